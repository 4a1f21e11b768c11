"""Splitting a corpus into shard work units before anything is tokenized.

Each shard gets a contiguous byte range of the corpus that starts right after a
document boundary (a blank line, or a file start), balanced by bytes. Shards are
then independent tasks with their own seeded RNG, which is what makes the output
identical whatever the number of processes, and lets a resumed build redo only
the missing shards. A gzip'd file counts by its uncompressed bytes and is cut at
the document starts that gzip_index.py finds in one reading of it, so one large
.gz file spreads over many shards like a plain one.

A tfds source is split by record ranges instead (`plan_tfds`).
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple

from electra_tf.data.corpus import decode_counting, is_gzip
from electra_tf.fileio import open_binary
from electra_tf.data.data_errors import DataError
from electra_tf.data.gzip_index import index_gzip

# How far past a byte-balanced cut point we look for a blank line before
# splitting a (huge) document at a line boundary instead.
DOC_SEARCH_BYTES = 4 << 20


@dataclasses.dataclass(frozen=True)
class Segment:
    """Bytes [start, end) of one file (uncompressed bytes of a .gz file); start is a line start."""

    path: str
    start: int
    end: int


@dataclasses.dataclass
class FilePlan:
    shards: List[List[Segment]]
    forced_splits: int  # cuts placed inside a document (no blank line nearby)


def _is_blank(line: bytes) -> bool:
    return not line.strip() or not decode_counting(line)[0].strip()


def _boundary(path: str, size: int, offset: int, blanks_separate_docs: bool,
              search_bytes: int) -> Tuple[int, bool]:
    """First cut point at or after `offset`: (local offset, forced?)."""
    if offset <= 0:
        return 0, False
    with open_binary(path) as f:
        f.seek(offset - 1)
        data = f.read(search_bytes + 1)
    nl = data.find(b"\n")
    if nl < 0:
        return size, False
    line_start = offset + nl  # (offset - 1) + nl + 1
    if not blanks_separate_docs:
        return line_start, False
    pos = nl + 1
    while True:
        nxt = data.find(b"\n", pos)
        if nxt < 0:
            # Window exhausted: at end of file this is a file boundary, else force.
            if offset - 1 + len(data) >= size:
                return size, False
            return line_start, True
        if _is_blank(data[pos:nxt]):
            return offset + nxt, False  # just after the blank line
        pos = nxt + 1


def plan_files(paths: Sequence[str], sizes: Sequence[int], num_shards: int,
               blanks_separate_docs: bool, search_bytes: int = DOC_SEARCH_BYTES) -> FilePlan:
    """Byte-balanced shard ranges that start at document boundaries.

    Args:
      paths: corpus files in order.
      sizes: their sizes in bytes (a .gz file's is replaced by its
        uncompressed size, read while indexing it).
      num_shards: number of output shards.
      blanks_separate_docs: cut after blank lines (else at any line start).
      search_bytes: look-ahead for a blank line before forcing a cut.

    Returns:
      FilePlan with num_shards lists of Segments (some may be empty on a tiny
      corpus).

    Raises:
      DataError: a .gz file that is not valid gzip.
    """
    indexes = {p: index_gzip(p, blanks_separate_docs) for p in paths if is_gzip(p)}
    sizes = [indexes[p].size if p in indexes else s for p, s in zip(paths, sizes)]
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    total = starts[-1]
    cuts = [0]
    forced = 0
    fi = 0
    for i in range(1, num_shards):
        target = max(i * total // num_shards, cuts[-1])
        while fi < len(paths) - 1 and target >= starts[fi + 1]:
            fi += 1
        if paths[fi] in indexes:
            local, was_forced = indexes[paths[fi]].cut_at_or_after(target - starts[fi]), False
        else:
            local, was_forced = _boundary(paths[fi], sizes[fi], target - starts[fi],
                                          blanks_separate_docs, search_bytes)
        forced += was_forced
        cuts.append(max(cuts[-1], starts[fi] + local))
    cuts.append(total)
    shards = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        segs = []
        for path, cs, ce in zip(paths, starts[:-1], starts[1:]):
            lo, hi = max(a, cs), min(b, ce)
            if lo < hi:
                segs.append(Segment(path, lo - cs, hi - cs))
        shards.append(segs)
    return FilePlan(shards=shards, forced_splits=forced)


def plan_tfds(name: str, split: str, text_key: str, data_dir: Optional[str],
              num_shards: int) -> tuple:
    """(per-shard split strings or None if empty, total records, identity) for tfds."""
    # Lazy: tensorflow_datasets imports TensorFlow (seconds); only tfds sources need it.
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel

    try:
        builder = tfds.builder(name, data_dir=data_dir)
        info = builder.info
        num = info.splits[split].num_examples
    except Exception as e:  # tfds raises many types for "not found"  # pylint: disable=broad-except
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(
            f"tfds dataset {name!r} split {split!r} is not available ({first}); "
            f"prepare it first (tfds build) or pass --tfds_data_dir where it was built"
        ) from None
    keys = list(info.features.keys()) if hasattr(info.features, "keys") else []
    if text_key not in keys:
        raise DataError(
            f"tfds dataset {name!r} has no feature {text_key!r}; pass --tfds_text_key, one of {keys}"
        )
    if num == 0:
        raise DataError(f"tfds dataset {name!r} split {split!r} is empty; choose another split")
    splits = []
    for i in range(num_shards):
        a, b = i * num // num_shards, (i + 1) * num // num_shards
        splits.append(f"{split}[{a}:{b}]" if b > a else None)
    identity = {"name": name, "split": split, "text_key": text_key,
                "version": str(info.version), "num_examples": int(num)}
    return splits, int(num), identity
