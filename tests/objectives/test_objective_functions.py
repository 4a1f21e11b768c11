"""The building blocks of the non-ELECTRA objectives, pinned on hand-made inputs.

BERT's 80/10/10 masking, per-token weights at the masked positions (ELECTRA
15%), the copy mechanism of All-Tokens MLM and the REINFORCE surrogate of
Adversarial ELECTRA.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.objectives import (
    all_tokens_mlm_loss,
    copy_mechanism_log_probs,
    mask_tokens,
    position_weights,
    reinforce_generator_loss,
)

PAD, CLS, SEP, MASK = 7, 3, 9, 5
VOCAB = 200


def _mask(ids, mask, seed, **kw):
    return mask_tokens(ids, mask, max_predictions=6, mask_prob=0.15, mask_token_id=MASK,
                       never_masked_ids=(CLS, SEP, MASK), seed=tf.constant(seed), **kw)


def test_bert_80_10_10_split_over_many_draws():
    row = [CLS] + list(range(100, 138)) + [SEP]  # 40 tokens, 38 candidates -> 6 slots
    ids = tf.constant([row] * 64, tf.int32)
    mask = tf.ones_like(ids)
    became = {"mask": 0, "random": 0, "kept": 0}
    random_ids = []
    for step in range(40):
        out = _mask(ids, mask, (3, step), keep_original_prob=0.1, random_token_prob=0.1,
                    vocab_size=VOCAB)
        w = out.weights.numpy() > 0
        pos = out.positions.numpy()
        at = np.take_along_axis(out.input_ids.numpy(), pos, axis=1)[w]
        orig = out.original_ids.numpy()[w]
        is_mask = at == MASK
        is_kept = at == orig
        # A random draw can hit the original id (p = 1/200) or [MASK]
        # (p = 1/200); both are counted with the class they look like, which
        # shifts the fractions by < 0.001.
        became["mask"] += is_mask.sum()
        became["kept"] += (is_kept & ~is_mask).sum()
        became["random"] += (~is_kept & ~is_mask).sum()
        random_ids.extend(at[~is_kept & ~is_mask].tolist())
        # Positions outside the chosen slots are untouched; the targets are the originals.
        np.testing.assert_array_equal(orig, np.take_along_axis(ids.numpy(), pos, axis=1)[w])
        changed = out.input_ids.numpy() != ids.numpy()
        for r in range(64):
            chosen = np.zeros(40, bool)
            chosen[pos[r][w[r]]] = True
            assert not changed[r][~chosen].any()
    total = sum(became.values())
    assert total == 40 * 64 * 6  # 15,360 draws: std of a 10% fraction ~0.0024
    assert abs(became["mask"] / total - 0.8) < 0.015, became
    assert abs(became["random"] / total - 0.1) < 0.012, became
    assert abs(became["kept"] / total - 0.1) < 0.012, became
    # Random tokens cover the vocabulary uniformly (special ids included, as BERT).
    counts = np.bincount(random_ids, minlength=VOCAB)
    assert len(counts) == VOCAB
    assert (counts > 0).mean() > 0.95
    assert counts[:100].sum() == pytest.approx(counts[100:].sum(), rel=0.15)


def test_zero_random_prob_is_the_electra_mask_exactly():
    row = [CLS] + list(range(100, 130)) + [SEP]
    ids = tf.constant([row] * 8, tf.int32)
    mask = tf.ones_like(ids)
    a = _mask(ids, mask, (4, 2))
    b = _mask(ids, mask, (4, 2), random_token_prob=0.0, vocab_size=VOCAB)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_random_tokens_need_a_vocab_size_and_a_valid_split():
    ids = tf.constant([[CLS, 11, 12, SEP]])
    with pytest.raises(ValueError, match="vocab_size"):
        _mask(ids, tf.ones_like(ids), (0, 0), random_token_prob=0.1)
    with pytest.raises(ValueError, match="exceed 1"):
        _mask(ids, tf.ones_like(ids), (0, 0), keep_original_prob=0.6, random_token_prob=0.5,
              vocab_size=VOCAB)


def test_position_weights_marks_used_positions_only():
    got = position_weights(tf.constant([[3, 1, 0], [2, 0, 0]]), tf.constant([[1.0, 1.0, 0.0],
                                                                             [1.0, 0.0, 0.0]]), 5)
    np.testing.assert_array_equal(got.numpy(), [[0, 1, 0, 1, 0], [0, 0, 1, 0, 0]])


def _log_softmax(z):
    z = np.asarray(z, np.float64)
    return z - np.log(np.exp(z).sum())


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_copy_mechanism_by_hand():
    # One sequence of 3 tokens over a vocabulary of 4.
    z = [[[1.0, 0.0, -1.0, 2.0], [0.5, 0.5, 0.5, 0.5], [3.0, -2.0, 0.0, 1.0]]]
    c = [[2.0, -1.0, 0.0]]
    inputs = [[3, 1, 2]]  # position 0 copied correctly, 1 replaced, 2 replaced
    targets = [[3, 0, 2]]
    got = copy_mechanism_log_probs(tf.constant(z), tf.constant(c), tf.constant(inputs)).numpy()
    for t in range(3):
        d = _sigmoid(c[0][t])
        probs = (1 - d) * np.exp(_log_softmax(z[0][t]))
        probs[inputs[0][t]] += d
        assert probs.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(np.exp(got[0, t]), probs, rtol=1e-5)
    # Loss: mean NLL over the weighted tokens (position 1 left out).
    weights = [[1.0, 0.0, 1.0]]
    loss = all_tokens_mlm_loss(tf.constant(z), tf.constant(c), tf.constant(inputs),
                               tf.constant(targets), tf.constant(weights)).numpy()
    # Position 0: target = input, p = D + (1 - D) softmax[3].
    p0 = _sigmoid(2.0) + (1 - _sigmoid(2.0)) * math.exp(_log_softmax(z[0][0])[3])
    # Position 2: target = input 2 as well, D = 0.5.
    p2 = 0.5 + 0.5 * math.exp(_log_softmax(z[0][2])[2])
    assert loss == pytest.approx(-(math.log(p0) + math.log(p2)) / 2, rel=1e-5)
    # A target the input does not hold gets no copy mass: only (1 - D) softmax.
    alone = all_tokens_mlm_loss(tf.constant(z), tf.constant(c), tf.constant(inputs),
                                tf.constant(targets), tf.constant([[0.0, 1.0, 0.0]])).numpy()
    assert alone == pytest.approx(-(math.log(1 - _sigmoid(-1.0)) + _log_softmax(z[0][1])[0]),
                                  rel=1e-5)
    # With a global denominator the sum is divided by it instead.
    halved = all_tokens_mlm_loss(tf.constant(z), tf.constant(c), tf.constant(inputs),
                                 tf.constant(targets), tf.constant(weights), denominator=4.0)
    assert halved.numpy() == pytest.approx(loss / 2, rel=1e-5)


def test_copy_gate_gradient_pushes_towards_copying_correct_inputs():
    z = tf.zeros([1, 2, 4])
    c = tf.Variable([[0.0, 0.0]])
    with tf.GradientTape() as tape:
        loss = all_tokens_mlm_loss(z, c, tf.constant([[1, 2]]), tf.constant([[1, 3]]),
                                   tf.constant([[1.0, 1.0]]))
    g = tape.gradient(loss, c).numpy()[0]
    assert g[0] < 0  # input is the target: raise D
    assert g[1] > 0  # input is wrong: lower D


def test_reinforce_gradient_by_hand():
    logits = tf.Variable([[[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]])
    sampled = tf.constant([[2, 0]])
    rewards = tf.constant([[3.0, 1.0]])
    weights = tf.constant([[1.0, 1.0]])
    with tf.GradientTape() as tape:
        loss = reinforce_generator_loss(logits, sampled, rewards, weights, baseline=2.0)
    grad = tape.gradient(loss, logits).numpy()[0]
    # d/dz of -(R - b) log softmax(z)[s] / 2 = -(R - b) (onehot(s) - softmax(z)) / 2
    for t, (r, s) in enumerate(((3.0, 2), (1.0, 0))):
        p = np.exp(_log_softmax(logits.numpy()[0, t]))
        want = -(r - 2.0) * (np.eye(3)[s] - p) / 2
        np.testing.assert_allclose(grad[t], want, rtol=1e-5, atol=1e-7)
    # Unused slots contribute nothing.
    with tf.GradientTape() as tape:
        loss = reinforce_generator_loss(logits, sampled, rewards, tf.constant([[1.0, 0.0]]),
                                        baseline=0.0)
    assert np.all(tape.gradient(loss, logits).numpy()[0, 1] == 0)
