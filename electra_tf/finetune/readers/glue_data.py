"""GLUE data: the task specs (`GlueSpec`) and readers (local GLUE-format TSV files or tfds `glue/<task>`).

Each task is described by a `GlueSpec`: where its columns are in the TSV files
that GLUE distributes, its label set, its official metrics and the reference
number of training epochs. Readers return `Example`s; every bad row is reported
with one line naming the file, the line number and what to do.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import sys
from typing import List, Optional, Sequence, Tuple

from electra_tf.errors import ElectraError
from electra_tf.data.table_files import utf8_lines

# GLUE's sentences can be long (MNLI parses); lift csv's 128 KiB field limit.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


class GlueDataError(ElectraError, ValueError):
    """A GLUE data file or row that cannot be used."""


@dataclasses.dataclass(frozen=True)
class Example:
    """One classification / regression example.

    Attributes:
      guid: "<split>-<row>" identifier (row counted from 0 after the header).
      text_a: first sentence.
      text_b: second sentence, or None for single-sentence tasks.
      label: label string as in the files (classification), float (regression),
        or None for unlabeled test data.
    """
    guid: str
    text_a: str
    text_b: Optional[str]
    label: object


@dataclasses.dataclass(frozen=True)
class GlueSpec:
    """Static description of a GLUE task.

    Attributes:
      name: our task name (cola, sst2, ...).
      dir_name: directory name in the GLUE distribution (CoLA, SST-2, ...).
      tfds_name: tfds builder name.
      labels: label strings for classification; empty for regression.
      metrics: official metrics; the first is the one used for model selection.
      text_a: column of the first sentence in train/dev files.
      text_b: column of the second sentence (None for single-sentence tasks).
      label_col: column of the label.
      header: whether train/dev files have a header line.
      dev_splits: file stems of the evaluation splits.
      tfds_text: tfds feature names of (text_a, text_b).
      tfds_dev_splits: tfds split names matching `dev_splits`.
      epochs: reference number of training epochs.
      double_unordered: sentence order does not matter (augment with swapped pairs).
      regression_range: (min, max) of the score for regression tasks.
    """
    name: str
    dir_name: str
    tfds_name: str
    labels: Tuple[str, ...]
    metrics: Tuple[str, ...]
    text_a: int
    text_b: Optional[int]
    label_col: int
    header: bool
    dev_splits: Tuple[str, ...]
    tfds_text: Tuple[str, Optional[str]]
    tfds_dev_splits: Tuple[str, ...]
    epochs: float = 3.0
    double_unordered: bool = False
    regression_range: Optional[Tuple[float, float]] = None

    @property
    def is_regression(self) -> bool:
        return self.regression_range is not None

    @property
    def num_labels(self) -> int:
        return 1 if self.is_regression else len(self.labels)


GLUE_TASKS = {
    t.name: t for t in (
        GlueSpec("cola", "CoLA", "glue/cola", ("0", "1"), ("mcc", "accuracy"),
                 3, None, 1, False, ("dev",), ("sentence", None), ("validation",)),
        GlueSpec("sst2", "SST-2", "glue/sst2", ("0", "1"), ("accuracy",),
                 0, None, 1, True, ("dev",), ("sentence", None), ("validation",)),
        GlueSpec("mrpc", "MRPC", "glue/mrpc", ("0", "1"), ("f1", "accuracy"),
                 3, 4, 0, True, ("dev",), ("sentence1", "sentence2"), ("validation",),
                 double_unordered=True),
        GlueSpec("stsb", "STS-B", "glue/stsb", (), ("spearman", "pearson"),
                 -3, -2, -1, True, ("dev",), ("sentence1", "sentence2"), ("validation",),
                 epochs=10.0, double_unordered=True, regression_range=(0.0, 5.0)),
        GlueSpec("qqp", "QQP", "glue/qqp", ("0", "1"), ("f1", "accuracy"),
                 3, 4, 5, True, ("dev",), ("question1", "question2"), ("validation",)),
        GlueSpec("mnli", "MNLI", "glue/mnli", ("contradiction", "entailment", "neutral"),
                 ("accuracy",), 8, 9, -1, True, ("dev_matched", "dev_mismatched"),
                 ("premise", "hypothesis"), ("validation_matched", "validation_mismatched")),
        GlueSpec("qnli", "QNLI", "glue/qnli", ("entailment", "not_entailment"), ("accuracy",),
                 1, 2, 3, True, ("dev",), ("question", "sentence"), ("validation",)),
        GlueSpec("rte", "RTE", "glue/rte", ("entailment", "not_entailment"), ("accuracy",),
                 1, 2, 3, True, ("dev",), ("sentence1", "sentence2"), ("validation",),
                 epochs=10.0),
        GlueSpec("wnli", "WNLI", "glue/wnli", ("0", "1"), ("accuracy",),
                 1, 2, 3, True, ("dev",), ("sentence1", "sentence2"), ("validation",)),
    )
}

# Names people commonly type for the same task.
_ALIASES = {"sst-2": "sst2", "sst": "sst2", "sts-b": "stsb", "sts": "stsb",
            "mnli-m": "mnli", "mnli_matched": "mnli"}


def get_spec(name: str) -> GlueSpec:
    """Looks up a GLUE task by name (case-insensitive; sst-2 / sts-b accepted).

    Args:
      name: task name.
    """
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in GLUE_TASKS:
        raise GlueDataError(
            f"unknown GLUE task {name!r}; choose one of {', '.join(GLUE_TASKS)}")
    return GLUE_TASKS[key]


def task_dir(spec: GlueSpec, data_dir: str) -> str:
    """Finds the directory holding `train.tsv` / `dev.tsv` for a task.

    Accepts the task directory itself (e.g. glue/SST-2) or the GLUE root that
    contains it (e.g. glue/).

    Args:
      spec: the task's `GlueSpec`.
      data_dir: directory given by the user.
    """
    for candidate in (data_dir, os.path.join(data_dir, spec.dir_name),
                      os.path.join(data_dir, spec.name)):
        if any(os.path.isfile(os.path.join(candidate, s + ".tsv"))
               for s in ("train",) + spec.dev_splits):
            return candidate
    raise GlueDataError(
        f"no {spec.name} TSV files (train.tsv, {'.tsv, '.join(spec.dev_splits)}.tsv) under "
        f"{data_dir!r} or {os.path.join(data_dir, spec.dir_name)!r}; pass the GLUE task directory as --data_dir")


def read_tsv_rows(path: str) -> List[Tuple[int, List[str]]]:
    """Reads a GLUE TSV file as (1-based line number, fields) pairs, header included.

    GLUE files are not quoted (quotes are part of the text), hence QUOTE_NONE.

    Args:
      path: the file.
    """
    if not os.path.isfile(path):
        raise GlueDataError(f"{path}: file does not exist; check --data_dir")
    rows = []
    # Decoded line by line: a byte that is not UTF-8 is one line naming it, with an iconv hint.
    reader = csv.reader((text for _, text in utf8_lines(path, "")), delimiter="\t", quoting=csv.QUOTE_NONE)
    for fields in reader:
        rows.append((reader.line_num, fields))
    return rows


# The header names of the columns each task reads (text_a, text_b, label), as GLUE writes them.
HEADER_NAMES = {"sst2": ("sentence", None, "label"), "mrpc": ("#1 String", "#2 String", "Quality"),
                "stsb": ("sentence1", "sentence2", "score"), "qqp": ("question1", "question2", "is_duplicate"),
                "mnli": ("sentence1", "sentence2", "gold_label"), "qnli": ("question", "sentence", "label"),
                "rte": ("sentence1", "sentence2", "label"), "wnli": ("sentence1", "sentence2", "label")}


def check_header(spec: GlueSpec, path: str, header: List[str]) -> None:
    """Refuses a header that names other columns than the task reads (they are read by position).

    Args:
      spec: the task.
      path: the file (for the message).
      header: the fields of its first line.
    """
    names = HEADER_NAMES.get(spec.name)
    if names is None:
        return
    for col, expected in zip((spec.text_a, spec.text_b, spec.label_col), names):
        if expected is None:
            continue
        found = header[col].strip() if -len(header) <= col < len(header) else None
        if found is None or found.lower() != expected.lower():
            position = col + 1 if col >= 0 else len(header) + col + 1
            shown = "nothing" if found is None else repr(found)
            raise GlueDataError(
                f"{path}: the header has {shown} as column {position} where {spec.name} expects {expected!r} "
                f"(header: {', '.join(h.strip() for h in header)}); rename the column, or fine-tune on your own "
                f"file with --train_file (--text_column, --label_column)")


def read_glue_split(spec: GlueSpec, path: str, split: str,
                    max_examples: Optional[int] = None,
                    skip_malformed: bool = False) -> List[Example]:
    """Reads a labeled GLUE split (train or dev) from a TSV file.

    Args:
      spec: the task's `GlueSpec` (gives columns and labels).
      path: the TSV file.
      split: split name, used in the example ids.
      max_examples: keep only the first N examples (None: all).
      skip_malformed: drop rows with too few fields instead of failing (QQP's
        train file has a few such rows in some copies).

    Raises:
      GlueDataError: on a missing or empty file, a row with too few fields, a
        label outside the task's label set, or an unparsable regression score.
    """
    rows = read_tsv_rows(path)
    if spec.header and rows:
        check_header(spec, path, rows[0][1])
        rows = rows[1:]
    needed = max(_need(spec.text_a), _need(spec.text_b), _need(spec.label_col))
    examples = []
    for line, fields in rows:
        if max_examples is not None and len(examples) >= max_examples:
            break
        if not fields or fields == [""]:
            continue  # a blank line (e.g. trailing) carries no example
        if len(fields) < needed:
            if skip_malformed:
                continue
            raise GlueDataError(
                f"{path}:{line}: malformed {spec.name} row with {len(fields)} tab-separated "
                f"field(s), expected at least {needed}; fix or delete the line")
        raw_label = fields[spec.label_col].strip()
        if spec.is_regression:
            try:
                label = float(raw_label)
            except ValueError:
                raise GlueDataError(
                    f"{path}:{line}: {spec.name} score {raw_label!r} is not a number; "
                    f"expected a value in {spec.regression_range}") from None
            lo, hi = spec.regression_range
            if not lo <= label <= hi:
                raise GlueDataError(
                    f"{path}:{line}: {spec.name} score {label} is outside [{lo}, {hi}]; fix the label")
        else:
            if raw_label not in spec.labels:
                raise GlueDataError(
                    f"{path}:{line}: label {raw_label!r} is not a {spec.name} label "
                    f"({', '.join(spec.labels)}); fix the label or choose the right --task")
            label = raw_label
        text_b = fields[spec.text_b] if spec.text_b is not None else None
        examples.append(Example(f"{split}-{len(examples)}", fields[spec.text_a], text_b, label))
    if not examples:
        raise GlueDataError(f"{path}: no {spec.name} examples in the file; it is empty or holds only a header")
    return examples


def _need(col: Optional[int]) -> int:
    """Number of fields a row needs so that column `col` exists."""
    if col is None:
        return 0
    return col + 1 if col >= 0 else -col


def double_unordered(examples: Sequence[Example]) -> List[Example]:
    """Appends every pair with its sentences swapped (reference `double_unordered`).

    Args:
      examples: sentence-pair examples.
    """
    swapped = [Example(e.guid + "-swap", e.text_b, e.text_a, e.label)
               for e in examples if e.text_b is not None]
    return list(examples) + swapped


def load_glue(spec: GlueSpec, data_dir: Optional[str], split: str,
              max_examples: Optional[int] = None, tfds_data_dir: Optional[str] = None,
              skip_malformed: bool = False) -> List[Example]:
    """Loads a split from local TSV files, or from tfds when no TSV directory is given.

    Args:
      spec: the task's `GlueSpec`.
      data_dir: GLUE task directory (or GLUE root). None: use tfds.
      split: "train" or one of `spec.dev_splits`.
      max_examples: keep only the first N examples.
      tfds_data_dir: tfds data directory (None: tfds' default).
      skip_malformed: see `read_glue_split`.
    """
    if split != "train" and split not in spec.dev_splits:
        raise GlueDataError(
            f"{spec.name} has no split {split!r}; use train or {', '.join(spec.dev_splits)}")
    if data_dir:
        path = os.path.join(task_dir(spec, data_dir), split + ".tsv")
        return read_glue_split(spec, path, split, max_examples, skip_malformed)
    tfds_split = "train" if split == "train" else spec.tfds_dev_splits[spec.dev_splits.index(split)]
    return read_tfds(spec, tfds_split, max_examples, tfds_data_dir)


def read_tfds(spec: GlueSpec, split: str, max_examples: Optional[int] = None,
              data_dir: Optional[str] = None) -> List[Example]:
    """Reads a GLUE split from tfds (`glue/<task>`), mapping labels to the TSV label strings.

    Args:
      spec: the task's `GlueSpec`.
      split: tfds split name (train, validation, validation_matched, ...).
      max_examples: keep only the first N examples.
      data_dir: tfds data directory.
    """
    # Deferred on purpose (the one function-level import here): tensorflow_datasets is
    # only needed without --data_dir, and importing it at module import runs etils'
    # lazy-import machinery in every process that reads GLUE, which breaks Python's
    # unraisable-exception hook there ("'LazyModule' object is not callable").
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel

    try:
        builder = tfds.builder(spec.tfds_name, data_dir=data_dir)
        ds = builder.as_dataset(split=split)
    except Exception as e:  # tfds raises several types for "not prepared"
        raise GlueDataError(
            f"tfds {spec.tfds_name} split {split!r} is not available ({type(e).__name__}); "
            f"prepare it with tfds, or pass a GLUE TSV directory as --data_dir") from None
    names = None if spec.is_regression else builder.info.features["label"].names
    examples = []
    for row in tfds.as_numpy(ds):
        if max_examples is not None and len(examples) >= max_examples:
            break
        a = row[spec.tfds_text[0]].decode("utf-8")
        b = row[spec.tfds_text[1]].decode("utf-8") if spec.tfds_text[1] else None
        raw = row["label"]
        if spec.is_regression:
            label = float(raw)
        else:
            if not 0 <= int(raw) < len(names):
                raise GlueDataError(
                    f"tfds {spec.tfds_name} {split}: label {int(raw)} outside the task's "
                    f"{len(names)} classes (test splits carry no labels; use train/validation)")
            # Binary tasks: tfds names the classes (negative/positive) where the
            # TSV files write 0/1, in the same order. NLI tasks: same strings.
            label = str(int(raw)) if spec.labels == ("0", "1") else names[int(raw)]
            if label not in spec.labels:
                raise GlueDataError(f"tfds {spec.tfds_name}: unexpected label name {label!r}")
        examples.append(Example(f"{split}-{len(examples)}", a, b, label))
    if not examples:
        raise GlueDataError(f"tfds {spec.tfds_name} split {split!r} has no examples")
    return examples
