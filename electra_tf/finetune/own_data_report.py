"""What an own-data fine-tuning run reports about its files and results.

`data_summary` is results.json's "data" (rows, labels and the rule that decided, the
baselines, truncation at --max_seq_length); `summary_lines` are the lines printed before
training; `format_own_table` is the results table; `write_predictions` writes the
validation / test predictions CSV. The task (tasks/own_data_task.py) computes, these say it.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Dict, List, Optional, Sequence

import numpy as np

from electra_tf.fileio import write_text_atomic
from electra_tf.finetune.readers.own_data import Examples, LabelSet
from electra_tf.finetune.settings import Settings

MAX_CLASSES_SHOWN = 12  # the summary line names at most this many classes

# The metrics of one split, in table order: (key, header, kind); kind "percent" (a fraction shown
# as percent), "correlation" (-1 to 1) or "number" (the labels' units).
CLASS_COLUMNS = (("accuracy", "accuracy %", "percent"), ("macro_f1", "macro-F1 %", "percent"),
                 ("mcc", "MCC", "correlation"), ("majority_accuracy", "majority accuracy %", "percent"))
SCORE_COLUMNS = (("mse", "MSE", "number"), ("rmse", "RMSE", "number"), ("pearson", "Pearson", "correlation"),
                 ("spearman", "Spearman", "correlation"), ("mean_mse", "mean MSE", "number"),
                 ("mean_rmse", "mean RMSE", "number"))


def write_predictions(path: str, predicted, gold, label_set: LabelSet, written: Optional[Sequence] = None,
                      texts: Optional[List[str]] = None) -> None:
    """Writes validation_predictions.csv / test_predictions.csv: index, prediction (label name or score), label (if known) and text (test files) per row.

    A regression's labels are written as the file has them (`1.0` stays `1.0`), its
    predictions with a decimal point.
    """
    if label_set.regression:
        name = score_text
        gold_text = (lambda i: _as_written(written[i])) if written is not None else (lambda i: score_text(gold[i]))
    else:
        name = lambda v: label_set.names[int(v)]  # noqa: E731
        gold_text = lambda i: name(gold[i])  # noqa: E731
    rows = [["index", "prediction"] + (["label"] if gold is not None else []) + (["text"] if texts else [])]
    for i, p in enumerate(predicted):
        rows.append([str(i), name(p)] + ([gold_text(i)] if gold is not None else [])
                    + ([texts[i]] if texts else []))
    write_text_atomic(path, "".join(_csv_line(r) for r in rows))


def score_text(value) -> str:
    """A predicted (or gold) number with a decimal point: 1 -> "1.0", 0.1234567 -> "0.123457"."""
    text = f"{float(value):.6g}"
    return text if any(c in text for c in ".en") else text + ".0"  # e, nan, inf keep their form


def _as_written(label) -> str:
    """A raw label as the file wrote it (CSV/TSV text; JSON numbers as JSON writes them)."""
    return label if isinstance(label, str) else json.dumps(label)


def _csv_line(fields: List[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(fields)
    return buffer.getvalue()


# ------------------------------------------------------------------ what the run worked out
def baseline(y: np.ndarray, regression: bool):
    """The best constant answer for labels `y`: their mean, or their commonest class id."""
    return float(np.mean(y)) if regression else int(np.argmax(np.bincount(y)))


def _commonest(y: np.ndarray) -> List[int]:
    """The class ids that share the highest count in `y`."""
    counts = np.bincount(y)
    return [int(i) for i in np.flatnonzero(counts == counts.max())]


def data_summary(s: Settings, label_set: LabelSet, read_rows: int, train_y, dev_y, test: Optional[Examples],
             test_y, truncated: Dict[str, Optional[np.ndarray]]) -> Dict:
    """results.json's "data": rows, labels and the rule, the baselines, truncation at --max_seq_length."""
    out: Dict = {"train_file": s.train_file, "train_rows_read": read_rows, "train_rows": int(len(train_y)),
                 "validation_file": s.validation_file, "validation_split": s.validation_split,
                 "validation_rows": int(len(dev_y)), "test_file": s.test_file,
                 "test_rows": None if test is None else len(test), "test_labelled": test_y is not None,
                 "label_type": "regression" if label_set.regression else "classification",
                 "label_rule": label_set.reason, "labels": list(label_set.names)}
    if label_set.regression:
        values = np.asarray(train_y, np.float64)
        out["train_labels"] = {"min": float(values.min()), "max": float(values.max()), "mean": float(values.mean()),
                               "variance": float(values.var())}
    else:
        counts = np.bincount(train_y, minlength=len(label_set.names))
        out["train_class_counts"] = {name: int(c) for name, c in zip(label_set.names, counts)}
    # The best constant answer of each labelled split: its mean, or its commonest label.
    out["baseline"] = {split: (baseline(y, True) if label_set.regression else label_set.names[baseline(y, False)])
                       for split, y in (("validation", dev_y), ("test", test_y)) if y is not None}
    if not label_set.regression:
        # Several commonest labels: each constant answer among them scores the same; the table says so.
        out["baseline_ties"] = {split: [label_set.names[i] for i in _commonest(y)]
                                for split, y in (("validation", dev_y), ("test", test_y))
                                if y is not None and len(_commonest(y)) > 1}
    out["max_seq_length"] = s.max_seq_length
    out["truncated_rows"] = {split: None if cut is None else int(np.sum(cut)) for split, cut in truncated.items()}
    return out


