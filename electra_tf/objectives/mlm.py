"""objective=mlm: BERT's masked language model (the paper's BERT baseline)."""

import tensorflow as tf

from electra_tf.objectives.base import Objective, masked_outputs


class Mlm(Objective):
    """The full-size network predicts the 80/10/10-corrupted positions; no generator."""

    name = "mlm"
    networks = ("mlm_head",)
    metric_names = ("loss", "mlm_loss", "mlm_accuracy")

    def forward(self, nets, inputs, seed, row_ids, *, training, denominators, phase=None):
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        masked = self.mask(input_ids, input_mask, seed, row_ids, bert=True)
        hidden = self.run_encoder(nets, masked.input_ids, inputs, training)
        mlm_logits = tf.cast(nets.mlm_head(hidden, mask_positions=masked.positions), tf.float32)
        mlm_loss = self.masked_lm_loss(mlm_logits, masked, denominators)
        return {
            **masked_outputs(masked, input_mask),
            "loss": mlm_loss,
            "mlm_loss": mlm_loss,
            "mlm_logits": mlm_logits,
        }
