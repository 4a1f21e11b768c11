"""The user's own labelled files as fine-tuning data: columns, labels, validation split.

`read_examples` reads the text (and optional second text) and label of every
row of a CSV / TSV / JSON Lines file (`text_files.TableReader`). `LabelSet`
decides, from the training file's labels alone, what is learnt:

* **classification** when any label is not a number, or every label is an
  integer (`0`, `1`, `5`): the classes are the distinct labels, sorted
  (numerically when they are all integers, else as strings), and class i is
  the i-th of them;
* **regression** when every label is a number and at least one is written
  with a decimal point or exponent (`3.5`, `1.0`, `2e-1`): the model predicts
  one number.

Every bad input is one `TextFileError` line naming the file, the line and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from electra_tf.finetune.text_files import TableReader, TextFileError

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


@dataclasses.dataclass
class Examples:
    """The rows of one file.

    Attributes:
      texts: first texts.
      pairs: second texts, or None.
      labels: raw labels as written (strings, or JSON numbers), None where the
        file has no label column (a test file).
      lines: each row's line number, for messages.
      text_column, pair_column: the columns actually read.
    """
    texts: List[str]
    pairs: Optional[List[str]]
    labels: Optional[List[object]]
    lines: List[int]
    text_column: str
    pair_column: Optional[str]

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, index: Sequence[int]) -> "Examples":
        pick = lambda values: None if values is None else [values[i] for i in index]  # noqa: E731
        return Examples(pick(self.texts), pick(self.pairs), pick(self.labels), pick(self.lines),
                        self.text_column, self.pair_column)


def _columns_line(reader: TableReader) -> str:
    return ", ".join(reader.columns) if reader.columns else "(none)"


def resolve_text_column(reader: TableReader, columns: Columns) -> str:
    """The text column of `reader`'s file: --text_column, or the first default present."""
    if columns.text is not None:
        if columns.text not in reader.columns:
            raise TextFileError(f"{reader.flag} {reader.path} has no column {columns.text!r} (--text_column); "
                                f"its columns are: {_columns_line(reader)}")
        return columns.text
    for name in DEFAULT_TEXT_COLUMNS:
        if name in reader.columns:
            return name
    raise TextFileError(f"{reader.flag} {reader.path} has no 'text' or 'sentence' column; its columns are: "
                        f"{_columns_line(reader)}; name the text column with --text_column")


def read_examples(path: str, flag: str, columns: Columns, need_labels: bool = True,
                  max_rows: Optional[int] = None) -> Examples:
    """Reads the text(s) and label of every row.

    Args:
      path: a .csv / .tsv / .jsonl file (optionally .gz).
      flag: the flag that named it (for the messages).
      columns: the column names.
      need_labels: the file must have the label column (train and validation
        files); a test file without it is read without labels.
      max_rows: keep only the first N rows (None: all).

    Raises:
      TextFileError: a missing column (naming the columns there are), an empty
        file, a blank label or text-pair cell, a malformed row.
    """
    reader = TableReader(path, flag)
    try:
        text_col = resolve_text_column(reader, columns)
        if columns.pair is not None and columns.pair not in reader.columns:
            raise TextFileError(f"{flag} {path} has no column {columns.pair!r} (--text_pair_column); its columns "
                                f"are: {_columns_line(reader)}")
        has_label = columns.label in reader.columns
        if need_labels and not has_label:
            raise TextFileError(f"{flag} {path} has no column {columns.label!r} (--label_column); its columns "
                                f"are: {_columns_line(reader)}")
        out = Examples([], [] if columns.pair else None, [] if has_label else None, [], text_col, columns.pair)
        for line, row in reader.rows():
            if max_rows is not None and len(out) >= max_rows:
                break
            out.texts.append(_cell(row, text_col, path, flag, line, "text"))
            if out.pairs is not None:
                out.pairs.append(_cell(row, columns.pair, path, flag, line, "text pair"))
            if out.labels is not None:
                out.labels.append(_label(row, columns.label, path, flag, line))
            out.lines.append(line)
    finally:
        reader.close()
    if not out.texts:
        raise TextFileError(f"{flag} {path} holds a header but no rows; add one row per example")
    return out


def _cell(row: dict, column: str, path: str, flag: str, line: int, what: str) -> str:
    if column not in row:  # JSON Lines: a later object without the key
        raise TextFileError(f"{flag} {path}:{line}: no {column!r} key; every object needs the {what} column")
    value = row[column]
    if value is None:
        raise TextFileError(f"{flag} {path}:{line}: the {what} in column {column!r} is null; write a string")
    return value if isinstance(value, str) else str(value)


