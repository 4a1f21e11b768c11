"""objective=electric: ELECTRIC, an energy-based cloze model (Clark et al., EMNLP 2020).

"Pre-Training Transformers as Energy-Based Cloze Models", Section 3: the
full-size network gives every position t an energy E(x)_t (one scalar from the
replaced-token head); it is trained by noise-contrastive estimation against a
noise distribution q, here the small masked-LM generator. A fraction
k/L = mask_prob of the positions holds a noise sample, the rest the data. The
posterior that position t holds noise is

    P(noise | x_t) = k q(x_t | x) / (k q(x_t | x) + n exp(-E(x)_t)),  n = L - k,

i.e. a sigmoid of E(x)_t + log q(x_t | x) + log(mask_prob / (1 - mask_prob)),
with q's gradient stopped; the loss is the binary cross-entropy of that
posterior over every real token. Every chosen position is labelled noise, even
where the sample equals the original (it was drawn from q).
"""

import math

import tensorflow as tf

from electra_tf.objectives import losses, masking
from electra_tf.objectives.base import Objective, replaced_token_outputs


def electric_logits(energies, noise_log_probs, mask_prob):
    """NCE logits of "this token is noise": E + log q + log(k / n).

    Args:
        energies: float [B, L] the model's energies E(x)_t.
        noise_log_probs: float [B, L] log q of the token at each position
            (its gradient is stopped here).
        mask_prob: the share k / L of noise positions.

    Returns float32 [B, L].
    """
    return (tf.cast(energies, tf.float32) + tf.stop_gradient(tf.cast(noise_log_probs, tf.float32))
            + math.log(mask_prob / (1.0 - mask_prob)))


class Electric(Objective):
    """ELECTRIC: energies for every token, NCE against the MLM generator's samples.

    Loss = gen_weight * L_MLM (the generator) + disc_weight * L_NCE. The noise
    log-probabilities come from the generator run once on the masked input,
    with its softmax evaluated at every position (at the masked positions a
    true cloze distribution; elsewhere the generator sees the token itself).
    """

    name = "electric"
    networks = ("generator", "discriminator_head")
    generator_on_every_position = True  # the noise log-probabilities of every token

    def forward(self, nets, inputs, seed, row_ids, *, training, denominators, phase=None):
        cfg = self.config
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        masked = self.mask(input_ids, input_mask, seed, row_ids)
        seq_len = input_ids.shape[1]
        every = tf.broadcast_to(tf.range(seq_len, dtype=tf.int32), tf.shape(input_ids))
        all_logits = self.run_generator(nets, masked, inputs, training, positions=every)
        mlm_logits = tf.gather(all_logits, masked.positions, batch_dims=1)
        sampled_ids = self.sample(mlm_logits, masked, seed, row_ids)
        disc_input_ids = masking.replace_at_positions(
            masked.input_ids, masked.positions, sampled_ids, masked.weights)
        # Noise is where a sample was placed, whatever token it is.
        labels = tf.cast(masking.position_weights(masked.positions, masked.weights, seq_len),
                         tf.int32)
        # log q(token seen | context) at every position: one logsumexp per
        # position and a gather, no [B, L, V] log-softmax kept.
        noise_log_probs = (tf.gather(all_logits, disc_input_ids, batch_dims=2)
                           - tf.reduce_logsumexp(all_logits, axis=-1))
        energies = tf.cast(nets.discriminator_head(
            self.run_encoder(nets, disc_input_ids, inputs, training)), tf.float32)
        disc_logits = electric_logits(energies, noise_log_probs, cfg.mask_prob)
        disc_weights = tf.cast(input_mask, tf.float32)
        disc_loss = losses.replaced_token_detection_loss(
            disc_logits, labels, disc_weights, denominator=denominators[1])
        mlm_loss = self.masked_lm_loss(mlm_logits, masked, denominators)
        total = losses.electra_loss(mlm_loss, disc_loss, cfg.gen_weight, cfg.disc_weight)
        return replaced_token_outputs(
            masked, input_mask, total=total, mlm_loss=mlm_loss, disc_loss=disc_loss,
            mlm_logits=mlm_logits, sampled_ids=sampled_ids, disc_input_ids=disc_input_ids,
            labels=labels, disc_logits=disc_logits, disc_weights=disc_weights,
            energies=energies, noise_log_probs=noise_log_probs)
