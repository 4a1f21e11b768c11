"""fused_ops: the fused loops of the fast path, against the Keras ops they replace."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models import fused_ops


def test_bias_gelu_known_values_and_bfloat16():
    zero = tf.zeros([1])
    # GELU(1) = Phi(1) = 0.8413447 (the bias is added first); GELU'(0) = 0.5.
    assert fused_ops.bias_gelu(tf.constant([0.25]), tf.constant([0.75])).numpy()[0] == \
        pytest.approx(0.8413447, abs=1e-6)
    z = tf.constant([0.0])
    with tf.GradientTape() as tape:
        tape.watch(z)
        y = fused_ops.bias_gelu(z, zero)
    assert tape.gradient(y, z).numpy()[0] == pytest.approx(0.5, abs=1e-7)
    x = tf.constant([[-1.0, 0.5, 2.0]], tf.bfloat16)
    y = fused_ops.bias_gelu(x, tf.zeros([3]))
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
    x = tf.ones([500, 1001])
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


def _norm(width, seed=0, epsilon=1e-12):
    rng = np.random.default_rng(seed)
    norm = keras.layers.LayerNormalization(epsilon=epsilon)
    norm.build((None, width))
    norm.gamma.assign(rng.normal(1.0, 0.3, width).astype(np.float32))
    norm.beta.assign(rng.normal(0.0, 0.3, width).astype(np.float32))
    return norm


@pytest.mark.parametrize("with_bias,training", [(True, True), (False, True), (True, False)])
def test_add_dropout_norm_matches_keras_layers_in_value_and_gradient(with_bias, training):
    rng = np.random.default_rng(3)
    y = tf.constant(rng.normal(0, 2, (3, 5, 8)).astype(np.float32))
    residual = tf.constant(rng.normal(1, 1, (3, 5, 8)).astype(np.float32))
    bias = tf.constant(rng.normal(0, 1, 8).astype(np.float32)) if with_bias else None
    weights = tf.constant(rng.normal(0, 1, (3, 5, 8)).astype(np.float32))
    norm = _norm(8)
    # Two dropout layers with the same seed draw the same masks.
    ours_drop, ref_drop = _dropout(0.3, seed=7), _dropout(0.3, seed=7)
    sources = [y, residual] + ([bias] if with_bias else [])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(sources)
        ours = fused_ops.add_dropout_norm(y, residual, norm, ours_drop, bias=bias, training=training)
        branch = y + bias if with_bias else y
        ref = norm(fused_ops.dropout(ref_drop, branch, training=training) + residual)
        ours_loss, ref_loss = tf.reduce_sum(ours * weights), tf.reduce_sum(ref * weights)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), atol=1e-5)
    targets = sources + [norm.gamma, norm.beta]
    for got, want in zip(tape.gradient(ours_loss, targets), tape.gradient(ref_loss, targets)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4)
    # Dropout really acted (or really did not): compare with the no-dropout output.
    plain = norm(branch + residual).numpy()
    assert (np.abs(ours.numpy() - plain).max() > 0.1) == training
    # LayerNorm: each row has mean beta-ish, i.e. (out - beta) / gamma is standardised.
    standard = (ours.numpy() - norm.beta.numpy()) / norm.gamma.numpy()
    np.testing.assert_allclose(standard.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(standard.std(-1), 1.0, atol=1e-4)


def test_add_dropout_norm_keeps_bfloat16_and_returns_float32_parameter_grads():
    rng = np.random.default_rng(4)
    y = tf.constant(rng.normal(0, 1, (4, 8)), tf.bfloat16)
    residual = tf.constant(rng.normal(0, 1, (4, 8)), tf.bfloat16)
    norm = _norm(8, epsilon=1e-5)
    with tf.GradientTape() as tape:
        tape.watch([y, residual])
        out = fused_ops.add_dropout_norm(y, residual, norm)
        loss = tf.reduce_sum(tf.cast(out, tf.float32))
    grads = tape.gradient(loss, [y, residual, norm.gamma, norm.beta])
    assert out.dtype == tf.bfloat16
    assert [g.dtype for g in grads] == [tf.bfloat16, tf.bfloat16, tf.float32, tf.float32]
    ref = norm(tf.cast(y, tf.float32) + tf.cast(residual, tf.float32)).numpy()
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), ref, atol=3e-2)
    # d(sum out)/d beta = number of rows.
    np.testing.assert_allclose(grads[3].numpy(), 4.0)


@pytest.mark.parametrize("training", [True, False])
def test_attention_probs_match_masked_softmax_and_dropout(training):
    rng = np.random.default_rng(5)
    scores = tf.constant(rng.normal(0, 3, (2, 3, 4, 6)).astype(np.float32))
    mask = tf.constant(np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)[:, None, None, :])
    weights = tf.constant(rng.normal(0, 1, (2, 3, 4, 6)).astype(np.float32))
    ours_drop, ref_drop = _dropout(0.2, seed=11), _dropout(0.2, seed=11)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(scores)
        ours = fused_ops.attention_probs(scores, mask, ours_drop, training=training)
        ref = fused_ops.dropout(
            ref_drop, tf.nn.softmax(tf.where(mask, scores, -1e9), axis=-1), training=training)
        ours_loss, ref_loss = tf.reduce_sum(ours * weights), tf.reduce_sum(ref * weights)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), atol=1e-6)
    np.testing.assert_allclose(tape.gradient(ours_loss, scores).numpy(),
                               tape.gradient(ref_loss, scores).numpy(), atol=1e-5)
    probs = ours.numpy()
    assert (probs[0, ..., 4:] == 0).all()  # padded keys get nothing
    grad = tape.gradient(ours_loss, scores).numpy()
    assert (grad[0, ..., 4:] == 0).all()
    if not training:
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    else:
        dropped = (probs == 0)[1]
        assert 0.05 < dropped.mean() < 0.4


def test_bias_gelu_matches_keras_gelu_of_the_sum():
    rng = np.random.default_rng(6)
    x = tf.constant(rng.normal(0, 2, (5, 7)).astype(np.float32))
    bias = tf.constant(rng.normal(0, 1, 7).astype(np.float32))
    weights = tf.constant(rng.normal(0, 1, (5, 7)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, bias])
        ours = fused_ops.bias_gelu(x, bias)
        ref = keras.activations.gelu(x + bias)
        ours_loss, ref_loss = tf.reduce_sum(ours * weights), tf.reduce_sum(ref * weights)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), atol=2e-6)
    for got, want in zip(tape.gradient(ours_loss, [x, bias]), tape.gradient(ref_loss, [x, bias])):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5)
