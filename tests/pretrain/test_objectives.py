"""Every pre-training objective (config field `objective`), pinned on hand-made tiny batches.

Networks each objective builds, what its loss is computed on (checked against
numpy), the [MASK]-free input of replace_mlm, the copy mechanism of
all_tokens_mlm, two_stage's switch, the saved model directory, and N replicas
== 1 device.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.models.model_folder import ModelDirError
from electra_tf.models.saving import load_discriminator, save_pretrained
from electra_tf.pretrain.pretrainer_loading import load_pretrainer
from electra_tf.pretrain import ElectraPretrainer, create_optimizer, metric_names

from helpers import (MASK, PRETRAIN_SEQ as SEQ, PRETRAIN_VOCAB_SIZE as VOCAB, cross_entropy,
                     pretrain_forward as forward, pretrain_batch as make_batch,
                     pretrain_config as make_config, pretrain_model as make_model, sigmoid_cross_entropy)


def _variable_paths(model):
    return [v.path for v in model.trainable_variables]


# ----------------------------------------------------------------------- mlm
def test_mlm_is_one_full_size_model_without_generator_or_discriminator():
    model = make_model("mlm")
    assert model.generator is None and model.generator_head is None
    assert model.discriminator_head is None and model.copy_head is None
    paths = _variable_paths(model)
    assert not [p for p in paths if "generator" in p or "discriminator_predictions" in p], paths
    assert any(p.startswith("mlm_predictions") for p in paths)
    # The MLM head reads the full-size encoder and is tied to its token table.
    assert model.mlm_head.token_embedding is model.discriminator.embeddings.token_embedding
    assert tuple(m.name for m in model.metrics) == metric_names("mlm") == (
        "loss", "mlm_loss", "mlm_accuracy")


def test_mlm_uses_the_bert_split_and_its_loss_covers_masked_positions_only():
    model = make_model("mlm")
    batch = make_batch(rows=64)
    ids = batch["input_ids"].numpy()
    counts = {"mask": 0, "random": 0, "kept": 0}
    for step in range(8):
        out = forward(model, batch, step)
        w = out["masked_weights"].numpy() > 0
        pos = out["masked_positions"].numpy()
        seen = np.take_along_axis(out["masked_input_ids"].numpy(), pos, axis=1)[w]
        orig = np.take_along_axis(ids, pos, axis=1)[w]
        counts["mask"] += (seen == MASK).sum()
        counts["kept"] += ((seen == orig) & (seen != MASK)).sum()
        counts["random"] += ((seen != orig) & (seen != MASK)).sum()
    total = sum(counts.values())  # ~3,000 slots: std of a 10% share ~0.006
    assert abs(counts["mask"] / total - 0.8) < 0.03, counts
    # A random draw equal to the original (1/60) counts as kept.
    assert abs(counts["random"] / total - 0.1 * 59 / 60) < 0.03, counts
    assert abs(counts["kept"] / total - (0.1 + 0.1 / 60)) < 0.03, counts

    out = forward(model, make_batch(), 3)
    logits, w = out["mlm_logits"].numpy(), out["masked_weights"].numpy()
    assert logits.shape == (8, model.config.predictions_per_seq, VOCAB)
    # The logits are the full-size network's MLM head on the corrupted input.
    hidden = model.discriminator({"input_ids": out["masked_input_ids"],
                                  "input_mask": make_batch()["input_mask"],
                                  "segment_ids": make_batch()["segment_ids"]})
    np.testing.assert_allclose(
        model.mlm_head(hidden, mask_positions=out["masked_positions"]).numpy(), logits,
        rtol=1e-5, atol=1e-5)
    orig = out["masked_original_ids"].numpy()
    want = sum(cross_entropy(logits[b, p], orig[b, p]) for b, p in zip(*np.nonzero(w))) / w.sum()
    assert float(out["loss"]) == float(out["mlm_loss"]) == pytest.approx(want, rel=1e-5)


# ---------------------------------------------------------------- electra_15
def test_electra_15_discriminator_loss_covers_masked_positions_only():
    model = make_model("electra_15")
    # Untrained logits are ~0, where every position's loss is ~log 2 whatever its
    # label; a bias of 3 makes replaced (masked) and original positions differ.
    model.discriminator_head.dense_prediction.bias.assign([3.0])
    out = forward(model, make_batch(), 1)
    logits, labels = out["disc_logits"].numpy(), out["disc_labels"].numpy()
    pos, w = out["masked_positions"].numpy(), out["masked_weights"].numpy()
    terms = [sigmoid_cross_entropy(logits[b, pos[b, p]], labels[b, pos[b, p]]) for b, p in zip(*np.nonzero(w))]
    assert float(out["disc_loss"]) == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    # Not the all-token mean that electra computes.
    mask = make_batch()["input_mask"].numpy()
    every = np.mean([sigmoid_cross_entropy(logits[b, t], labels[b, t]) for b, t in zip(*np.nonzero(mask))])
    assert float(out["disc_loss"]) != pytest.approx(every, rel=0.5)
    gen = float(out["mlm_loss"])
    assert float(out["loss"]) == pytest.approx(gen + 50.0 * sum(terms) / len(terms), rel=1e-5)
    # Same networks and draws as electra: only the loss weights differ.
    electra = make_model("electra")
    electra.set_weights(model.get_weights())
    ref = forward(electra, make_batch(), 1)
    np.testing.assert_array_equal(ref["disc_input_ids"].numpy(), out["disc_input_ids"].numpy())
    np.testing.assert_allclose(ref["disc_logits"].numpy(), logits, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------- replace_mlm
def test_replace_mlm_input_has_no_mask_token_and_predicts_the_originals():
    model = make_model("replace_mlm")
    batch = make_batch(rows=64)
    ids = batch["input_ids"].numpy()
    for step in range(3):
        out = forward(model, batch, step)
        seen = out["model_input_ids"].numpy()
        # An untrained generator over 60 tokens would sample [MASK] in ~96% of
        # such batches; it is never allowed to.
        assert not (seen == MASK).any()
        pos, w = out["masked_positions"].numpy(), out["masked_weights"].numpy() > 0
        chosen = np.zeros_like(ids, bool)
        for b in range(len(ids)):
            chosen[b, pos[b][w[b]]] = True
        np.testing.assert_array_equal(seen[~chosen], ids[~chosen])
        np.testing.assert_array_equal(np.take_along_axis(seen, pos, 1)[w],
                                      out["sampled_ids"].numpy()[w])
    assert model.discriminator_head is None and model.copy_head is None
    logits, orig = out["mlm_logits"].numpy(), out["masked_original_ids"].numpy()
    w = out["masked_weights"].numpy()
    mlm = sum(cross_entropy(logits[b, p], orig[b, p]) for b, p in zip(*np.nonzero(w))) / w.sum()
    gen_logits = out["gen_logits"].numpy()
    gen = sum(cross_entropy(gen_logits[b, p], orig[b, p]) for b, p in zip(*np.nonzero(w))) / w.sum()
    assert float(out["mlm_loss"]) == pytest.approx(mlm, rel=1e-5)
    assert float(out["gen_loss"]) == pytest.approx(gen, rel=1e-5)
    assert float(out["loss"]) == pytest.approx(gen + mlm, rel=1e-5)


# ------------------------------------------------------------ all_tokens_mlm
def test_all_tokens_mlm_loss_is_the_copy_mixture_over_every_token():
    model = make_model("all_tokens_mlm")
    batch = make_batch()
    out = forward(model, batch, 2)
    seen = out["model_input_ids"].numpy()
    assert not (seen == MASK).any()
    hidden = model.discriminator({"input_ids": out["model_input_ids"],
                                  "input_mask": batch["input_mask"],
                                  "segment_ids": batch["segment_ids"]})
    every = tf.broadcast_to(tf.range(SEQ), [8, SEQ])
    z = model.mlm_head(hidden, mask_positions=every).numpy()
    d = tf.sigmoid(model.copy_head(hidden)).numpy()
    ids, mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
    nll = []
    for b, t in zip(*np.nonzero(mask)):
        p = np.exp(z[b, t] - z[b, t].max())
        p = (1 - d[b, t]) * p / p.sum()
        p[seen[b, t]] += d[b, t]  # copy the input token with probability D
        nll.append(-math.log(p[ids[b, t]]))
    assert float(out["mlm_loss"]) == pytest.approx(np.mean(nll), rel=1e-5)
    assert len(nll) == mask.sum() > out["masked_weights"].numpy().sum() * 3
    gen = float(out["gen_loss"])
    assert float(out["loss"]) == pytest.approx(gen + np.mean(nll), rel=1e-5)


# ----------------------------------------------------------------- two_stage
@pytest.mark.large
def test_two_stage_switches_at_step_k_and_the_discriminator_starts_from_the_mlm():
    # No weight decay, so untouched variables stay bit-identical (AdamW's
    # decoupled decay would otherwise shrink them by lr * wd per step).
    model = make_model("two_stage", weight_decay_rate=0.0)
    assert model.config.two_stage_mlm_steps == 2
    data = tf.data.Dataset.from_tensors(make_batch()).repeat()
    # Variables by role; the token/position/segment tables are shared by all
    # networks (their paths start with whichever network was built first).
    groups = {
        "generator": ("generator/transformer", "generator_predictions/"),
        "disc_head": ("discriminator_predictions/",),
        "encoder": ("discriminator/",),
        "mlm_head": ("mlm_predictions/",),
        "embeddings": ("generator/embeddings/",),
    }

    def snapshot():
        return {k: [v.numpy().copy() for v in model.trainable_variables if v.path.startswith(prefixes)]
                for k, prefixes in groups.items()}

    def changed(before, after):
        return {k: any(not np.array_equal(a, b) for a, b in zip(before[k], after[k])) for k in before}

    start = snapshot()
    out = forward(model, make_batch(), 0)
    assert float(out["disc_loss"]) == 0.0 and float(out["loss"]) == float(out["mlm_loss"])
    model.fit(data, steps_per_epoch=2, epochs=1, verbose=0, shuffle=False)
    after_mlm = snapshot()
    # Steps 0 and 1 trained only the MLM (full-size encoder + its head).
    assert all(len(v) for v in start.values())
    assert changed(start, after_mlm) == {"generator": False, "disc_head": False, "encoder": True,
                                         "mlm_head": True, "embeddings": True}
    # From step 2 on it is electra, starting from the MLM-trained encoder: an
    # electra model given these weights computes the same step.
    out = forward(model, make_batch(), 2)
    assert float(out["disc_loss"]) > 0
    electra = make_model("electra", weight_decay_rate=0.0)
    electra.discriminator.set_weights(model.discriminator.get_weights())
    electra.discriminator_head.set_weights(model.discriminator_head.get_weights())
    electra.generator.set_weights(model.generator.get_weights())
    electra.generator_head.set_weights(model.generator_head.get_weights())
    ref = forward(electra, make_batch(), 2)
    for key in ("loss", "mlm_loss", "disc_loss", "disc_logits"):
        np.testing.assert_allclose(out[key].numpy(), ref[key].numpy(), rtol=1e-5, atol=1e-6)
    history = model.fit(data, steps_per_epoch=1, epochs=1, verbose=0, shuffle=False).history
    assert changed(after_mlm, snapshot())["generator"] and changed(after_mlm, snapshot())["disc_head"]
    assert history["disc_loss"][0] > 0


def test_two_stage_needs_its_step_count():
    with pytest.raises(ValueError, match="two_stage_mlm_steps"):
        make_config("two_stage", two_stage_mlm_steps=0)


# --------------------------------------------------------------- adversarial
def test_adversarial_generator_loss_is_reinforce_on_the_discriminator_loss():
    model = make_model("adversarial")
    out = forward(model, make_batch(), 4)
    logits, labels = out["disc_logits"].numpy(), out["disc_labels"].numpy()
    pos, w = out["masked_positions"].numpy(), out["masked_weights"].numpy()
    gen_logits, sampled = out["mlm_logits"].numpy(), out["sampled_ids"].numpy()
    slots = list(zip(*np.nonzero(w)))
    rewards = {s: sigmoid_cross_entropy(logits[s[0], pos[s]], labels[s[0], pos[s]]) for s in slots}
    baseline = np.mean(list(rewards.values()))
    reinforce = sum((rewards[s] - baseline) * cross_entropy(gen_logits[s], sampled[s]) for s in slots) / len(slots)
    # loss = gen_weight * REINFORCE + disc_weight * disc_loss; the MLM loss is only reported.
    assert float(out["loss"]) == pytest.approx(reinforce + 50.0 * float(out["disc_loss"]), rel=1e-4)


# ------------------------------------------------------ saving and training
@pytest.mark.parametrize("objective", ["mlm", "all_tokens_mlm"])
def test_model_dir_holds_the_encoder_to_fine_tune(tmp_path, objective):
    from electra_tf.models.model_folder import find_init_files
    from electra_tf.models.saving import load_encoder_weights
    from electra_tf.models import build_encoder

    model = make_model(objective)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"w{i}" for i in range(VOCAB - 5)]) + "\n")
    out_dir = save_pretrained(str(tmp_path / "pretrained"), model, str(vocab))
    files = sorted(p.name for p in (tmp_path / "pretrained").iterdir())
    assert "discriminator.weights.h5" in files and "mlm_head.weights.h5" in files
    assert "discriminator_head.weights.h5" not in files and "discriminator.keras" not in files
    assert ("generator.weights.h5" in files) == (objective != "mlm")
    assert ("copy_head.weights.h5" in files) == (objective == "all_tokens_mlm")
    # Fine-tuning's loader finds and loads the full-size encoder.
    weights, config_path, _ = find_init_files(out_dir, None, None)
    assert weights.endswith("discriminator.weights.h5")
    cfg = ElectraConfig.from_json(config_path)
    encoder = build_encoder(cfg)
    encoder.build({k: (None, SEQ) for k in ("input_ids", "input_mask", "segment_ids")})
    load_encoder_weights(encoder, weights)
    batch = make_batch()
    np.testing.assert_allclose(encoder(batch).numpy(), model.discriminator(batch).numpy(),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ModelDirError, match="no replaced-token head"):
        load_discriminator(out_dir)
    again = load_pretrainer(out_dir)
    np.testing.assert_allclose(forward(again, batch)["loss"].numpy(),
                               forward(model, batch)["loss"].numpy(), rtol=1e-5)


@pytest.mark.large
@pytest.mark.parametrize("objective", ["all_tokens_mlm", "two_stage"])
def test_mirrored_step_equals_single_device_step(objective, mirrored_strategy):
    # Global-batch denominators and counter-based draws: 2 replicas == 1 device,
    # for a copy-mixture loss over all tokens, and across two_stage's switch
    # (step 1 is MLM, step 2 ELECTRA).
    single = make_model(objective, two_stage_mlm_steps=1) if objective == "two_stage" else make_model(objective)
    weights = single.get_weights()
    with mirrored_strategy.scope():
        mirrored = (make_model(objective, two_stage_mlm_steps=1) if objective == "two_stage"
                    else make_model(objective))
    mirrored.set_weights(weights)
    data = tf.data.Dataset.from_tensor_slices(make_batch(rows=16)).repeat().batch(8, drop_remainder=True)
    a = single.fit(data, epochs=2, steps_per_epoch=1, verbose=0, shuffle=False).history
    b = mirrored.fit(data, epochs=2, steps_per_epoch=1, verbose=0, shuffle=False).history
    assert set(a) == set(metric_names(objective))
    for name in ("loss", "mlm_loss"):
        np.testing.assert_allclose(b[name], a[name], rtol=1e-5)
    for x, y in zip(single.get_weights(), mirrored.get_weights()):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)


def test_the_discriminator_loss_sends_no_gradient_into_the_generator():
    # ELECTRA trains the generator by maximum likelihood only: the replaced-token loss
    # reaches the generator's own layers through nothing (the embeddings are shared and
    # do get it). The MLM loss does reach them, so the check sees a gradient that exists.
    model = make_model("electra")
    generator_vars = [v for layer in model.generator.transformer_layers for v in layer.trainable_variables]
    assert generator_vars
    with tf.GradientTape(persistent=True) as tape:
        out = forward(model, make_batch(), training=True)
    from_disc = tape.gradient(out["disc_loss"], generator_vars)
    from_mlm = tape.gradient(out["mlm_loss"], generator_vars)
    assert all(g is None or not np.any(tf.convert_to_tensor(g).numpy()) for g in from_disc)
    assert max(np.abs(tf.convert_to_tensor(g).numpy()).max() for g in from_mlm if g is not None) > 0
