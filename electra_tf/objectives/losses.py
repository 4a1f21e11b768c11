"""ELECTRA's losses, always computed in float32."""

import tensorflow as tf


def masked_lm_loss(logits, target_ids, weights, denominator=None):
    """Cross-entropy of the generator at the masked slots, averaged over used slots.

    Args:
        logits: [B, P, V] generator logits.
        target_ids: [B, P] original ids.
        weights: [B, P], 1 for used slots.
        denominator: optional total weight to divide by (e.g. summed over all
            replicas, so that N replicas reproduce the global-batch mean);
            defaults to this batch's `sum(weights)`.
    """
    per_slot = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(target_ids, tf.int32), logits=tf.cast(logits, tf.float32)
    )
    weights = tf.cast(weights, tf.float32)
    if denominator is None:
        denominator = tf.reduce_sum(weights)
    return tf.reduce_sum(per_slot * weights) / (denominator + 1e-6)


def replaced_token_detection_loss(logits, labels, input_mask, denominator=None):
    """Sigmoid cross-entropy of the discriminator, averaged over all real tokens.

    `denominator` works as in `masked_lm_loss` (default: this batch's real tokens).
    """
    per_token = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32)
    )
    weights = tf.cast(input_mask, tf.float32)
    if denominator is None:
        denominator = tf.reduce_sum(weights)
    return tf.reduce_sum(per_token * weights) / (denominator + 1e-6)


def replaced_labels(discriminator_ids, original_ids, input_mask):
    """1 where the discriminator's input differs from the original token.

    A sampled token equal to the original therefore counts as original.
    """
    differs = tf.not_equal(tf.cast(discriminator_ids, tf.int32), tf.cast(original_ids, tf.int32))
    return tf.cast(differs, tf.int32) * tf.cast(input_mask, tf.int32)


def electra_loss(mlm_loss, disc_loss, gen_weight=1.0, disc_weight=50.0):
    """Total = gen_weight * L_MLM + disc_weight * L_Disc (lambda = 50 in the paper)."""
    return gen_weight * mlm_loss + disc_weight * disc_loss