def _count(n: int) -> str:
    return f"{n:,}"


def summary_lines(summary: Dict, label_set: LabelSet, max_positions: int) -> List[str]:
    """The few lines printed before training: rows, labels and why, truncation."""
    train, dev = summary["train_rows"], summary["validation_rows"]
    if summary["validation_file"]:
        rows = (f"read: {_count(train)} training rows from {summary['train_file']}, {_count(dev)} validation rows "
                f"from {summary['validation_file']}")
    else:
        rows = (f"read: {_count(summary['train_rows_read'])} rows from {summary['train_file']}: {_count(train)} for "
                f"training, {_count(dev)} held out for validation (--validation_split {summary['validation_split']:g})")
    if summary["test_file"]:
        rows += (f", {_count(summary['test_rows'])} test rows from {summary['test_file']}"
                 f"{'' if summary['test_labelled'] else ' (no labels: predicted only)'}")
    if label_set.regression:
        stats = summary["train_labels"]
        labels = (f"labels: regression, one number per text (training labels {stats['min']:g} to {stats['max']:g}, "
                  f"mean {stats['mean']:.4g}): {label_set.reason}")
    else:
        counts = summary["train_class_counts"]
        shown = [f"{name} {_count(n)}" for name, n in list(counts.items())[:MAX_CLASSES_SHOWN]]
        if len(counts) > MAX_CLASSES_SHOWN:
            shown.append(f"... {len(counts) - MAX_CLASSES_SHOWN} more")
        labels = (f"labels: {len(counts)} classes (training rows: {', '.join(shown)}): {label_set.reason}")
    length = summary["max_seq_length"]
    cut = summary["truncated_rows"]
    sizes = {"train": train, "validation": dev, "test": summary["test_rows"]}
    names = {"train": "training", "validation": "validation", "test": "test"}
    parts = [f"{100 * cut[k] / sizes[k]:.1f}% of {names[k]} rows ({_count(cut[k])} of {_count(sizes[k])})"
             for k in ("train", "validation", "test") if cut.get(k) is not None]
    if not any(cut[k] for k in cut if cut[k] is not None):
        truncated = f"truncated: no row is longer than --max_seq_length {length} word pieces"
    else:
        hint = (f"a larger --max_seq_length (up to {max_positions} for this model) keeps more of each text"
                if length < max_positions else f"this model reads at most {max_positions} word pieces")
        truncated = (f"truncated: {', '.join(parts)} were longer than --max_seq_length {length} word pieces and "
                     f"were cut; {hint}")
    return [rows, labels, truncated]


def format_own_table(task: str, results: List[Dict], median: Dict[str, float], summary: Dict,
                     label_set: LabelSet) -> str:
    """The results table: one row per split and seed (and the median), each column in its unit.

    Classification: accuracy and macro-F1 in percent, MCC from -1 to 1, and the
    majority-class baseline; regression: MSE and RMSE in the labels' units,
    Pearson and Spearman from -1 to 1, and the mean baseline (each baseline the
    best constant answer for the split).
    """
    columns = SCORE_COLUMNS if label_set.regression else CLASS_COLUMNS
    columns = [c for c in columns if c[0] in results[0]]
    splits = [("validation", "")] + ([("test", "test_")] if "test_" + columns[0][0] in results[0] else [])

    def cell(value: float, kind: str) -> str:
        if kind == "percent":
            return f"{100 * value:.2f}"
        if kind == "correlation":
            return f"{value:.3f}"
        return f"{value:#.4g}"

    head = ["split", "seed"] + [header for _, header, _ in columns]
    rows = []
    for split, prefix in splits:
        for r in results:
            rows.append([split, str(r["seed"])] + [cell(r[prefix + k], kind) for k, _, kind in columns])
        rows.append([split, "median"] + [cell(median[prefix + k], kind) for k, _, kind in columns])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    base = summary["baseline"]
    ties = summary.get("baseline_ties") or {}

    def constant(split: str) -> str:
        if label_set.regression:
            return f"{split}: {base[split]:.4g}"
        if split in ties:
            return f"{split}: a tie of {', '.join(map(repr, ties[split]))}, each as good"
        return f"{split}: {base[split]!r}"

    shown = ", ".join(constant(split) for split, _ in splits)
    if label_set.regression:
        legend = (f"MSE and RMSE in the labels' units (MSE squared), Pearson and Spearman from -1 to 1; mean = "
                  f"always answering the split's mean label ({shown}), whose MSE is the labels' variance")
    else:
        legend = (f"accuracy and macro-F1 in percent{', MCC from -1 to 1' if len(label_set.names) == 2 else ''}; "
                  f"majority = always answering the split's commonest label ({shown})")
    sizes = [f"validation {_count(summary['validation_rows'])} rows"]
    if len(splits) > 1:
        sizes.append(f"test {_count(summary['test_rows'])} rows")
    out = [f"{task} results ({', '.join(sizes)}): {legend}", line(head), line(["-" * w for w in widths])]
    return "\n".join(out + [line(r) for r in rows])
