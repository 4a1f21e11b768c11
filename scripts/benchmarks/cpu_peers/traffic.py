"""The texts every side is fed, and the one width rule every side pads to.

- IMDB reviews (long: most fill 128 pieces, about half fill 256) and GLUE SST-2 sentences (short:
  a few dozen pieces), so that the served widths vary.
- Fresh texts every round: `TextStream` hands out consecutive, never repeated slices of a pool,
  and every side gets the same slice in the same round, so no server sees a text twice in a run
  (no cache of any kind can help) and every side sees the same tokens.
- Widths: our SavedModel pads a batch to its longest row rounded up to a multiple of
  `WIDTH_MULTIPLE` (capped at the maximum length), in its graph. Each peer serves twice: padded the
  same way (the tokenizer's `pad_to_multiple_of`) and padded to the longest row only (`LONGEST`,
  its natural setting); the faster of the two is its best. Fine-tuning batches are cut to
  multiples of 16 on every side (our `finetune` default).
- Same tokens: our in-graph tokenizer and the peers' `tokenizers` WordPiece disagree on a few texts
  (ours, tensorflow_text's FastBertTokenizer lower-casing, turns "½" into 1 ⁄ 2; theirs keeps "½"). The driver tokenizes each
  serving pool on every side, leaves out the texts whose ids differ (counted in the results), and
  checks the ids again on every text it times (`first_id_mismatch`), stopping at a difference.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT.parent / "shared" / "data"
MINILM = DATA / "encoders" / "all-MiniLM-L6-v2"

# Our serving graph's width multiple (electra_tf.export.serving.WIDTH_MULTIPLE), used by every side.
WIDTH_MULTIPLE = 16


# Padding to the longest row: a width multiple of 1.
LONGEST = 1


def rounded_width(length: int, max_len: int, multiple: int = WIDTH_MULTIPLE) -> int:
    """The padded width of a batch whose longest row has `length` pieces."""
    return min(max_len, -(-int(length) // multiple) * multiple)


def cold_calls(round_lengths, seen_lengths, max_len: int, multiple: int):
    """Per round, the indices of the batch-1 calls that meet a padded width first.

    round_lengths: the pieces of each text, per round, in the order the calls are made;
    seen_lengths: the pieces of the warm-up's batch-1 texts (their widths are not cold)."""
    seen = {rounded_width(n, max_len, multiple) for n in seen_lengths}
    out = []
    for lengths in round_lengths:
        cold = []
        for i, n in enumerate(lengths):
            w = rounded_width(n, max_len, multiple)
            if w not in seen:
                seen.add(w)
                cold.append(i)
        out.append(cold)
    return out


def first_id_mismatch(ours, theirs):
    """None when both lists of token id lists are equal, else (text index, piece index, ours, theirs)
    of the first difference (a piece past the end of one list is None)."""
    if len(ours) != len(theirs):
        raise ValueError(f"token ids of {len(ours)} texts against {len(theirs)}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if list(a) != list(b):
            j = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return (i, j, a[j] if j < len(a) else None, b[j] if j < len(b) else None)
    return None


def read_imdb(split: str, n: int, offset: int = 0):
    """(texts, labels) of IMDB reviews `offset .. offset + n` of imdb/<split>.tsv.gz, in file order."""
    csv.field_size_limit(1 << 30)
    texts, labels = [], []
    with gzip.open(DATA / "imdb" / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)):
            if i < offset:
                continue
            if len(texts) >= n:
                break
            texts.append(row["sentence"])
            labels.append(int(row["label"]))
    return texts, labels


def read_sst2(n: int, offset: int = 0):
    """(texts, labels) of GLUE SST-2 training sentences `offset .. offset + n`."""
    texts, labels = [], []
    with open(DATA / "glue" / "SST-2" / "train.tsv", encoding="utf-8") as f:
        next(f)
        for i, line in enumerate(f):
            if i < offset:
                continue
            if len(texts) >= n:
                break
            text, label = line.rstrip("\n").split("\t")
            texts.append(text)
            labels.append(int(label))
    return texts, labels


# Fine-tuning reads the first rows of IMDB train; serving never does.
FT_ROWS = 256
# Serving pools: IMDB dev (5,000 reviews) then IMDB train past the fine-tuning rows; SST-2 train
# past the fine-tuning rows (67k sentences).
POOLS = {"imdb": lambda n: _chain(read_imdb("dev", n), n, lambda m: read_imdb("train", m, FT_ROWS)),
         "sst2": lambda n: read_sst2(n, FT_ROWS)}


def _chain(first, n, more):
    texts = first[0]
    if len(texts) < n:
        texts = texts + more(n - len(texts))[0]
    return texts, None


class TextStream:
    """Consecutive, never repeated slices of one data set's serving pool.

    `take(n)` returns the next n texts; one stream per (model, max length) server, so that no
    server is sent a text twice. Raises when the pool runs out (lower the rounds or calls)."""

    def __init__(self, dataset: str, size: int):
        self.dataset = dataset
        self.texts, _ = POOLS[dataset](size)
        self.next = 0

    def keep_only(self, keep):
        """Drops the pool's texts whose flag in `keep` (one per text, in pool order) is false."""
        if self.next:
            raise RuntimeError(f"{self.dataset}: the pool is filtered before any text is handed out")
        self.texts = [t for t, k in zip(self.texts, keep, strict=True) if k]

    def take(self, n: int):
        if self.next + n > len(self.texts):
            raise RuntimeError(f"{self.dataset}: the serving pool of {len(self.texts)} texts is used up; "
                               f"lower --rounds or --latency_calls")
        out = self.texts[self.next:self.next + n]
        self.next += n
        return out


def ft_batches(case, convert):
    """The fine-tuning batches of `case["batches"]` (.npz of ids padded to seq): input order, each
    cut to its longest row rounded up like every side (our `finetune` default)."""
    import numpy as np

    data = np.load(case["batches"])
    ids, mask, labels = data["ids"], data["mask"], data["labels"]
    out = []
    b = case["batch"]
    for start in range(0, len(ids) - b + 1, b):
        sl = slice(start, start + b)
        width = rounded_width(mask[sl].sum(1).max(), case["seq"])
        out.append(convert(ids[sl, :width], mask[sl, :width], labels[sl]))
    return out


def percentile(values, q):
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)
