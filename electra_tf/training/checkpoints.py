"""Step-numbered checkpoints shared by pre-training and fine-tuning.

Checkpoints are Keras `.weights.h5` files of the whole model being trained
(the `ElectraPretrainer` or a fine-tuning model: every layer, the optimizer's slots and step counter, the metric state).
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
import os
import re
from typing import List, Optional, Tuple

import h5py
import keras
import tensorflow as tf

from electra_tf.errors import ElectraError, error_line
from electra_tf.keras_compat import write_weights_in_memory
from electra_tf.paths import is_remote

CHECKPOINT_RE = re.compile(r"^ckpt-(\d{8})\.weights\.h5$")
RNG_GROUP = "electra_tf_rng"


class CheckpointError(ElectraError, RuntimeError):
    """A checkpoint that cannot be written or restored; the message names it and the fix."""


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
    buffer = io.BytesIO()
    store = write_weights_in_memory(model, buffer)
    try:
        _write_seed_states(model, store.h5_file)
    finally:
        store.close()  # closes the HDF5 file; the buffer stays open
    return buffer.getvalue()


def _read_seed_states(model, path: str) -> None:
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
        tmp = (final + ".tmp" if is_remote(final)
               else os.path.join(self.directory, f".ckpt-{step:08d}.tmp.weights.h5"))
        try:
            tf.io.gfile.makedirs(self.directory)
            if is_remote(final):
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
                f"cannot write checkpoint {final} ({error_line(e)}); {kept}; free disk space or make "
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
                f"checkpoint {path} does not fit this model ({error_line(e)}); it was written for "
                f"another config: pass a new model directory, or delete the checkpoint") from None
        except (OSError, RuntimeError, KeyError, tf.errors.OpError) as e:  # truncated / corrupted
            raise CheckpointError(
                f"checkpoint {path} is unreadable ({error_line(e)}); delete it to resume from the "
                f"checkpoint before it") from None
        return int(optimizer.iterations.numpy())
