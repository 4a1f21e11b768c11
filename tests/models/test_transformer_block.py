"""The owned Transformer block: fused == plain, plain == keras-hub's block, and the switch."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.models import build_encoder
from electra_tf.models.transformer_block import TransformerBlock, key_mask


def _padded_mask(batch=3, seq=16):
    padding = np.ones((batch, seq), np.int32)
    padding[1, 10:] = 0  # one padded row: the key mask must act in both paths
    return padding


def _values_and_grads(block, x, mask, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = block(x, mask, training=True)
        loss = tf.reduce_sum(out * weights)
    grads = tape.gradient(loss, [x] + block.trainable_variables)
    return out.numpy(), [tf.convert_to_tensor(g).numpy() for g in grads]


def _assert_grads_close(got, want, names):
    assert len(got) == len(want) == len(names)
    for name, g, w in zip(names, got, want):
        scale = max(np.abs(w).max(), 1e-3)
        np.testing.assert_allclose(g, w, atol=1e-4 * scale, err_msg=name)


def test_fused_and_plain_paths_give_the_same_values_and_gradients():
    block = TransformerBlock(num_heads=2, intermediate_dim=48, dropout=0.0)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(3, 16, 24)), tf.float32)
    weights = tf.constant(rng.normal(size=(3, 16, 24)), tf.float32)
    mask = key_mask(_padded_mask())
    block.build(x.shape)
    fused_out, fused_grads = _values_and_grads(block, x, mask, weights)
    block.fused = False
    plain_out, plain_grads = _values_and_grads(block, x, mask, weights)
    assert np.abs(fused_out - plain_out).max() < 2e-5
    _assert_grads_close(fused_grads, plain_grads, ["x"] + [v.path for v in block.trainable_variables])
    # A padded key changes nothing for the other tokens; the mask is really applied.
    block.fused = True
    unmasked = block(x, None, training=False).numpy()
    assert np.abs(unmasked[1] - fused_out[1]).max() > 1e-3
    np.testing.assert_allclose(unmasked[0], fused_out[0], atol=2e-5)


def test_plain_path_equals_keras_hub_transformer_encoder():
    """Same variables in the same order and the same function as keras-hub's post-LN block."""
    block = TransformerBlock(num_heads=2, intermediate_dim=48, dropout=0.0, fused=False)
    hub = keras_hub.layers.TransformerEncoder(intermediate_dim=48, num_heads=2, dropout=0.0,
                                              activation=keras.activations.gelu,
                                              layer_norm_epsilon=1e-12)
    block.build((3, 16, 24))
    hub.build((3, 16, 24))
    assert [tuple(v.shape) for v in block.weights] == [tuple(v.shape) for v in hub.weights]
    rng = np.random.default_rng(1)
    for ours, theirs in zip(block.weights, hub.weights):
        value = rng.normal(scale=0.2, size=tuple(ours.shape)).astype(np.float32)
        ours.assign(value)
        theirs.assign(value)
    x = rng.normal(size=(3, 16, 24)).astype(np.float32)
    padding = _padded_mask()
    want = hub(x, padding_mask=padding).numpy()
    got = block(x, key_mask(padding)).numpy()
    np.testing.assert_allclose(got, want, atol=2e-5)


@pytest.fixture(scope="module")
def tiny(repo_root):
    return ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json")).replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def test_config_switch_reaches_every_block(tiny):
    assert tiny.fused_kernels  # the default
    plain = build_encoder(tiny.replace(fused_kernels=False))
    fused = build_encoder(tiny)
    ids = np.random.default_rng(2).integers(5, tiny.vocab_size, size=(2, 12)).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    plain(inputs)
    fused(inputs)
    assert [b.fused for b in plain.transformer_layers] == [False] * tiny.num_hidden_layers
    assert [b.fused for b in fused.transformer_layers] == [True] * tiny.num_hidden_layers
    for a, b in zip(fused.weights, plain.weights):
        a.assign(b)
    np.testing.assert_allclose(fused(inputs).numpy(), plain(inputs).numpy(), atol=2e-5)
    restored = keras.layers.deserialize(keras.layers.serialize(plain))
    assert restored.fused_kernels is False


@pytest.mark.parametrize("fused", [True, False])
def test_attention_probs_dropout_prob_drives_the_attention_dropout_alone(fused):
    # attention_probs_dropout_prob reaches the attention-probability dropout of every
    # block, and only it: with the hidden dropout off, a training call differs from
    # inference exactly when the attention dropout is on.
    base = ElectraConfig.from_json("configs/tiny.json").replace(hidden_dropout_prob=0.0, fused_kernels=fused)
    ids = np.random.default_rng(0).integers(5, base.vocab_size, (2, 12)).astype("int32")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    weights, outputs = None, {}
    for rate in (0.0, 0.5):
        encoder = build_encoder(base.replace(attention_probs_dropout_prob=rate))
        encoder(inputs, training=False)
        weights = weights or encoder.get_weights()
        encoder.set_weights(weights)  # the same network; only the dropout rate differs
        outputs[rate] = (encoder(inputs, training=False).numpy(), encoder(inputs, training=True).numpy())
        blocks = encoder.transformer_layers
        assert {b.attention_probs_dropout.rate for b in blocks} == {rate}
        assert {b.attention_dropout.rate for b in blocks} == {b.feedforward_dropout.rate for b in blocks} == {0.0}
        assert encoder.embeddings.dropout_layer.rate == 0.0
    np.testing.assert_allclose(outputs[0.0][1], outputs[0.0][0], atol=1e-6)
    np.testing.assert_allclose(outputs[0.5][0], outputs[0.0][0], atol=1e-6)  # inference: no dropout
    assert np.abs(outputs[0.5][1] - outputs[0.5][0]).max() > 1e-2
