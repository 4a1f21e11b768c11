"""Fine-tuning on the user's own labelled files as a `FinetuneTask` (`--train_file`).

Text classification (one text or a pair) or regression from CSV / TSV / JSON
Lines files (`own_data.py` reads them and decides classification or
regression from the training labels, or as --label_type says). Validation
data come from --validation_file, or from a seeded, stratified
--validation_split of the training file.

What the run worked out is printed before training (`summary_lines`): the
rows of each split, the classes (or regression) and the rule that decided,
and the share of rows cut at --max_seq_length; results.json records the same
under "data". Metrics: accuracy and macro-F1 (and MCC for two classes) beside
the majority-class baseline; for a regression MSE, RMSE, Pearson and Spearman
beside the mean baseline. Each baseline is the best constant answer for the
split it is reported on (its commonest label; its mean, whose MSE is the
labels' variance), so a model that does not beat it has learnt nothing a
constant could not. The saved classifier records
the label names and the columns it was trained on, so `predict` and the
exported SavedModel answer with label names.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from electra_tf.fileio import write_text_atomic
from electra_tf.finetune.tasks.base_task import FinetuneTask, TaskData
from electra_tf.finetune.modeling.classifier_dir import save_classifier
from electra_tf.finetune.tasks.task_metrics import (accuracy, macro_f1, matthews_corrcoef, mean_squared_error, pearson,
                                         spearman)
from electra_tf.models.classifier_model import ClassifierModel
from electra_tf.finetune.readers.own_data import Columns, Examples, LabelSet, read_examples, stratified_split
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.finetune.readers.text_files import TextFileError
from electra_tf.finetune.readers.tokenization import encode_classification

TASK_NAME = "own_data"
SPLIT_SEED = 0  # --validation_split draws the same rows for every --seed value
MAX_CLASSES_SHOWN = 12  # the summary line names at most this many classes

# The metrics of one split, in table order: (key, header, kind); kind "percent" (a fraction shown
# as percent), "correlation" (-1 to 1) or "number" (the labels' units).
CLASS_COLUMNS = (("accuracy", "accuracy %", "percent"), ("macro_f1", "macro-F1 %", "percent"),
                 ("mcc", "MCC", "correlation"), ("majority_accuracy", "majority accuracy %", "percent"))
SCORE_COLUMNS = (("mse", "MSE", "number"), ("rmse", "RMSE", "number"), ("pearson", "Pearson", "correlation"),
                 ("spearman", "Spearman", "correlation"), ("mean_mse", "mean MSE", "number"),
                 ("mean_rmse", "mean RMSE", "number"))


@dataclasses.dataclass
class OwnDev:
    """`TaskData.dev` of an own-data run.

    Attributes:
      label_set: classification or regression, the class names and the rule that decided.
      x, y: encoded validation features and labels.
      examples: the validation rows (their labels as written go into validation_predictions.csv).
      test_x, test_y: the --test_file's features and labels (y None: unlabelled).
      test: the --test_file rows (their texts go into test_predictions.csv).
      columns: the columns read (text, pair, label).
      summary: what the run worked out from its files (results.json "data").
    """
    label_set: LabelSet
    x: Dict[str, np.ndarray]
    y: np.ndarray
    examples: Examples
    test_x: Optional[Dict[str, np.ndarray]]
    test_y: Optional[np.ndarray]
    test: Optional[Examples]
    columns: Columns
    summary: Dict


def check_own_data_settings(s: Settings) -> None:
    """Refuses own-data flags that cannot work together, before any file is read (one line)."""
    if not s.train_file:
        raise FinetuneError(f"--task {TASK_NAME} reads your own files: pass --train_file (and --validation_file "
                            f"or --validation_split)")
    split = s.validation_split
    if split is not None and not 0 < split < 1:
        raise FinetuneError(f"--validation_split={split:g} must be a fraction between 0 and 1, e.g. 0.1")
    if s.validation_file and split is not None:
        raise FinetuneError("--validation_file and --validation_split both given; pass one of them")
    if not s.validation_file and split is None:
        raise FinetuneError("--train_file needs validation data: pass --validation_file, or --validation_split 0.1 "
                            "to hold out 10% of the training rows")
    if s.data_dir:
        raise FinetuneError("--data_dir is for the built-in tasks; with --train_file, name the files with "
                            "--train_file / --validation_file")


class OwnDataFinetuneTask(FinetuneTask):
    """Classification or regression on the files named by --train_file / --validation_file."""

    pads_to_longest = True  # one label per text: batches cut to their longest text
    pools = True  # a sentence vector feeds the head (--pooling)

    cpu_epochs = 10.0  # as GLUE's: a CPU-sized encoder learns from few rows slowly

    def __init__(self, name: str = TASK_NAME):
        super().__init__(name)

    def data_files(self, s: Settings) -> Dict[str, Optional[str]]:
        check_own_data_settings(s)  # --data_dir is refused here: the files come by their own flags
        return {}

    def prepare_data(self, s: Settings, tokenizer) -> TaskData:
        check_own_data_settings(s)
        columns = Columns(s.text_column, s.text_pair_column, s.label_column or "label")
        # Every file is read (and every label checked) before any is encoded: a bad row is
        # reported before the slow part.
        train = read_examples(s.train_file, "--train_file", columns, max_rows=s.max_train_examples)
        columns = dataclasses.replace(columns, text=train.text_column)
        label_set = LabelSet.from_training_labels(train.labels, s.train_file, label_type=s.label_type,
                                                  lines=train.lines)
        read_rows = len(train)
        if s.validation_file:
            dev = read_examples(s.validation_file, "--validation_file", columns, max_rows=s.max_eval_examples)
            dev_y = label_set.encode(dev, s.validation_file, "--validation_file")
            train_y = label_set.encode(train, s.train_file, "--train_file")
        else:
            all_y = label_set.encode(train, s.train_file, "--train_file")
            train_idx, dev_idx = stratified_split(all_y, s.validation_split, SPLIT_SEED, label_set.regression)
            if len(dev_idx) == 0 or len(train_idx) == 0:
                raise TextFileError(f"--validation_split {s.validation_split:g} of the {len(train)} rows of "
                                    f"{s.train_file} leaves no validation or no training row; use more rows or "
                                    f"another fraction")
            dev, dev_y = train.subset(dev_idx), all_y[dev_idx]
            if s.max_eval_examples is not None:
                dev, dev_y = dev.subset(range(min(len(dev), s.max_eval_examples))), dev_y[:s.max_eval_examples]
            train, train_y = train.subset(train_idx), all_y[train_idx]
        test = test_y = None
        if s.test_file:
            test = read_examples(s.test_file, "--test_file", columns, need_labels=False)
            if test.labels is not None:
                test_y = label_set.encode(test, s.test_file, "--test_file")

        def encode(examples):
            return encode_classification(tokenizer, examples.texts, examples.pairs, s.max_seq_length,
                                         return_truncated=True)

        (train_x, train_cut), (dev_x, dev_cut) = encode(train), encode(dev)
        test_x, test_cut = encode(test) if test is not None else (None, None)
        summary = _summary(s, label_set, read_rows, train_y, dev_y, test, test_y,
                           {"train": train_cut, "validation": dev_cut, "test": test_cut})
        return TaskData(train_x, train_y, OwnDev(label_set, dev_x, dev_y, dev, test_x, test_y, test, columns,
                                                 summary))

    def describe_data(self, data: TaskData) -> Optional[Dict]:
        return data.dev.summary

    def summary_lines(self, data: TaskData, max_positions: int) -> List[str]:
        return _summary_lines(data.dev.summary, data.dev.label_set, max_positions)

    def build_model(self, encoder, config, s: Settings, data: TaskData) -> keras.Model:
        dev: OwnDev = data.dev
        return OwnDataClassifier(dev.label_set, dev.columns, encoder, dev.label_set.num_outputs,
                                 dev.label_set.regression, config.hidden_dropout_prob, config.initializer_range,
                                 s.two_layer_head, pooling=s.pooling, name=f"electra_{self.name}")

    def loss(self) -> keras.losses.Loss:
        return ClassOrScoreLoss()

    def evaluate(self, model, s: Settings, data: TaskData, seed_dir: str) -> Dict[str, float]:
        dev: OwnDev = data.dev
        out, predicted = self._scores(model, s, dev.x, dev.y, dev.label_set)
        self._write(os.path.join(seed_dir, "validation_predictions.csv"), predicted, dev.y, dev.label_set,
                    dev.examples.labels)
        if dev.test_x is not None:
            test_metrics, test_pred = self._scores(model, s, dev.test_x, dev.test_y, dev.label_set)
            out.update({"test_" + k: v for k, v in test_metrics.items()})
            self._write(os.path.join(seed_dir, "test_predictions.csv"), test_pred, dev.test_y, dev.label_set,
                        dev.test.labels, dev.test.texts)
        return out

    def _scores(self, model, s: Settings, x, y, label_set: LabelSet) -> Tuple[Dict[str, float], np.ndarray]:
        out = self.predict(model, x, s)
        if label_set.regression:
            pred = np.asarray(out, np.float32).reshape(-1)
            if y is None:
                return {}, pred
            mse = mean_squared_error(y, pred)
            mean_mse = mean_squared_error(y, np.full_like(y, _baseline(y, True)))
            return {"mse": mse, "rmse": math.sqrt(mse), "pearson": pearson(y, pred), "spearman": spearman(y, pred),
                    "mean_mse": mean_mse, "mean_rmse": math.sqrt(mean_mse)}, pred
        pred = np.argmax(out, -1)
        if y is None:
            return {}, pred
        metrics = {"accuracy": accuracy(y, pred), "macro_f1": macro_f1(y, pred, len(label_set.names))}
        if len(label_set.names) == 2:
            metrics["mcc"] = matthews_corrcoef(y, pred)
        metrics["majority_accuracy"] = accuracy(y, np.full_like(y, _baseline(y, False)))
        return metrics, pred

    @staticmethod
    def _write(path: str, predicted, gold, label_set: LabelSet, written: Optional[Sequence] = None,
               texts: Optional[List[str]] = None) -> None:
        """index, prediction (label name or score), label (if known) and text (test files) per row.

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

    def metric_keys(self, result: Dict) -> List[str]:
        order = [key for key, _, _ in CLASS_COLUMNS + SCORE_COLUMNS]
        keys = [k for k in order if k in result]
        return keys + ["test_" + k for k in order if "test_" + k in result]

    def format_results(self, results: List[Dict], median: Dict[str, float], data: TaskData) -> str:
        return format_own_table(self.name, results, median, data.dev.summary, data.dev.label_set)

    def save_for_export(self, seed_dir: str, model, config, tokenizer, s: Settings) -> Optional[str]:
        # The classifier directory, with its label names and the columns it was trained on.
        save_classifier(seed_dir, model, config, tokenizer.vocab_file, model.label_set.names, self.name,
                        pair=model.columns.pair is not None, max_seq_length=s.max_seq_length,
                        regression=model.label_set.regression, two_layer_head=s.two_layer_head,
                        pooling=s.pooling, do_lower_case=tokenizer.do_lower_case,
                        normalization=tokenizer.normalization,
                        columns={"text": model.columns.text, "text_pair": model.columns.pair,
                                 "label": model.columns.label})
        return seed_dir


