"""The replaced-token objectives' `forward`, wired end to end on hand-made samples.

The generator's samples are fixed (the objective's sampler replaced by a known
table, or the real sampler forced by a large output bias) so that one masked
slot receives its own original token. Every objective with a discriminator is
then checked against numpy: what the discriminator reads, its labels, which
tokens its loss covers and what that loss is divided by, and the total with the
config's weights (lambda = 50 in the paper).
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from helpers import (CLS, MASK, SEP, PRETRAIN_VOCAB_SIZE, cross_entropy, pretrain_batch, pretrain_forward,
                     pretrain_model, sigmoid_cross_entropy)

STEP = 3
FORCED = 7  # the token the forced sampler writes at every slot


def _fixed_sampler(same_slot):
    """A sampler: at slot `same_slot` = (row, slot) the original token, elsewhere another one."""

    def sample(logits, masked, seed, row_ids, never_sample=None):
        original = tf.cast(masked.original_ids, tf.int32)
        b, p = tf.shape(original)[0], tf.shape(original)[1]
        index = tf.range(b)[:, None] * p + tf.range(p)[None, :]
        # A different regular token (5..59) at every other slot.
        other = 5 + (original - 5 + 1 + index % 50) % (PRETRAIN_VOCAB_SIZE - 5)
        here = tf.logical_and(tf.equal(tf.range(b)[:, None], same_slot[0]),
                              tf.equal(tf.range(p)[None, :], same_slot[1]))
        return tf.where(here, original, other)

    return sample


def _model(objective, **kw):
    model = pretrain_model(objective, **kw)
    # Trained-looking discriminator outputs: replaced and original tokens then
    # have clearly different losses (near 0 every token costs ~log 2).
    model.discriminator_head.dense_prediction.bias.assign([1.5])
    # A generator whose log-probabilities differ from token to token.
    rng = np.random.default_rng(0)
    model.generator_head.bias.assign(rng.normal(0, 2, PRETRAIN_VOCAB_SIZE).astype(np.float32))
    return model


def _run(model, batch, phase):
    kw = {} if phase is None else {"phase": phase}
    return pretrain_forward(model, batch, STEP, **kw)


def _expected_counts(ids, mask, cfg):
    """ELECTRA's masking count per row: max(1, min(P, round(0.25 * real))), capped by candidates."""
    real = mask.sum(1)
    want = np.maximum(1, np.minimum(cfg.predictions_per_seq, np.round(real * cfg.mask_prob)))
    candidates = (mask > 0) & ~np.isin(ids, [CLS, SEP, MASK])
    return np.minimum(want, candidates.sum(1)).astype(int)


PARAMS = [
    ("electra", {}, None),
    ("electra", {"gen_weight": 1.5, "disc_weight": 20.0}, None),
    ("electra", {"embedding_sharing": "gdes"}, None),
    ("electra", {"embedding_sharing": "none"}, None),
    ("electra_15", {}, None),
    ("adversarial", {}, None),
    ("electric", {}, None),
    ("two_stage", {}, False),  # the ELECTRA phase
]


@pytest.mark.parametrize("objective,changes,phase", PARAMS,
                         ids=[f"{o}-{'-'.join(f'{k}={v}' for k, v in c.items()) or 'default'}"
                              for o, c, _ in PARAMS])
