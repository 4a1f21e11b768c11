"""ELECTRA's losses, always computed in float32."""

import tensorflow as tf


def masked_lm_loss(logits, target_ids, weights):
    """Cross-entropy of the generator at the masked slots, averaged over used slots."""
    per_slot = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(target_ids, tf.int32), logits=tf.cast(logits, tf.float32)
    )
    weights = tf.cast(weights, tf.float32)
    return tf.reduce_sum(per_slot * weights) / (tf.reduce_sum(weights) + 1e-6)


def replaced_token_detection_loss(logits, labels, input_mask):
    """Sigmoid cross-entropy of the discriminator, averaged over all real tokens."""
    per_token = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32)
    )
    weights = tf.cast(input_mask, tf.float32)
    return tf.reduce_sum(per_token * weights) / (tf.reduce_sum(weights) + 1e-6)


def replaced_labels(discriminator_ids, original_ids, input_mask):
    """1 where the discriminator's input differs from the original token.

    A sampled token equal to the original therefore counts as original.
    """
    differs = tf.not_equal(tf.cast(discriminator_ids, tf.int32), tf.cast(original_ids, tf.int32))
    return tf.cast(differs, tf.int32) * tf.cast(input_mask, tf.int32)


def electra_loss(mlm_loss, disc_loss, gen_weight=1.0, disc_weight=50.0):
    """Total = gen_weight * L_MLM + disc_weight * L_Disc (lambda = 50 in the paper)."""
    return gen_weight * mlm_loss + disc_weight * disc_loss