def score_text(value) -> str:
    """A predicted (or gold) number with a decimal point: 1 -> "1.0", 0.1234567 -> "0.123457"."""
    text = f"{float(value):.6g}"
    return text if any(c in text for c in ".en") else text + ".0"  # e, nan, inf keep their form


def _as_written(label) -> str:
    """A raw label as the file wrote it (CSV/TSV text; JSON numbers as JSON writes them)."""
    return label if isinstance(label, str) else json.dumps(label)


# ------------------------------------------------------------------ what the run worked out
def _baseline(y: np.ndarray, regression: bool):
    """The best constant answer for labels `y`: their mean, or their commonest class id."""
    return float(np.mean(y)) if regression else int(np.argmax(np.bincount(y)))


def _commonest(y: np.ndarray) -> List[int]:
    """The class ids that share the highest count in `y`."""
    counts = np.bincount(y)
    return [int(i) for i in np.flatnonzero(counts == counts.max())]


def _summary(s: Settings, label_set: LabelSet, read_rows: int, train_y, dev_y, test: Optional[Examples],
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
    out["baseline"] = {split: (_baseline(y, True) if label_set.regression else label_set.names[_baseline(y, False)])
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


def _summary_lines(summary: Dict, label_set: LabelSet, max_positions: int) -> List[str]:
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


class OwnDataClassifier(ClassifierModel):
    """`ClassifierModel` that knows its label set and columns (what `save_for_export` records).

    The same layers as `ClassifierModel`, so its weights load into one (export, predict).

    Args:
      label_set: the `LabelSet` of the training file.
      columns: the `Columns` read.
      *args, **kwargs: `ClassifierModel`'s.
    """

    def __init__(self, label_set: LabelSet, columns: Columns, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.label_set = label_set
        self.columns = columns


class ClassOrScoreLoss(keras.losses.Loss):
    """Cross-entropy on class logits [batch, C], mean squared error on scores [batch].

    The task object is stateless, so the loss reads classification or
    regression from the rank of the model's output (`ClassifierModel` squeezes
    a regression's single output).
    """

    def __init__(self, name: str = "class_or_score_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        if len(y_pred.shape) == 1:
            return keras.ops.square(keras.ops.cast(y_true, y_pred.dtype) - y_pred)
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)


def _csv_line(fields: List[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(fields)
    return buffer.getvalue()
