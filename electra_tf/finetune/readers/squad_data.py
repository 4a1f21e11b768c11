"""SQuAD 1.1 / 2.0: reading, windowed features and n-best decoding.

Features follow the reference (google-research/electra `qa_tasks.py`):
`[CLS] query [SEP] doc-window [SEP]`, the query cut to `max_query_length`
pieces, the document split into windows of `max_seq_length - len(query) - 3`
pieces starting every `doc_stride` pieces, and each piece marked as "max
context" in the window where it has the most context on both sides. Answers are
mapped with character offsets of the word pieces (`TextPreprocessor.tokenize_with_offsets`), so a
predicted span is cut straight out of the original context.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from electra_tf.errors import ElectraError
from electra_tf.data.table_files import utf8_lines


class SquadDataError(ElectraError, ValueError):
    """A SQuAD file or example that cannot be used."""


@dataclasses.dataclass
class SquadExample:
    """One question over one context.

    Attributes:
      qas_id: question id.
      question: question text.
      context: paragraph text.
      answer_text: first gold answer ("" if unanswerable or not given).
      answer_start: character offset of `answer_text` in `context` (-1 if none).
      is_impossible: SQuAD 2.0 unanswerable question.
    """
    qas_id: str
    question: str
    context: str
    answer_text: str = ""
    answer_start: int = -1
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
    """One window of one example, ready for the model.

    Attributes:
      example_index: index of the example in the list given to `featurize`.
      window_index: index of the window within the example.
      input_ids, input_mask, segment_ids: model inputs (length max_seq_length).
      token_char_spans: per position, (start, end) character span in the context,
        or None for [CLS], query, [SEP] and padding.
      token_is_max_context: per position, whether this window gives the piece its
        maximum context.
      start_position, end_position: answer piece positions in the window; 0 ([CLS])
        when the answer is outside the window or the question is unanswerable.
      is_impossible: no answer in this window (2.0, or answer outside it).
    """
    example_index: int
    window_index: int
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    token_char_spans: List[Optional[Tuple[int, int]]]
    token_is_max_context: List[bool]
    start_position: int = 0
    end_position: int = 0
    is_impossible: bool = False


def read_squad(path: str, version_2: bool, max_examples: Optional[int] = None,
               is_training: bool = True) -> Tuple[List[SquadExample], List[dict]]:
    """Reads a SQuAD JSON file.

    Args:
      path: train-v1.1.json / dev-v2.0.json style file.
      version_2: honour `is_impossible` (SQuAD 2.0).
      max_examples: keep only the first N questions.
      is_training: require an answer for every answerable question.

    Returns:
      (examples, data) where `data` is the raw `data` list for the evaluator.
    """
    if not os.path.isfile(path):
        raise SquadDataError(f"{path}: SQuAD file does not exist; check --data_dir")
    try:
        # Decoded line by line, as every fine-tuning reader does: a byte that is not
        # UTF-8 is one line naming its line and column, with an iconv hint.
        data = json.loads("".join(text for _, text in utf8_lines(path, "")))["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise SquadDataError(f"{path}: not a SQuAD JSON file with a top-level 'data' list ({e})") from None
    examples = []
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                if max_examples is not None and len(examples) >= max_examples:
                    return examples, data
                impossible = bool(qa.get("is_impossible", False)) and version_2
                answers = qa.get("answers", [])
                text, start = "", -1
                if not impossible and answers:
                    text, start = answers[0]["text"], int(answers[0]["answer_start"])
                    if context[start:start + len(text)] != text:
                        raise SquadDataError(
                            f"{path}: question {qa['id']}: answer {text!r} is not at character "
                            f"{start} of its context; fix answer_start")
                elif not impossible and is_training:
                    raise SquadDataError(
                        f"{path}: question {qa['id']} has no answer and is not marked "
                        f"is_impossible; use a SQuAD 2.0 task or fix the file")
                examples.append(SquadExample(qa["id"], qa["question"], context, text, start, impossible))
    if not examples:
        raise SquadDataError(f"{path}: the file holds no questions")
    return examples, data


def char_span_to_tokens(starts: Sequence[int], ends: Sequence[int],
                        char_start: int, char_end: int) -> Tuple[int, int]:
    """Maps a [char_start, char_end) character span to the covering piece indices.

    Args:
      starts: start character offset of each piece.
      ends: end character offset of each piece.
      char_start: first character of the answer.
      char_end: one past its last character.

    Returns:
      (first piece, last piece), or (-1, -1) if no piece overlaps the span.
    """
    first = last = -1
    for i, (s, e) in enumerate(zip(starts, ends)):
        if e > char_start and s < char_end:
            if first < 0:
                first = i
            last = i
    return first, last


def doc_windows(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> List[Tuple[int, int]]:
    """Sliding windows (start, length) over the document pieces, as the reference.

    Args:
      num_tokens: number of document pieces.
      max_tokens_for_doc: most pieces in one window.
      doc_stride: distance between window starts.
    """
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def is_max_context(spans: Sequence[Tuple[int, int]], span_index: int, position: int) -> bool:
    """Whether window `span_index` gives piece `position` its most context (reference rule).

    Args:
      spans: (start, length) windows.
      span_index: window to test.
      position: document piece index.
    """
    best_score, best_index = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, i
    return span_index == best_index


def featurize(tokenizer, examples: Sequence[SquadExample], max_seq_length: int = 384,
              doc_stride: int = 128, max_query_length: int = 64,
              is_training: bool = True) -> List[SquadFeature]:
    """Cuts examples into windowed features.

    Args:
      tokenizer: a `FinetuneTokenizer`.
      examples: SQuAD examples.
      max_seq_length: window length including [CLS], query and two [SEP].
      doc_stride: distance between window starts (reference 128).
      max_query_length: query pieces kept (reference 64).
      is_training: label windows with answer positions.
    """
    special = tokenizer.special
    features = []
    queries = tokenizer.tokenize([e.question for e in examples])
    for ex_index, ex in enumerate(examples):
        query = queries[ex_index][:max_query_length]
        ids, starts, ends = tokenizer.tokenize_with_char_offsets(ex.context)
        max_doc = max_seq_length - len(query) - 3
        if max_doc < 1:
            raise SquadDataError(
                f"max_seq_length={max_seq_length} leaves no room for the context after a "
                f"{len(query)}-piece question; raise --max_seq_length or lower max_query_length")
        tok_start = tok_end = -1
        if is_training and not ex.is_impossible and ex.answer_start >= 0:
            tok_start, tok_end = char_span_to_tokens(
                starts, ends, ex.answer_start, ex.answer_start + len(ex.answer_text))
        spans = doc_windows(len(ids), max_doc, doc_stride)
        for w, (w_start, w_len) in enumerate(spans):
            input_ids = [special.cls] + query + [special.sep]
            segment_ids = [0] * len(input_ids)
            char_spans: List[Optional[Tuple[int, int]]] = [None] * len(input_ids)
            max_ctx = [False] * len(input_ids)
            for i in range(w_start, w_start + w_len):
                input_ids.append(ids[i])
                segment_ids.append(1)
                char_spans.append((starts[i], ends[i]))
                max_ctx.append(is_max_context(spans, w, i))
            input_ids.append(special.sep)
            segment_ids.append(1)
            char_spans.append(None)
            max_ctx.append(False)
            input_mask = [1] * len(input_ids)
            pad = max_seq_length - len(input_ids)
            input_ids += [special.pad] * pad
            input_mask += [0] * pad
            segment_ids += [0] * pad
            char_spans += [None] * pad
            max_ctx += [False] * pad
            start_pos = end_pos = 0
            impossible = True
            if tok_start >= 0 and w_start <= tok_start and tok_end <= w_start + w_len - 1:
                offset = len(query) + 2
                start_pos = tok_start - w_start + offset
                end_pos = tok_end - w_start + offset
                impossible = False
            features.append(SquadFeature(ex_index, w, input_ids, input_mask, segment_ids,
                                         char_spans, max_ctx, start_pos, end_pos, impossible))
    return features


def features_to_arrays(features: Sequence[SquadFeature], is_training: bool) -> Dict[str, np.ndarray]:
    """Stacks features into int32 arrays for tf.data.

    Args:
      features: windowed features.
      is_training: add start/end positions and is_impossible.
    """
    out = {
        "input_ids": np.asarray([f.input_ids for f in features], np.int32),
        "input_mask": np.asarray([f.input_mask for f in features], np.int32),
        "segment_ids": np.asarray([f.segment_ids for f in features], np.int32),
    }
    if is_training:
        out["start_positions"] = np.asarray([f.start_position for f in features], np.int32)
        out["end_positions"] = np.asarray([f.end_position for f in features], np.int32)
        out["is_impossible"] = np.asarray([f.is_impossible for f in features], np.float32)
    return out


def _softmax(scores: Sequence[float]) -> List[float]:
    if not scores:
        return []
    m = max(scores)
    exps = [math.exp(s - m) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def decode_nbest(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                 start_top_log_probs: np.ndarray, start_top_index: np.ndarray,
                 end_top_log_probs: np.ndarray, end_top_index: np.ndarray,
                 answerable_logits: Optional[np.ndarray] = None,
                 n_best_size: int = 20, max_answer_length: int = 30):
    """Joint start/end beam decoding to n-best answers per question (reference logic).

    Args:
      examples: the examples that `features` were made from.
      features: their windows, in the order the model outputs follow.
      start_top_log_probs: [num_features, beam] best start log-probs.
      start_top_index: [num_features, beam] their positions.
      end_top_log_probs: [num_features, beam, beam] best end log-probs per start.
      end_top_index: [num_features, beam, beam] their positions.
      answerable_logits: [num_features] "unanswerable" logits (SQuAD 2.0), or None.
      n_best_size: answers kept per question.
      max_answer_length: longest answer in pieces.

    Returns:
      (predictions, nbest, null_odds): qas_id -> best non-empty text; qas_id -> list
      of {text, probability, score}; qas_id -> min answerable logit over windows
      (only with `answerable_logits`).
    """
    by_example = collections.defaultdict(list)
    for fi, f in enumerate(features):
        by_example[f.example_index].append(fi)
    predictions, nbest_all, null_odds = {}, {}, {}
    for ei, ex in enumerate(examples):
        prelim = []
        score_null = None
        for fi in by_example.get(ei, []):
            f = features[fi]
            if answerable_logits is not None:
                score = float(answerable_logits[fi])
                score_null = score if score_null is None else min(score_null, score)
            for i in range(start_top_index.shape[1]):
                s = int(start_top_index[fi, i])
                for j in range(end_top_index.shape[2]):
                    e = int(end_top_index[fi, i, j])
                    if s >= len(f.token_char_spans) or e >= len(f.token_char_spans):
                        continue
                    if f.token_char_spans[s] is None or f.token_char_spans[e] is None:
                        continue  # [CLS], query, [SEP] or padding
                    if not f.token_is_max_context[s] or e < s or e - s + 1 > max_answer_length:
                        continue
                    prelim.append((float(start_top_log_probs[fi, i]) + float(end_top_log_probs[fi, i, j]),
                                   fi, s, e))
        prelim.sort(key=lambda x: x[0], reverse=True)
        seen, nbest = set(), []
        for score, fi, s, e in prelim:
            if len(nbest) >= n_best_size:
                break
            f = features[fi]
            text = ex.context[f.token_char_spans[s][0]:f.token_char_spans[e][1]]
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "score": score})
        if not nbest:  # rare: no valid span in any window; keep a non-crashing guess
            nbest.append({"text": "", "score": 0.0})
        for entry, p in zip(nbest, _softmax([n["score"] for n in nbest])):
            entry["probability"] = p
        predictions[ex.qas_id] = nbest[0]["text"]
        nbest_all[ex.qas_id] = nbest
        if score_null is not None:
            null_odds[ex.qas_id] = score_null
    return predictions, nbest_all, null_odds
