"""Finding corpus files and streaming their lines with bounded memory.

Remote paths go through `tf.io.gfile` (fileio.py) so that gs:// (and other TF file systems)
work like local paths. TensorFlow is imported lazily: bad paths are reported
before paying the ~3 s TF import.

Files whose name ends in `.gz` are gzip'd text, decompressed as they stream.
Offsets into them count uncompressed bytes: a reader that starts mid-way
decompresses from the file's start and discards what comes before (a .gz file
has no index to seek with), so a shard plan can cut one at any line.
"""

from __future__ import annotations

import codecs
import dataclasses
import glob as _glob
import gzip
import os
import zlib
from typing import Callable, Dict, Iterator, List, Optional, Sequence

from electra_tf import fileio
from electra_tf.data.data_errors import DataError
from electra_tf.paths import is_remote

_GLOB_CHARS = set("*?[")
# Bytes checked for NUL at the start of each file (git uses the same heuristic).
BINARY_SNIFF_BYTES = 8192
# More invalid UTF-8 than this share of those bytes: the file is in another
# encoding (Latin-1, cp1252, ...), and replacing every accented letter with
# U+FFFD would silently damage the text. Scattered bad bytes are replaced and
# counted instead.
MAX_INVALID_UTF8_SHARE = 0.01
READ_CHUNK_BYTES = 1 << 22


# --- counting decoder -------------------------------------------------------
_REPLACED = [0]


def _count_and_replace(exc: UnicodeDecodeError):
    _REPLACED[0] += exc.end - exc.start
    return ("\ufffd", exc.end)


codecs.register_error("electra_tf_count_replace", _count_and_replace)


def decode_counting(data: bytes) -> tuple:
    """Decodes UTF-8, replacing invalid bytes with U+FFFD.

    Returns:
      (text, number of invalid bytes replaced).
    """
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        _REPLACED[0] = 0
        text = data.decode("utf-8", errors="electra_tf_count_replace")
        return text, _REPLACED[0]


# --- path expansion ----------------------------------------------------------
def expand_corpus(patterns: Sequence[str]) -> List[str]:
    """Turns files, directories and globs into a sorted, de-duplicated file list.

    Args:
      patterns: paths as given on the command line. Directories are walked
        recursively (hidden files skipped); globs must match at least one file.

    Raises:
      DataError: a pattern matches nothing, or no pattern was given.
    """
    if not patterns:
        raise DataError("no corpus given; pass --corpus with text files, directories or globs")
    files: List[str] = []
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = _expand_one(pattern)
        if not matched:
            raise DataError(
                f"corpus path {pattern!r} matches no file; check the path (files, directories or globs)"
            )
        files.extend(matched)
    seen = set()
    unique = []
    for f in files:
        if f not in seen:
            seen.add(f)
            unique.append(f)
    return unique


def _expand_one(pattern: str) -> List[str]:
    if is_remote(pattern):
        gfile = fileio.gfile()
        if any(c in pattern for c in _GLOB_CHARS):
            return sorted(p for p in gfile.glob(pattern) if not gfile.isdir(p))
        if gfile.isdir(pattern):
            out = []
            for root, _, names in gfile.walk(pattern):
                out.extend(f"{root.rstrip('/')}/{n}" for n in names if not n.startswith("."))
            return sorted(out)
        return [pattern] if gfile.exists(pattern) else []
    # Local paths: plain os is much faster than gfile and needs no TF.
    if any(c in pattern for c in _GLOB_CHARS):
        return sorted(p for p in _glob.glob(pattern, recursive=True) if os.path.isfile(p))
    if os.path.isdir(pattern):
        out = []
        for root, dirs, names in os.walk(pattern):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            out.extend(os.path.join(root, n) for n in names if not n.startswith("."))
        return sorted(out)
    return [pattern] if os.path.isfile(pattern) else []


def is_gzip(path: str) -> bool:
    """gzip'd text is recognised by its name, as TensorFlow's readers do."""
    return path.endswith(".gz")


