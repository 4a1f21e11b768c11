"""Metrics against values computed by hand (worked out in the comments)."""

import math

import pytest

from electra_tf.finetune.tasks import task_metrics as metrics


def test_accuracy_and_f1():
    y = [1, 1, 0, 0, 1]
    p = [1, 0, 0, 1, 1]
    assert metrics.accuracy(y, p) == pytest.approx(3 / 5)
    # tp=2 fp=1 fn=1 -> F1 = 2*2/(2*2+1+1) = 4/6
    assert metrics.f1_binary(y, p) == pytest.approx(2 / 3)
    assert metrics.f1_binary([0, 0], [0, 0]) == 0.0  # no positives at all


def test_matthews_hand_computed():
    # tp=3 tn=2 fp=1 fn=2: (3*2-1*2)/sqrt(4*5*3*4) = 4/sqrt(240)
    y = [1, 1, 1, 1, 1, 0, 0, 0]
    p = [1, 1, 1, 0, 0, 1, 0, 0]
    assert metrics.matthews_corrcoef(y, p) == pytest.approx(4 / math.sqrt(240))
    assert metrics.matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert metrics.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0  # empty marginal


def test_pearson_hand_computed():
    # x mean 2, y mean 4: dx=(-1,0,1) dy=(-2,-1,3) -> sum dxdy=5, |dx|^2=2, |dy|^2=14
    assert metrics.pearson([1, 2, 3], [2, 3, 7]) == pytest.approx(5 / math.sqrt(28))
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_spearman_with_ties():
    # ranks of x: (1, 2.5, 2.5, 4); of y: (1, 2, 3, 4)
    # dx = (-1.5, 0, 0, 1.5), dy = (-1.5, -.5, .5, 1.5): sum=4.5, |dx|^2=4.5, |dy|^2=5
    assert list(metrics.rankdata([1, 5, 5, 9])) == [1.0, 2.5, 2.5, 4.0]
    assert metrics.spearman([1, 5, 5, 9], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))
    # monotone but non-linear: spearman 1, pearson < 1
    assert metrics.spearman([1, 2, 3, 4], [1, 4, 9, 100]) == pytest.approx(1.0)
    assert metrics.pearson([1, 2, 3, 4], [1, 4, 9, 100]) < 0.95


def test_compute_metrics_and_errors():
    out = metrics.compute_metrics(["f1", "accuracy"], [1, 0], [1, 1])
    assert out == {"f1": pytest.approx(2 / 3), "accuracy": 0.5}
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        metrics.compute_metrics(["bleu"], [1], [1])
    with pytest.raises(ValueError, match="dev file is not empty"):
        metrics.accuracy([], [])
    with pytest.raises(ValueError, match="equal length"):
        metrics.accuracy([1, 0], [1])
