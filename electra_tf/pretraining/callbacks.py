"""Keras callbacks of the pre-training job: checkpoints, TensorBoard, evaluation.

Checkpoints are Keras `.weights.h5` files of the whole `ElectraPretrainer`
(every layer, the optimizer's slots and step counter, the metric state).
`tf.train.Checkpoint` is not used: Keras 3 keeps sub-layers in Python lists it
does not track, so it would silently miss variables.

    <model_dir>/checkpoints/ckpt-00000500.weights.h5   (the last K are kept)

A checkpoint is written under a temporary name and renamed, so a crash leaves
either the previous set or the new one, never a half-written file under a
final name. Every step is keyed by `optimizer.iterations` (randomness and
learning rate), so restoring it resumes the schedule exactly. The states of
the Keras dropout seed generators, which `save_weights` leaves out, are stored
in the same file (group `electra_tf_rng`), so dropout continues its stream
after a resume instead of replaying the first steps' masks.

A checkpoint that cannot be written (full disk, read-only directory) or read
(truncated, another model's) raises `CheckpointError` with one line naming
the file and the fix; the temporary file is removed and earlier checkpoints
are left as they were.
"""

from __future__ import annotations

import io
import math
import os
import re
import sys
import time
from typing import Callable, List, Optional, Tuple

import keras
import tensorflow as tf