# What a damaged or mis-named .gz file raises while it is read.
GZIP_ERRORS = (OSError, EOFError, zlib.error)


def _bad_gzip(path: str, error: BaseException) -> DataError:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return DataError(f"corpus file {path!r} is not valid gzip ({reason}); re-compress it, or remove "
                     f"the .gz ending if it is plain text")


def _read_range(f, pos: int, end: Optional[int], progress) -> Iterator[bytes]:
    """Pieces of an open file object from offset `pos` (where it stands) to `end` (None: its end)."""
    while end is None or pos < end:
        data = f.read(READ_CHUNK_BYTES if end is None else min(READ_CHUNK_BYTES, end - pos))
        if not data:
            break
        pos += len(data)
        if progress is not None:
            progress(len(data))
        yield data


def _chunks(path: str, start: int, end: Optional[int], progress=None) -> Iterator[bytes]:
    """Pieces of bytes [start, end) of `path` (end None: to the end of the file).

    For a gzip'd file the offsets count uncompressed bytes, like its pieces
    and the progress calls (the unit of shard plans).
    """
    if not is_gzip(path):
        with fileio.open_binary(path) as f:
            f.seek(start)
            yield from _read_range(f, start, end, progress)
        return
    with fileio.open_binary(path) as raw:
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                if start:
                    gz.seek(start)  # decompresses and discards: a .gz file cannot be entered otherwise
                yield from _read_range(gz, start, end, progress)
        except GZIP_ERRORS as e:
            raise _bad_gzip(path, e) from None


def read_chunks(path: str) -> Iterator[bytes]:
    """The whole (decompressed) content of `path`, in pieces of bounded size.

    Raises:
      DataError: a .gz file that is not valid gzip.
    """
    return _chunks(path, 0, None)


def text_corpus_files(corpus: Sequence[str], empty_message: Callable[[List[str]], str]) -> List[str]:
    """The corpus's files (`expand_corpus`), each checked by `check_text_file`.

    Args:
      corpus: files, folders or globs, as --corpus takes them.
      empty_message: the DataError's text, from the files, when none holds a non-blank line.

    Raises:
      DataError: a missing, binary or non-UTF-8 file, or no non-blank line in any.
    """
    files = expand_corpus(corpus)
    has_text = False
    for path in files:
        has_text = check_text_file(path) or has_text
    if not has_text:
        raise DataError(empty_message(files))
    return files


