"""Integer hashing shared by the random draws of the objectives and the models' dropout.

A low-level module (no dependency inside electra_tf) so that both
`electra_tf.objectives.random` (masking, sampling) and
`electra_tf.models.fused_ops` (hashed dropout) use one definition without the
models importing the objectives.

The hash is Chris Wellons' `lowbias32` 32-bit integer mixer (bijective, good
avalanche), expressed in plain uint32 TensorFlow ops that XLA compiles on CPU,
GPU and TPU.
"""

import tensorflow as tf

# The 32-bit golden ratio (Weyl sequence step): spreads consecutive element
# indices over the whole uint32 range before mixing.
GOLDEN = 0x9E3779B1
ROW_SALT = 0x632BE5AB


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
    """One uint32 key per example from a [2] int seed and int64 example ids [B].

    Args:
        seed: int tensor [2].
        row_ids: int [B] stable example ids.
    """
    seed = tf.cast(seed, tf.int64)
    s0_lo, s0_hi = _split64(seed[0])
    s1_lo, s1_hi = _split64(seed[1])
    key = mix32(_xor(s0_lo, mix32(s0_hi + _u32(ROW_SALT))))
    key = mix32(_xor(key, s1_lo))
    key = mix32(_xor(key, mix32(s1_hi + _u32(GOLDEN))))
    lo, hi = _split64(row_ids)
    return mix32(_xor(mix32(_xor(key, lo)), mix32(hi + _u32(ROW_SALT))))
