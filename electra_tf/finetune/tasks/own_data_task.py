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

import dataclasses
import math
import os
from typing import Dict, List, Optional, Tuple

import keras
import numpy as np

from electra_tf.data.table_columns import Columns
from electra_tf.data.table_files import TextFileError
from electra_tf.finetune.own_data_report import (CLASS_COLUMNS, SCORE_COLUMNS, baseline, data_summary,
                                                  format_own_table, summary_lines, write_predictions)
from electra_tf.finetune.tasks.base_task import FinetuneTask, TaskData
from electra_tf.models.model_folder import save_classifier
from electra_tf.finetune.tasks.task_metrics import (accuracy, macro_f1, matthews_corrcoef, mean_squared_error, pearson,
                                         spearman)
from electra_tf.models.classifier_model import ClassOrScoreLoss, LabelledClassifierModel
from electra_tf.finetune.readers.own_data import Examples, LabelSet, read_examples, stratified_split
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.finetune.readers.tokenization import encode_classification
from electra_tf.training import size_defaults

TASK_NAME = "own_data"
SPLIT_SEED = 0  # --validation_split draws the same rows for every --seed value

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

    # Defined beside the size defaults, which ElectraClassifier reads them from.
    reference_epochs = size_defaults.OWN_DATA_EPOCHS
    cpu_epochs = size_defaults.OWN_DATA_CPU_EPOCHS
    reference_max_seq_length = size_defaults.OWN_DATA_MAX_SEQ_LENGTH

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
        summary = data_summary(s, label_set, read_rows, train_y, dev_y, test, test_y,
                           {"train": train_cut, "validation": dev_cut, "test": test_cut})
        return TaskData(train_x, train_y, OwnDev(label_set, dev_x, dev_y, dev, test_x, test_y, test, columns,
                                                 summary))

    def describe_data(self, data: TaskData) -> Optional[Dict]:
        return data.dev.summary

    def summary_lines(self, data: TaskData, max_positions: int) -> List[str]:
        return summary_lines(data.dev.summary, data.dev.label_set, max_positions)

    def build_model(self, encoder, config, s: Settings, data: TaskData) -> keras.Model:
        dev: OwnDev = data.dev
        return LabelledClassifierModel(dev.label_set, dev.columns, encoder, dev.label_set.num_outputs,
                                       dev.label_set.regression, config.hidden_dropout_prob,
                                       config.initializer_range, s.two_layer_head, pooling=s.pooling,
                                       name=f"electra_{self.name}")

    def loss(self) -> keras.losses.Loss:
        return ClassOrScoreLoss()

    def evaluate(self, model, s: Settings, data: TaskData, seed_dir: str) -> Dict[str, float]:
        dev: OwnDev = data.dev
        out, predicted = self._scores(model, s, dev.x, dev.y, dev.label_set)
        write_predictions(os.path.join(seed_dir, "validation_predictions.csv"), predicted, dev.y, dev.label_set,
                    dev.examples.labels)
        if dev.test_x is not None:
            test_metrics, test_pred = self._scores(model, s, dev.test_x, dev.test_y, dev.label_set)
            out.update({"test_" + k: v for k, v in test_metrics.items()})
            write_predictions(os.path.join(seed_dir, "test_predictions.csv"), test_pred, dev.test_y, dev.label_set,
                        dev.test.labels, dev.test.texts)
        return out

    def _scores(self, model, s: Settings, x, y, label_set: LabelSet) -> Tuple[Dict[str, float], np.ndarray]:
        out = self.predict(model, x, s)
        if label_set.regression:
            pred = np.asarray(out, np.float32).reshape(-1)
            if y is None:
                return {}, pred
            mse = mean_squared_error(y, pred)
            mean_mse = mean_squared_error(y, np.full_like(y, baseline(y, True)))
            return {"mse": mse, "rmse": math.sqrt(mse), "pearson": pearson(y, pred), "spearman": spearman(y, pred),
                    "mean_mse": mean_mse, "mean_rmse": math.sqrt(mean_mse)}, pred
        pred = np.argmax(out, -1)
        if y is None:
            return {}, pred
        metrics = {"accuracy": accuracy(y, pred), "macro_f1": macro_f1(y, pred, len(label_set.names))}
        if len(label_set.names) == 2:
            metrics["mcc"] = matthews_corrcoef(y, pred)
        metrics["majority_accuracy"] = accuracy(y, np.full_like(y, baseline(y, False)))
        return metrics, pred

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
