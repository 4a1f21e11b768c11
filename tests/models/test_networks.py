"""The networks: shared embeddings, generator sizing, heads and keras-hub mapping."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.models import build_encoder
from electra_tf.models.keras_hub_compat import to_keras_hub_backbone, weight_pairs
from electra_tf.pretrain import ElectraPretrainer

SPECIAL = SpecialTokenIds(pad=0, unk=1, cls=2, sep=3, mask=4)


@pytest.fixture(scope="module")
def tiny(repo_root):
    return ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))


@pytest.fixture(scope="module")
def model(tiny):
    return ElectraPretrainer(tiny, SPECIAL)


def _inputs(batch, seq, vocab, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(batch, seq)).astype(np.int32)
    ids[:, 0] = SPECIAL.cls
    ids[:, -1] = SPECIAL.sep
    return {"input_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
            "segment_ids": tf.zeros_like(ids)}


def test_embeddings_are_the_same_variables(model):
    assert model.generator.embeddings is model.discriminator.embeddings
    assert model.generator_head.token_embedding is model.embeddings.token_embedding
    emb = model.embeddings
    for var in (emb.token_embedding.embeddings, emb.position_embedding.position_embeddings,
                emb.segment_embedding.embeddings, emb.layer_norm.gamma, emb.layer_norm.beta):
        holders = [v for v in model.trainable_variables if v is var]
        assert len(holders) == 1  # listed once, trained once, used by both encoders
    ids = {id(v) for v in model.trainable_variables}
    assert len(ids) == len(model.trainable_variables)


def test_untied_generator_embeddings_are_separate(tiny):
    m = ElectraPretrainer(tiny.replace(untied_generator_embeddings=True), SPECIAL)
    assert m.generator.embeddings is not m.discriminator.embeddings
    assert m.generator_head.token_embedding is m.generator.embeddings.token_embedding


def test_generator_sizes(tiny, model):
    g, d = model.generator, model.discriminator
    assert g.hidden_dim == tiny.generator_hidden_dim == 32
    assert (g.num_heads, g.intermediate_dim, g.num_layers) == (1, 128, 2)
    assert (d.hidden_dim, d.num_heads, d.intermediate_dim) == (64, 2, 256)
    # E (32) == generator H: no projection for the generator; the discriminator projects 32->64.
    assert g.embeddings_projection is None
    assert tuple(d.embeddings_projection.kernel.shape) == (32, 64)


def test_output_shapes(tiny, model):
    out = model(_inputs(3, tiny.max_seq_length, tiny.vocab_size))
    assert tuple(out["mlm_logits"].shape) == (3, tiny.predictions_per_seq, tiny.vocab_size)
    assert tuple(out["disc_logits"].shape) == (3, tiny.max_seq_length)
    assert out["mlm_logits"].dtype == tf.float32 and out["loss"].dtype == tf.float32
    np.testing.assert_allclose(
        out["loss"].numpy(), out["mlm_loss"].numpy() + 50.0 * out["disc_loss"].numpy(), rtol=1e-6)


def test_exact_gelu_eps_and_init(model):
    layer = model.discriminator.transformer_layers[0]
    act = layer.feedforward_intermediate_dense.activation
    x = np.array([1.0, -0.5], np.float32)
    exact = 0.5 * x * (1 + np.array([0.6826894921, -0.3829249225]))  # x * Phi(x)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(act(x)), exact, rtol=1e-6)
    norms = [l for l in model._flatten_layers() if isinstance(l, keras.layers.LayerNormalization)]
    assert norms and all(l.epsilon == 1e-12 for l in norms)
    kernel = keras.ops.convert_to_numpy(layer.feedforward_intermediate_dense.kernel)
    assert np.abs(kernel).max() <= 0.04 + 1e-6  # truncated at 2 stddev
    assert 0.015 < kernel.std() < 0.02


def test_no_pooler(model):
    names = [v.path for v in model.discriminator.weights]
    assert not any("pool" in n for n in names)


def test_discriminator_maps_one_to_one_onto_keras_hub(tiny):
    encoder = build_encoder(tiny.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    inputs = _inputs(2, 16, tiny.vocab_size, seed=1)
    ours = encoder(inputs).numpy()
    backbone = to_keras_hub_backbone(encoder)
    n_pooler = len(backbone.pooled_dense.weights)
    assert len(weight_pairs(encoder, backbone)) == len(encoder.weights) == len(backbone.weights) - n_pooler
    hub_inputs = {"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
                  "padding_mask": inputs["input_mask"]}
    approx = backbone(hub_inputs)["sequence_output"].numpy()
    # keras-hub's tanh GELU differs a little from the exact form...
    gap = np.abs(approx - ours).max()
    assert 0 < gap < 5e-3, gap
    # ...and with the exact GELU swapped in the outputs agree to float precision.
    for layer in backbone.transformer_layers:
        layer._feedforward_intermediate_dense.activation = keras.activations.gelu
    exact = backbone(hub_inputs)["sequence_output"].numpy()
    np.testing.assert_allclose(exact, ours, atol=2e-5)
