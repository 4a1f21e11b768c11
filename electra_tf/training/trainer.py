"""The one training loop of pre-training, fine-tuning and `ElectraClassifier.fit`.

`Trainer` runs Keras' `model.fit` from a start step to exactly `train_steps`
with the one callback stack (`training/callbacks.py`: NaN stop, progress lines,
TensorBoard, periodic evaluation, checkpoints, job-specific checks) and turns
the failures it can diagnose into one-line errors. The jobs keep what is
theirs: the model and its data (the Task half, as in Model Garden's
Task/Trainer split); the trainer owns how they are trained.

Keras epochs are cut to divide both the checkpoint and the evaluation
intervals, so a resumed run starts on an epoch boundary; the steps past the
last whole epoch (and any that fp16 loss scaling skipped) are run by further
short fits. A NaN loss, a corrupt data file, a failed checkpoint write and a
lost worker stop the run with an error saying what was kept and how to go on.

Also here: `precision_policy` (the global dtype policy set for a run and
reset after it), `settings_conflicts` (the one resume guard) and the
`--verbose` mapping.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import keras
import tensorflow as tf

from electra_tf.errors import ElectraError
from electra_tf.training.callbacks import DEFAULT_SHOWN_METRICS, StopOnNonFiniteLoss, TrainingCallback
from electra_tf.training.checkpoints import CheckpointError

TENSORBOARD_DIR = "tensorboard"  # in a run's directory: train/ and eval/ event files


class TrainingError(ElectraError, RuntimeError):
    """A run the trainer stopped (NaN loss, corrupt data, lost worker); one line with the fix."""


def _raise_training_error(message: str):
    raise TrainingError(message)


def epoch_steps(save_every: int, eval_every: Optional[int]) -> int:
    """Steps per Keras epoch: they divide both intervals, so resumes start on an epoch boundary."""
    return math.gcd(save_every, eval_every) if eval_every else save_every


def keras_verbose(verbose: str) -> int:
    """--verbose (auto | 0 | 1 | 2) -> model.fit's verbose (auto: a bar on a terminal)."""
    if verbose == "auto":
        return 1 if sys.stdout.isatty() else 0
    return int(verbose)


def latest_text(checkpoints, form: str = " ({})") -> str:
    latest = checkpoints.latest() if checkpoints is not None else None
    return form.format(latest[1]) if latest else ""


def peer_failure(error: BaseException) -> str:
    """Which peer failed and how, from a collective / coordination-service error."""
    text = str(getattr(error, "message", None) or error)
    match = re.search(r"stopped sending heartbeats\):\s*(/job:\S+)", text)
    if match:
        return f"{match.group(1)} stopped sending heartbeats"
    match = re.search(r"remote target (/job:\S+) while calling", text)
    if match:
        return f"{match.group(1)} closed the connection"
    if "coordination service" in text:
        return "the coordination service on the chief is unreachable"
    if "deadline" in text.lower() or "timed out" in text.lower():
        return "a collective op timed out (--collective_timeout_s)"
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.startswith("Graph execution error")]
    return (lines or [type(error).__name__])[0][:300]


@contextlib.contextmanager
def precision_policy(policy: str):
    """Sets Keras' global dtype policy for a run and resets it to float32 after, whatever happens."""
    keras.mixed_precision.set_global_policy(policy)
    try:
        yield policy
    finally:
        keras.mixed_precision.set_global_policy("float32")


def settings_conflicts(before: Dict, now: Dict, may_differ: Iterable[str] = ()) -> List[str]:
    """The one resume guard: the settings (sorted names) in which a run directory's record
    `before` and this run's `now` differ, leaving out those a resumption may change."""
    skip = set(may_differ)
    return sorted(k for k in set(before) | set(now) if k not in skip and before.get(k) != now.get(k))


