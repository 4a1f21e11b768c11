"""ELECTRIC (objective=electric) and GDES (embedding_sharing=gdes), pinned on hand-made batches.

ELECTRIC's NCE loss is recomputed in numpy from the networks' own outputs;
GDES is checked by the gradients each loss sends to the two tables and by the
merged table the model directory stores. Both: 2 replicas == 1 device.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ConfigError, ElectraConfig
from electra_tf.models.saving import load_encoder, save_pretrained
from electra_tf.pretrain import METRIC_NAMES, metric_names
from electra_tf.models.embedding_sharing import DeltaEmbedding

from helpers import (PRETRAIN_SEQ as SEQ, PRETRAIN_VOCAB_SIZE as VOCAB, cross_entropy,
                     pretrain_forward as forward, pretrain_batch as make_batch,
                     pretrain_config as make_config, pretrain_model as make_model, sigmoid_cross_entropy)


def _dense_grad(grad, like):
    return np.zeros(like.shape, np.float32) if grad is None else tf.convert_to_tensor(grad).numpy()


# ------------------------------------------------------------------- electric
def test_electric_loss_is_nce_with_the_generator_as_noise():
    model = make_model("electric")
    assert model.generator is not None and model.discriminator_head is not None
    assert model.mlm_head is None and metric_names("electric") == METRIC_NAMES
    # A non-zero energy bias, so that the NCE logit's three terms all matter.
    model.discriminator_head.dense_prediction.bias.assign([1.5])
    batch = make_batch()
    out = forward(model, batch, 2)
    ids, mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
    pos, w = out["masked_positions"].numpy(), out["masked_weights"].numpy()
    seen = out["disc_input_ids"].numpy()

    # Labels: 1 at every position that received a generator sample, even where
    # the sample equals the original.
    chosen = np.zeros_like(ids)
    for b, p in zip(*np.nonzero(w)):
        chosen[b, pos[b, p]] = 1
    np.testing.assert_array_equal(out["disc_labels"].numpy(), chosen)
    np.testing.assert_array_equal(seen[chosen == 0], ids[chosen == 0])

    # Noise log-probabilities: the generator on the masked input, softmax at every position.
    hidden = model.generator({"input_ids": out["masked_input_ids"], "input_mask": batch["input_mask"],
                              "segment_ids": batch["segment_ids"]})
    every = tf.broadcast_to(tf.range(SEQ), [8, SEQ])
    z = model.generator_head(hidden, mask_positions=every).numpy().astype(np.float64)
    log_q = np.take_along_axis(z, seen[..., None], -1)[..., 0] - np.log(np.exp(z).sum(-1))
    np.testing.assert_allclose(out["noise_log_probs"].numpy(), log_q, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["mlm_logits"].numpy(), np.take_along_axis(z, pos[..., None], 1),
                               rtol=1e-4, atol=1e-4)

    # Energies from the full-size network on the corrupted input; NCE logit =
    # E + log q + log(k / n) with k / L = mask_prob = 0.25.
    energies = model.discriminator_head(model.discriminator(
        {"input_ids": out["disc_input_ids"], "input_mask": batch["input_mask"],
         "segment_ids": batch["segment_ids"]})).numpy()
    np.testing.assert_allclose(out["energies"].numpy(), energies, rtol=1e-5, atol=1e-5)
    logits = energies + log_q + math.log(0.25 / 0.75)
    np.testing.assert_allclose(out["disc_logits"].numpy(), logits, rtol=1e-4, atol=1e-4)
    nce = np.mean([sigmoid_cross_entropy(logits[b, t], chosen[b, t]) for b, t in zip(*np.nonzero(mask))])
    assert float(out["disc_loss"]) == pytest.approx(nce, rel=1e-4)
    mlm_logits, orig = out["mlm_logits"].numpy(), out["masked_original_ids"].numpy()
    mlm = sum(cross_entropy(mlm_logits[b, p], orig[b, p]) for b, p in zip(*np.nonzero(w))) / w.sum()
    assert float(out["mlm_loss"]) == pytest.approx(mlm, rel=1e-5)
    assert float(out["loss"]) == pytest.approx(mlm + 50.0 * nce, rel=1e-4)


def test_electric_noise_log_probs_send_no_gradient_to_the_generator():
    model = make_model("electric")
    batch = make_batch()
    head_kernel = model.generator_head.intermediate_dense.kernel
    with tf.GradientTape(persistent=True) as tape:
        out = forward(model, batch, 1)
    # Only the generator's MLM loss trains the generator's own layers.
    assert not _dense_grad(tape.gradient(out["disc_loss"], head_kernel), head_kernel).any()
    assert np.abs(_dense_grad(tape.gradient(out["mlm_loss"], head_kernel), head_kernel)).sum() > 0


# ----------------------------------------------------------------------- gdes
def test_embedding_sharing_values_and_the_legacy_alias():
    assert make_config("electra").embedding_sharing == "shared"
    legacy = make_config("electra", untied_generator_embeddings=True)
    assert legacy.embedding_sharing == "none"
    assert make_config("electra", embedding_sharing="none").untied_generator_embeddings is True
    with pytest.raises(ConfigError, match="embedding_sharing.*no generator"):
        make_config("mlm", embedding_sharing="gdes")
    with pytest.raises(ConfigError, match="untied_generator_embeddings.*contradicts"):
        make_config("electra", embedding_sharing="gdes", untied_generator_embeddings=True)
    with pytest.raises(ConfigError, match="embedding_sharing.*choose one of shared, none, gdes"):
        make_config("electra", embedding_sharing="tied")
    again = ElectraConfig.from_dict(make_config("electra", embedding_sharing="gdes").to_dict())
    assert again.embedding_sharing == "gdes" and not again.untied_generator_embeddings


def _gdes_model(objective="electra"):
    model = make_model(objective, embedding_sharing="gdes")
    delta = model.discriminator.embeddings.token_embedding
    assert isinstance(delta, DeltaEmbedding)
    # Starts at zero: the discriminator first reads exactly the generator's table.
    assert not delta.embeddings.numpy().any()
    # A non-zero delta, so the merged table differs from either part.
    delta.embeddings.assign(np.random.default_rng(0).normal(0, 0.02, (VOCAB, 16)).astype(np.float32))
    return model, model.generator.embeddings.token_embedding.embeddings, delta.embeddings


@pytest.mark.parametrize("objective", ["electra", "electric"])
def test_gdes_gradients_are_disentangled(objective):
    model, e_gen, e_delta = _gdes_model(objective)
    assert model.generator.embeddings is not model.discriminator.embeddings
    # E_delta belongs to the discriminator alone; E_gen to the generator alone.
    paths = {v.path for v in model.trainable_variables}
    assert e_gen.path in paths and e_delta.path in paths
    with tf.GradientTape(persistent=True) as tape:
        out = forward(model, make_batch(), 1)
    gen_on_delta = _dense_grad(tape.gradient(out["mlm_loss"], e_delta), e_delta)
    disc_on_gen = _dense_grad(tape.gradient(out["disc_loss"], e_gen), e_gen)
    assert not gen_on_delta.any() and not disc_on_gen.any()
    # ... while each loss does train its own table.
    assert np.abs(_dense_grad(tape.gradient(out["mlm_loss"], e_gen), e_gen)).sum() > 0
    assert np.abs(_dense_grad(tape.gradient(out["disc_loss"], e_delta), e_delta)).sum() > 0


@pytest.mark.large
def test_gdes_model_dir_holds_the_merged_table(tmp_path):
    model, e_gen, e_delta = _gdes_model()
    data = tf.data.Dataset.from_tensors(make_batch()).repeat()
    model.fit(data, steps_per_epoch=2, verbose=0, shuffle=False)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(VOCAB - 5)]) + "\n")
    out_dir = save_pretrained(str(tmp_path / "pretrained"), model, str(vocab))
    encoder, config = load_encoder(out_dir)
    assert config.embedding_sharing == "gdes"
    np.testing.assert_allclose(encoder.embeddings.token_embedding.embeddings.numpy(),
                               e_gen.numpy() + e_delta.numpy(), rtol=1e-6, atol=1e-7)
    # The plain encoder computes what the trained discriminator computes.
    batch = make_batch(seed=3)
    np.testing.assert_allclose(encoder(batch).numpy(), model.discriminator(batch).numpy(),
                               rtol=1e-5, atol=1e-5)


# ------------------------------------------------------- 2 replicas == 1 device
# The electra case stays in the fast tier (~15 s): it is the one test that catches loss
# denominators left unsummed over replicas (scripts/ci/mutation_check.py --fast).
@pytest.mark.parametrize("objective, extra", [pytest.param("electric", {}, marks=pytest.mark.large),
                                              ("electra", {"embedding_sharing": "gdes"})])
def test_mirrored_step_equals_single_device_step(objective, extra, mirrored_strategy):
    single = make_model(objective, **extra)
    weights = single.get_weights()
    with mirrored_strategy.scope():
        mirrored = make_model(objective, **extra)
    mirrored.set_weights(weights)
    data = tf.data.Dataset.from_tensor_slices(make_batch(rows=16)).repeat().batch(8, drop_remainder=True)
    a = single.fit(data, epochs=2, steps_per_epoch=1, verbose=0, shuffle=False).history
    b = mirrored.fit(data, epochs=2, steps_per_epoch=1, verbose=0, shuffle=False).history
    for name in ("loss", "mlm_loss", "disc_loss"):
        np.testing.assert_allclose(b[name], a[name], rtol=1e-5)
    for x, y in zip(single.get_weights(), mirrored.get_weights()):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)