CHECKPOINT_RE = re.compile(r"^ckpt-(\d{8})\.weights\.h5$")
RNG_GROUP = "electra_tf_rng"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written or restored; the message names it and the fix."""


def _reason(error: BaseException) -> str:
    text = str(error).strip()
    text = text.splitlines()[0] if text else type(error).__name__
    code = getattr(error, "errno", None)
    if isinstance(code, int) and code > 0 and os.strerror(code) not in text:
        text = f"{os.strerror(code)}: {text}"  # h5py hides ENOSPC / EACCES behind "[Errno 28] Can't write"
    return text


def _seed_state_variables(model):
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _write_seed_states(model, h5_file) -> None:
    states = _seed_state_variables(model)
    if not states:
        return
    group = h5_file.create_group(RNG_GROUP)
    for i, variable in enumerate(states):
        group.create_dataset(str(i), data=keras.ops.convert_to_numpy(variable.value))
        group[str(i)].attrs["path"] = variable.path


def checkpoint_bytes(model) -> bytes:
    """The checkpoint file of `model` (what `model.save_weights` writes, plus the
    dropout seed states), built in memory.

    It reaches the disk through plain Python writes: HDF5 kills the process
    with SIGSEGV when it cannot flush a file it is closing (full disk, quota,
    file-size limit), whereas a failed Python write is an OSError we report.
    """
    from keras.src.saving import saving_lib  # pylint: disable=import-outside-toplevel

    buffer = io.BytesIO()
    store = saving_lib.H5IOStore(buffer, mode="w")
    try:
        saving_lib._save_state(  # pylint: disable=protected-access
            model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set())
        _write_seed_states(model, store.h5_file)
    finally:
        store.close()  # closes the HDF5 file; the buffer stays open
    return buffer.getvalue()


def _read_seed_states(model, path: str) -> None:
    import h5py  # pylint: disable=import-outside-toplevel

    with h5py.File(path, "r") as f:
        if RNG_GROUP not in f:
            return  # a checkpoint from before the group existed: fresh dropout streams
        stored = [f[RNG_GROUP][str(i)][()] for i in range(len(f[RNG_GROUP]))]
    # Matched by position: load_weights above already proved the same layer structure
    # (paths can differ: Keras numbers auto-named layers per process).
    states = _seed_state_variables(model)
    if len(stored) == len(states):
        for variable, value in zip(states, stored):
            if tuple(value.shape) == tuple(variable.shape):
                variable.assign(value)


def _is_remote(path: str) -> bool:
    return "://" in path


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}.weights.h5"


class CheckpointManager:
    """Lists, writes, prunes and restores step-numbered weight checkpoints."""

    def __init__(self, directory: str, keep: int = 3):
        if keep < 1:
            raise ValueError(f"keep={keep} must be >= 1")
        self.directory = directory
        self.keep = keep

    def checkpoints(self) -> List[Tuple[int, str]]:
        """(step, path) of every complete checkpoint, oldest first."""
        if not tf.io.gfile.isdir(self.directory):
            return []
        found = []
        for name in tf.io.gfile.listdir(self.directory):
            match = CHECKPOINT_RE.match(name.rstrip("/"))
            if match:
                found.append((int(match.group(1)), os.path.join(self.directory, name)))
        return sorted(found)

    def latest(self) -> Optional[Tuple[int, str]]:
        found = self.checkpoints()
        return found[-1] if found else None

    def remove_temporaries(self) -> None:
        """Deletes what an interrupted save left behind (never a complete checkpoint)."""
        if not tf.io.gfile.isdir(self.directory):
            return
        for name in tf.io.gfile.listdir(self.directory):
            if ".tmp" in name:
                path = os.path.join(self.directory, name)
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)

    def save(self, model, step: int, chief: bool = True) -> Optional[str]:
        """Writes checkpoint `step` (temp name, fsync, rename); prunes to the last K.

        Every worker of a multi-worker run must call this (reading some
        distributed variables is a collective op); only the chief writes a file.

        Raises:
          CheckpointError: the file cannot be written; earlier ones are intact.
        """
        data = checkpoint_bytes(model)
        if not chief:
            return None
        final = os.path.join(self.directory, checkpoint_name(step))
        tmp = (final + ".tmp" if _is_remote(final)
               else os.path.join(self.directory, f".ckpt-{step:08d}.tmp.weights.h5"))
        try:
            tf.io.gfile.makedirs(self.directory)
            if _is_remote(final):
                with tf.io.gfile.GFile(tmp, "wb") as f:
                    f.write(data)
                tf.io.gfile.rename(tmp, final, overwrite=True)
            else:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())  # on disk before the rename makes it the latest
                os.replace(tmp, final)
        except (OSError, tf.errors.OpError) as e:
            # A full disk or a directory that became read-only: say so in one
            # line, drop the partial file, keep every earlier checkpoint.
            try:
                if tf.io.gfile.exists(tmp):
                    tf.io.gfile.remove(tmp)
            except (OSError, tf.errors.OpError):
                pass
            latest = self.latest()
            kept = f"the last checkpoint, {latest[1]}, is intact" if latest else "no earlier checkpoint exists"
            raise CheckpointError(
                f"cannot write checkpoint {final} ({_reason(e)}); {kept}; free disk space or make "
                f"{self.directory} writable, then re-run the same command to resume") from None
        for _, old in self.checkpoints()[:-self.keep]:
            tf.io.gfile.remove(old)
        return final

    def restore_latest(self, model, clean: bool = True) -> Optional[Tuple[int, str]]:
        """Resumes `model` from the newest complete checkpoint, if any.

        Args:
          model: a compiled model.
          clean: first delete what an interrupted save left (chief only).

        Returns (restored step, path), or None when there is no checkpoint.

        Raises:
          CheckpointError: the newest checkpoint is unreadable, belongs to another
            model, or holds another step than its name says.
        """
        if clean:
            self.remove_temporaries()
        latest = self.latest()
        if latest is None:
            return None
        step = self.restore(model, latest[1])
        if step != latest[0]:
            raise CheckpointError(f"checkpoint {latest[1]} holds step {step}, not {latest[0]}; "
                                  f"delete it to resume from the one before")
        return step, latest[1]

    @staticmethod
    def restore(model, path: str) -> int:
        """Loads a checkpoint into a compiled model; returns the restored step."""
        optimizer = model.optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        try:
            model.load_weights(path)
            _read_seed_states(model, path)
        except ValueError as e:  # shapes or layer structure differ: another model's file
            raise CheckpointError(
                f"checkpoint {path} does not fit this model ({_reason(e)}); it was written for "
                f"another config: pass a new model directory, or delete the checkpoint") from None
        except (OSError, RuntimeError, KeyError, tf.errors.OpError) as e:  # truncated / corrupted
            raise CheckpointError(
                f"checkpoint {path} is unreadable ({_reason(e)}); delete it to resume from the "
                f"checkpoint before it") from None
        return int(optimizer.iterations.numpy())


def current_learning_rate(optimizer) -> float:
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    lr = inner.learning_rate
    return float(keras.ops.convert_to_numpy(lr))


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
