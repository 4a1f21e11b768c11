"""Fine-tuning on the user's own labelled files as a `FinetuneTask` (`--train_file`).

Text classification (one text or a pair) or regression from CSV / TSV / JSON
Lines files (`own_data.py` reads them and decides classification or
regression from the training labels). Validation data come from
--validation_file, or from a seeded, stratified --validation_split of the
training file. Metrics: accuracy and macro-F1 (and MCC for two classes);
Pearson and Spearman for a regression. The saved classifier records the label
names and the columns it was trained on, so `predict` and the exported
SavedModel answer with label names.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from typing import Dict, List, Optional, Tuple

import keras
import numpy as np

from electra_tf.data.fs import write_text_atomic
from electra_tf.finetune.base_task import FinetuneTask, TaskData
from electra_tf.finetune.classifier_dir import save_classifier
from electra_tf.finetune.metrics import accuracy, macro_f1, matthews_corrcoef, pearson, spearman
from electra_tf.finetune.models import ClassifierModel
from electra_tf.finetune.own_data import Columns, Examples, LabelSet, read_examples, stratified_split
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.finetune.text_files import TextFileError
from electra_tf.finetune.tokenization import encode_classification

TASK_NAME = "own_data"
SPLIT_SEED = 0  # --validation_split draws the same rows for every --seeds value


@dataclasses.dataclass
class OwnDev:
    """`TaskData.dev` of an own-data run.

    Attributes:
      label_set: classification or regression, and the class names.
      x, y: encoded validation features and labels.
      test_x, test_y: the --test_file's features and labels (y None: unlabelled).
      test: the --test_file rows (their texts go into test_predictions.csv).
      columns: the columns read (text, pair, label).
    """
    label_set: LabelSet
    x: Dict[str, np.ndarray]
    y: np.ndarray
    test_x: Optional[Dict[str, np.ndarray]]
    test_y: Optional[np.ndarray]
    test: Optional[Examples]
    columns: Columns


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

    cpu_epochs = 10.0  # as GLUE's: a CPU-sized encoder learns from few rows slowly

    def __init__(self, name: str = TASK_NAME):
        super().__init__(name)

    def prepare_data(self, s: Settings, tokenizer) -> TaskData:
        check_own_data_settings(s)
        columns = Columns(s.text_column, s.text_pair_column, s.label_column or "label")
        # Every file is read (and every label checked) before any is encoded: a bad row is
        # reported before the slow part.
        train = read_examples(s.train_file, "--train_file", columns, max_rows=s.max_train_examples)
        columns = dataclasses.replace(columns, text=train.text_column)
        label_set = LabelSet.from_training_labels(train.labels, s.train_file)
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
        encode = lambda e: encode_classification(tokenizer, e.texts, e.pairs, s.max_seq_length)  # noqa: E731
        return TaskData(encode(train), train_y, OwnDev(label_set, encode(dev), dev_y,
                                                        encode(test) if test is not None else None, test_y,
                                                        test, columns))

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
        self._write(os.path.join(seed_dir, "validation_predictions.csv"), predicted, dev.y, dev.label_set)
        if dev.test_x is not None:
            test_metrics, test_pred = self._scores(model, s, dev.test_x, dev.test_y, dev.label_set)
            out.update({"test_" + k: v for k, v in test_metrics.items()})
            self._write(os.path.join(seed_dir, "test_predictions.csv"), test_pred, dev.test_y, dev.label_set,
                        dev.test.texts)
        return out

    def _scores(self, model, s: Settings, x, y, label_set: LabelSet) -> Tuple[Dict[str, float], np.ndarray]:
        out = self.predict(model, x, s)
        if label_set.regression:
            pred = np.asarray(out, np.float32).reshape(-1)
            metrics = {} if y is None else {"pearson": pearson(y, pred), "spearman": spearman(y, pred)}
            return metrics, pred
        pred = np.argmax(out, -1)
        if y is None:
            return {}, pred
        metrics = {"accuracy": accuracy(y, pred), "macro_f1": macro_f1(y, pred, len(label_set.names))}
        if len(label_set.names) == 2:
            metrics["mcc"] = matthews_corrcoef(y, pred)
        return metrics, pred

    @staticmethod
    def _write(path: str, predicted, gold, label_set: LabelSet, texts: Optional[List[str]] = None) -> None:
        """index, prediction (label name or score), label (if known) and text (test files) per row."""
        name = (lambda v: f"{float(v):.6g}") if label_set.regression else (lambda v: label_set.names[int(v)])
        rows = [["index", "prediction"] + (["label"] if gold is not None else []) + (["text"] if texts else [])]
        for i, p in enumerate(predicted):
            rows.append([str(i), name(p)] + ([name(gold[i])] if gold is not None else [])
                        + ([texts[i]] if texts else []))
        write_text_atomic(path, "".join(_csv_line(r) for r in rows))

    def metric_keys(self, result: Dict) -> List[str]:
        order = ("accuracy", "macro_f1", "mcc", "pearson", "spearman")
        keys = [k for k in order if k in result]
        return keys + ["test_" + k for k in order if "test_" + k in result]

    def save_for_export(self, seed_dir: str, model, config, tokenizer, s: Settings) -> None:
        # The classifier directory, with its label names and the columns it was trained on.
        save_classifier(seed_dir, model, config, tokenizer.vocab_file, model.label_set.names, self.name,
                        pair=model.columns.pair is not None, max_seq_length=s.max_seq_length,
                        regression=model.label_set.regression, two_layer_head=s.two_layer_head,
                        pooling=s.pooling, do_lower_case=tokenizer.do_lower_case,
                        columns={"text": model.columns.text, "text_pair": model.columns.pair,
                                 "label": model.columns.label})


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
