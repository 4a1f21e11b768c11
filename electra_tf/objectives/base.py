"""The interface every pre-training objective implements, and the steps they share.

An objective says which networks it needs and computes, for one batch, its
losses and the inputs of the metrics. The pre-trainer
(`electra_tf.pretrain.pretrainer.ElectraPretrainer`) builds the networks,
runs the optimisation (gradients, accumulation, distribution) and the
metrics; it never looks at the objective's name.

Adding an objective: a module with an `Objective` subclass in this package and
one line in `registry.py` (plus its name in `electra_tf.config.OBJECTIVES`,
which validates configs without importing the networks).
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from electra_tf.objectives import losses, masking, sampling

# Offsets folded into the first seed word so every random draw of a step gets
# its own stream.
# mask_tokens derives its streams from its seed word m as 2m, 2m + 1 and
# -(2m + 1), i.e. 16s + 2, 16s + 3 for m = 8s + 1; the sampling word 8s + 4 is
# 4 mod 8 and never equals one of them (8s + 2 did, for s = 0: the Gumbel noise
# of slot 0 repeated the masking scores).
SEED_MASKING, SEED_SAMPLING = 1, 4
# BERT's corruption of the chosen positions (objective mlm): 80% [MASK],
# 10% a random token, 10% kept.
BERT_KEEP_PROB, BERT_RANDOM_PROB = 0.1, 0.1

# The metrics a pre-training run can report, in the order `fit` lists them.
METRIC_NAMES = (
    "loss", "mlm_loss", "mlm_accuracy", "sampled_accuracy", "disc_loss",
    "disc_auc", "disc_accuracy", "disc_precision", "disc_recall",
)
# The optional networks an objective may ask for (the full-size encoder,
# `discriminator`, and the embeddings always exist).
NETWORKS = ("generator", "discriminator_head", "mlm_head", "copy_head")


def sum_over_replicas(value):
    """Sum across replicas inside a replica context; identity without a strategy."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def masked_outputs(masked, input_mask):
    """The masking results every objective's forward returns (metrics read them)."""
    return {
        "masked_input_ids": masked.input_ids,
        "masked_positions": masked.positions,
        "masked_original_ids": masked.original_ids,
        "masked_weights": masked.weights,
        "mlm_weights": masked.weights,
        "input_mask": input_mask,
    }


def replaced_token_outputs(masked, input_mask, *, total, mlm_loss, disc_loss, mlm_logits,
                           sampled_ids, disc_input_ids, labels, disc_logits, disc_weights, **extra):
    """What a generator + replaced-token-detection objective's forward returns."""
    return {
        **masked_outputs(masked, input_mask),
        "loss": total,
        "mlm_loss": mlm_loss,
        "disc_loss": disc_loss,
        "mlm_logits": mlm_logits,
        "sampled_ids": sampled_ids,
        "disc_input_ids": disc_input_ids,
        "disc_labels": labels,
        "disc_logits": disc_logits,
        "sample_weights": masked.weights,
        "disc_weights": disc_weights,
        **extra,
    }


