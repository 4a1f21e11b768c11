"""Counter-based random numbers keyed by (seed, example, position).

The pre-training step draws its masks and generator samples from a hash of the
seed, the step, the *global* example index and the position, instead of from a
per-device random stream. Consequences, all intended:
- replicas draw different numbers (their examples differ), never the same mask;
- a step gives the same result on 1 device or N replicas of the same global
  batch, so distributed runs can be checked against single-device runs;
- runs are reproducible from the seed alone.
The hash (`electra_tf.numerics`) is Chris Wellons' `lowbias32` 32-bit integer
mixer, in plain uint32 TensorFlow ops that XLA compiles on CPU, GPU and TPU.
"""

import tensorflow as tf

# The hash primitives live one layer down so that the models' dropout shares them.
from electra_tf.numerics import GOLDEN as _GOLDEN, mix32, row_keys


def _u32(x):
    return tf.cast(x, tf.uint32)


def row_uniform(seed, row_ids, shape):
    """Uniform floats in the open interval (0, 1), shape [B] + shape.

    Args:
        seed: int tensor [2], e.g. (config seed + purpose, training step).
        row_ids: int [B], a stable id per example (its global batch index).
        shape: static trailing shape (a list of Python ints).
    """
    keys = row_keys(seed, row_ids)
    size = 1
    for dim in shape:
        size *= int(dim)
    index = _u32(tf.reshape(tf.range(size, dtype=tf.int32), [1] + list(shape)))
    keys = tf.reshape(keys, [-1] + [1] * len(shape))
    bits = mix32(index * _u32(_GOLDEN) + keys)
    # 24 random bits, centred in their bucket: never exactly 0 or 1.
    top24 = tf.cast(tf.bitwise.right_shift(bits, _u32(8)), tf.float32)
    return (top24 + 0.5) * (1.0 / 16777216.0)
