"""What every fine-tuning model (classifier, tagger, SQuAD) does with its inputs and its loss
before its head: the encoder's three inputs picked from the batch, and the loss scaled per replica."""

from __future__ import annotations

import tensorflow as tf

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")


def encoder_inputs(inputs):
    """The encoder's inputs out of a batch that may also carry labels or gold positions."""
    return {k: inputs[k] for k in ENCODER_INPUTS}


def per_replica_loss(loss):
    """Divides by the replica count, as Keras' own losses do under tf.distribute
    (gradients are summed across replicas)."""
    n = tf.distribute.get_strategy().num_replicas_in_sync
    return loss / n if n > 1 else loss
