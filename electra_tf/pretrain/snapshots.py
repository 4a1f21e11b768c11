"""Model directories written every few minutes while pre-training runs (`--snapshot_dir`).

Checkpoints resume a run, but they hold the optimizer's state (three times the weights) and
live with the run. On a machine that may vanish (a Colab session, a borrowed GPU) what matters
is a usable model copied out often: every `--snapshot_minutes`, and once more at the end,

    <snapshot_dir>/step_000420/    a model directory (config.json, vocab.txt, the per-part
                                   .weights.h5 files: what `finetune --init`, `pretrain --init`
                                   and `export` read) plus snapshot.json: the step, minutes
                                   trained, the last train and held-out metrics
    <snapshot_dir>/latest          the name of the newest complete one

A snapshot is written under a temporary name and renamed when complete, and `latest` is
replaced last, so a copy taken at any moment holds whole snapshots; the two newest are kept.
`--snapshot_dtype fp16` stores the weights in half precision (half the bytes; tools load
them back into float32 variables).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Callable, Optional

import h5py
import keras
import numpy as np

from electra_tf.fileio import write_json_atomic, write_text_atomic

LATEST_FILE = "latest"
SNAPSHOT_FILE = "snapshot.json"
SNAPSHOT_DTYPES = {"fp32": None, "fp16": "float16"}  # flag value -> stored numpy dtype
KEEP = 2


def snapshot_name(step: int) -> str:
    return f"step_{step:07d}"


def latest_snapshot(directory: str) -> Optional[str]:
    """The newest complete snapshot's folder under `directory` (None when there is none)."""
    path = os.path.join(directory, LATEST_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        name = f.read().strip()
    folder = os.path.join(directory, name)
    return folder if name and os.path.isfile(os.path.join(folder, SNAPSHOT_FILE)) else None


def _copy_h5(source, target, dtype) -> None:
    for key, value in source.attrs.items():
        target.attrs[key] = value
    for name, item in source.items():
        if isinstance(item, h5py.Group):
            _copy_h5(item, target.create_group(name), dtype)
            continue
        data = item[()]
        if isinstance(data, np.ndarray) and data.dtype == np.float32:
            data = data.astype(dtype)
        copied = target.create_dataset(name, data=data)
        for key, value in item.attrs.items():
            copied.attrs[key] = value


def cast_weights_file(path: str, dtype: str = "float16") -> None:
    """Rewrites a Keras .weights.h5 file with its float32 arrays stored as `dtype` (in place)."""
    tmp = path + ".cast.tmp"
    with h5py.File(path, "r") as source, h5py.File(tmp, "w") as target:
        _copy_h5(source, target, np.dtype(dtype))
    os.replace(tmp, path)


class ModelSnapshots(keras.callbacks.Callback):
    """Writes the model directory every `minutes` of training into `directory` (layout above).

    Args:
      directory: a local folder (created).
      minutes: the interval, counted from the start of training.
      save: function(folder) writing the model directory of the weights as they are now.
      dtype: "fp32" or "fp16": how the weights are stored.
      metrics: function() -> dict added to each snapshot.json (the last train and eval metrics).
      log: where the one line per snapshot goes.
      clock: time source (tests).
    """

    def __init__(self, directory: str, minutes: float, save: Callable[[str], None], dtype: str = "fp32",
                 metrics: Callable[[], dict] = dict, log: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.time):
        super().__init__()
        if dtype not in SNAPSHOT_DTYPES:
            raise ValueError(f"snapshot dtype {dtype!r} is not one of {', '.join(SNAPSHOT_DTYPES)}")
        self.directory = directory
        self.interval = float(minutes) * 60.0
        self.save = save
        self.dtype = dtype
        self.metrics = metrics
        self.log = log
        self.clock = clock
        self.started: Optional[float] = None
        self.last_written: Optional[float] = None
        self.last_step: Optional[int] = None

    def on_train_begin(self, logs=None):
        if self.started is None:  # the trainer may call fit more than once: the first start counts
            self.started = self.last_written = self.clock()

    def on_train_batch_end(self, batch, logs=None):
        if self.clock() - self.last_written >= self.interval:
            self.write(int(self.model.optimizer.iterations.numpy()))

    def write(self, step: int) -> str:
        """Writes the snapshot of `step` now (again only if the step moved); returns its folder."""
        final = os.path.join(self.directory, snapshot_name(step))
        if step == self.last_step and os.path.isdir(final):
            return final
        started = self.clock()
        os.makedirs(self.directory, exist_ok=True)
        tmp = final + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        # Weights are saved in float32 whatever the training precision (mixed policies keep
        # float32 variables); a layer built while saving (a merged token table) must be too.
        policy = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy("float32")
        try:
            self.save(tmp)
        finally:
            keras.mixed_precision.set_global_policy(policy)
        if SNAPSHOT_DTYPES[self.dtype] is not None:
            for name in sorted(os.listdir(tmp)):
                if name.endswith(".weights.h5"):
                    cast_weights_file(os.path.join(tmp, name), SNAPSHOT_DTYPES[self.dtype])
        minutes = (started - self.started) / 60.0 if self.started is not None else None
        record = {"step": step, "minutes": None if minutes is None else round(minutes, 3),
                  "weights_dtype": self.dtype, **self.metrics()}
        write_json_atomic(os.path.join(tmp, SNAPSHOT_FILE), record, sort_keys=True)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        write_text_atomic(os.path.join(self.directory, LATEST_FILE), snapshot_name(step) + "\n")
        self._prune()
        self.last_written, self.last_step = self.clock(), step
        size = sum(os.path.getsize(os.path.join(final, n)) for n in os.listdir(final))
        self.log(f"snapshot at step {step}: {final} ({size / 2**20:.1f} MiB, {self.dtype}, "
                 f"{self.clock() - started:.1f}s)")
        return final

    def _prune(self) -> None:
        names = sorted(n for n in os.listdir(self.directory)
                       if n.startswith("step_") and not n.endswith(".tmp")
                       and os.path.isfile(os.path.join(self.directory, n, SNAPSHOT_FILE)))
        for name in names[:-KEEP]:
            shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)


def read_snapshot(folder: str) -> dict:
    """The snapshot.json of a snapshot folder."""
    with open(os.path.join(folder, SNAPSHOT_FILE), encoding="utf-8") as f:
        return json.load(f)
