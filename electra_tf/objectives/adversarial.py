"""objective=adversarial: Adversarial ELECTRA (the paper's Appendix F)."""

import tensorflow as tf

from electra_tf.objectives import losses
from electra_tf.objectives.base import sum_over_replicas
from electra_tf.objectives.electra import Electra


class Adversarial(Electra):
    """ELECTRA whose generator maximises the discriminator's loss on its samples.

    The generator is trained with REINFORCE (reward: the discriminator's
    per-token loss at each sampled slot, minus the batch's mean reward as
    baseline); its masked-LM loss is only reported.
    """

    name = "adversarial"

    def generator_loss(self, mlm_loss, *, mlm_logits, sampled_ids, masked, labels, disc_logits,
                       denominators):
        per_token = tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.float32), logits=tf.cast(disc_logits, tf.float32))
        rewards = tf.gather(per_token, masked.positions, batch_dims=1)
        # The baseline is the mean reward of the batch this forward sees (summed
        # over replicas, so N replicas match one device). Under gradient
        # accumulation that is the micro-batch's mean: still a constant per
        # slot, so the REINFORCE gradient stays unbiased.
        totals = sum_over_replicas(tf.stack([tf.reduce_sum(rewards * masked.weights),
                                             tf.reduce_sum(masked.weights)]))
        baseline = totals[0] / (totals[1] + 1e-6)
        return losses.reinforce_generator_loss(
            mlm_logits, sampled_ids, rewards, masked.weights, baseline,
            denominator=denominators[0])
