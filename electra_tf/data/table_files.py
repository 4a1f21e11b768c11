"""Reading the user's own text tables: CSV, TSV and JSON Lines files, optionally gzipped.

The format comes from the file name: `.csv`, `.tsv` or `.jsonl` (`.json` is
taken as JSON Lines too), each optionally followed by `.gz`. CSV and TSV files
start with a header line naming the columns; CSV fields may be quoted (Python's
`csv` dialect "excel", what spreadsheets and pandas write); TSV fields are
not (a quote is part of the text, as in GLUE). A JSON Lines file holds one
JSON object per line; its columns are the keys of the first object.

Files are read as bytes and decoded line by line, so a byte that is not UTF-8
is reported with its line number and an `iconv` hint (the rule build_vocab and
build_pretraining_data follow). Rows are yielded one at a time: `predict`
streams files of any size through `TableReader` in bounded memory.

Every problem is one `TextFileError` line naming the file, the line and the
fix. Fine-tuning (`--train_file`) and `predict` (`--input_file`) read them; which
column holds the text is `table_columns.py`.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import sys
from typing import Dict, Iterator, List, Optional, Tuple

from electra_tf.data.data_errors import DataError

# Reviews and articles can be long: lift csv's 128 KiB field limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}


class TextFileError(DataError):
    """A text table (or one of its rows) that cannot be used."""


def file_format(path: str, flag: str) -> str:
    """"csv", "tsv" or "jsonl", from the file name (a trailing .gz is looked through).

    Args:
      path: the file.
      flag: the flag that named it (for the message), e.g. "--train_file".
    """
    stem = path[:-3] if path.endswith(".gz") else path
    ext = os.path.splitext(stem)[1].lower()
    if ext not in FORMATS:
        raise TextFileError(f"{flag} {path}: unknown file type {ext or '(none)'!r}; name it .csv, .tsv or "
                            f".jsonl (optionally .gz)")
    return FORMATS[ext]


def not_utf8_message(path: str, line: int, error: UnicodeDecodeError) -> str:
    """The one line for a line that is not UTF-8 (shared by every fine-tuning reader)."""
    byte = error.object[error.start:error.start + 1].hex()
    name = os.path.basename(path)
    plain = name[:-3] if name.endswith(".gz") else name
    stem, ext = os.path.splitext(plain)
    source = f"zcat {name} | iconv -f latin1 -t utf-8" if name.endswith(".gz") else f"iconv -f latin1 -t utf-8 {name}"
    return (f"{path}:{line} is not UTF-8 (byte 0x{byte} at column {error.start + 1}; Latin-1 or cp1252?); "
            f"convert the file, e.g. {source} > {stem}.utf8{ext}")


def utf8_lines(path: str, flag: str, raw: Optional[list] = None) -> Iterator[Tuple[int, str]]:
    """Yields (1-based line number, text with its line ending) of a text file, gzip or not.

    Args:
      path: the file.
      flag: the flag that named it (for the messages; "" for none).
      raw: if given, the underlying (compressed) binary file is appended to it,
        so a caller can show progress as its `tell()` over the file size.

    Raises:
      TextFileError: the file does not exist, is not gzip though named .gz,
        or holds a line that is not UTF-8.
    """
    if not os.path.isfile(path):
        raise TextFileError(f"{flag} {path} does not exist; check the path".lstrip())
    with open(path, "rb") as binary:
        if raw is not None:
            raw.append(binary)
        stream = gzip.GzipFile(fileobj=binary) if path.endswith(".gz") else binary
        number = 0
        try:
            for number, data in enumerate(stream, 1):
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise TextFileError(f"{flag} {not_utf8_message(path, number, e)}".lstrip()) from None
                if number == 1 and text.startswith("\ufeff"):
                    text = text[1:]  # the byte-order mark spreadsheets write
                yield number, text
        except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
            raise TextFileError(f"{flag} {path}:{number + 1}: cannot be read as "
                                f"{'gzip' if path.endswith('.gz') else 'text'} ({e}); check the file".lstrip()) from None


class TableReader:
    """Streams the rows of a CSV, TSV or JSON Lines file as {column: value} dicts.

    Args:
      path: the file (.csv, .tsv, .jsonl, each optionally .gz).
      flag: the flag that named it, e.g. "--train_file" (for the messages).

    Attributes:
      columns: the column names (CSV/TSV header, or the first JSON object's keys).
      format: "csv", "tsv" or "jsonl".

    Raises (on construction, once the header is read):
      TextFileError: a missing, empty or unreadable file.
    """

    def __init__(self, path: str, flag: str):
        self.path = path
        self.flag = flag
        self.format = file_format(path, flag)
        self._raw: list = []
        self._lines = utf8_lines(path, flag, self._raw)
        self._first: Optional[Tuple[int, Dict]] = None
        if self.format == "jsonl":
            self._first = next(self._json_rows(), None)
            if self._first is None:
                raise TextFileError(f"{flag} {path} is empty; it needs one JSON object per line")
            self.columns: List[str] = list(self._first[1])
        else:
            self._csv = csv.reader(_text(self._lines), **self._dialect())
            header = next((row for row in self._csv if row and any(c.strip() for c in row)), None)
            if header is None:
                raise TextFileError(f"{flag} {path} is empty; it needs a header line naming the columns, "
                                    f"then one row per example")
            self.columns = [c.strip() for c in header]

    def _dialect(self) -> dict:
        if self.format == "tsv":
            return {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
        return {"delimiter": ","}

    def _json_rows(self) -> Iterator[Tuple[int, Dict]]:
        for number, text in self._lines:
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as e:
                raise TextFileError(f"{self.flag} {self.path}:{number}: not valid JSON ({e.msg}); write one JSON "
                                    f"object per line") from None
            if not isinstance(row, dict):
                raise TextFileError(f"{self.flag} {self.path}:{number}: a JSON {type(row).__name__}, not an "
                                    f"object; write one object per line, e.g. {{\"text\": \"...\", \"label\": \"...\"}}")
            yield number, row

    def rows(self) -> Iterator[Tuple[int, Dict]]:
        """Yields (line number, {column: value}) for every row; blank lines are skipped.

        CSV/TSV values are strings; JSON values are as written (strings,
        numbers, ...). A CSV/TSV row with another number of fields than the
        header is an error naming its line.
        """
        if self.format == "jsonl":
            if self._first is not None:
                first, self._first = self._first, None
                yield first
            yield from self._json_rows()
            return
        width = len(self.columns)
        start = self._csv.line_num + 1
        for fields in self._csv:
            # A quoted field may span lines: a row is named by the line it starts on.
            line, start = start, self._csv.line_num + 1
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if len(fields) != width:
                sep = "tab-separated" if self.format == "tsv" else "comma-separated"
                hint = ("a tab inside a text?" if self.format == "tsv"
                        else "a comma inside an unquoted text? quote it")
                raise TextFileError(f"{self.flag} {self.path}:{line}: {len(fields)} {sep} fields "
                                    f"where the header has {width} ({hint}); fix or delete the line")
            yield line, dict(zip(self.columns, fields))

    def progress(self) -> Tuple[int, int]:
        """(bytes of the file read so far, file size): for a progress bar."""
        size = os.path.getsize(self.path)
        if not self._raw or self._raw[0].closed:
            return size, size
        return self._raw[0].tell(), size

    def close(self) -> None:
        self._lines.close()


def _text(lines: Iterator[Tuple[int, str]]) -> Iterator[str]:
    """The text of `utf8_lines`, for csv.reader (which counts lines itself)."""
    for _, text in lines:
        yield text
