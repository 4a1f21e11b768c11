"""Where a gzip'd corpus file can be cut into shards, found in one reading.

A .gz file cannot be entered mid-way by seeking, but a reader can decompress
it from the start and discard the bytes before its range (corpus.iter_lines
does). So the planner reads each .gz file once, decompressed, and notes its
size and document starts (just after a blank line; any line start when blank
lines do not separate documents), spread evenly over the file and at most a
few tens of thousands per file; shards then get ranges of uncompressed bytes
that start at one of them. The plan depends only on the file's content, so it
is the same in every run (determinism, resume, repair).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import List, Tuple

from electra_tf.data.corpus import read_chunks

# A blank line: the newline ending one line, ASCII blanks only, its own newline.
_BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")
_NEWLINE = re.compile(rb"\n")
_BLANKS = b" \t\r\f\v"
# More candidate cuts than this and every other one is dropped (their spacing doubles):
# memory stays bounded, and a shard boundary still falls close to its target.
MAX_POINTS = 1 << 15


@dataclasses.dataclass(frozen=True)
class GzipIndex:
    """A .gz file's uncompressed size and candidate cut points.

    cuts: increasing uncompressed offsets, each the start of a document (just
    after a blank line) or of a line, none 0 or the size. starts: where the
    blank line that ends before each cut starts (the cut itself for line starts).
    """

    size: int
    cuts: List[int]
    starts: List[int]

    def cut_at_or_after(self, offset: int) -> int:
        """Where a shard boundary aimed at `offset` goes (0 for offset <= 0; the size when no cut is left).

        The rule of a plain file's plan (planning._boundary): just after the
        first blank line that starts at or after `offset`, so a .gz file is
        cut where the same text, uncompressed, would be.
        """
        if offset <= 0:
            return 0
        i = bisect.bisect_left(self.starts, offset)
        return self.cuts[i] if i < len(self.cuts) else self.size


def _thin(cuts: List[int], starts: List[int], spacing: int) -> Tuple[List[int], List[int]]:
    kept_cuts: List[int] = []
    kept_starts: List[int] = []
    for cut, start in zip(cuts, starts):
        if not kept_cuts or cut >= kept_cuts[-1] + spacing:
            kept_cuts.append(cut)
            kept_starts.append(start)
    return kept_cuts, kept_starts


def index_gzip(path: str, blanks_separate_docs: bool, max_points: int = MAX_POINTS) -> GzipIndex:
    """Reads `path` once and returns its GzipIndex.

    Args:
      path: a .gz corpus file.
      blanks_separate_docs: cut points follow blank lines (else any line start).
      max_points: bound on the points kept (their spacing doubles past twice this).

    Raises:
      DataError: the file is not valid gzip.
    """
    pattern = _BLANK_LINE if blanks_separate_docs else _NEWLINE
    shortest = 2 if blanks_separate_docs else 1  # bytes of the shortest match
    cuts: List[int] = []
    starts: List[int] = []
    spacing = 1
    tail = b""  # a newline and blanks at the end of one piece: a blank line may end in the next
    base = 0  # uncompressed offset of buf[0]
    size = 0
    for data in read_chunks(path):
        size += len(data)
        buf = tail + data
        while True:
            # Searching from here, every match ends at or past the wanted cut: cuts
            # strictly increase, at least `spacing` apart.
            wanted = cuts[-1] + spacing if cuts else 1
            m = pattern.search(buf, max(wanted - base - shortest, 0))
            if m is None:
                break
            cuts.append(base + m.end())
            # A blank line starts after the newline that opens the match.
            starts.append(base + m.start() + 1 if blanks_separate_docs else base + m.end())
            if len(cuts) > 2 * max_points:
                spacing *= 2
                cuts, starts = _thin(cuts, starts, spacing)
        last_nl = buf.rfind(b"\n")
        if (blanks_separate_docs and last_nl >= 0 and len(buf) - last_nl < 4096
                and not buf[last_nl + 1:].strip(_BLANKS)):
            tail, base = buf[last_nl:], base + last_nl
        else:
            tail, base = b"", base + len(buf)
    keep = [i for i, cut in enumerate(cuts) if cut < size]
    return GzipIndex(size=size, cuts=[cuts[i] for i in keep], starts=[starts[i] for i in keep])
