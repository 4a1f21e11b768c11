"""objective=all_tokens_mlm: All-Tokens MLM (the paper's Section 3.2 ablation)."""

import tensorflow as tf

from electra_tf.objectives import losses
from electra_tf.objectives.replace_mlm import ReplaceMlm


class AllTokensMlm(ReplaceMlm):
    """Replace MLM that predicts every token through a copy mechanism.

    The full-size network's output is D * onehot(input) + (1 - D) * softmax,
    D = sigmoid(copy gate), and its loss covers every real token
    (`losses.all_tokens_mlm_loss`).
    """

    name = "all_tokens_mlm"
    networks = ("generator", "mlm_head", "copy_head")
    mlm_head_on_every_position = True

    def full_size_loss(self, nets, hidden, masked, inputs, model_input_ids, denominators):
        input_ids = inputs["input_ids"]
        seq_len = input_ids.shape[1]
        every = tf.broadcast_to(tf.range(seq_len, dtype=tf.int32), tf.shape(input_ids))
        all_logits = tf.cast(nets.mlm_head(hidden, mask_positions=every), tf.float32)
        copy_logits = nets.copy_head(hidden)
        mlm_loss = losses.all_tokens_mlm_loss(
            all_logits, copy_logits, model_input_ids, input_ids, inputs["input_mask"],
            denominator=denominators[1])
        # For the metrics: the mixture's log-probabilities at the masked positions.
        mlm_logits = losses.copy_mechanism_log_probs(
            tf.gather(all_logits, masked.positions, batch_dims=1),
            tf.gather(copy_logits, masked.positions, batch_dims=1),
            tf.gather(model_input_ids, masked.positions, batch_dims=1))
        return mlm_loss, mlm_logits, {"copy_logits": copy_logits}
