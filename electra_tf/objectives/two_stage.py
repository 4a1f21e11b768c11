"""objective=two_stage: BERT's MLM first, then ELECTRA (the paper's Section 3.2 ablation)."""

import tensorflow as tf

from electra_tf.objectives.base import Objective
from electra_tf.objectives.electra import Electra
from electra_tf.objectives.mlm import Mlm


class TwoStage(Objective):
    """`mlm` before step `two_stage_mlm_steps`, `electra` from then on.

    Both phases train the same full-size encoder (`discriminator`), so the
    ELECTRA phase starts from the MLM-trained weights. Outputs have the
    ELECTRA keys in both phases; in the MLM phase the generator and
    discriminator fields are zeros with zero metric weights, `mlm_*` are the
    full-size network's and `disc_loss` is 0 (`disc_active` 0).
    """

    name = "two_stage"
    networks = ("generator", "discriminator_head", "mlm_head")

    def __init__(self, config, special_token_ids):
        super().__init__(config, special_token_ids)
        self.first = Mlm(config, special_token_ids)
        self.second = Electra(config, special_token_ids)

    @classmethod
    def trained_at(cls, config, step):
        if step is None:
            raise ValueError("objective two_stage costs differ by phase; pass step= (0-based) or "
                             "use total_train_flops for a whole run")
        return "mlm" if step < config.two_stage_mlm_steps else "electra"

    @classmethod
    def phase_steps(cls, config, train_steps):
        first = min(train_steps, config.two_stage_mlm_steps)
        return [(0, first), (config.two_stage_mlm_steps, train_steps - first)]

    def phase(self, step):
        """True (the MLM phase) while the 0-based step is below `two_stage_mlm_steps`."""
        return tf.less(tf.cast(step, tf.int64), self.config.two_stage_mlm_steps)

    def forward(self, nets, inputs, seed, row_ids, *, training, denominators, phase=None):
        cfg = self.config
        input_ids = inputs["input_ids"]

        def mlm_branch():
            out = self.first.forward(nets, inputs, seed, row_ids, training=training,
                                     denominators=denominators)
            batch = tf.shape(input_ids)[0]
            seq_len, predictions = input_ids.shape[1], cfg.predictions_per_seq
            out.update({
                "disc_loss": tf.zeros([], tf.float32),
                "sampled_ids": tf.zeros([batch, predictions], tf.int32),
                "disc_input_ids": out["masked_input_ids"],
                "disc_labels": tf.zeros([batch, seq_len], tf.int32),
                "disc_logits": tf.zeros([batch, seq_len], tf.float32),
                "sample_weights": tf.zeros([batch, predictions], tf.float32),
                "disc_weights": tf.zeros([batch, seq_len], tf.float32),
                "disc_active": tf.zeros([], tf.float32),
            })
            return out

        def electra_branch():
            out = self.second.forward(nets, inputs, seed, row_ids, training=training,
                                      denominators=denominators)
            out["disc_active"] = tf.ones([], tf.float32)
            return out

        if phase is None:
            raise ValueError("objective two_stage needs the phase (the trainer passes "
                             "phase=objective.phase(step))")
        if isinstance(phase, bool):  # the phase is known (the trainer's tf.cond branch)
            return mlm_branch() if phase else electra_branch()
        return tf.cond(phase, mlm_branch, electra_branch)
