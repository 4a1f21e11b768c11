"""The flags of `python -m electra_tf.finetune` for fine-tuning on your own files.

    python -m electra_tf.finetune --init runs/default --train_file train.csv \\
        --validation_file dev.csv --output_dir runs/reviews

--train_file chooses the own-data task (own_data_task.py); --task is then
not needed. `define_own_data_flags` defines the flags (importing this module
defines nothing); `own_data_settings` turns them into `Settings` fields and
`resolve_task` picks the task name.
"""

from __future__ import annotations

from typing import Dict, Optional

from absl import flags

from electra_tf.finetune.tasks.own_data_task import TASK_NAME
from electra_tf.finetune.settings import FinetuneError

def define_own_data_flags(fv=None) -> None:
    """Defines the own-data flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    string = flags.DEFINE_string
    string("train_file", None, "Your labelled training data: a .csv, .tsv or .jsonl file (optionally .gz) with a "
           "text column and a label column; chooses the own-data task (no --task needed).", flag_values=fv)
    string("validation_file", None, "Labelled validation data in the same layout (or --validation_split).",
           flag_values=fv)
    string("test_file", None, "Optional data to predict after training (labels optional): "
           "<output_dir>/seed_<n>/test_predictions.csv.", flag_values=fv)
    string("text_column", None, "Column of the text (default: 'text', else 'sentence').", flag_values=fv)
    string("text_pair_column", None, "Column of a second text, for text-pair tasks (default: none).",
           flag_values=fv)
    string("label_column", "label", "Column of the label: class names or integers (classification), or numbers "
           "with a decimal point (regression).", flag_values=fv)
    flags.DEFINE_enum("label_type", "auto", ["auto", "classification", "regression"], "What the labels are: auto "
                      "(names and integers are classes; numbers written with a decimal point are a regression), "
                      "classification (every distinct label is a class), or regression (one number per text, e.g. "
                      "integer ratings 1-10).", flag_values=fv)
    flags.DEFINE_float("validation_split", None, "Without --validation_file: hold out this fraction of "
                       "--train_file (stratified by label, the same rows for every seed), e.g. 0.1.", flag_values=fv)


_FILE_FLAGS = ("validation_file", "test_file", "text_column", "text_pair_column", "validation_split")


def own_data_settings(values) -> Dict:
    """The `Settings` fields of these flags.

    Args:
      values: the parsed absl FLAGS.
    """
    return {"train_file": values.train_file, "validation_file": values.validation_file,
            "test_file": values.test_file, "text_column": values.text_column,
            "text_pair_column": values.text_pair_column, "label_column": values.label_column,
            "validation_split": values.validation_split,
            "label_type": None if values.label_type == "auto" else values.label_type}


def resolve_task(task: Optional[str], values) -> Optional[str]:
    """The task name: --task, or the own-data task when --train_file is given.

    Args:
      task: the --task value (None when not given).
      values: the parsed absl FLAGS.

    Raises:
      FinetuneError: --train_file with a built-in --task, or own-data flags
        without --train_file.
    """
    if values.train_file:
        if task is not None and task.lower() != TASK_NAME:
            raise FinetuneError(f"--train_file fine-tunes on your own files, --task {task} on a built-in task's "
                                f"--data_dir; pass one of them")
        return TASK_NAME
    given = [f"--{name}" for name in _FILE_FLAGS if getattr(values, name) is not None]
    if values.label_type != "auto":
        given.append("--label_type")
    if given:
        raise FinetuneError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --train_file (your "
                            f"labelled training data)")
    return task
