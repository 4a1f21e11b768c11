"""Step 6 of a pre-training job: `model.fit` up to --train_steps, and its failures as one message.

Keras epochs are cut to divide both the checkpoint and the evaluation intervals,
so a resumed run starts on an epoch boundary; the steps past the last whole
epoch (and any that fp16 loss scaling skipped) are run by further short fits.
A NaN loss, a corrupt shard, a failed checkpoint write and a lost worker stop
the job with a `PretrainError` saying what was kept and how to go on.
"""

from __future__ import annotations

import math
import re
import sys
import time
from typing import List

import tensorflow as tf

from electra_tf.training.checkpoints import CheckpointError
from electra_tf.pretrain.pretrain_callbacks import StopOnNonFiniteLoss
from electra_tf.pretrain.data_setup import data_loss_message
from electra_tf.pretrain.options import fail


def epoch_steps(save_every: int, eval_every: int, has_eval: bool) -> int:
    """Steps per Keras epoch: they divide both intervals, so resumes start on an epoch boundary."""
    return math.gcd(save_every, eval_every) if has_eval else save_every


def keras_verbose(verbose: str) -> int:
    """--verbose (auto | 0 | 1 | 2) -> model.fit's verbose (auto: a bar on a terminal)."""
    if verbose == "auto":
        return 1 if sys.stdout.isatty() else 0
    return int(verbose)


def latest_text(checkpoints, form: str = " ({})") -> str:
    latest = checkpoints.latest()
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


def fit_to_step(model, optimizer, train_data, callback, *, train_steps: int, start_step: int,
                steps_per_epoch: int, verbose: int, checkpoints, multi_worker: bool, worker: str,
                data_dirs: List[str], excluded: List[str]):
    """Runs `model.fit` from `start_step` to `train_steps`; returns (final step, seconds of fit).

    Raises PretrainError for the failures the job diagnoses (see the module docstring);
    other errors propagate.
    """
    nan_guard = StopOnNonFiniteLoss()
    callbacks = [nan_guard, callback]
    full_epochs = train_steps // steps_per_epoch
    fit_started = time.time()
    try:
        # A run continued from another run's step may start off the epoch grid: step to it first.
        head = -start_step % steps_per_epoch
        if head and start_step + head <= full_epochs * steps_per_epoch:
            model.fit(train_data, epochs=1, steps_per_epoch=head, callbacks=callbacks, verbose=verbose,
                      shuffle=False)
            start_step = int(optimizer.iterations.numpy())
        start_epoch = start_step // steps_per_epoch
        if start_step < full_epochs * steps_per_epoch and not model.stop_training:
            model.fit(train_data, epochs=full_epochs, initial_epoch=start_epoch,
                      steps_per_epoch=steps_per_epoch, callbacks=callbacks, verbose=verbose, shuffle=False)
        done = int(optimizer.iterations.numpy())
        # The tail (train_steps not a multiple of the epoch), and steps that fp16
        # loss scaling skipped (non-finite gradients do not advance the counter).
        for _ in range(100):
            if done >= train_steps or model.stop_training:
                break
            model.fit(train_data, epochs=1, steps_per_epoch=train_steps - done,
                      callbacks=callbacks, verbose=verbose, shuffle=False)
            done = int(optimizer.iterations.numpy())
    except CheckpointError as e:
        fail(str(e))
    except tf.errors.DataLossError as e:
        fail(data_loss_message(e, data_dirs, excluded,
                               latest_text(checkpoints, "; checkpoints up to {} are intact")))
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
            tf.errors.CancelledError, tf.errors.InternalError) as e:
        if not multi_worker:
            raise
        # A peer died (preemption, OOM kill): the coordination service's heartbeat
        # (or --collective_timeout_s) fails the collective here instead of hanging.
        fail(f"[{worker}] lost contact with another worker ({peer_failure(e)}); restart every "
             f"worker with the same command to resume from the last checkpoint"
             f"{latest_text(checkpoints)}")
    if nan_guard.bad_step is not None:
        fail(f"the training loss became {nan_guard.bad_value} at step {nan_guard.bad_step}; "
             f"training stopped and nothing was saved after it"
             f"{latest_text(checkpoints, ' (the last good checkpoint, kept: {})')}; lower the "
             f"learning rate (--override learning_rate=...) or check the data, and start again "
             f"in a new --model_dir")
    fit_seconds = time.time() - fit_started
    final_step = int(optimizer.iterations.numpy())
    if final_step != train_steps:
        fail(f"training stopped at step {final_step} of {train_steps} (a NaN loss? see the log); "
             f"the last checkpoint is in {checkpoints.directory}")
    return final_step, fit_seconds
