"""objective=replace_mlm: Replace MLM (the paper's Section 3.2 ablation)."""

import tensorflow as tf

from electra_tf.objectives import masking
from electra_tf.objectives.base import Objective, masked_outputs


class ReplaceMlm(Objective):
    """A masked LM on generator-corrupted input, with no [MASK] token.

    The generator is trained as in ELECTRA; its samples (never [MASK]) fill
    every chosen position, and the full-size network predicts the originals
    there. Loss = gen_weight * L_gen + L_MLM. Subclasses replace `full_size_loss`.
    """

    name = "replace_mlm"
    networks = ("generator", "mlm_head")
    metric_names = ("loss", "mlm_loss", "mlm_accuracy", "gen_loss", "gen_accuracy",
                    "sampled_accuracy")

    def full_size_loss(self, nets, hidden, masked, inputs, model_input_ids, denominators):
        """(loss, logits [B, P, V] at the masked slots for the metrics, extra outputs)."""
        mlm_logits = tf.cast(nets.mlm_head(hidden, mask_positions=masked.positions), tf.float32)
        return self.masked_lm_loss(mlm_logits, masked, denominators), mlm_logits, {}

    def forward(self, nets, inputs, seed, row_ids, *, training, denominators, phase=None):
        cfg, special = self.config, self.special_token_ids
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        masked = self.mask(input_ids, input_mask, seed, row_ids)
        gen_logits, sampled_ids = self.generate(nets, masked, inputs, seed, row_ids, training,
                                                never_sample=special.mask)
        model_input_ids = masking.replace_at_positions(
            input_ids, masked.positions, sampled_ids, masked.weights)
        hidden = self.run_encoder(nets, model_input_ids, inputs, training)
        gen_loss = self.masked_lm_loss(gen_logits, masked, denominators)
        mlm_loss, mlm_logits, out = self.full_size_loss(nets, hidden, masked, inputs,
                                                        model_input_ids, denominators)
        out.update({
            "loss": cfg.gen_weight * gen_loss + mlm_loss,
            "mlm_loss": mlm_loss,
            "gen_loss": gen_loss,
            "mlm_logits": mlm_logits,
            "gen_logits": gen_logits,
            "sampled_ids": sampled_ids,
            "model_input_ids": model_input_ids,
            **masked_outputs(masked, inputs["input_mask"]),
            "sample_weights": masked.weights,
        })
        return out
