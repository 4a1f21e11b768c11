"""Counter-based random numbers keyed by (seed, example, position).

The pre-training step draws its masks and generator samples from a hash of the
seed, the step, the *global* example index and the position, instead of from a
per-device random stream. Consequences, all intended:
- replicas draw different numbers (their examples differ), never the same mask;
- a step gives the same result on 1 device or N replicas of the same global
  batch, so distributed runs can be checked against single-device runs;
- runs are reproducible from the seed alone.
The hash is Chris Wellons' `lowbias32` 32-bit integer mixer (bijective, good
avalanche), expressed in plain uint32 TensorFlow ops that XLA compiles on CPU,
GPU and TPU.
"""

import tensorflow as tf

_GOLDEN = 0x9E3779B1
_ROW_SALT = 0x632BE5AB


def _u32(x):
    return tf.cast(x, tf.uint32)


def mix32(x):
    """lowbias32: a bijective uint32 -> uint32 mixer."""
    shift = tf.bitwise.right_shift
    x = tf.bitwise.bitwise_xor(x, shift(x, _u32(16)))
    x = x * _u32(0x7FEB352D)
    x = tf.bitwise.bitwise_xor(x, shift(x, _u32(15)))
    x = x * _u32(0x846CA68B)
    return tf.bitwise.bitwise_xor(x, shift(x, _u32(16)))


def _xor(a, b):
    return tf.bitwise.bitwise_xor(a, b)


def _split64(x):
    x = tf.cast(x, tf.int64)
    return _u32(tf.bitwise.bitwise_and(x, 0xFFFFFFFF)), _u32(tf.bitwise.right_shift(x, 32))


def row_keys(seed, row_ids):
    """One uint32 key per example from a [2] int seed and int64 example ids [B]."""
    seed = tf.cast(seed, tf.int64)
    s0_lo, s0_hi = _split64(seed[0])
    s1_lo, s1_hi = _split64(seed[1])
    key = mix32(_xor(s0_lo, mix32(s0_hi + _u32(_ROW_SALT))))
    key = mix32(_xor(key, s1_lo))
    key = mix32(_xor(key, mix32(s1_hi + _u32(_GOLDEN))))
    lo, hi = _split64(row_ids)
    return mix32(_xor(mix32(_xor(key, lo)), mix32(hi + _u32(_ROW_SALT))))


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
