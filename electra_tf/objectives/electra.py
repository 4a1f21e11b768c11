"""objective=electra: ELECTRA's replaced-token detection (Clark et al., ICLR 2020)."""

import tensorflow as tf

from electra_tf.objectives import losses, masking
from electra_tf.objectives.base import Objective, replaced_token_outputs


class Electra(Objective):
    """Generator (masked LM) + discriminator telling, for every token, whether it was replaced.

    Loss = gen_weight * L_MLM + disc_weight * L_Disc. Subclasses change which
    tokens the discriminator learns from (`discriminator_weights`) or what the
    generator minimises (`generator_loss`).
    """

    name = "electra"
    networks = ("generator", "discriminator_head")

    def discriminator_weights(self, masked, input_mask, denominators):
        """(per-token weights [B, L], normaliser) of the discriminator loss: every real token."""
        return tf.cast(input_mask, tf.float32), denominators[1]

    def generator_loss(self, mlm_loss, **_):
        """What the generator minimises: its masked-LM loss."""
        return mlm_loss

    def forward(self, nets, inputs, seed, row_ids, *, training, denominators, phase=None):
        cfg = self.config
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        masked = self.mask(input_ids, input_mask, seed, row_ids)
        mlm_logits, sampled_ids = self.generate(nets, masked, inputs, seed, row_ids, training)
        # Every chosen position, [MASK]ed or kept, receives the generator's sample.
        disc_input_ids = masking.replace_at_positions(
            masked.input_ids, masked.positions, sampled_ids, masked.weights)
        labels = losses.replaced_labels(disc_input_ids, input_ids, input_mask)
        disc_logits = nets.discriminator_head(self.run_encoder(nets, disc_input_ids, inputs,
                                                               training))
        mlm_loss = self.masked_lm_loss(mlm_logits, masked, denominators)
        disc_weights, disc_denominator = self.discriminator_weights(masked, input_mask,
                                                                    denominators)
        disc_loss = losses.replaced_token_detection_loss(
            disc_logits, labels, disc_weights, denominator=disc_denominator)
        generator_loss = self.generator_loss(
            mlm_loss, mlm_logits=mlm_logits, sampled_ids=sampled_ids, masked=masked,
            labels=labels, disc_logits=disc_logits, denominators=denominators)
        total = losses.electra_loss(generator_loss, disc_loss, cfg.gen_weight, cfg.disc_weight)
        return replaced_token_outputs(
            masked, input_mask, total=total, mlm_loss=mlm_loss, disc_loss=disc_loss,
            mlm_logits=mlm_logits, sampled_ids=sampled_ids, disc_input_ids=disc_input_ids,
            labels=labels, disc_logits=disc_logits, disc_weights=disc_weights)