def check_text_file(path: str) -> bool:
    """Rejects binary files; says whether the file holds any non-blank text.

    Raises:
      DataError: the file has NUL bytes near its start (binary or UTF-16), or
        its start is mostly not UTF-8.
    """
    if is_gzip(path):
        try:
            with fileio.open_binary(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                return _check_text_stream(path, gz)
        except GZIP_ERRORS as e:
            raise _bad_gzip(path, e) from None
    with fileio.open_binary(path) as f:
        return _check_text_stream(path, f)


def _check_text_stream(path: str, f) -> bool:
    """The checks of check_text_file on an open (decompressed) byte stream."""
    head = f.read(BINARY_SNIFF_BYTES)
    nul = head.find(b"\x00")
    if nul >= 0:
        raise DataError(
            f"corpus file {path!r} looks binary (NUL byte at offset {nul}); "
            f"remove it from --corpus or convert it to UTF-8 text"
        )
    whole = head[:head.rfind(b"\n") + 1] or head  # no character cut at the sniff boundary
    invalid = decode_counting(whole)[1]
    if invalid >= 8 and invalid > MAX_INVALID_UTF8_SHARE * len(whole):
        raise DataError(
            f"corpus file {path!r} is not UTF-8 ({invalid} of its first {len(whole)} bytes are "
            f"invalid; Latin-1 or cp1252?); convert it, e.g. iconv -f latin1 -t utf-8"
        )
    chunk = head
    while chunk:
        if chunk.strip() and decode_counting(chunk)[0].strip():
            return True
        chunk = f.read(READ_CHUNK_BYTES)
    return False


# --- streaming lines -----------------------------------------------------------
@dataclasses.dataclass
class ReadStats:
    """What was repaired while reading (reported, never silent)."""

    invalid_bytes: Dict[str, int] = dataclasses.field(default_factory=dict)
    long_lines_cut: Dict[str, int] = dataclasses.field(default_factory=dict)
    bytes_read: int = 0

    def add(self, other: "ReadStats") -> None:
        for mine, theirs in ((self.invalid_bytes, other.invalid_bytes),
                             (self.long_lines_cut, other.long_lines_cut)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        self.bytes_read += other.bytes_read


def _cut_long_line(line: bytes, limit: int) -> bytes:
    """Keeps at most `limit` bytes, cut at a space or at least a UTF-8 boundary."""
    head = line[:limit]
    space = head.rfind(b" ")
    if space > limit // 2:
        return head[:space]
    end = len(head)
    # Back off over UTF-8 continuation bytes so no character is split.
    while end > 0 and (head[end - 1] & 0xC0) == 0x80:
        end -= 1
    if end > 0 and head[end - 1] >= 0xC0:
        end -= 1
    return head[:end]


def iter_lines(path: str, start: int, end: Optional[int], stats: ReadStats,
               max_line_bytes: int, progress=None) -> Iterator[str]:
    """Yields the decoded lines of `path` in the byte range [start, end).

    `start` must be at a line start (in a gzip'd file, offsets count
    uncompressed bytes). Lines
    longer than `max_line_bytes` are cut (counted in `stats.long_lines_cut`)
    so a file without newlines cannot exhaust memory; invalid UTF-8 is
    replaced and counted.

    Args:
      path: local or gfile path.
      start: first byte (a line start).
      end: byte offset to stop at (a line start, or the file size); None:
        the end of the file.
      stats: ReadStats updated in place.
      max_line_bytes: longest line kept whole.
      progress: optional callable(bytes) called as chunks are consumed.
    """
    if end is not None and end <= start:
        return
    chunks = _chunks(path, start, end, progress)
    upcoming = next(chunks, None)
    pending = b""  # an unfinished line carried between chunks
    skipping = False  # inside an over-long line whose head was already yielded
    while upcoming is not None:
        data = upcoming
        # One chunk of look-ahead tells whether this one is the range's last.
        upcoming = next(chunks, None)
        final = upcoming is None
        stats.bytes_read += len(data)
        data = pending + data
        last_nl = data.rfind(b"\n")
        if last_nl < 0 and not final:
            if skipping:
                pending = b""
            elif len(data) > max_line_bytes:
                yield from _decode_lines(_cut_long_line(data, max_line_bytes), path, stats)
                stats.long_lines_cut[path] = stats.long_lines_cut.get(path, 0) + 1
                skipping, pending = True, b""
            else:
                pending = data
            continue
        if final:
            # The range ends at a line start (or EOF): drop the final newline.
            body, pending = (data[:-1] if data.endswith(b"\n") else data), b""
        else:
            body, pending = data[:last_nl], data[last_nl + 1:]
        if skipping:
            nl = body.find(b"\n")
            skipping = False
            if nl < 0:
                continue
            body = body[nl + 1:]
        lines = body.split(b"\n")
        for i, raw in enumerate(lines):
            if len(raw) > max_line_bytes:
                lines[i] = _cut_long_line(raw, max_line_bytes)
                stats.long_lines_cut[path] = stats.long_lines_cut.get(path, 0) + 1
        yield from _decode_lines(b"\n".join(lines), path, stats)


def _decode_lines(body: bytes, path: str, stats: ReadStats) -> Iterator[str]:
    text, bad = decode_counting(body)
    if bad:
        stats.invalid_bytes[path] = stats.invalid_bytes.get(path, 0) + bad
    yield from text.split("\n")
