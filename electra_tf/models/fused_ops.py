"""Cheaper element-wise ops for the encoder's fast path (see fast_block.py).

On CPU an ELECTRA step spends a large share of its time outside the matmuls,
in TensorFlow's one-kernel-per-op element-wise work. Two of those ops are
replaced here by equivalents that do less memory traffic:

- `exact_gelu`: x * Phi(x) with a hand-written gradient, forward and backward
  each one XLA-fused loop (TensorFlow runs tf.nn.gelu and its autodiff
  gradient as ~10 separate passes). Measured on the 2-core CPU, [4096, 1024],
  forward + backward: 11 ms vs 36 ms.
- `dropout`: the same keep/scale rule as Keras' dropout, but 16 random bits per
  element (one Philox uint32 feeds two elements) instead of a 32-bit float
  uniform, and the replica id folded into the seed. The drop rate is rounded to
  a multiple of 1/65536 (0.1 -> 0.1000061). Measured forward + backward on
  [32, 4, 128, 128]: 13 ms vs 18 ms.
"""

import math

import keras
import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_forward(x):
    x32 = tf.cast(x, tf.float32)
    return tf.cast(0.5 * x32 * (1.0 + tf.math.erf(x32 * _SQRT_HALF)), x.dtype)


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_backward(x, dy):
    x32 = tf.cast(x, tf.float32)
    cdf = 0.5 * (1.0 + tf.math.erf(x32 * _SQRT_HALF))
    pdf = tf.exp(-0.5 * x32 * x32) * _INV_SQRT_2PI
    return tf.cast(tf.cast(dy, tf.float32) * (cdf + x32 * pdf), dy.dtype)


@tf.custom_gradient
def exact_gelu(x):
    """Exact (erf) GELU, x * Phi(x); d/dx = Phi(x) + x * phi(x).

    Same values as `keras.activations.gelu(x)` to float32 round-off.
    """
    return _gelu_forward(x), lambda dy: _gelu_backward(x, dy)


def is_exact_gelu(activation) -> bool:
    """True for the activation ELECTRA's configs call "gelu" (keras' exact GELU)."""
    return activation is keras.activations.gelu or activation is exact_gelu


def _replica_id():
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    return tf.cast(context.replica_id_in_sync_group, tf.int32)


def dropout(layer, x, training=None):
    """`layer(x, training=training)` for a `keras.layers.Dropout`, cheaper.

    Draws the seed from the layer's own `SeedGenerator` (so the masks change
    every call, as with Keras), folds in the replica id (Keras' mirrored seed
    state would give every replica the same mask), and keeps an element when
    its 16 random bits are >= round(rate * 65536).

    Args:
        layer: a built `keras.layers.Dropout` (its rate and seed generator).
        x: the input tensor (static rank).
        training: dropout only when true.
    """
    rate = float(layer.rate)
    if not training or rate <= 0.0:
        return x
    if layer.noise_shape is not None or rate >= 1.0:
        return layer(x, training=training)
    seed = layer.seed_generator.next()
    seed = tf.cast(tf.math.floormod(tf.cast(seed, tf.int64), 2**31 - 1), tf.int32)
    replica = _replica_id()
    if replica is not None:
        seed = seed + tf.stack([tf.constant(0, tf.int32), 1_000_003 * (replica + 1)])
    static = x.shape.num_elements()
    size = static if static is not None else tf.size(x)
    bits = tf.random.stateless_uniform(
        [(size + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.uint32)
    halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])
    if static is None or static % 2:
        halves = halves[:size]
    threshold = tf.constant(min(int(round(rate * 65536)), 65535), tf.uint16)
    keep = tf.reshape(halves >= threshold, tf.shape(x))
    scale = tf.cast(1.0 / (1.0 - rate), x.dtype)
    return tf.where(keep, x * scale, tf.zeros_like(x))
