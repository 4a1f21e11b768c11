"""Sampling replacement tokens from the generator."""

import tensorflow as tf

from electra_tf.objectives.random import row_uniform


def sample_from_logits(logits, *, seed, row_ids=None, temperature: float = 1.0, disallow_ids=None):
    """Draws one id per row of `logits` [..., V] with the Gumbel-max trick.

    argmax(logits / T + Gumbel noise) is an exact sample from softmax(logits / T).
    No gradient flows through the sample (ELECTRA trains the generator by
    maximum likelihood only).

    Args:
        logits: float [B, P, V] generator logits.
        seed: int tensor [2]; with `row_ids` it determines the noise.
        row_ids: int [B] stable example ids (default 0..B-1); see `random.py`.
        temperature: softmax temperature (1.0 in the paper).
        disallow_ids: optional int [B, P]; those ids are never sampled
            (the reference's `disallow_correct` option).
    """
    logits = tf.stop_gradient(tf.cast(logits, tf.float32))
    if disallow_ids is not None:  # -1000 once divided by the temperature below
        logits -= 1000.0 * temperature * tf.one_hot(disallow_ids, tf.shape(logits)[-1],
                                                    dtype=tf.float32)
    if row_ids is None:
        row_ids = tf.range(tf.shape(logits)[0], dtype=tf.int64)
    perturbed = _perturbed_logits(logits, tf.cast(seed, tf.int64), tf.cast(row_ids, tf.int64),
                                  tf.constant(temperature, tf.float32),
                                  tuple(int(d) for d in logits.shape[1:]))
    return tf.argmax(perturbed, axis=-1, output_type=tf.int32)


def gumbel_noise(seed, row_ids, shape):
    """Gumbel(0, 1) noise [B] + shape from the counter-based hash of `random.py`."""
    return -tf.math.log(-tf.math.log(row_uniform(seed, row_ids, shape)))


def perturbed_logits(logits, seed, row_ids, temperature, shape):
    """logits / temperature + Gumbel(0, 1) noise; its argmax is a sample.

    `shape` is logits' static shape without the batch axis (a Python tuple, so
    that each shape gets its own trace).
    """
    return logits / temperature + gumbel_noise(seed, row_ids, shape)


# The noise is one hash per [B, P, V] element (~19M for ELECTRA-Small at batch
# 32): some 15 element-wise ops that TensorFlow runs as 15 passes over a 75 MB
# tensor. XLA fuses them, the temperature and the addition into one pass
# (measured ~3x faster for the whole sampling on the 2-core CPU), even when the
# surrounding step is not compiled; the argmax stays in TensorFlow, whose
# reduction is faster on CPU. The hash is integer arithmetic, so the draws are
# the same as unfused.
_perturbed_logits = tf.function(perturbed_logits, jit_compile=True)
