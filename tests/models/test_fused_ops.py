"""fused_ops: exact GELU with a hand-written gradient, 16-bit dropout."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models import fused_ops


def test_exact_gelu_matches_keras_value_and_gradient():
    x = tf.constant(np.linspace(-6.0, 6.0, 2001, dtype=np.float32).reshape(1, -1) *
                    np.array([[1.0], [0.3]], np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = fused_ops.exact_gelu(x)
        ref = keras.activations.gelu(x)
        ours_sum, ref_sum = tf.reduce_sum(ours * x), tf.reduce_sum(ref * x)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), atol=2e-6)
    np.testing.assert_allclose(tape.gradient(ours_sum, x).numpy(),
                               tape.gradient(ref_sum, x).numpy(), atol=2e-5)
    # Known values: GELU(1) = Phi(1) = 0.8413447, GELU'(0) = 0.5.
    assert fused_ops.exact_gelu(tf.constant([1.0])).numpy()[0] == pytest.approx(0.8413447, abs=1e-6)
    z = tf.constant([0.0])
    with tf.GradientTape() as tape:
        tape.watch(z)
        y = fused_ops.exact_gelu(z)
    assert tape.gradient(y, z).numpy()[0] == pytest.approx(0.5, abs=1e-7)


def test_exact_gelu_keeps_bfloat16():
    x = tf.constant([[-1.0, 0.5, 2.0]], tf.bfloat16)
    y = fused_ops.exact_gelu(x)
    assert y.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(y, tf.float32).numpy(),
                               keras.activations.gelu(tf.constant([[-1.0, 0.5, 2.0]])).numpy(),
                               atol=1e-2)
    assert fused_ops.is_exact_gelu(keras.activations.gelu)
    assert not fused_ops.is_exact_gelu(keras.activations.relu)


def _dropout(rate, seed=1):
    layer = keras.layers.Dropout(rate, seed=seed)
    layer.build((None,))
    return layer


def test_dropout_keeps_the_rate_and_scales_the_kept_values():
    layer = _dropout(0.1)
    x = tf.ones([500, 1001])  # odd size: the 16-bit halves are trimmed
    y = fused_ops.dropout(layer, x, training=True).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.9) < 0.003
    np.testing.assert_allclose(y[kept], 1.0 / 0.9, rtol=1e-6)
    # Each call draws a new mask; inference and rate 0 are the identity.
    y2 = fused_ops.dropout(layer, x, training=True).numpy()
    assert (kept != (y2 != 0)).mean() > 0.1
    assert fused_ops.dropout(layer, x, training=False) is x
    assert fused_ops.dropout(_dropout(0.0), x, training=True) is x


def test_dropout_gradient_is_the_mask_times_the_scale():
    layer = _dropout(0.25)
    x = tf.Variable(tf.random.normal([64, 32]))
    with tf.GradientTape() as tape:
        y = fused_ops.dropout(layer, tf.convert_to_tensor(x), training=True)
        total = tf.reduce_sum(y)
    grad = tape.gradient(total, x).numpy()
    mask = (y.numpy() != 0)
    np.testing.assert_allclose(grad, mask / 0.75, rtol=1e-6)


def test_dropout_masks_differ_between_replicas(mirrored_strategy):
    strategy = mirrored_strategy
    with strategy.scope():
        layer = _dropout(0.5, seed=7)

    @tf.function
    def run():
        return strategy.run(lambda: fused_ops.dropout(layer, tf.ones([4, 256]), training=True))

    per_replica = strategy.experimental_local_results(run())
    masks = [r.numpy() != 0 for r in per_replica]
    assert (masks[0] != masks[1]).mean() > 0.3