class Trainer:
    """Trains a compiled Keras model to exactly `train_steps` with the shared callbacks.

    Args:
      checkpoints: a `CheckpointManager` (None: no checkpoints).
      train_steps: the step training ends at.
      global_batch_size: examples per optimizer step (for examples/s).
      save_every: checkpoint interval in steps (<= 0: only the last step).
      log_every: progress-line interval in steps.
      eval_every: evaluation interval in steps (None or <= 0: only at the last step,
        when `evaluate` is given).
      evaluate: None, or a function() -> dict of metrics on held-out data.
      tensorboard_dir: where train/ and eval/ event files go (None: no TensorBoard).
      chief: whether this process writes checkpoints and TensorBoard.
      log: where the lines go.
      checks: job-specific checks (see `TrainingCallback`).
      shown_metrics: the metrics a progress line shows.
      shown_eval_metrics: the metrics an evaluation line shows (None: all).
      announce_last_checkpoint: print the last step's checkpoint path.
      verbose: `model.fit`'s verbose.
      restart_hint: how to go on after a NaN loss (the job's flags), ends the error line.
      describe_data_loss: function(error, checkpoints text) -> the message for a corrupt
        data file (None: the error propagates).
      multi_worker: whether a lost peer is a diagnosed failure.
      worker: this process's label in messages.
      fail: raises the job's error type with a message (default `TrainingError`).
      time_budget: a `TimeBudget` (or None): training ends at the step it decides, which
        its `on_decided` gives to `callback.train_steps`.
      extra_callbacks: more Keras callbacks, called after the shared ones (e.g. snapshots).
    """

    def __init__(self, checkpoints, *, train_steps: int, global_batch_size: int, save_every: int = 0,
                 log_every: int = 100, eval_every: Optional[int] = None,
                 evaluate: Optional[Callable[[], dict]] = None, tensorboard_dir: Optional[str] = None,
                 chief: bool = True, log: Callable[[str], None] = None, checks: Sequence = (),
                 shown_metrics: Sequence[str] = DEFAULT_SHOWN_METRICS,
                 shown_eval_metrics: Optional[Sequence[str]] = None, announce_last_checkpoint: bool = True,
                 verbose: int = 0,
                 restart_hint: str = "lower the learning rate or check the data, and start again",
                 describe_data_loss: Optional[Callable[[BaseException, str], str]] = None,
                 multi_worker: bool = False, worker: str = "", fail: Callable[[str], None] = None,
                 time_budget=None, extra_callbacks: Sequence = ()):
        self.checkpoints = checkpoints
        self.time_budget = time_budget
        self.extra_callbacks = list(extra_callbacks)
        self.train_steps = int(train_steps)
        self.save_every = save_every if save_every and save_every > 0 else self.train_steps
        self.eval_every = eval_every if evaluate is not None and eval_every and eval_every > 0 else None
        self.verbose = verbose
        self.restart_hint = restart_hint
        self.describe_data_loss = describe_data_loss
        self.multi_worker = multi_worker
        self.worker = worker
        self.fail = fail or _raise_training_error
        self.log = log or (lambda message: print(message, flush=True))
        train_writer = eval_writer = None
        if tensorboard_dir and chief:
            train_writer = tf.summary.create_file_writer(os.path.join(tensorboard_dir, "train"))
            if evaluate is not None:
                eval_writer = tf.summary.create_file_writer(os.path.join(tensorboard_dir, "eval"))
        self.callback = TrainingCallback(
            checkpoints, self.train_steps, global_batch_size, save_every=self.save_every,
            eval_every=self.eval_every or self.save_every, log_every=log_every, evaluate=evaluate,
            train_writer=train_writer, eval_writer=eval_writer, chief=chief, print_fn=self.log,
            checks=checks, shown_metrics=shown_metrics, shown_eval_metrics=shown_eval_metrics,
            announce_last_checkpoint=announce_last_checkpoint)
        self.steps_per_epoch = epoch_steps(self.save_every, self.eval_every)

    def fit(self, model, train_data, start_step: int = 0) -> Tuple[int, float]:
        """Runs `model.fit` on the (repeated) `train_data` from `start_step` to `train_steps`.

        Returns:
          (final step, seconds of fit).
        """
        optimizer = model.optimizer
        nan_guard = StopOnNonFiniteLoss()
        # The budget first: on the step it decides the end, the TrainingCallback already stops there.
        callbacks = ([nan_guard] + ([self.time_budget] if self.time_budget is not None else []) + [self.callback]
                     + self.extra_callbacks)
        steps_per_epoch, train_steps = self.steps_per_epoch, self.train_steps
        full_epochs = train_steps // steps_per_epoch
        fit_kwargs = dict(callbacks=callbacks, verbose=self.verbose, shuffle=False)
        started = time.time()
        if start_step >= self.callback.train_steps:
            return int(optimizer.iterations.numpy()), 0.0
        try:
            # A run continued from another run's step may start off the epoch grid: step to it first.
            head = -start_step % steps_per_epoch
            if head and start_step + head <= full_epochs * steps_per_epoch:
                model.fit(train_data, epochs=1, steps_per_epoch=head, **fit_kwargs)
                start_step = int(optimizer.iterations.numpy())
            start_epoch = start_step // steps_per_epoch
            if start_step < full_epochs * steps_per_epoch and not model.stop_training:
                model.fit(train_data, epochs=full_epochs, initial_epoch=start_epoch,
                          steps_per_epoch=steps_per_epoch, **fit_kwargs)
            done = int(optimizer.iterations.numpy())
            # The tail (train_steps not a multiple of the epoch), and steps that fp16
            # loss scaling skipped (non-finite gradients do not advance the counter).
            for _ in range(100):
                if done >= train_steps or model.stop_training:
                    break
                model.fit(train_data, epochs=1, steps_per_epoch=train_steps - done, **fit_kwargs)
                done = int(optimizer.iterations.numpy())
        except CheckpointError as e:
            self.fail(str(e))
        except tf.errors.DataLossError as e:
            if self.describe_data_loss is None:
                raise
            self.fail(self.describe_data_loss(e, latest_text(self.checkpoints, "; checkpoints up to {} are intact")))
        except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
                tf.errors.CancelledError, tf.errors.InternalError) as e:
            if not self.multi_worker:
                raise
            # A peer died (preemption, OOM kill): the coordination service's heartbeat
            # (or --collective_timeout_s) fails the collective here instead of hanging.
            self.fail(f"[{self.worker}] lost contact with another worker ({peer_failure(e)}); restart every "
                      f"worker with the same command to resume from the last checkpoint"
                      f"{latest_text(self.checkpoints)}")
        if nan_guard.bad_step is not None:
            kept = latest_text(self.checkpoints, " (the last good checkpoint, kept: {})")
            self.fail(f"the training loss became {nan_guard.bad_value} at step {nan_guard.bad_step}; "
                      f"training stopped and nothing was saved after it{kept}; {self.restart_hint}")
        fit_seconds = time.time() - started
        final_step = int(optimizer.iterations.numpy())
        train_steps = self.callback.train_steps  # moved earlier by a time budget
        if final_step != train_steps:
            where = f"; the last checkpoint is in {self.checkpoints.directory}" if self.checkpoints else ""
            self.fail(f"training stopped at step {final_step} of {train_steps} (a NaN loss? see the log){where}")
        return final_step, fit_seconds
