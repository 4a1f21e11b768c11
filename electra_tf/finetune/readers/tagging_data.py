"""Token classification from CoNLL-style files: reading, label alignment, span F1.

Words are labelled on their first word piece only (the reference's tagging
tasks do the same); the other pieces get weight 0 in the loss and are ignored
at evaluation. Span F1 follows conlleval: a predicted entity counts only if its
type and both boundaries match a gold entity.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from electra_tf.errors import ElectraError
from electra_tf.data.table_files import utf8_lines


class TaggingDataError(ElectraError, ValueError):
    """A CoNLL file or label that cannot be used."""


@dataclasses.dataclass
class TaggedSentence:
    """Words and their labels.

    Attributes:
      words: the words.
      labels: one label per word.
      line: 1-based line of the first word in the file (for messages).
    """
    words: List[str]
    labels: List[str]
    line: int = 0


def read_conll(path: str, label_column: int = -1,
               max_sentences: Optional[int] = None) -> List[TaggedSentence]:
    """Reads a CoNLL file: one `word ... label` line per token, blank line between sentences.

    `-DOCSTART-` lines are skipped.

    Args:
      path: the file.
      label_column: whitespace-separated column holding the label (-1: last).
      max_sentences: keep only the first N sentences.
    """
    if not os.path.isfile(path):
        raise TaggingDataError(f"{path}: file does not exist; check --data_dir")
    sentences: List[TaggedSentence] = []
    words: List[str] = []
    labels: List[str] = []
    first_line = 0
    # Decoded line by line, as every fine-tuning reader does: a byte that is not UTF-8
    # is one line naming its line and column, with an iconv hint.
    for lineno, raw in utf8_lines(path, ""):
        line = raw.strip()
        if not line or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(TaggedSentence(words, labels, first_line))
                words, labels = [], []
                if max_sentences is not None and len(sentences) >= max_sentences:
                    return sentences
            continue
        fields = line.split()
        if len(fields) < 2:
            raise TaggingDataError(
                f"{path}:{lineno}: expected 'word ... label' (2+ columns), got {line!r}; "
                f"fix the line or separate sentences with an empty line")
        if not words:
            first_line = lineno
        words.append(fields[0])
        labels.append(fields[label_column])
    if words:
        sentences.append(TaggedSentence(words, labels, first_line))
    if not sentences:
        raise TaggingDataError(f"{path}: no sentences in the file")
    return sentences


def _split(label: str) -> Tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', '')."""
    if label == "O":
        return "O", ""
    if len(label) > 2 and label[1] == "-" and label[0] in "BIESU":
        return label[0], label[2:]
    raise TaggingDataError(f"label {label!r} is not O or <B|I|E|S>-TYPE; check the label column")


def get_spans(labels: Sequence[str], scheme: str = "BIO") -> Set[Tuple[str, int, int]]:
    """Extracts (type, first, last) entity spans from a label sequence.

    Args:
      labels: one label per word.
      scheme: "BIO" (IOB2; an I- after O or another type starts a new span, as
        conlleval does) or "BIOES" (S- single, E- ends; U- accepted for S-).

    Returns:
      set of (type, first word, last word).
    """
    scheme = scheme.upper()
    if scheme not in ("BIO", "BIOES"):
        raise TaggingDataError(f"unknown tagging scheme {scheme!r}; use BIO or BIOES")
    spans = set()
    cur_type, cur_start = None, -1
    for i, label in enumerate(list(labels) + ["O"]):
        tag, typ = _split(label)
        if scheme == "BIOES" and tag == "U":
            tag = "S"
        # Close the current span when this label cannot continue it.
        if cur_type is not None and (tag in ("O", "B", "S") or typ != cur_type):
            spans.add((cur_type, cur_start, i - 1))
            cur_type = None
        if tag in ("B", "S") or (tag in ("I", "E") and cur_type is None):
            cur_type, cur_start = typ, i
        if scheme == "BIOES" and tag in ("S", "E") and cur_type is not None:
            spans.add((cur_type, cur_start, i))
            cur_type = None
    return spans


def bio_to_bioes(labels: Sequence[str]) -> List[str]:
    """Converts IOB2 labels to BIOES.

    Args:
      labels: BIO labels of one sentence.
    """
    out = []
    for i, label in enumerate(labels):
        tag, typ = _split(label)
        nxt = labels[i + 1] if i + 1 < len(labels) else "O"
        continues = nxt != "O" and _split(nxt) == ("I", typ)
        if tag == "O":
            out.append("O")
        elif tag == "B":
            out.append(("B-" if continues else "S-") + typ)
        elif tag == "I":
            out.append(("I-" if continues else "E-") + typ)
        else:
            raise TaggingDataError(f"label {label!r} is not BIO; convert only BIO sequences")
    return out