def _label(row: dict, column: str, path: str, flag: str, line: int):
    value = row.get(column)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise TextFileError(f"{flag} {path}:{line}: blank label in column {column!r}; fill it in or delete the row")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise TextFileError(f"{flag} {path}:{line}: label {value} in column {column!r} is not a finite number; "
                                f"write a number or a class name")
        return value
    if isinstance(value, str):
        return value.strip()
    raise TextFileError(f"{flag} {path}:{line}: label in column {column!r} is a JSON {type(value).__name__}; "
                        f"write a string or a number")


def _as_number(label) -> Optional[Tuple[float, bool]]:
    """(value, written as an integer) of a numeric label, None for any other."""
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        return float(label), True
    if isinstance(label, float):
        return label, False
    try:
        value = float(label)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    try:
        int(label)
        return value, True
    except ValueError:
        return value, False


@dataclasses.dataclass(frozen=True)
class LabelSet:
    """What the training labels say is learnt (see the module docstring).

    Attributes:
      regression: one number per text instead of classes.
      names: the class names in logit order (empty for regression).
    """
    regression: bool
    names: Tuple[str, ...]

    @classmethod
    def from_training_labels(cls, labels: Sequence, path: str, flag: str = "--train_file") -> "LabelSet":
        numbers = [_as_number(label) for label in labels]
        if all(n is not None for n in numbers):
            if not all(is_int for _, is_int in numbers):
                values = np.asarray([v for v, _ in numbers])
                if float(values.max()) == float(values.min()):
                    raise TextFileError(f"{flag} {path}: every label is {values[0]:g}; a regression needs "
                                        f"labels that differ")
                return cls(True, ())
            names = tuple(str(int(v)) for v in sorted({v for v, _ in numbers}))
        else:
            names = tuple(sorted({str(label) for label in labels}))
        if len(names) < 2:
            raise TextFileError(f"{flag} {path}: every label is {names[0]!r} (one class); a classifier needs "
                                f"examples of at least two classes")
        return cls(False, names)

    @property
    def num_outputs(self) -> int:
        return 1 if self.regression else len(self.names)

    def encode(self, examples: Examples, path: str, flag: str) -> np.ndarray:
        """Class ids (int32) or scores (float32) of `examples`' labels.

        Raises:
          TextFileError: a label the training file does not have (naming its
            line), or a non-numeric label for a regression.
        """
        if self.regression:
            out = []
            for label, line in zip(examples.labels, examples.lines):
                number = _as_number(label)
                if number is None:
                    raise TextFileError(f"{flag} {path}:{line}: label {label!r} is not a number, but the "
                                        f"training labels are numbers (regression); fix the label")
                out.append(number[0])
            return np.asarray(out, np.float32)
        index = {name: i for i, name in enumerate(self.names)}
        ids = []
        for label, line in zip(examples.labels, examples.lines):
            key = _class_name(label)
            if key not in index:
                raise TextFileError(f"{flag} {path}:{line}: label {str(label)!r} does not occur in --train_file "
                                    f"(labels: {', '.join(self.names)}); fix the label or add examples of it "
                                    f"to the training file")
            ids.append(index[key])
        return np.asarray(ids, np.int32)


def _class_name(label) -> str:
    """A label as its class name: integers written as 1, 1.0 or "1" are the class "1"."""
    number = _as_number(label)
    if number is not None and float(number[0]).is_integer():
        return str(int(number[0]))
    return str(label)


def stratified_split(labels: np.ndarray, fraction: float, seed: int,
                     regression: bool) -> Tuple[np.ndarray, np.ndarray]:
    """Seeded split of row indices into (train, validation).

    Classification: every class gives round(fraction * its count) rows, at
    least one for a class with two or more rows, so the validation set has the
    class mix of the file. Regression: `fraction` of the rows at random.

    Args:
      labels: class ids or scores of every row.
      fraction: share held out, in (0, 1).
      seed: random seed (the split is the same for every fine-tuning seed).
      regression: labels are scores.

    Returns:
      (train indices, validation indices), each sorted.
    """
    rng = np.random.default_rng(seed)
    groups = [np.arange(len(labels))] if regression else [np.flatnonzero(labels == c) for c in np.unique(labels)]
    held = []
    for group in groups:
        take = int(round(fraction * len(group)))
        if not regression and len(group) >= 2:
            take = min(max(take, 1), len(group) - 1)  # each class on both sides
        held.append(rng.permutation(group)[:take])
    validation = np.sort(np.concatenate(held)).astype(np.int64)
    train = np.setdiff1d(np.arange(len(labels)), validation)
    return train, validation
