"""The step's random streams are independent: masking never shares bits with sampling."""

import numpy as np
import tensorflow as tf

from electra_tf import objectives
from electra_tf.objectives.base import SEED_MASKING, SEED_SAMPLING


def test_sampling_noise_is_not_the_masking_scores():
    # Uniform generator (zero logits) with V == L: had the sampling stream reused
    # the masking scores, slot 0's noise at id v would be position v's score, and
    # the sample would land on a masked position's index almost always.
    batch, length, slots = 512, 64, 9
    ids = tf.fill([batch, length], 7)
    mask = tf.ones([batch, length], tf.int32)
    for config_seed in (0, 1, 5):
        seed = tf.constant([config_seed, 3], tf.int64)
        masked = objectives.mask_tokens(
            ids, mask, max_predictions=slots, mask_prob=0.15, mask_token_id=4,
            never_masked_ids=[2, 3, 4],
            seed=tf.stack([seed[0] * 8 + SEED_MASKING, seed[1]]))
        sampled = objectives.sample_from_logits(
            tf.zeros([batch, slots, length]),
            seed=tf.stack([seed[0] * 8 + SEED_SAMPLING, seed[1]]))
        first = sampled.numpy()[:, 0]
        positions = masked.positions.numpy()
        hit = np.mean([first[b] in set(positions[b]) for b in range(batch)])
        # Independent draws: P(hit) = slots / length = 0.14.
        assert abs(hit - slots / length) < 0.05, (config_seed, hit)
