"""The callback stack of the one training loop (`electra_tf.training.trainer`).

- `StopOnNonFiniteLoss`: stops at the first NaN/Inf loss and records the step.
- `TrainingCallback`: progress lines, TensorBoard scalars, periodic evaluation,
  checkpoints, and hooks for job-specific checks (pre-training's discriminator
  collapse detector is one).

Every job (pre-training, fine-tuning, `ElectraClassifier.fit`) gets them from
the trainer; none defines its own.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, Optional, Sequence

import keras
import tensorflow as tf

# What a progress line shows of the logged metrics when they are there (all go to TensorBoard).
DEFAULT_SHOWN_METRICS = ("loss", "mlm_loss", "disc_loss", "disc_auc", "accuracy")


def current_learning_rate(optimizer) -> float:
    """The learning rate the optimizer applies at its current step (what the logs show).

    Unwraps a `LossScaleOptimizer` (mixed_float16), whose own `learning_rate`
    is its inner optimizer's.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return float(keras.ops.convert_to_numpy(inner.learning_rate))


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops training at the first step whose loss is NaN or Inf.

    Like `keras.callbacks.TerminateOnNaN`, but it records the optimizer step
    (`bad_step`, `bad_value`) for the caller's error message, and
    `TrainingCallback` saves nothing once training was stopped, so the last
    good checkpoint stays the latest one.
    """

    def __init__(self):
        super().__init__()
        self.bad_step: Optional[int] = None
        self.bad_value: Optional[float] = None

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or self.bad_step is not None:
            return
        loss = float(loss)
        if not math.isfinite(loss):
            self.bad_step = int(self.model.optimizer.iterations.numpy())
            self.bad_value = loss
            self.model.stop_training = True


class TrainingCallback(keras.callbacks.Callback):
    """Logging, TensorBoard, periodic evaluation and checkpoints in one place.

    Every `log_every` steps (optimizer steps, not fit's batch counter, so the
    numbering survives a resume): one line and TensorBoard scalars of every
    metric, the learning rate and examples/s. The train metrics are windowed:
    each logged value covers the steps since the previous line (the model's
    metrics are reset after every line), so a change shows up within one
    window and the `checks` see it there. At the end of each Keras epoch (the
    trainer cuts the run into epochs that divide `save_every` and `eval_every`):
    evaluation when the step is a multiple of `eval_every` (or the last), then a
    checkpoint when it is a multiple of `save_every` (or the last).

    Args:
      checkpoints: a `CheckpointManager`, or None (no checkpoints).
      train_steps: the run's last step; training stops there.
      global_batch_size: examples per optimizer step (for examples/s).
      save_every, eval_every, log_every: intervals in optimizer steps.
      evaluate: None, or a function() -> dict of eval metrics.
      train_writer, eval_writer: tf.summary writers (None: no TensorBoard).
      chief: whether this process keeps checkpoints.
      print_fn: where the lines go.
      checks: objects with `update(step, logs) -> Optional[str]`, called at every
        progress line with the window's metrics; a returned line is printed.
      shown_metrics: the metrics a progress line shows (when logged).
      shown_eval_metrics: the metrics an evaluation line shows (None: all).
      announce_last_checkpoint: print the path of the last step's checkpoint
        (fine-tuning removes it with the finished seed, so it does not say it).
    """

    def __init__(self, checkpoints, train_steps: int, global_batch_size: int,
                 save_every: int, eval_every: int, log_every: int,
                 evaluate: Optional[Callable[[], dict]] = None,
                 train_writer=None, eval_writer=None, chief: bool = True,
                 print_fn: Callable[[str], None] = print, checks: Sequence = (),
                 shown_metrics: Sequence[str] = DEFAULT_SHOWN_METRICS,
                 shown_eval_metrics: Optional[Sequence[str]] = None,
                 announce_last_checkpoint: bool = True):
        super().__init__()
        self.checkpoints = checkpoints
        self.train_steps = train_steps
        self.global_batch_size = global_batch_size
        self.save_every = max(1, save_every)
        self.eval_every = max(1, eval_every)
        self.log_every = max(1, log_every)
        self.evaluate = evaluate
        self.train_writer = train_writer
        self.eval_writer = eval_writer
        self.chief = chief
        self.print = print_fn
        self.checks = list(checks)
        self.shown_metrics = tuple(shown_metrics)
        self.shown_eval_metrics = None if shown_eval_metrics is None else tuple(shown_eval_metrics)
        self.announce_last_checkpoint = announce_last_checkpoint
        self.last_eval: dict = {}
        self.last_train: dict = {}
        self.last_saved: Optional[int] = None
        self._last_logged_step = None
        self._last_time = None
        self._first_step_time = None
        self._first_step = None
        self.steady_examples_per_second = float("nan")
        self.reached_end = False

    # ------------------------------------------------------------- helpers
    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def _scalars(self, writer, values: dict, step: int) -> None:
        if writer is None:
            return
        with writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, float(value))
        writer.flush()

    # ------------------------------------------------------------ callbacks
    def on_train_begin(self, logs=None):
        self.reached_end = False
        self._last_time = time.time()
        self._last_logged_step = self._step()
        # Interval "blocks" already handled: with fp16 loss scaling a skipped
        # (non-finite) step does not advance the counter, so epoch ends may fall
        # off the multiples; act whenever a new block of steps is entered.
        self._save_block = self._last_logged_step // self.save_every
        self._eval_block = self._last_logged_step // self.eval_every

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        now = time.time()
        if self._first_step_time is None:
            # The first execution includes tracing/compilation: measure from here.
            self._first_step_time, self._first_step = now, step
            self._last_time, self._last_logged_step = now, step
        elif step > self._first_step:
            self.steady_examples_per_second = (
                (step - self._first_step) * self.global_batch_size / max(now - self._first_step_time, 1e-9))
        if step >= self.train_steps and not self.model.stop_training:
            # The last step: the run may end inside a Keras epoch (a length decided while it
            # trains, `TimeBudget`), so stop here; `on_epoch_end` then evaluates and saves.
            self.reached_end = True
            self.model.stop_training = True
        if step % self.log_every and step != self.train_steps:
            return
        logs = {k: float(v) for k, v in (logs or {}).items()}
        self.last_train = dict(logs)
        elapsed = max(now - self._last_time, 1e-9)
        done = step - self._last_logged_step
        rate = done * self.global_batch_size / elapsed if done > 0 else float("nan")
        lr = current_learning_rate(self.model.optimizer)
        values = dict(logs, learning_rate=lr)
        if rate == rate:
            values["examples_per_second"] = rate
        self._scalars(self.train_writer, values, step)
        shown = " ".join(f"{k}={logs[k]:.4f}" for k in self.shown_metrics if k in logs)
        self.print(f"step {step}/{self.train_steps} {shown} lr={lr:.3g} examples/s={rate:.1f}")
        for check in self.checks:
            warning = check.update(step, logs)
            if warning:
                self.print(warning)
        self._last_time, self._last_logged_step = now, step
        # Start the next window: Keras would otherwise accumulate the metrics
        # over the whole epoch (save_every steps), so the logged values would lag.
        self.model.reset_metrics()

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training and not self.reached_end:
            return  # stopped for a non-finite loss: these weights must not become a checkpoint
        step = self._step()
        last = step >= self.train_steps
        logs = logs if logs is not None else {}
        if self.evaluate is not None and (step // self.eval_every > self._eval_block or last):
            self._eval_block = step // self.eval_every
            started = time.time()
            results = self.evaluate()
            self.last_eval = {k: float(v) for k, v in results.items()}
            self._scalars(self.eval_writer, self.last_eval, step)
            for name, value in self.last_eval.items():
                logs[f"val_{name}"] = value
            shown = " ".join(f"{k}={v:.4f}" for k, v in self.last_eval.items()
                             if self.shown_eval_metrics is None or k in self.shown_eval_metrics)
            self.print(f"eval at step {step}: {shown} ({time.time() - started:.1f}s)")
        if self.checkpoints is not None and (step // self.save_every > self._save_block or last):
            self._save_block = step // self.save_every
            path = self.checkpoints.save(self.model, step, chief=self.chief)
            self.last_saved = step
            if path and (self.announce_last_checkpoint or not last):
                self.print(f"saved checkpoint {path}")
        sys.stdout.flush()
