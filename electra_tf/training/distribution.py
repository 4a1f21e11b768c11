"""The tf.distribute pieces both training loops share: one MirroredStrategy per
process and the split of the CPU into logical devices.

Every MirroredStrategy numbers its collectives from the same start, so a
second one in the same process breaks the first; `mirrored_strategy` hands out
one per device set. Which strategy a job uses is its own choice
(`pretraining.distribution.create_strategy`, `finetune --strategy`).
"""

from __future__ import annotations

import functools
from typing import Optional

import tensorflow as tf

from electra_tf.errors import ElectraError


class StrategyError(ElectraError, ValueError):
    """A strategy that cannot run on this machine, with the fix in the message."""


def split_cpu(num_devices: Optional[int]) -> int:
    """Splits the physical CPU into `num_devices` logical devices (tests, demos).

    Returns the number of logical CPU devices. Must run before TensorFlow is
    initialised; if it already is, the existing split is accepted when it has
    at least `num_devices` devices.
    """
    if not num_devices or num_devices < 2:
        return len(tf.config.list_logical_devices("CPU"))
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError:
        pass  # runtime already initialised (e.g. by a test's conftest)
    have = len(tf.config.list_logical_devices("CPU"))
    if have < num_devices:
        raise StrategyError(
            f"--num_cpu_devices={num_devices} came after TensorFlow started with {have} CPU device(s); "
            f"pass it before anything else runs (the CLI does this first)")
    return have


def mirrored_devices():
    """All GPUs, or else all logical CPU devices."""
    gpus = tf.config.list_logical_devices("GPU")
    return tuple(d.name for d in gpus) or tuple(d.name for d in tf.config.list_logical_devices("CPU"))


def mirrored_strategy(devices=None):
    """One MirroredStrategy per device set and process.

    Every MirroredStrategy numbers its collective all-reduces from the same
    start; a second one in the same process re-uses the first one's instance
    keys with other shapes ("Shape mismatch in the collective instance") and
    aborts the collective executor for the rest of the process. Jobs, seeds
    and tests that run in one process therefore share this one.

    Args:
        devices: device names (default `mirrored_devices()`); the cache is
            keyed by the resolved names, so the default and an explicit list
            of the same devices give the same strategy.
    """
    return _mirrored_strategy(tuple(devices or mirrored_devices()))


@functools.lru_cache(maxsize=None)
def _mirrored_strategy(devices):
    return tf.distribute.MirroredStrategy(list(devices))
