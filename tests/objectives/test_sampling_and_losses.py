"""Generator sampling, the replaced-token label rule and the joint loss."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.objectives import (
    electra_loss,
    masked_lm_loss,
    replaced_labels,
    replaced_token_detection_loss,
    sample_from_logits,
)


def _empirical(logits, temperature=1.0, draws=20000, disallow=None):
    """Frequencies of sampled ids for one row of logits, from many example ids."""
    v = len(logits)
    batch = tf.constant(np.tile(np.asarray(logits, np.float32), (draws, 1, 1)))
    ids = sample_from_logits(
        batch, seed=tf.constant([5, 9]), row_ids=tf.range(draws, dtype=tf.int64),
        temperature=temperature,
        disallow_ids=None if disallow is None else tf.fill([draws, 1], disallow),
    ).numpy()[:, 0]
    return np.bincount(ids, minlength=v) / draws


def test_samples_follow_softmax():
    logits = [2.0, 1.0, 0.0, -1.0, 0.5]
    p = tf.nn.softmax(logits).numpy()
    freq = _empirical(logits)
    # 20k draws: std of each frequency <= 0.0036
    np.testing.assert_allclose(freq, p, atol=0.012)


def test_temperature_sharpens():
    logits = np.array([2.0, 1.0, 0.0, -1.0, 0.5])
    freq = _empirical(logits, temperature=0.5)
    np.testing.assert_allclose(freq, tf.nn.softmax(logits / 0.5).numpy(), atol=0.012)


def test_disallow_correct_never_samples_original():
    freq = _empirical([5.0, 0.0, 0.0], disallow=0, draws=3000)
    assert freq[0] == 0.0
    np.testing.assert_allclose(freq[1:], [0.5, 0.5], atol=0.04)


def _gradient_to_logits(sampler):
    """d(sum of the sampled tokens' embeddings . w) / d(logits): what a discriminator loss
    downstream of the sample would send back into the generator's logits."""
    logits = tf.Variable(tf.random.stateless_normal([2, 3, 5], seed=[1, 2]))
    table = tf.random.stateless_normal([5, 4], seed=[3, 4])
    with tf.GradientTape() as tape:
        one_hot = sampler(logits)
        loss = tf.reduce_sum(tf.einsum("bpv,vd->bpd", one_hot, table) * 0.5)
    return tape.gradient(loss, logits)


def test_no_gradient_through_sampling():
    ours = _gradient_to_logits(
        lambda logits: tf.one_hot(sample_from_logits(logits, seed=tf.constant([0, 0])), 5))
    assert ours is None or not np.any(tf.convert_to_tensor(ours).numpy())
    # The same check on a sampler that lets the gradient through (straight-through
    # Gumbel-softmax) sees it: the check can fail.
    def straight_through(logits):
        soft = tf.nn.softmax(logits)
        hard = tf.one_hot(tf.argmax(logits, -1), 5)
        return hard + soft - tf.stop_gradient(soft)
    leaky = _gradient_to_logits(straight_through)
    assert leaky is not None and np.abs(tf.convert_to_tensor(leaky).numpy()).max() > 1e-3


def test_sample_equal_to_original_is_labelled_original():
    original = tf.constant([[2, 10, 11, 12, 3, 0]])
    mask = tf.constant([[1, 1, 1, 1, 1, 0]])
    # Positions 1 and 3 were chosen; the sample at 1 equals the original.
    disc_input = tf.constant([[2, 10, 11, 40, 3, 0]])
    np.testing.assert_array_equal(replaced_labels(disc_input, original, mask).numpy(),
                                  [[0, 0, 0, 1, 0, 0]])


def test_mlm_loss_from_known_logits():
    logits = tf.constant([[[0.0, 0.0, 0.0, 0.0], [3.0, 1.0, 0.0, 0.0], [9.0, 9.0, 9.0, 9.0]]])
    targets = tf.constant([[2, 0, 1]])
    weights = tf.constant([[1.0, 1.0, 0.0]])  # third slot unused
    expected = (np.log(4.0) + (np.log(np.exp(3) + np.exp(1) + 2) - 3.0)) / 2
    np.testing.assert_allclose(masked_lm_loss(logits, targets, weights).numpy(), expected, rtol=1e-5)


def test_disc_loss_over_non_pad_tokens_and_total_is_1_mlm_plus_50_disc():
    logits = tf.constant([[2.0, -1.0, 0.0, 7.0]])
    labels = tf.constant([[1, 0, 1, 1]])
    mask = tf.constant([[1, 1, 1, 0]])  # the last token is padding and is ignored

    def bce(z, y):
        return -(y * np.log(1 / (1 + np.exp(-z))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-z))))

    expected_disc = (bce(2.0, 1) + bce(-1.0, 0) + bce(0.0, 1)) / 3
    disc = replaced_token_detection_loss(logits, labels, mask)
    np.testing.assert_allclose(disc.numpy(), expected_disc, rtol=1e-5)
    mlm = tf.constant(2.5)
    np.testing.assert_allclose(electra_loss(mlm, disc).numpy(), 2.5 + 50.0 * expected_disc, rtol=1e-6)


def test_sparse_softmax_cross_entropy_matches_tensorflow_in_value_and_gradient():
    from electra_tf.objectives.losses import sparse_softmax_cross_entropy
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(0, 4, (2, 3, 11)).astype(np.float32))
    labels = tf.constant(rng.integers(0, 11, (2, 3)).astype(np.int32))
    upstream = tf.constant(rng.normal(0, 1, (2, 3)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = sparse_softmax_cross_entropy(logits, labels)
        ref = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        ours_sum, ref_sum = tf.reduce_sum(ours * upstream), tf.reduce_sum(ref * upstream)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(ours_sum, logits).numpy(),
                               tape.gradient(ref_sum, logits).numpy(), atol=1e-6)
    # By hand: uniform logits over 4 classes -> log 4; gradient 1/4 - one-hot.
    flat = tf.zeros([1, 4])
    with tf.GradientTape() as tape:
        tape.watch(flat)
        loss = sparse_softmax_cross_entropy(flat, tf.constant([2]))
    assert loss.numpy()[0] == pytest.approx(np.log(4.0), rel=1e-6)
    np.testing.assert_allclose(tape.gradient(loss, flat).numpy(), [[0.25, 0.25, -0.75, 0.25]])
