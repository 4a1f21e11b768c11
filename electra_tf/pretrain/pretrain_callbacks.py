"""Keras callbacks of the pre-training job: logging, TensorBoard, evaluation, checkpoints.

The checkpoint files themselves (format, atomic writes, restore) are
`electra_tf.training.checkpoints`, shared with fine-tuning.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, Optional, Tuple

import keras
import tensorflow as tf

from electra_tf.training.callbacks import current_learning_rate
from electra_tf.training.checkpoints import CheckpointManager

class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops training at the first step whose loss is NaN or Inf.

    Like `keras.callbacks.TerminateOnNaN`, but it records the optimizer step
    (`bad_step`, `bad_value`) for the caller's error message, and
    `PretrainingCallback` saves nothing once training was stopped, so the last
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


class DiscriminatorCollapseDetector:
    """Notices a discriminator that learned and then fell back to the prior.

    Seen on small models when the generator reaches the unigram distribution
    while the learning rate is high (docs/pretraining.md, "Discriminator
    collapse"): the discriminator then predicts "original" everywhere (no
    positive prediction, AUC near 0.5, loss = entropy of the replaced fraction)
    and did not recover in our runs; its encoder fine-tuned worse than a random
    one. `update` returns one warning line the first time that happens.

    Args:
      learned_auc: the AUC that shows the discriminator had learned something.
      collapsed_auc: below this (with no positive prediction) it has collapsed.
    """

    def __init__(self, learned_auc: float = 0.7, collapsed_auc: float = 0.6):
        self.learned_auc = learned_auc
        self.collapsed_auc = collapsed_auc
        self.best: Optional[Tuple[float, int]] = None
        self.warned = False

    def update(self, step: int, logs: dict) -> Optional[str]:
        auc = logs.get("disc_auc")
        if auc is None or self.warned:
            return None
        if self.best is None or auc > self.best[0]:
            self.best = (auc, step)
        if (self.best[0] >= self.learned_auc and auc < self.collapsed_auc
                and logs.get("disc_precision", 1.0) == 0.0 and logs.get("disc_recall", 1.0) == 0.0):
            self.warned = True
            return (f"warning: step {step}: the discriminator collapsed to the prior (disc_auc "
                    f"{auc:.3f} after {self.best[0]:.3f} at step {self.best[1]}; it predicts no "
                    f"replaced token); such runs did not recover here: restart with "
                    f"--override temperature=2 (samples the discriminator can still tell apart "
                    f"while it learns context; docs/pretraining.md)")
        return None


class PretrainingCallback(keras.callbacks.Callback):
    """Logging, TensorBoard, periodic evaluation and checkpoints in one place.

    Every `log_every` steps (optimizer steps, not fit's batch counter, so the
    numbering survives a resume): one stdout line and TensorBoard scalars of
    every metric, the learning rate and examples/s. The train metrics are
    windowed: each logged value covers the steps since the previous log line
    (the model's metrics are reset after every log), not the whole Keras epoch,
    so a change in the discriminator shows up within one `log_every` window and
    the collapse detector sees it there. At the end of each Keras
    epoch (the run is cut into epochs that divide `save_every` and
    `eval_every`): evaluation when the step is a multiple of `eval_every` (or
    the last), then a checkpoint when it is a multiple of `save_every` (or the
    last).

    Args:
      checkpoints: a CheckpointManager.
      train_steps: the run's last step.
      global_batch_size: examples per optimizer step (for examples/s).
      save_every, eval_every, log_every: intervals in optimizer steps.
      evaluate: None, or a function() -> dict of eval metrics.
      train_writer, eval_writer: tf.summary writers (None on non-chief workers).
      chief: whether this process keeps checkpoints.
      print_fn: where the log lines go.
    """

    def __init__(self, checkpoints: CheckpointManager, train_steps: int, global_batch_size: int,
                 save_every: int, eval_every: int, log_every: int,
                 evaluate: Optional[Callable[[], dict]] = None,
                 train_writer=None, eval_writer=None, chief: bool = True,
                 print_fn: Callable[[str], None] = print):
        super().__init__()
        self.checkpoints = checkpoints
        self.train_steps = train_steps
        self.global_batch_size = global_batch_size
        self.save_every = save_every
        self.eval_every = eval_every
        self.log_every = max(1, log_every)
        self.evaluate = evaluate
        self.train_writer = train_writer
        self.eval_writer = eval_writer
        self.chief = chief
        self.print = print_fn
        self.last_eval: dict = {}
        self.last_train: dict = {}
        self.last_saved: Optional[int] = None
        self._last_logged_step = None
        self._last_time = None
        self._first_step_time = None
        self._first_step = None
        self.steady_examples_per_second = float("nan")
        self.collapse = DiscriminatorCollapseDetector()

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
        shown = " ".join(f"{k}={logs[k]:.4f}" for k in ("loss", "mlm_loss", "disc_loss", "disc_auc") if k in logs)
        self.print(f"step {step}/{self.train_steps} {shown} lr={lr:.3g} examples/s={rate:.1f}")
        warning = self.collapse.update(step, logs)
        if warning:
            self.print(warning)
        self._last_time, self._last_logged_step = now, step
        # Start the next window: Keras would otherwise accumulate the metrics
        # over the whole epoch (save_every steps), so the logged AUC would lag.
        self.model.reset_metrics()

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training:
            return  # stopped for a non-finite loss: these weights must not become a checkpoint
        step = self._step()
        logs = logs if logs is not None else {}
        last = step >= self.train_steps
        if self.evaluate is not None and (step // self.eval_every > self._eval_block or last):
            self._eval_block = step // self.eval_every
            started = time.time()
            results = self.evaluate()
            self.last_eval = {k: float(v) for k, v in results.items()}
            self._scalars(self.eval_writer, self.last_eval, step)
            for name, value in self.last_eval.items():
                logs[f"val_{name}"] = value
            shown = " ".join(f"{k}={v:.4f}" for k, v in self.last_eval.items()
                             if k in ("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc"))
            self.print(f"eval at step {step}: {shown} ({time.time() - started:.1f}s)")
        if step // self.save_every > self._save_block or last:
            self._save_block = step // self.save_every
            path = self.checkpoints.save(self.model, step, chief=self.chief)
            self.last_saved = step
            if path:
                self.print(f"saved checkpoint {path}")
        sys.stdout.flush()
