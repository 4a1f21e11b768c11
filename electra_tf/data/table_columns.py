"""Which columns of a text table hold the text, the optional second text and the label.

`Columns` names them (the flags --text_column, --text_pair_column, --label_column);
`resolve_text_column` and `check_columns` find them in an open `TableReader` and name
every column a file lacks, with its fix, in one `TextFileError` line. Fine-tuning on
own files and `predict` share them.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from electra_tf.data.table_files import TableReader, TextFileError

DEFAULT_TEXT_COLUMNS = ("text", "sentence")  # tried in this order when --text_column is not given
DEFAULT_LABEL_COLUMN = "label"


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns hold the text, the optional second text and the label.

    Attributes:
      text: --text_column, or None for the first of `DEFAULT_TEXT_COLUMNS` present.
      pair: --text_pair_column, or None for single texts.
      label: --label_column.
    """
    text: Optional[str] = None
    pair: Optional[str] = None
    label: str = DEFAULT_LABEL_COLUMN


def _columns_line(reader: TableReader) -> str:
    return ", ".join(reader.columns) if reader.columns else "(none)"


def resolve_text_column(reader: TableReader, columns: Columns) -> str:
    """The text column of `reader`'s file: --text_column, or the first default present."""
    text, missing = _find_text_column(reader, columns)
    if missing:
        raise TextFileError(_missing_columns_message(reader, [missing]))
    return text


def _find_text_column(reader: TableReader, columns: Columns):
    """(the text column, None), or (None, (what is missing, its fix)) when the file lacks it."""
    if columns.text is not None:
        if columns.text in reader.columns:
            return columns.text, None
        return None, (f"no column {columns.text!r}", "name the text column with --text_column")
    for name in DEFAULT_TEXT_COLUMNS:
        if name in reader.columns:
            return name, None
    return None, ("no 'text' or 'sentence' column", "name the text column with --text_column")


def _missing_columns_message(reader: TableReader, missing) -> str:
    """One line for every column the file lacks: what is missing, the columns there are, each fix."""
    what = [m for m, _ in missing]
    fixes = [f for _, f in missing]
    if len(fixes) > 1:  # "name the text column with --text_column and the label column with --label_column"
        fixes = [fixes[0]] + [f[len("name "):] if f.startswith("name ") else f for f in fixes[1:]]
    return (f"{reader.flag} {reader.path} has {joined_with_and(what)}; its columns are: {_columns_line(reader)}; "
            f"{joined_with_and(fixes)}")


def joined_with_and(parts: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c": a list of what is missing, in a message."""
    parts = list(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def check_columns(reader: TableReader, columns: Columns, need_labels: bool) -> str:
    """The text column of `reader`'s file; every column it lacks is named in one `TextFileError`.

    Args:
      reader: the open file.
      columns: the columns asked for.
      need_labels: the label column is required (training and validation files).
    """
    text, missing = _find_text_column(reader, columns)
    missing = [missing] if missing else []
    if columns.pair is not None and columns.pair not in reader.columns:
        missing.append((f"no column {columns.pair!r}", "name the second text's column with --text_pair_column"))
    if need_labels and columns.label not in reader.columns:
        missing.append((f"no column {columns.label!r}", "name the label column with --label_column"))
    if missing:
        raise TextFileError(_missing_columns_message(reader, missing))
    return text
