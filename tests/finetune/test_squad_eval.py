"""Official SQuAD EM/F1 normalisation and scoring on handmade predictions."""

import pytest

from electra_tf.finetune.tasks import squad_eval as se


def test_normalize_answer():
    assert se.normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert se.normalize_answer("an apple, a pear and THE plum") == "apple pear and plum"
    # articles are removed only as whole words
    assert se.normalize_answer("Theatre anatomy") == "theatre anatomy"


def test_em_f1_values():
    assert se.exact_match("the Denver Broncos", "Denver Broncos.") == 1
    # gold: denver broncos; pred: broncos won -> common 1, p=1/2, r=1/2, F1=0.5
    assert se.f1_v1("Denver Broncos", "Broncos won") == pytest.approx(0.5)
    # gold 3 tokens, pred 1 shared of 1 -> p=1, r=1/3 -> F1 = 0.5
    assert se.f1_v1("Santa Clara California", "Clara") == pytest.approx(0.5)
    assert se.f1_v1("", "") == 0.0   # v1.1 script: nothing shared -> 0
    assert se.f1_v2("", "") == 1.0   # v2.0 script: both empty -> 1
    assert se.f1_v2("", "something") == 0.0


DATA_V1 = [{"paragraphs": [{"context": "...", "qas": [
    {"id": "q1", "answers": [{"text": "Denver Broncos"}, {"text": "the Broncos"}]},
    {"id": "q2", "answers": [{"text": "Santa Clara California"}]},
    {"id": "q3", "answers": [{"text": "1895"}]},
]}]}]


def test_evaluate_v1_max_over_golds_and_missing():
    preds = {"q1": "Broncos", "q2": "Clara"}  # q3 missing: scores 0
    out = se.evaluate_v1(DATA_V1, preds)
    # q1: EM with "the Broncos" after normalisation -> 1, F1 1; q2: EM 0, F1 .5
    assert out["exact_match"] == pytest.approx(100 / 3)
    assert out["f1"] == pytest.approx(100 * 1.5 / 3)
    assert out["total"] == 3


DATA_V2 = [{"paragraphs": [{"context": "...", "qas": [
    {"id": "a", "answers": [{"text": "Paris"}]},
    {"id": "b", "answers": []},
    {"id": "c", "answers": [{"text": "New York"}]},
    {"id": "d", "answers": []},
]}]}]


def test_evaluate_v2_with_threshold_search():
    preds = {"a": "Paris", "b": "", "c": "York", "d": "London"}
    out = se.evaluate_v2(DATA_V2, preds)
    # EM: a=1 b=1 c=0 d=0 -> 50; F1: a=1 b=1 c=2/3 d=0 -> 2.6667/4
    assert out["exact"] == pytest.approx(50.0)
    assert out["f1"] == pytest.approx(100 * (2 + 2 / 3) / 4)
    assert out["HasAns_total"] == 2 and out["NoAns_total"] == 2
    assert out["NoAns_exact"] == pytest.approx(50.0)
    # With na scores, abstaining on d (score .9 > thresh .5) fixes it.
    na = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.9}
    out = se.evaluate_v2(DATA_V2, preds, na, na_prob_thresh=0.5)
    assert out["exact"] == pytest.approx(75.0)
    # best threshold: start with 2 (all abstain); a +1 -> 3; b 0 -> 3; c +0 -> 3; d -1 -> 2
    assert out["best_exact"] == pytest.approx(75.0)
    assert out["best_exact_thresh"] == pytest.approx(0.1)
