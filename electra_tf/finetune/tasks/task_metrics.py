"""Official GLUE metrics, written out so they can be checked by hand.

CoLA: Matthews correlation; STS-B: Pearson and Spearman correlation; MRPC and
QQP: F1 of the positive class and accuracy; accuracy elsewhere; macro-F1 and
mean squared error for your own files. All functions take plain sequences
(lists or numpy arrays) and return Python floats.
"""

from __future__ import annotations

import math
from typing import Dict, Sequence

import numpy as np


def _pair(y_true, y_pred, name: str):
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1:
        raise ValueError(
            f"{name}: labels and predictions must be 1-D of equal length, "
            f"got shapes {y_true.shape} and {y_pred.shape}")
    if y_true.size == 0:
        raise ValueError(f"{name}: no examples to score; check that the dev file is not empty")
    return y_true, y_pred


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    """Fraction of predictions equal to the label.

    Args:
      y_true: gold labels.
      y_pred: predicted labels.
    """
    y_true, y_pred = _pair(y_true, y_pred, "accuracy")
    return float(np.mean(y_true == y_pred))


def f1_binary(y_true: Sequence, y_pred: Sequence, positive=1) -> float:
    """F1 of the positive class (sklearn's `f1_score` default, used by GLUE).

    Args:
      y_true: gold labels.
      y_pred: predicted labels.
      positive: the label counted as positive.

    Returns 0.0 when there are no true positives (precision or recall undefined).
    """
    y_true, y_pred = _pair(y_true, y_pred, "f1")
    tp = float(np.sum((y_pred == positive) & (y_true == positive)))
    fp = float(np.sum((y_pred == positive) & (y_true != positive)))
    fn = float(np.sum((y_pred != positive) & (y_true == positive)))
    if tp == 0.0:
        return 0.0
    return 2.0 * tp / (2.0 * tp + fp + fn)


def matthews_corrcoef(y_true: Sequence, y_pred: Sequence) -> float:
    """Matthews correlation coefficient for binary labels (CoLA).

    Args:
      y_true: gold labels in {0, 1}.
      y_pred: predicted labels in {0, 1}.

    Returns 0.0 when a marginal is empty (the denominator is 0), as sklearn does.
    """
    y_true, y_pred = _pair(y_true, y_pred, "matthews_corrcoef")
    tp = float(np.sum((y_pred == 1) & (y_true == 1)))
    tn = float(np.sum((y_pred != 1) & (y_true != 1)))
    fp = float(np.sum((y_pred == 1) & (y_true != 1)))
    fn = float(np.sum((y_pred != 1) & (y_true == 1)))
    denom = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    if denom == 0.0:
        return 0.0
    return (tp * tn - fp * fn) / denom


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation (STS-B).

    Args:
      x: gold scores.
      y: predicted scores.

    Returns 0.0 if either side is constant (correlation undefined).
    """
    x, y = _pair(x, y, "pearson")
    x = x.astype(np.float64) - np.mean(x)
    y = y.astype(np.float64) - np.mean(y)
    denom = math.sqrt(float(np.sum(x * x)) * float(np.sum(y * y)))
    if denom == 0.0:
        return 0.0
    return float(np.sum(x * y)) / denom


def mean_squared_error(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Mean of the squared differences, in the labels' units squared (regression).

    Args:
      y_true: gold scores.
      y_pred: predicted scores.
    """
    y_true, y_pred = _pair(y_true, y_pred, "mean_squared_error")
    diff = y_true.astype(np.float64) - y_pred.astype(np.float64)
    return float(np.mean(diff * diff))


def rankdata(values: Sequence[float]) -> np.ndarray:
    """1-based ranks with ties given their average rank (scipy's default).

    Args:
      values: numbers to rank.
    """
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation: Pearson on tie-averaged ranks (STS-B).

    Args:
      x: gold scores.
      y: predicted scores.
    """
    x, y = _pair(x, y, "spearman")
    return pearson(rankdata(x), rankdata(y))


def macro_f1(y_true: Sequence, y_pred: Sequence, num_classes: int) -> float:
    """Unweighted mean over the classes of each class's F1 (sklearn's average="macro").

    Args:
      y_true: gold class ids in [0, num_classes).
      y_pred: predicted class ids.
      num_classes: number of classes; a class with neither gold nor predicted
        examples counts as F1 0, as in sklearn with `labels=range(num_classes)`.
    """
    y_true, y_pred = _pair(y_true, y_pred, "macro_f1")
    return float(np.mean([f1_binary(y_true, y_pred, positive=c) for c in range(num_classes)]))


def compute_metrics(metric_names: Sequence[str], y_true, y_pred) -> Dict[str, float]:
    """Computes the named metrics.

    Args:
      metric_names: any of accuracy, f1, mcc, pearson, spearman.
      y_true: gold labels or scores.
      y_pred: predicted labels or scores.
    """
    table = {"accuracy": accuracy, "f1": f1_binary, "mcc": matthews_corrcoef,
             "pearson": pearson, "spearman": spearman}
    out = {}
    for name in metric_names:
        if name not in table:
            raise ValueError(f"unknown metric {name!r}; choose from {', '.join(table)}")
        out[name] = table[name](y_true, y_pred)
    return out
