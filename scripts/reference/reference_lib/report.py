"""Window metrics of both models, computed the same way, and their printed and JSON forms."""

from __future__ import annotations

import math
from typing import Dict, List

import numpy as np

from .rules import rank_auc

MODELS = ("tf", "torch")
# Per-window metrics, in the printed order.
COLUMNS = ("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc", "replaced", "lr")


def window_metrics(records: List[Dict[str, np.ndarray]]) -> Dict[str, float]:
    """The window's means: losses over steps, accuracy over chosen slots, AUC
    and replaced share over real tokens."""
    real = np.concatenate([r["input_mask"].ravel() > 0 for r in records])
    labels = np.concatenate([r["labels"].ravel() for r in records])[real]
    probs = np.concatenate([r["probs"].ravel() for r in records])[real]
    weights = sum(float(r["mlm_weights"].sum()) for r in records)
    return {
        "loss": float(np.mean([r["loss"] for r in records])),
        "mlm_loss": float(np.mean([r["mlm_loss"] for r in records])),
        "mlm_accuracy": sum(float(r["mlm_hits"].sum()) for r in records) / max(weights, 1e-9),
        "disc_loss": float(np.mean([r["disc_loss"] for r in records])),
        "disc_auc": rank_auc(labels, probs),
        "replaced": float(labels.mean()) if labels.size else float("nan"),
        "lr": float(records[-1]["lr"]),
    }


def _format(value, width, digits):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return f"{'nan':>{width}}"
    return f"{value:>{width}.{digits}f}"


HEADER = (f"{'step':>6}  {'model':<5} {'loss':>9} {'mlm_loss':>9} {'mlm_acc':>8} "
          f"{'disc_loss':>9} {'disc_auc':>8} {'replaced':>8} {'lr':>9}")


def format_row(row: Dict) -> str:
    return (f"{row['step']:>6}  {row['model']:<5} {_format(row['loss'], 9, 4)} "
            f"{_format(row['mlm_loss'], 9, 4)} {_format(row['mlm_accuracy'], 8, 4)} "
            f"{_format(row['disc_loss'], 9, 4)} {_format(row['disc_auc'], 8, 4)} "
            f"{_format(row['replaced'], 8, 4)} {row['lr']:>9.2e}")


def json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