def span_f1(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]],
            scheme: str = "BIO") -> Dict[str, float]:
    """Micro span-level precision, recall and F1 over sentences.

    Args:
      gold: gold label sequences.
      pred: predicted label sequences (same lengths).
      scheme: BIO or BIOES.
    """
    if len(gold) != len(pred):
        raise ValueError(f"span_f1: {len(gold)} gold sentences but {len(pred)} predicted")
    tp = n_gold = n_pred = 0
    for g, p in zip(gold, pred):
        if len(g) != len(p):
            raise ValueError(f"span_f1: a sentence has {len(g)} gold labels but {len(p)} predicted")
        gs, ps = get_spans(g, scheme), get_spans(p, scheme)
        tp += len(gs & ps)
        n_gold += len(gs)
        n_pred += len(ps)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def build_label_list(sentences: Sequence[TaggedSentence]) -> List[str]:
    """Sorted label set with "O" first.

    Args:
      sentences: training sentences.
    """
    labels = sorted({l for s in sentences for l in s.labels} - {"O"})
    return ["O"] + labels


def align_labels(tokenizer, sentences: Sequence[TaggedSentence], label_list: Sequence[str],
                 max_seq_length: int, path: str = "data") -> Dict[str, np.ndarray]:
    """Tokenizes words and puts each word's label on its first word piece.

    Args:
      tokenizer: a `FinetuneTokenizer`.
      sentences: tagged sentences.
      label_list: label strings; index = class id.
      max_seq_length: sequence length; words that do not fit are cut (and get no
        prediction; `word_index` tells which words were kept).
      path: file name for error messages.

    Returns:
      dict with input_ids, input_mask, segment_ids, label_ids, label_weights
      (1.0 on first pieces) and word_index (word number at first pieces, -1 elsewhere).
    """
    label_to_id = {l: i for i, l in enumerate(label_list)}
    all_words = [w for s in sentences for w in s.words]
    pieces = tokenizer.tokenize(all_words)
    special = tokenizer.special
    n = len(sentences)
    arrays = {k: np.zeros((n, max_seq_length), np.int32)
              for k in ("input_ids", "input_mask", "segment_ids", "label_ids")}
    arrays["label_weights"] = np.zeros((n, max_seq_length), np.float32)
    arrays["word_index"] = np.full((n, max_seq_length), -1, np.int32)
    k = 0
    for si, sent in enumerate(sentences):
        ids, lab, wts, widx = [special.cls], [0], [0.0], [-1]
        for wi, (word, label) in enumerate(zip(sent.words, sent.labels)):
            if label not in label_to_id:
                raise TaggingDataError(
                    f"{path}:{sent.line + wi}: label {label!r} is not in the training label set "
                    f"({', '.join(label_list)}); fix the label")
            wp = pieces[k + wi] or [special.unk]  # a word that tokenizes to nothing still gets a slot
            ids.extend(wp)
            lab.extend([label_to_id[label]] + [0] * (len(wp) - 1))
            wts.extend([1.0] + [0.0] * (len(wp) - 1))
            widx.extend([wi] + [-1] * (len(wp) - 1))
        k += len(sent.words)
        ids, lab, wts, widx = (x[:max_seq_length - 1] for x in (ids, lab, wts, widx))
        ids.append(special.sep)
        lab.append(0)
        wts.append(0.0)
        widx.append(-1)
        L = len(ids)
        arrays["input_ids"][si, :L] = ids
        arrays["input_ids"][si, L:] = special.pad
        arrays["input_mask"][si, :L] = 1
        arrays["label_ids"][si, :L] = lab
        arrays["label_weights"][si, :L] = wts
        arrays["word_index"][si, :L] = widx
    return arrays


def predictions_to_labels(pred_ids: np.ndarray, word_index: np.ndarray,
                          sentences: Sequence[TaggedSentence], label_list: Sequence[str]) -> List[List[str]]:
    """Reads word labels back from first-piece predictions ("O" for words cut off).

    Args:
      pred_ids: [n, seq] predicted class ids.
      word_index: [n, seq] from `align_labels`.
      sentences: the sentences.
      label_list: label strings.
    """
    out = []
    for si, sent in enumerate(sentences):
        labels = ["O"] * len(sent.words)
        for pos in np.nonzero(word_index[si] >= 0)[0]:
            labels[int(word_index[si, pos])] = label_list[int(pred_ids[si, pos])]
        out.append(labels)
    return out
