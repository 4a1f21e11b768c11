"""The interface every fine-tuning task family implements: `FinetuneTask`.

The driver (`run.py`) trains every task the same way and asks the task object
for everything that differs, so it never needs to know which family a task
belongs to. A task:

  - reads and encodes its train and dev data once (`prepare_data`),
  - builds its Keras model around the encoder (`build_model`) and names the
    loss `compile` needs (`loss`; None when the model computes its own),
  - evaluates a trained model and writes its dev predictions (`evaluate`),
    naming the metrics the results table shows (`metric_keys`),
  - writes what `python -m electra_tf.export` serves (`save_for_export`),
  - may say what it worked out from its data (`summary_lines`, `describe_data`)
    and print its own results table (`format_results`).

Implementations, one per family: `glue_task.GlueFinetuneTask` (GLUE
classification and regression), `squad_task.SquadFinetuneTask` (SQuAD 1.1 /
2.0) and `tagging_task.TaggingFinetuneTask` (CoNLL-style tagging);
`registry.get_task` maps a --task name to its object.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Dict, List, Optional

import keras
import numpy as np

from electra_tf.finetune.settings import Settings
from electra_tf.finetune.training_setup import make_dataset, padded_width_multiple
from electra_tf.training import size_defaults as sizes


@dataclasses.dataclass
class TaskData:
    """A task's encoded data, prepared once and shared by every seed.

    Attributes:
      train_x: training features (name -> array), `input_ids` among them.
      train_y: training labels, or None when the model's `compute_loss` reads
        its targets from `train_x`.
      dev: what the task's `evaluate` (and `build_model`) need; its own type.
    """
    train_x: Dict[str, np.ndarray]
    train_y: Optional[np.ndarray]
    dev: Any

    @property
    def num_train(self) -> int:
        return len(self.train_x["input_ids"])


class FinetuneTask(abc.ABC):
    """One fine-tuning task: its data, model, loss, evaluation and export.

    Task objects are stateless beyond their name and static description; all
    per-run state travels in `Settings` and `TaskData`, so one object serves
    every seed and every run.

    Args:
      name: the --task name.

    Attributes:
      reference_epochs: the reference's training epochs for this task.
      reference_max_seq_length: the reference's sequence length.
      table_scale: factor the results table applies to metrics (100: they
        are fractions and shown as percent).
      cpu_epochs: epochs for the sizes pre-trained on a CPU (those whose
        `size_defaults.SizeDefaults` say `cpu_epochs`); None: the reference's.
      pads_to_longest: its batches are cut to their longest row (one output per
        example, inputs ids / mask / segments only): same outputs, less work on
        short texts (`training_setup.trim_to_longest`).
      pools: its head reads one vector per text (--pooling: [CLS] or the mean).
    """

    reference_epochs: float = 3.0
    reference_max_seq_length: int = 128
    cpu_epochs: Optional[float] = None
    table_scale: float = 100.0
    pads_to_longest: bool = False
    pools: bool = False

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def reference_hparams(self, model_size: str, pooling: Optional[str] = None) -> Dict[str, object]:
        """Default fine-tuning settings for a model size.

        The size's row of `electra_tf.training.size_defaults` (the paper's
        sizes: the reference's recipe; the sizes pre-trained on a CPU: the
        recipe docs/domain_study.md chose; imported BERT-family encoders: the
        usual recipe of a public encoder) with this task's sequence length
        and epochs.

        Args:
          model_size: the config's model_size (small, base, large, tiny, ...,
            imported; anything else: as base).
          pooling: the encoder's own read-out (the config's `pooling`), which
            wins over the size's; None: the size's.
        """
        return sizes.reference_hparams(model_size, pooling, self.reference_epochs, self.cpu_epochs,
                                       self.reference_max_seq_length)

    def data_files(self, s: Settings) -> Dict[str, Optional[str]]:
        """The files under --data_dir this task reads ("--data_dir:<file name>" -> path); their content
        fingerprints guard a resumption. Only those files are read: a --data_dir such as /tmp
        must not be hashed whole. A folder that lacks them raises the task's one-line error.

        Args:
          s: resolved settings.
        """
        return {"--data_dir": s.data_dir}

    @abc.abstractmethod
    def prepare_data(self, s: Settings, tokenizer) -> TaskData:
        """Reads and encodes the train and dev data (bad files raise one line).

        Args:
          s: resolved settings (data_dir, max_seq_length, example limits, ...).
          tokenizer: a `FinetuneTokenizer`.
        """

    @abc.abstractmethod
    def build_model(self, encoder, config, s: Settings, data: TaskData) -> keras.Model:
        """The unbuilt fine-tuning model: `encoder` plus this task's head.

        Args:
          encoder: a freshly built `ElectraEncoder`.
          config: its `ElectraConfig` (head dropout and initializer range).
          s: resolved settings.
          data: this run's `TaskData` (e.g. the tag set sizes the head).
        """

    def loss(self) -> Optional[keras.losses.Loss]:
        """The loss `model.compile` takes; None: the model's own `compute_loss`."""
        return None

    @abc.abstractmethod
    def evaluate(self, model, s: Settings, data: TaskData, seed_dir: str) -> Dict[str, float]:
        """Scores the trained model on the dev data and writes its predictions to `seed_dir`.

        Args:
          model: the trained model.
          s: resolved settings.
          data: this run's `TaskData`.
          seed_dir: the seed's output directory.

        Returns:
          metric name -> value.
        """

    @abc.abstractmethod
    def metric_keys(self, result: Dict) -> List[str]:
        """The metrics of one seed's `result` that results.json and the table report."""

    def save_for_export(self, seed_dir: str, model, config, tokenizer, s: Settings) -> Optional[str]:
        """Writes what `python -m electra_tf.export` needs to serve the model (default: nothing).

        Args:
          seed_dir: the seed's output directory.
          model: the trained model.
          config: its `ElectraConfig`.
          tokenizer: the `FinetuneTokenizer` it was trained with (vocabulary, casing).
          s: resolved settings.

        Returns:
          the directory `predict` and `export` take (the run prints it), or None.
        """
        return None

    def describe_data(self, data: TaskData) -> Optional[Dict]:
        """What the run worked out from its data, for results.json's "data" (None: nothing)."""
        return None

    def summary_lines(self, data: TaskData, max_positions: int) -> List[str]:
        """A few lines printed before training: what was read and decided (default: none).

        Args:
          data: this run's `TaskData`.
          max_positions: the model's max_position_embeddings (the longest --max_seq_length).
        """
        return []

    def format_results(self, results: List[Dict], median: Dict[str, float], data: TaskData) -> Optional[str]:
        """The results table printed at the end; None: the driver's table of `metric_keys`
        in percent (`table_scale`)."""
        return None

    def trim_multiple(self, s: Settings) -> Optional[int]:
        """What `make_dataset` rounds this task's batch widths up to (None: no cut)."""
        return padded_width_multiple(s.jit_compile) if self.pads_to_longest else None

    def predict(self, model, x: Dict[str, np.ndarray], s: Settings):
        """The model's outputs on features `x`, in --eval_batch_size batches."""
        return model.predict(make_dataset(x, None, s.eval_batch_size, trim_multiple=self.trim_multiple(s)),
                             verbose=0)
