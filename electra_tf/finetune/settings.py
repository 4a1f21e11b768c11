"""What one fine-tuning run is configured with: `Settings`, and its one error type.

`python -m electra_tf.finetune` fills `Settings` from its flags; scripts build
it directly and call `electra_tf.finetune.finetune_job.run_task`. The checks here need
nothing but the settings themselves, so they run before any file is read.
"""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Optional, Sequence

from electra_tf.errors import ElectraError
from electra_tf.models.encoder_reinit import reinit_problem
from electra_tf.training.finetune_optimizer import FinetuneOptimizerSettings
from electra_tf.training.shared_flags import PRECISION_POLICIES


class FinetuneError(ElectraError, ValueError):
    """Bad command-line settings or inputs."""


@dataclasses.dataclass
class Settings:
    """Everything one fine-tuning run needs (the CLI fills it from flags).

    Attributes mirror the flags of `python -m electra_tf.finetune`; None means
    "use the reference default for this task and model size" (see
    `FinetuneTask.reference_hparams`).
    """
    task: str
    init: str
    data_dir: Optional[str]
    output_dir: str
    vocab_file: Optional[str] = None
    config: Optional[str] = None
    seeds: Sequence[int] = (1,)  # the flag --seed (a comma-separated list)
    learning_rate: Optional[float] = None
    layerwise_lr_decay: Optional[float] = None
    reference_lr_power: bool = FinetuneOptimizerSettings.reference_lr_power
    epochs: Optional[float] = None
    batch_size: Optional[int] = None  # global: examples per optimizer step over all replicas (None: by size)
    eval_batch_size: int = 64
    max_seq_length: Optional[int] = None
    warmup_proportion: float = FinetuneOptimizerSettings.warmup_proportion
    weight_decay: float = FinetuneOptimizerSettings.weight_decay
    clip_norm: float = FinetuneOptimizerSettings.clip_norm
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    max_steps: Optional[int] = None  # the flag --train_steps: at most this many optimizer steps
    # The fewest optimizer steps the default epochs give (None: the size's floor when --epochs is
    # unset, else 0; size_defaults.py).
    min_train_steps: Optional[int] = None
    two_layer_head: bool = False
    pooling: Optional[str] = None  # classifier input: the [CLS] vector or "mean" of the tokens (None: by size)
    # Re-draw the top N Transformer blocks after loading --init (None: the model folder's
    # finetune_recipe.json, else 0; models/model_folder.py).
    reinit_top_layers: Optional[int] = None
    double_unordered: bool = True
    tagging_scheme: str = "BIO"
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    strategy: str = "auto"  # the shared flags (electra_tf/training/shared_flags.py)
    num_cpu_devices: int = 0
    mixed_precision: str = "none"
    jit_compile: bool = False
    tfds_data_dir: Optional[str] = None
    do_lower_case: Optional[bool] = None  # None: config.json's do_lower_case (see run.py's docstring)
    save_every: int = 1000  # checkpoint every N optimizer steps (0: only at the end of a seed)
    log_every: int = 100  # progress line every N steps
    eval_every: Optional[int] = None  # the task's dev metrics every N steps during training (None: at the end only)
    # Own labelled files (own_data_task.py): CSV / TSV / JSON Lines, optionally .gz.
    train_file: Optional[str] = None
    validation_file: Optional[str] = None
    test_file: Optional[str] = None
    text_column: Optional[str] = None  # None: "text", else "sentence"
    text_pair_column: Optional[str] = None
    label_column: str = "label"
    validation_split: Optional[float] = None  # hold out this fraction of --train_file (seeded, stratified)
    label_type: Optional[str] = None  # "classification" or "regression"; None: decided by the training labels
    # Start over in an --output_dir that holds a run with other settings or changed input files
    # (its settings, results and seed folders are removed first); without it such a re-run is refused.
    overwrite: bool = False

    @classmethod
    def defaults(cls) -> types.SimpleNamespace:
        """The fields' defaults by name (the CLI's flag defaults come from here)."""
        return types.SimpleNamespace(**{f.name: f.default for f in dataclasses.fields(cls)
                                        if f.default is not dataclasses.MISSING})


def check_mixed_precision(s: Settings) -> None:
    """Refuses an unknown --mixed_precision (one line)."""
    if s.mixed_precision not in PRECISION_POLICIES:
        raise FinetuneError(f"unknown --mixed_precision {s.mixed_precision!r}; use none, bf16 or fp16")


def check_numbers(s: Settings) -> None:
    """Refuses numeric settings that cannot train, before any work (one line each)."""
    for name in ("batch_size", "eval_batch_size"):
        value = getattr(s, name)
        if value is None and name == "batch_size":
            continue  # the model size's default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FinetuneError(f"--{name}={value} must be a positive integer")
    for name in ("learning_rate", "epochs"):
        value = getattr(s, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
            raise FinetuneError(f"--{name}={shown} must be a positive number")
    value = s.min_train_steps
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise FinetuneError(f"--min_train_steps={value} must be a non-negative integer (0: no floor)")
    for name, flag in (("max_train_examples", "max_train_examples"), ("max_eval_examples", "max_eval_examples"),
                       ("max_steps", "train_steps")):  # the field max_steps is the flag --train_steps
        value = getattr(s, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise FinetuneError(f"--{flag}={value} must be a positive integer (leave it out to use them all)")


def check_reinit(s: Settings, num_hidden_layers: int) -> None:
    """Refuses a --reinit_top_layers the encoder cannot have (one line)."""
    problem = reinit_problem(s.reinit_top_layers, num_hidden_layers)
    if problem:
        raise FinetuneError(f"--{problem}")


def check_intervals(s: Settings) -> None:
    """Refuses checkpoint / progress intervals that mean nothing (one line)."""
    if s.save_every < 0 or s.log_every < 1:
        raise FinetuneError(f"--save_every={s.save_every} must be >= 0 and --log_every={s.log_every} >= 1")
