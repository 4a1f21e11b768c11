"""The reference's ELECTRA rules in numpy: masking, the learning-rate schedule, and rank AUC.

They follow electra_tf/objectives and electra_tf/training/optimization.py
but do not call them (tests/study/test_reference_check.py checks the masking
counts against ours).
"""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np


class CheckError(ValueError):
    """Bad flags or inputs; the message names the fix."""


def prediction_counts(input_ids: np.ndarray, input_mask: np.ndarray, max_predictions: int,
                      mask_prob: float, never_masked: Sequence[int]):
    """Positions to choose per row and the candidate mask (numpy).

    count = min(max(1, min(P, round(n_real * mask_prob))), n_candidates), the
    product in float32 and rounded half to even, as in the original ELECTRA;
    n_real counts [CLS]/[SEP] although they are never candidates.
    """
    real = np.asarray(input_mask).astype(bool)
    candidates = real.copy()
    for token in never_masked:
        candidates &= np.asarray(input_ids) != token
    n_real = real.sum(axis=1).astype(np.float32)
    wanted = np.round(n_real * np.float32(mask_prob)).astype(np.int64)
    wanted = np.maximum(1, np.minimum(max_predictions, wanted))
    return np.minimum(wanted, candidates.sum(axis=1)), candidates


def mask_batch(input_ids: np.ndarray, input_mask: np.ndarray, rng: np.random.Generator, *,
               max_predictions: int, mask_prob: float, mask_id: int,
               never_masked: Sequence[int], keep_prob: float) -> Dict[str, np.ndarray]:
    """ELECTRA's masking in numpy: uniform positions without replacement, then
    [MASK] with probability 1 - keep_prob (the rest keep their token).

    Returns masked_ids [B, L], positions [B, P] (0 in unused slots),
    original_ids [B, P] (0 in unused slots), weights [B, P] (1 = used slot).
    """
    input_ids = np.asarray(input_ids).astype(np.int64)
    batch, seq = input_ids.shape
    count, candidates = prediction_counts(input_ids, input_mask, max_predictions, mask_prob,
                                          never_masked)
    scores = np.where(candidates, rng.random((batch, seq)), -1.0)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :max_predictions]
    if top.shape[1] < max_predictions:  # P > L cannot happen for a valid config
        raise CheckError(f"predictions_per_seq={max_predictions} exceeds the sequence length {seq}")
    used = np.arange(max_predictions)[None, :] < count[:, None]
    positions = np.where(used, top, 0)
    rows = np.arange(batch)[:, None]
    original = np.where(used, input_ids[rows, positions], 0)
    to_mask = used & (rng.random((batch, max_predictions)) >= keep_prob)
    masked = input_ids.copy()
    masked[np.broadcast_to(rows, positions.shape)[to_mask], positions[to_mask]] = mask_id
    return {"masked_ids": masked, "positions": positions, "original_ids": original,
            "weights": used.astype(np.float32)}


def rank_auc(labels, scores) -> float:
    """ROC AUC as the Mann-Whitney statistic (ties get average ranks); NaN
    when only one class is present."""
    labels = np.asarray(labels).astype(bool).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def lr_factor(step: int, train_steps: int, warmup_steps: int, power: float) -> float:
    """Multiplier of the peak learning rate at 0-based `step`."""
    progress = min(step, train_steps) / float(train_steps)
    factor = (1.0 - progress) ** power
    if warmup_steps > 0:
        factor *= min(1.0, step / float(warmup_steps))
    return factor
