"""SQuAD evaluation: the official v1.1 and v2.0 EM/F1 logic, re-written here.

Follows the behaviour of the official `evaluate-v1.1.py` and `evaluate-v2.0.py`
scripts: answers are normalised (lower-case, punctuation and English articles
removed, whitespace collapsed); EM and F1 take the max over gold answers; v2.0
scores an unanswerable question 1 when the prediction is empty, and can apply a
no-answer probability threshold and search the best one.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Dict, List, Mapping, Optional

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower-cases, removes punctuation and articles, and collapses whitespace.

    Args:
      s: an answer string.
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(gold: str, pred: str) -> int:
    """1 if the normalised strings are equal, else 0.

    Args:
      gold: gold answer.
      pred: predicted answer.
    """
    return int(normalize_answer(gold) == normalize_answer(pred))


def f1_v1(gold: str, pred: str) -> float:
    """Token F1 exactly as evaluate-v1.1.py (0 when nothing is shared, even if both empty).

    Args:
      gold: gold answer.
      pred: predicted answer.
    """
    pred_tokens = normalize_answer(pred).split()
    gold_tokens = normalize_answer(gold).split()
    return _overlap_f1(pred_tokens, gold_tokens)


def f1_v2(gold: str, pred: str) -> float:
    """Token F1 as evaluate-v2.0.py: if either side is empty, 1 iff both are.

    Args:
      gold: gold answer.
      pred: predicted answer.
    """
    gold_tokens = normalize_answer(gold).split() if gold else []
    pred_tokens = normalize_answer(pred).split() if pred else []
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    return _overlap_f1(pred_tokens, gold_tokens)


def _overlap_f1(pred_tokens, gold_tokens) -> float:
    """Harmonic mean of token precision and recall (bag-of-tokens overlap)."""
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset: List[dict]):
    """Yields the `qas` entries of a SQuAD `data` list."""
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield qa


def evaluate_v1(dataset: List[dict], predictions: Mapping[str, str]) -> Dict[str, float]:
    """Official SQuAD 1.1 evaluation.

    Args:
      dataset: the `data` list of a SQuAD JSON file.
      predictions: question id -> answer text. Missing ids score 0.

    Returns:
      {"exact_match": ..., "f1": ..., "total": ...} with EM/F1 in percent.
    """
    em = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue  # the official script: "Unanswered question ... will receive score 0."
        golds = [a["text"] for a in qa["answers"]]
        pred = predictions[qa["id"]]
        em += max(exact_match(g, pred) for g in golds)
        f1 += max(f1_v1(g, pred) for g in golds)
    if total == 0:
        raise ValueError("SQuAD dev data holds no questions; check the dev file")
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total, "total": total}


def _raw_scores_v2(dataset, predictions):
    exact, f1, has_ans = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
        has_ans[qid] = bool(golds)
        if not golds:
            golds = [""]  # unanswerable: the only correct prediction is ""
        if qid not in predictions:
            continue
        pred = predictions[qid]
        exact[qid] = max(exact_match(g, pred) for g in golds)
        f1[qid] = max(f1_v2(g, pred) for g in golds)
    return exact, f1, has_ans


def _apply_threshold(scores, na_probs, has_ans, thresh):
    out = {}
    for qid, s in scores.items():
        if na_probs[qid] > thresh:
            out[qid] = float(not has_ans[qid])
        else:
            out[qid] = s
    return out


def _best_threshold(predictions, scores, na_probs, has_ans):
    cur = sum(1 for q in has_ans if not has_ans[q])
    best, best_thresh = cur, 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        cur += diff
        if cur > best:
            best, best_thresh = cur, na_probs[qid]
    return 100.0 * best / len(scores), best_thresh


def evaluate_v2(dataset: List[dict], predictions: Mapping[str, str],
                na_probs: Optional[Mapping[str, float]] = None,
                na_prob_thresh: float = 1.0) -> Dict[str, float]:
    """Official SQuAD 2.0 evaluation.

    Args:
      dataset: the `data` list of a SQuAD 2.0 JSON file.
      predictions: question id -> answer text ("" for no answer).
      na_probs: question id -> no-answer score (higher: more likely unanswerable).
        When given, predictions whose score exceeds `na_prob_thresh` count as
        "no answer", and best_exact/best_f1 with their thresholds are added.
      na_prob_thresh: threshold for `na_probs`.

    Returns:
      exact, f1, total, HasAns_* / NoAns_* breakdowns (percent), and best_* keys
      when `na_probs` is given.
    """
    exact, f1, has_ans = _raw_scores_v2(dataset, predictions)
    if not has_ans:
        raise ValueError("SQuAD dev data holds no questions; check the dev file")
    probs = na_probs if na_probs is not None else {k: 0.0 for k in has_ans}
    exact_t = _apply_threshold(exact, probs, has_ans, na_prob_thresh)
    f1_t = _apply_threshold(f1, probs, has_ans, na_prob_thresh)
    # Missing predictions score 0 (the official script would stop with a KeyError).
    total = len(has_ans)
    out = {"exact": 100.0 * sum(exact_t.values()) / total,
           "f1": 100.0 * sum(f1_t.values()) / total, "total": total}
    for name, want in (("HasAns", True), ("NoAns", False)):
        ids = [q for q in has_ans if has_ans[q] == want]
        if ids:
            out[f"{name}_exact"] = 100.0 * sum(exact_t.get(q, 0.0) for q in ids) / len(ids)
            out[f"{name}_f1"] = 100.0 * sum(f1_t.get(q, 0.0) for q in ids) / len(ids)
            out[f"{name}_total"] = len(ids)
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = _best_threshold(predictions, exact, na_probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = _best_threshold(predictions, f1, na_probs, has_ans)
    return out
