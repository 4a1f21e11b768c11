"""The user's own labelled files as fine-tuning data: columns, labels, validation split.

`read_examples` reads the text (and optional second text) and label of every
row of a CSV / TSV / JSON Lines file (`electra_tf.data.table_files.TableReader`;
the columns: `electra_tf.data.table_columns`). A text that
is missing, null, empty or only whitespace is refused (naming its line), in
every file: a row without text teaches nothing and cannot be predicted.
`LabelSet` decides, from the training file's labels alone, what is learnt
(`--label_type auto`):

* **classification** when any label is not a number, or every label is an
  integer (`0`, `1`, `5`): the classes are the distinct labels, sorted
  (numerically when they are all numbers, else as strings), and class i is
  the i-th of them;
* **regression** when every label is a number and at least one is written
  with a decimal point or exponent (`3.5`, `1.0`, `2e-1`): the model predicts
  one number.

`--label_type classification` or `regression` overrides the rule (integer
ratings 1-10 as a score, say); `LabelSet.reason` says which rule decided.

Every bad input is one `TextFileError` line naming the file, the line and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from electra_tf.data.table_columns import Columns, check_columns, joined_with_and
from electra_tf.data.table_files import TableReader, TextFileError

LABEL_TYPES = ("auto", "classification", "regression")  # --label_type


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
      TextFileError: missing columns (all of them in one line, naming the
        columns there are), an empty file, a blank (empty or whitespace-only)
        or null text or label, a malformed row.
    """
    reader = TableReader(path, flag)
    try:
        text_col = check_columns(reader, columns, need_labels)
        has_label = columns.label in reader.columns
        out = Examples([], [] if columns.pair else None, [] if has_label else None, [], text_col, columns.pair)
        needed = [(text_col, "text")] + ([(columns.pair, "second text")] if columns.pair else [])
        needed += [(columns.label, "label")] if has_label else []
        for line, row in reader.rows():
            if max_rows is not None and len(out) >= max_rows:
                break
            absent = [(column, what) for column, what in needed if column not in row]
            if absent:  # JSON Lines: a later object without the keys
                raise TextFileError(f"{flag} {path}:{line}: {joined_with_and([f'no {c!r}' for c, _ in absent])} key; every "
                                    f"object needs the {joined_with_and([w for _, w in absent])} "
                                    f"column{'s' if len(absent) > 1 else ''}")
            out.texts.append(_cell(row, text_col, path, flag, line, "text"))
            if out.pairs is not None:
                out.pairs.append(_cell(row, columns.pair, path, flag, line, "second text"))
            if out.labels is not None:
                out.labels.append(_label(row, columns.label, path, flag, line))
            out.lines.append(line)
    finally:
        reader.close()
    if not out.texts:
        raise TextFileError(f"{flag} {path} holds a header but no rows; add one row per example")
    return out


def _cell(row: dict, column: str, path: str, flag: str, line: int, what: str) -> str:
    value = row[column]
    if value is None:
        raise TextFileError(f"{flag} {path}:{line}: the {what} in column {column!r} is null; write a string")
    value = value if isinstance(value, str) else str(value)
    if not value.strip():
        raise TextFileError(f"{flag} {path}:{line}: blank {what} in column {column!r}; fill it in or delete "
                            f"the row")
    return value


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
      reason: the rule that decided, in words, with the flag that overrides it.
    """
    regression: bool
    names: Tuple[str, ...]
    reason: str = dataclasses.field(default="", compare=False)

    @classmethod
    def from_training_labels(cls, labels: Sequence, path: str, flag: str = "--train_file",
                             label_type: Optional[str] = None, lines: Optional[Sequence[int]] = None) -> "LabelSet":
        """Classification or regression, and the classes, from the training labels.

        Args:
          labels: the raw training labels.
          path, flag: the training file and its flag (for the messages).
          label_type: --label_type: "classification", "regression", or
            None / "auto" for the rule of the module docstring.
          lines: each label's line (for the messages; default 1, 2, ...).

        Raises:
          TextFileError: one class, a constant regression, a label that is not a
            number under --label_type regression, an unknown label_type.
        """
        label_type = label_type or "auto"
        if label_type not in LABEL_TYPES:
            raise TextFileError(f"--label_type {label_type!r} is not one of {', '.join(LABEL_TYPES)}")
        numbers = [_as_number(label) for label in labels]
        all_numbers = all(n is not None for n in numbers)
        if label_type == "regression" or (label_type == "auto" and all_numbers
                                           and not all(is_int for _, is_int in numbers)):
            if label_type == "regression":
                reason = "chosen by --label_type regression"
                for i, (label, number) in enumerate(zip(labels, numbers)):
                    if number is None:
                        line = lines[i] if lines is not None else i + 1
                        raise TextFileError(f"{flag} {path}:{line}: label {str(label)!r} is not a number, but "
                                            f"--label_type regression needs a number in every row; fix the label "
                                            f"or leave out --label_type")
            else:
                example = next(label for label, (_, is_int) in zip(labels, numbers) if not is_int)
                reason = (f"every label is a number and some are written with a decimal point or exponent (e.g. "
                          f"{str(example)!r}); --label_type classification makes each value a class")
            values = np.asarray([v for v, _ in numbers])
            if float(values.max()) == float(values.min()):
                raise TextFileError(f"{flag} {path}: every label is {values[0]:g}; a regression needs "
                                    f"labels that differ")
            return cls(True, (), reason)
        distinct = {_class_name(label) for label in labels}
        if all_numbers:
            names = tuple(sorted(distinct, key=lambda name: _as_number(name)[0]))
        else:
            names = tuple(sorted(distinct))
        if len(names) < 2:
            raise TextFileError(f"{flag} {path}: every label is {names[0]!r} (one class); a classifier needs "
                                f"examples of at least two classes")
        if label_type == "classification":
            reason = "chosen by --label_type classification"
        elif all_numbers:
            reason = (f"every label is an integer, so each of the {len(names)} values is a class; if they are "
                      f"scores on a scale, --label_type regression predicts one number instead")
        else:
            example = next(str(label) for label, number in zip(labels, numbers) if number is None)
            reason = f"the labels are names, not numbers (e.g. {example!r})"
        return cls(False, names, reason)

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
    """A label as its class name: integers written as 1, 1.0 or "1" are the class "1", other
    numbers are named by their value ("2.50" and 2.5 are "2.5"), names stay as written."""
    number = _as_number(label)
    if number is None:
        return str(label)
    if float(number[0]).is_integer():
        return str(int(number[0]))
    return repr(float(number[0]))


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