def test_forward_by_hand(objective, changes, phase):
    model = _model(objective, **changes)
    cfg = model.config
    batch = pretrain_batch(rows=6, seed=1)
    ids, mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
    real = mask > 0

    # Slot 1 of row 2 samples its own original token; every other slot another token.
    objective_object = model.objective.second if objective == "two_stage" else model.objective
    objective_object.sample = _fixed_sampler((2, 1))
    out = _run(model, batch, phase)
    pos, w = out["masked_positions"].numpy(), out["masked_weights"].numpy()
    used = w > 0
    n_used, n_real = int(used.sum()), int(real.sum())
    np.testing.assert_array_equal(used.sum(1), _expected_counts(ids, mask, cfg))
    assert used[2, 1]
    rows = np.arange(len(ids))[:, None]
    chosen = np.zeros_like(ids, bool)
    chosen[np.broadcast_to(rows, pos.shape)[used], pos[used]] = True
    assert not chosen[:, 0].any() and not chosen[~real].any()

    # The generator reads the [MASK]ed input: ELECTRA's 85/15 (no random tokens).
    masked_in = out["masked_input_ids"].numpy()
    np.testing.assert_array_equal(masked_in[~chosen], ids[~chosen])
    assert np.all((masked_in[chosen] == MASK) | (masked_in[chosen] == ids[chosen]))
    assert (masked_in[chosen] == MASK).any()
    inputs = {"input_ids": out["masked_input_ids"], "input_mask": batch["input_mask"],
              "segment_ids": batch["segment_ids"]}
    gen_logits = model.generator_head(model.generator(inputs), mask_positions=pos).numpy()
    np.testing.assert_allclose(out["mlm_logits"].numpy(), gen_logits, rtol=1e-4, atol=1e-4)

    # The discriminator's input: the samples at the masked slots, the original elsewhere.
    samples = out["sampled_ids"].numpy()
    assert samples[2, 1] == ids[2, pos[2, 1]]
    disc_in = out["disc_input_ids"].numpy()
    np.testing.assert_array_equal(disc_in[~chosen], ids[~chosen])
    np.testing.assert_array_equal(np.take_along_axis(disc_in, pos, 1)[used], samples[used])

    labels = out["disc_labels"].numpy()
    if objective == "electric":
        # NCE: every position that holds a generator sample is noise, even one
        # equal to the original.
        np.testing.assert_array_equal(labels, chosen.astype(int))
        assert labels[2, pos[2, 1]] == 1
    else:
        np.testing.assert_array_equal(labels, ((disc_in != ids) & real).astype(int))
        assert labels[2, pos[2, 1]] == 0
        assert labels.sum() == n_used - 1

    # The discriminator's logits come from the full-size network on disc_input_ids.
    disc_inputs = {"input_ids": out["disc_input_ids"], "input_mask": batch["input_mask"],
                   "segment_ids": batch["segment_ids"]}
    energies = model.discriminator_head(model.discriminator(disc_inputs)).numpy().astype(np.float64)
    logits = out["disc_logits"].numpy().astype(np.float64)
    if objective == "electric":
        every = np.broadcast_to(np.arange(ids.shape[1]), ids.shape).astype(np.int32)
        z = model.generator_head(model.generator(inputs), mask_positions=every).numpy().astype(np.float64)
        log_q = (np.take_along_axis(z, disc_in[..., None], -1)[..., 0]
                 - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) - z.max(-1))
        np.testing.assert_allclose(logits, energies + log_q + math.log(cfg.mask_prob / (1 - cfg.mask_prob)),
                                   rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_allclose(logits, energies, rtol=1e-4, atol=1e-5)

    # Losses: the generator's over the masked slots / their count; the
    # discriminator's over the real tokens / their count (electra_15: the
    # masked positions / their count).
    mlm_logits = out["mlm_logits"].numpy()
    original = np.take_along_axis(ids, pos, 1)
    mlm = sum(cross_entropy(mlm_logits[b, p], original[b, p]) for b, p in zip(*np.nonzero(used))) / n_used
    assert float(out["mlm_loss"]) == pytest.approx(mlm, rel=1e-5)
    per_token = np.vectorize(sigmoid_cross_entropy)(logits, labels)
    if objective == "electra_15":
        disc = per_token[chosen].sum() / n_used
        np.testing.assert_array_equal(out["disc_weights"].numpy(), chosen.astype(np.float32))
    else:
        disc = per_token[real].sum() / n_real
        np.testing.assert_array_equal(out["disc_weights"].numpy(), real.astype(np.float32))
    assert float(out["disc_loss"]) == pytest.approx(disc, rel=1e-5)

    if objective == "adversarial":
        # REINFORCE: reward = the discriminator's loss at each sampled slot,
        # baseline = the batch's mean reward; normalised by the masked count.
        rewards = np.take_along_axis(per_token, pos, 1)
        baseline = rewards[used].mean()
        z = mlm_logits.astype(np.float64)
        log_p = np.take_along_axis(z, samples[..., None], -1)[..., 0] - np.log(np.exp(z).sum(-1))
        gen = -((rewards - baseline) * log_p)[used].sum() / n_used
        assert abs(gen - mlm) > 0.1  # the total holds the REINFORCE term, not the MLM loss
    else:
        gen = mlm
    assert cfg.disc_weight == changes.get("disc_weight", 50.0)
    assert cfg.gen_weight == changes.get("gen_weight", 1.0)
    assert float(out["loss"]) == pytest.approx(cfg.gen_weight * gen + cfg.disc_weight * disc, rel=1e-5)


def test_the_real_sampler_forced_by_a_large_output_bias():
    """Without replacing the sampler: a bias of 60 on one token makes every sample that token.

    The one masked slot whose original is that token is labelled original (0),
    every other masked slot replaced (1), and the losses follow numpy.
    """
    model = _model("electra")
    cfg = model.config
    batch = pretrain_batch(rows=6, seed=2)
    ids = batch["input_ids"].numpy()
    ids[ids == FORCED] = FORCED + 1  # FORCED appears nowhere in the input ...
    batch["input_ids"] = tf.constant(ids)
    bias = np.zeros(PRETRAIN_VOCAB_SIZE, np.float32)
    bias[FORCED] = 60.0
    model.generator_head.bias.assign(bias)
    first = pretrain_forward(model, batch, STEP)
    pos, w = first["masked_positions"].numpy(), first["masked_weights"].numpy()
    assert w[1, 0] > 0
    ids[1, pos[1, 0]] = FORCED  # ... but at one masked position (a regular token: same draws)
    batch["input_ids"] = tf.constant(ids)
    out = pretrain_forward(model, batch, STEP)
    np.testing.assert_array_equal(out["masked_positions"].numpy(), pos)

    mask = batch["input_mask"].numpy()
    used = w > 0
    samples, disc_in = out["sampled_ids"].numpy(), out["disc_input_ids"].numpy()
    assert np.all(samples[used] == FORCED)
    chosen = np.zeros_like(ids, bool)
    chosen[np.broadcast_to(np.arange(len(ids))[:, None], pos.shape)[used], pos[used]] = True
    np.testing.assert_array_equal(disc_in, np.where(chosen, FORCED, ids))
    labels = out["disc_labels"].numpy()
    np.testing.assert_array_equal(labels, ((disc_in != ids) & (mask > 0)).astype(int))
    assert labels[1, pos[1, 0]] == 0 and labels.sum() == used.sum() - 1

    logits = out["disc_logits"].numpy()
    disc = np.vectorize(sigmoid_cross_entropy)(logits, labels)[mask > 0].mean()
    assert float(out["disc_loss"]) == pytest.approx(disc, rel=1e-5)
    mlm_logits = out["mlm_logits"].numpy()
    mlm = np.mean([cross_entropy(mlm_logits[b, p], ids[b, pos[b, p]]) for b, p in zip(*np.nonzero(used))])
    assert float(out["mlm_loss"]) == pytest.approx(mlm, rel=1e-5)
    assert float(out["loss"]) == pytest.approx(mlm + 50.0 * disc, rel=1e-5)


@pytest.mark.parametrize("objective,bert,want", [
    ("electra", False, {"mask": 0.85, "random": 0.0, "kept": 0.15}),  # ELECTRA's reference: 85/15
    ("mlm", True, {"mask": 0.8, "random": 0.1, "kept": 0.1}),  # BERT: 80/10/10
])
def test_the_objectives_corrupt_the_chosen_positions_as_the_papers_say(objective, bert, want):
    """`Objective.mask` (what every objective's forward calls) with the config's defaults."""
    from electra_tf.config import ElectraConfig

    model = pretrain_model(objective)
    defaults = ElectraConfig()
    assert (defaults.mask_prob, defaults.mask_token_keep_prob) == (0.15, 0.15)
    batch = pretrain_batch(rows=256, seed=5)
    ids, mask = batch["input_ids"], batch["input_mask"]
    counts = {"mask": 0, "random": 0, "kept": 0}
    for step in range(3):
        seed = tf.constant([0, step], tf.int64)
        masked = model.objective.mask(ids, mask, seed, tf.range(256, dtype=tf.int64), bert=bert)
        used = masked.weights.numpy() > 0
        seen = np.take_along_axis(masked.input_ids.numpy(), masked.positions.numpy(), 1)[used]
        original = masked.original_ids.numpy()[used]
        counts["mask"] += int((seen == MASK).sum())
        counts["kept"] += int(((seen == original) & (seen != MASK)).sum())
        counts["random"] += int(((seen != original) & (seen != MASK)).sum())
    total = sum(counts.values())  # ~3,000 slots: the standard error of a 15% share is ~0.007
    assert total > 2500
    # A random token equal to the original (1 in 60) counts as kept.
    assert abs(counts["random"] / total - want["random"] * 59 / 60) < 0.03, counts
    assert abs(counts["kept"] / total - (want["kept"] + want["random"] / 60)) < 0.03, counts
    assert abs(counts["mask"] / total - want["mask"]) < 0.03, counts


def test_the_loss_normalisers_count_the_positions_actually_masked():
    """A row with fewer candidates than its count (here [MASK]s already in the input, never
    chosen) masks fewer positions; the masked-LM loss is divided by what was masked."""
    model = _model("electra")
    batch = pretrain_batch(rows=4, seed=7)
    ids = batch["input_ids"].numpy()
    ids[0, :] = 0
    ids[0, :8] = [CLS, 9, MASK, MASK, MASK, MASK, MASK, SEP]  # 8 real tokens -> count 2, 1 candidate
    batch = {"input_ids": tf.constant(ids), "input_mask": tf.constant((ids > 0).astype(np.int32)),
             "segment_ids": batch["segment_ids"]}
    out = pretrain_forward(model, batch, STEP)
    used = out["masked_weights"].numpy() > 0
    assert used[0].sum() == 1
    mask = batch["input_mask"].numpy()
    np.testing.assert_array_equal(_expected_counts(ids, mask, model.config), used.sum(1))
    denominators = model.objective.denominators(batch["input_ids"], batch["input_mask"]).numpy()
    np.testing.assert_array_equal(denominators, [used.sum(), mask.sum()])
    logits, pos = out["mlm_logits"].numpy(), out["masked_positions"].numpy()
    mlm = np.mean([cross_entropy(logits[b, p], ids[b, pos[b, p]]) for b, p in zip(*np.nonzero(used))])
    assert float(out["mlm_loss"]) == pytest.approx(mlm, rel=1e-5)


def test_the_label_rule_is_zero_on_padding_whatever_the_ids():
    from electra_tf.objectives import losses

    disc_in = tf.constant([[2, 9, 8, 3, 7, 7]])
    original = tf.constant([[2, 9, 5, 3, 0, 0]])
    mask = tf.constant([[1, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(losses.replaced_labels(disc_in, original, mask).numpy(), [[0, 0, 1, 0, 0, 0]])
