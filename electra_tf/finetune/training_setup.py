"""The task-independent half of fine-tuning: strategy, datasets, optimizer, `fit`.

Every task family trains the same way (the reference's AdamW with layer-wise
learning rates, warmup and linear decay, checkpointed `model.fit`); what
differs between tasks lives in their `FinetuneTask`.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import keras
import tensorflow as tf

from electra_tf.finetune.modeling.layerwise_lr import layerwise_lr_multipliers
from electra_tf.finetune.settings import Settings
from electra_tf.training.callbacks import current_learning_rate
from electra_tf.training.distribution import check_jit_compile, create_strategy, resolve_name, split_cpu
from electra_tf.training.optimization import WarmupPolynomialDecay, adamw
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


def make_dataset(x: Dict, y=None, batch_size: int = 32, shuffle_seed: Optional[int] = None) -> tf.data.Dataset:
    """Batches feature arrays (and labels) into a `tf.data.Dataset`.

    Args:
      x: feature name -> array, all of the same length.
      y: labels, or None (inference, or a model whose `compute_loss` reads `x`).
      batch_size: examples per batch.
      shuffle_seed: shuffle with this seed, afresh each pass (None: keep the order).
    """
    ds = tf.data.Dataset.from_tensor_slices((x, y) if y is not None else (x,))
    if shuffle_seed is not None:
        ds = ds.shuffle(len(next(iter(x.values()))), seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def make_optimizer(model, encoder, s: Settings, lr, decay, steps):
    """Fine-tuning's optimizer: the shared `ElectraAdamW` (training/optimization.py).

    Layer-wise learning rates, the reference's warmup + linear decay (pre-training's
    schedule with power 1), and
    --clip_norm applied to the replica-summed gradient, as in pre-training (so
    --strategy mirrored takes the same step as one device).

    Args:
      model: the built fine-tuning model.
      encoder: its encoder (layer depths are counted in it).
      s: resolved settings (warmup, weight decay, clipping).
      lr: peak learning rate.
      decay: layer-wise learning-rate decay.
      steps: total optimizer steps.

    Returns:
      (optimizer, {variable path: lr multiplier}).
    """
    mult = layerwise_lr_multipliers(model, encoder, decay, s.reference_lr_power)
    schedule = WarmupPolynomialDecay(lr, steps, int(round(s.warmup_proportion * steps)), power=1.0)
    opt = adamw(schedule, weight_decay=s.weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                clip_norm=s.clip_norm or None, lr_multipliers=mult)
    return opt, mult


def train_steps(n_train: int, s: Settings, epochs: float) -> Tuple[int, int]:
    """(total optimizer steps, steps per epoch) for `epochs` over `n_train` examples, capped
    by --max_steps."""
    steps_per_epoch = max(1, math.ceil(n_train / s.batch_size))
    total = max(1, int(round(steps_per_epoch * epochs)))
    if s.max_steps:
        total = min(total, s.max_steps)
    return total, steps_per_epoch


class ProgressCallback(keras.callbacks.Callback):
    """Progress lines every `log_every` steps; a checkpoint every `save_every` steps and
    at the last one (announced only before the last); stops at exactly `total_steps`.

    Args:
      total_steps: the step training ends at.
      save_every: checkpoint interval in steps (0: only the last step).
      log_every: progress-line interval in steps.
      checkpoints: a `CheckpointManager`.
    """

    def __init__(self, total_steps: int, save_every: int, log_every: int, checkpoints):
        super().__init__()
        self.total_steps = total_steps
        self.save_every = save_every
        self.log_every = log_every
        self.checkpoints = checkpoints

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.log_every == 0 or step >= self.total_steps:
            loss = float((logs or {}).get("loss", float("nan")))
            print(f"step {step}/{self.total_steps} loss={loss:.4f} "
                  f"lr={current_learning_rate(self.model.optimizer):.6g}", flush=True)
        if step >= self.total_steps:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        # Keras epochs are checkpoint intervals here (see `fit`).
        step = int(self.model.optimizer.iterations.numpy())
        if (self.save_every and step % self.save_every == 0) or step >= self.total_steps:
            path = self.checkpoints.save(self.model, step)
            # The last step's checkpoint only bridges a crash before the seed's outputs are written,
            # and is removed with them: not announced (the run names the saved model instead).
            if step < self.total_steps:
                print(f"saved checkpoint {path}", flush=True)


def fit(model, ds_train, total_steps: int, start_step: int, s: Settings, checkpoints) -> List[float]:
    """Trains from `start_step` to exactly `total_steps` over the repeated dataset.

    Keras epochs are checkpoint intervals; the data skips the `start_step`
    batches already trained on, so a resumed run sees the batches an
    uninterrupted one would.

    Args:
      model: the compiled model (restored to `start_step` when resuming).
      ds_train: the shuffled, batched training dataset (one pass).
      total_steps: the step training ends at.
      start_step: the optimizer step it starts from.
      s: settings (save_every, log_every).
      checkpoints: a `CheckpointManager` for the seed.

    Returns:
      the loss logged at the end of each Keras epoch.
    """
    if start_step >= total_steps:
        return []
    chunk = s.save_every if s.save_every and s.save_every > 0 else total_steps
    epochs = math.ceil((total_steps - start_step) / chunk)
    callback = ProgressCallback(total_steps, s.save_every, max(1, s.log_every), checkpoints)
    hist = model.fit(ds_train.repeat().skip(start_step), epochs=epochs, steps_per_epoch=chunk,
                     verbose=0, callbacks=[callback],
                     shuffle=False)  # the dataset is shuffled already
    return [float(v) for v in hist.history.get("loss", [])]