class Objective:
    """One pre-training objective (config field `objective`).

    Subclasses set the class attributes and implement `forward`.

    Class attributes:
        name: the config value that selects it.
        networks: the optional networks it trains, from `NETWORKS`.
        mlm_head_on_every_position: the full-size MLM head predicts every
            position (else the `predictions_per_seq` masked slots).
        generator_on_every_position: the generator's softmax runs on every
            position (else on the masked slots). With `networks` and
            `mlm_head_on_every_position` it is what `electra_tf.flops` counts.
        metric_names: what `fit` / `evaluate` report, a subsequence of
            ("loss", "mlm_loss", "mlm_accuracy", "gen_loss", "gen_accuracy",
            "sampled_accuracy", "disc_loss", "disc_auc", "disc_accuracy",
            "disc_precision", "disc_recall").

    Args:
        config: the `ElectraConfig`.
        special_token_ids: the vocabulary's `SpecialTokenIds`.
    """

    name: str = ""
    networks: tuple = ()
    mlm_head_on_every_position = False
    generator_on_every_position = False
    metric_names: tuple = METRIC_NAMES

    def __init__(self, config, special_token_ids):
        self.config = config
        self.special_token_ids = special_token_ids

    # ------------------------------------------------------------ phases
    @classmethod
    def trained_at(cls, config, step: Optional[int]) -> str:
        """The name of the one-phase objective that 0-based step `step` trains (itself here).

        Args:
            config: the `ElectraConfig`.
            step: the step (None: any step; a phased objective refuses it).
        """
        return cls.name

    @classmethod
    def phase_steps(cls, config, train_steps: int):
        """[(a step of the phase or None, the phase's number of steps)] over a run of
        `train_steps` steps (one phase here)."""
        return [(None, train_steps)]

    def phase(self, step) -> Optional[tf.Tensor]:
        """None for a one-phase objective; else a bool scalar: the phase of `step`.

        A phased objective's `forward` takes `phase` True/False; the trainer
        runs each phase's forward and gradients in its own `tf.cond` branch.
        """
        return None

    # ------------------------------------------------------- normalisers
    def denominators(self, input_ids, input_mask):
        """This replica's loss normalisers: float [2] = (masked positions, real tokens).

        A function of the input alone (see `masking.prediction_counts`), so the
        trainer can sum it over replicas and micro-batches before any forward:
        every loss is then a share of the global batch's mean.
        """
        cfg = self.config
        count, _ = masking.prediction_counts(
            tf.cast(input_ids, tf.int32), input_mask, cfg.predictions_per_seq, cfg.mask_prob,
            self.special_token_ids.never_masked)
        return tf.stack([tf.reduce_sum(tf.cast(count, tf.float32)),
                         tf.reduce_sum(tf.cast(input_mask, tf.float32))])

    # ----------------------------------------------------------- forward
    def forward(self, nets, inputs, seed, row_ids, *, training, denominators, phase=None):
        """Losses and metric inputs of one batch.

        Args:
            nets: the pre-trainer; its attributes `embeddings`, `generator`,
                `generator_head`, `discriminator`, `discriminator_head`,
                `mlm_head`, `copy_head` (None where not built).
            inputs: dict of int32 `input_ids`, `input_mask`, `segment_ids` [B, L].
            seed: int64 [2]; with `row_ids` it determines every random draw.
            row_ids: int64 [B] stable example ids.
            training: enables dropout.
            denominators: float [2] global-batch totals (see `denominators`).
            phase: a phased objective's phase (Python bool or bool tensor).

        Returns a dict: `loss` (to minimise), `mlm_loss`, `mlm_logits` [B, P, V]
        of the objective's masked-LM term, the `masked_outputs` fields, and
        for the metrics it reports: `gen_loss` / `gen_logits`, `sampled_ids` /
        `sample_weights`, `disc_loss` / `disc_labels` / `disc_logits` /
        `disc_weights` (optional `disc_active`, the weight of this step's
        `disc_loss`).
        """
        raise NotImplementedError(f"objective {self.name!r} must implement forward")

    # ------------------------------------------------- shared building blocks
    def mask(self, input_ids, input_mask, seed, row_ids, bert=False):
        """The positions to predict; ELECTRA's 85/15 corruption, or BERT's 80/10/10."""
        cfg, special = self.config, self.special_token_ids
        return masking.mask_tokens(
            input_ids,
            input_mask,
            max_predictions=cfg.predictions_per_seq,
            mask_prob=cfg.mask_prob,
            mask_token_id=special.mask,
            never_masked_ids=special.never_masked,
            seed=tf.stack([seed[0] * 8 + SEED_MASKING, seed[1]]),
            row_ids=row_ids,
            keep_original_prob=BERT_KEEP_PROB if bert else cfg.mask_token_keep_prob,
            random_token_prob=BERT_RANDOM_PROB if bert else 0.0,
            vocab_size=cfg.vocab_size,
        )

    def sample(self, logits, masked, seed, row_ids, never_sample=None):
        """One generator sample per slot from `logits` [B, P, V] (float32)."""
        cfg = self.config
        sampling_logits = logits
        if never_sample is not None:
            sampling_logits = logits - 1000.0 * tf.one_hot(never_sample, cfg.vocab_size)
        return sampling.sample_from_logits(
            sampling_logits,
            seed=tf.stack([seed[0] * 8 + SEED_SAMPLING, seed[1]]),
            row_ids=row_ids,
            temperature=cfg.temperature,
            disallow_ids=masked.original_ids if cfg.disallow_correct else None,
        )

    @staticmethod
    def run_generator(nets, masked, inputs, training, positions=None):
        """Generator logits (float32) at `positions` [B, K] (default: the masked slots)."""
        hidden = nets.generator(
            {"input_ids": masked.input_ids, "input_mask": inputs["input_mask"],
             "segment_ids": inputs["segment_ids"]},
            training=training,
        )
        if positions is None:
            positions = masked.positions
        return tf.cast(nets.generator_head(hidden, mask_positions=positions), tf.float32)

    def generate(self, nets, masked, inputs, seed, row_ids, training, never_sample=None):
        """Generator logits at the masked positions [B, P, V] and one sample per slot."""
        logits = self.run_generator(nets, masked, inputs, training)
        return logits, self.sample(logits, masked, seed, row_ids, never_sample)

    @staticmethod
    def run_encoder(nets, input_ids, inputs, training):
        """The full-size encoder's sequence output on `input_ids` [B, L]."""
        return nets.discriminator(
            {"input_ids": input_ids, "input_mask": inputs["input_mask"],
             "segment_ids": inputs["segment_ids"]},
            training=training,
        )

    def masked_lm_loss(self, logits, masked, denominators):
        """Cross-entropy at the masked slots, normalised by the global masked count."""
        return losses.masked_lm_loss(logits, masked.original_ids, masked.weights,
                                     denominator=denominators[0], fused=self.config.fused_kernels)
