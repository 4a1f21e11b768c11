"""What fine-tuning gives the one training loop: strategy, datasets, optimizer, step count.

Every task family trains the same way (the reference's AdamW with layer-wise
learning rates, warmup and linear decay, through `electra_tf.training.trainer`);
what differs between tasks lives in their `FinetuneTask`.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import tensorflow as tf

from electra_tf.finetune.settings import Settings
from electra_tf.training.distribution import check_jit_compile, create_strategy, resolve_name, split_cpu
from electra_tf.training.shared_flags import check_one_machine


def distribution_strategy(name: str) -> tf.distribute.Strategy:
    """The tf.distribute strategy named by --strategy (shared with pre-training).

    Args:
      name: auto, cpu, gpu or mirrored (`check_strategy` refused the others).
    """
    return create_strategy(name)[0]


def check_strategy(s: Settings) -> None:
    """Refuses, before any file is read or written, a --strategy fine-tuning cannot run
    (multi_worker, tpu; --jit_compile with mirrored CPU devices); splits the CPU for
    --num_cpu_devices while TensorFlow has not started yet.

    Raises:
      StrategyError: naming the flag and the fix.
    """
    if s.num_cpu_devices:
        split_cpu(s.num_cpu_devices)
    name = resolve_name(s.strategy, None)
    check_one_machine(name, "fine-tuning")
    check_jit_compile(name, s.jit_compile)


def padded_width_multiple(jit_compile: bool) -> int:
    """What a batch's width is rounded up to when it is cut to its longest row: every distinct
    width is a new trace, and under XLA a new compilation (~30 s for Small), so XLA gets few."""
    return 64 if jit_compile else 16


_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")  # [batch, length]: what trim_to_longest cuts


def trim_to_longest(features: Dict, multiple: int) -> Dict:
    """Cuts the [batch, length] features of one batch to its longest row (by `input_mask`),
    rounded up to `multiple` (never past the length they have).

    The cut columns are padding only: the attention mask hides them from every real token
    and pooling reads real tokens only, so the outputs are the padded batch's (tested).
    """
    mask = features["input_mask"]
    full = tf.shape(mask)[1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
    width = tf.minimum(full, (longest + multiple - 1) // multiple * multiple)
    width = tf.maximum(width, 1)
    return {name: value[:, :width] if name in _SEQUENCE_FEATURES else value for name, value in features.items()}


def make_dataset(x: Dict, y=None, batch_size: int = 32, shuffle_seed: Optional[int] = None,
                 trim_multiple: Optional[int] = None) -> tf.data.Dataset:
    """Batches feature arrays (and labels) into a `tf.data.Dataset`.

    Args:
      x: feature name -> array, all of the same length.
      y: labels, or None (inference, or a model whose `compute_loss` reads `x`).
      batch_size: examples per batch.
      shuffle_seed: shuffle with this seed, afresh each pass (None: keep the order).
      trim_multiple: cut each batch to its longest row, rounded up to this (`trim_to_longest`);
        None: every batch keeps the full length. Only for models with one output per example
        whose inputs are `input_ids`, `input_mask`, `segment_ids`.
    """
    ds = tf.data.Dataset.from_tensor_slices((x, y) if y is not None else (x,))
    if shuffle_seed is not None:
        ds = ds.shuffle(len(next(iter(x.values()))), seed=shuffle_seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size)
    if trim_multiple:
        ds = ds.map(lambda features, *rest: (trim_to_longest(features, trim_multiple), *rest),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def train_steps(n_train: int, s: Settings, epochs: float) -> Tuple[int, int]:
    """(total optimizer steps, steps per epoch) for `epochs` over `n_train` examples, at least
    --min_train_steps, capped by --train_steps."""
    steps_per_epoch = max(1, math.ceil(n_train / s.batch_size))
    total = max(1, int(round(steps_per_epoch * epochs)), getattr(s, "min_train_steps", None) or 0)
    if s.max_steps:
        total = min(total, s.max_steps)
    return total, steps_per_epoch
