"""ElectraPretrainer: generator + discriminator with the replaced-token-detection step."""

from __future__ import annotations

import dataclasses
from typing import Optional

import keras
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.models import (
    DiscriminatorHead,
    build_embeddings,
    build_encoder,
    build_generator_encoder,
    build_generator_head,
)
from electra_tf import objectives

# Offsets folded into the first seed word so every random draw of a step gets
# its own stream.
_SEED_MASKING, _SEED_SAMPLING = 1, 2
_EVAL_SEED_OFFSET = 1 << 20

def _sum_over_replicas(value):
    """Sum across replicas inside a replica context; identity without a strategy."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


METRIC_NAMES = (
    "loss", "mlm_loss", "mlm_accuracy", "sampled_accuracy", "disc_loss",
    "disc_auc", "disc_accuracy", "disc_precision", "disc_recall",
)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainer(keras.Model):
    """ELECTRA pre-training: masked-LM generator and replaced-token discriminator.

    Each step masks ~15% of the tokens, lets the generator predict them, samples
    replacements from its softmax, and trains the discriminator to tell, for
    every token, whether it was replaced. Loss = gen_weight * L_MLM +
    disc_weight * L_Disc. Generator and discriminator share the token, position
    and segment embeddings and the embedding LayerNorm (one `ElectraEmbeddings`
    layer), unless `config.untied_generator_embeddings`.

    Args:
        config: an `ElectraConfig` (or its dict).
        special_token_ids: a `SpecialTokenIds` (or its dict) from the vocabulary.

    Inputs (to `fit`, `evaluate` and `__call__`): a dict with int `input_ids`,
    `input_mask` and `segment_ids` of shape [batch, max_seq_length].

    Example:

    >>> cfg = ElectraConfig.from_json("configs/tiny.json")
    >>> model = ElectraPretrainer(cfg, SpecialTokenIds(0, 1, 2, 3, 4))
    >>> model.compile(optimizer=create_optimizer(cfg))
    >>> model.fit(dataset, steps_per_epoch=100)  # doctest: +SKIP
    """

    def __init__(self, config, special_token_ids, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ElectraConfig.from_dict(config)
        if isinstance(special_token_ids, dict):
            special_token_ids = SpecialTokenIds(**special_token_ids)
        self.config = config
        self.special_token_ids = special_token_ids
        for name in ("pad", "cls", "sep", "mask"):
            if not 0 <= getattr(special_token_ids, name) < config.vocab_size:
                raise ValueError(
                    f"special token {name} id {getattr(special_token_ids, name)} is outside "
                    f"vocab_size={config.vocab_size}; the vocabulary and the config disagree"
                )

        self.embeddings = build_embeddings(config, name="embeddings")
        generator_embeddings = (
            build_embeddings(config, name="generator_embeddings")
            if config.untied_generator_embeddings
            else self.embeddings
        )
        self.generator = build_generator_encoder(config, generator_embeddings, name="generator")
        self.generator_head = build_generator_head(
            generator_embeddings.token_embedding,
            layer_norm_epsilon=config.layer_norm_eps,
            initializer_range=config.initializer_range,
        )
        self.discriminator = build_encoder(config, self.embeddings, name="discriminator")
        self.discriminator_head = DiscriminatorHead(
            config.hidden_size, initializer_range=config.initializer_range,
            name="discriminator_predictions",
        )

        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        self.sampled_accuracy = keras.metrics.Mean(name="sampled_accuracy")
        self.disc_loss_tracker = keras.metrics.Mean(name="disc_loss")
        self.disc_auc = keras.metrics.AUC(name="disc_auc")
        self.disc_accuracy = keras.metrics.BinaryAccuracy(name="disc_accuracy")
        self.disc_precision = keras.metrics.Precision(name="disc_precision")
        self.disc_recall = keras.metrics.Recall(name="disc_recall")

        # Create every variable now, inside whatever strategy scope is active,
        # so that `fit` never builds layers inside a replica context.
        self._build_networks()

    # ------------------------------------------------------------------ build
    def _build_networks(self):
        cfg = self.config
        seq = cfg.max_seq_length
        shape = {"input_ids": (None, seq), "input_mask": (None, seq), "segment_ids": (None, seq)}
        self.generator.build(shape)
        self.generator_head.build((None, seq, cfg.generator_hidden_dim), (None, cfg.predictions_per_seq))
        self.discriminator.build(shape)
        self.discriminator_head.build((None, seq, cfg.hidden_size))
        self.built = True

    def build(self, input_shape=None):
        # All sub-layers are built in __init__; Keras may still call this.
        self.built = True

    @property
    def metrics(self):
        return [
            self.loss_tracker, self.mlm_loss_tracker, self.mlm_accuracy,
            self.sampled_accuracy, self.disc_loss_tracker, self.disc_auc,
            self.disc_accuracy, self.disc_precision, self.disc_recall,
        ]

    # ---------------------------------------------------------------- forward
    def forward(self, inputs, seed, row_ids=None, training=False):
        """Runs the full ELECTRA objective on one batch.

        Args:
            inputs: dict of int `input_ids`, `input_mask`, `segment_ids` [B, L].
            seed: int [2]; with `row_ids` it determines every random draw.
            row_ids: int64 [B] stable example ids (default 0..B-1).
            training: enables dropout.

        Returns a dict of tensors: losses, generator logits [B, P, V], masked
        batch fields, sampled ids, discriminator inputs, labels and logits.
        Under a distribution strategy the losses are this replica's share of
        the global-batch losses (they sum to it across replicas).
        """
        cfg, special = self.config, self.special_token_ids
        input_ids = tf.cast(inputs["input_ids"], tf.int32)
        input_mask = tf.cast(inputs["input_mask"], tf.int32)
        segment_ids = tf.cast(inputs["segment_ids"], tf.int32)
        seed = tf.cast(seed, tf.int64)

        masked = objectives.mask_tokens(
            input_ids,
            input_mask,
            max_predictions=cfg.predictions_per_seq,
            mask_prob=cfg.mask_prob,
            mask_token_id=special.mask,
            never_masked_ids=special.never_masked,
            seed=tf.stack([seed[0] * 8 + _SEED_MASKING, seed[1]]),
            row_ids=row_ids,
            keep_original_prob=cfg.mask_token_keep_prob,
        )
        generator_output = self.generator(
            {"input_ids": masked.input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
            training=training,
        )
        mlm_logits = tf.cast(
            self.generator_head(generator_output, mask_positions=masked.positions), tf.float32
        )
        sampled_ids = objectives.sample_from_logits(
            mlm_logits,
            seed=tf.stack([seed[0] * 8 + _SEED_SAMPLING, seed[1]]),
            row_ids=row_ids,
            temperature=cfg.temperature,
            disallow_ids=masked.original_ids if cfg.disallow_correct else None,
        )
        # Every chosen position, [MASK]ed or kept, receives the generator's sample.
        disc_input_ids = objectives.replace_at_positions(
            masked.input_ids, masked.positions, sampled_ids, masked.weights
        )
        labels = objectives.replaced_labels(disc_input_ids, input_ids, input_mask)
        disc_output = self.discriminator(
            {"input_ids": disc_input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
            training=training,
        )
        disc_logits = self.discriminator_head(disc_output)

        # Normalise by the weight of the *global* batch: each replica's loss is
        # then its share of the global-batch mean, the shares sum (like the
        # gradients) across replicas, and N replicas match one device exactly.
        denominators = _sum_over_replicas(tf.stack([
            tf.reduce_sum(masked.weights), tf.reduce_sum(tf.cast(input_mask, tf.float32))
        ]))
        mlm_loss = objectives.masked_lm_loss(
            mlm_logits, masked.original_ids, masked.weights, denominator=denominators[0])
        disc_loss = objectives.replaced_token_detection_loss(
            disc_logits, labels, input_mask, denominator=denominators[1])
        total = objectives.electra_loss(mlm_loss, disc_loss, cfg.gen_weight, cfg.disc_weight)
        return {
            "loss": total,
            "mlm_loss": mlm_loss,
            "disc_loss": disc_loss,
            "mlm_logits": mlm_logits,
            "masked_input_ids": masked.input_ids,
            "masked_positions": masked.positions,
            "masked_original_ids": masked.original_ids,
            "masked_weights": masked.weights,
            "sampled_ids": sampled_ids,
            "disc_input_ids": disc_input_ids,
            "disc_labels": labels,
            "disc_logits": disc_logits,
            "input_mask": input_mask,
        }

    def call(self, inputs, training=False):
        seed, row_ids = self._data_randomness(inputs)
        return self.forward(inputs, seed, row_ids, training=training)

    # ------------------------------------------------------------------ seeds
    def _train_randomness(self, inputs):
        """Seed (config seed, step) and the examples' indices in the global batch.

        Draws are keyed by global example index (see objectives/random.py): each
        replica masks its own examples differently, and N replicas reproduce a
        single device on the same global batch.
        """
        local_batch = tf.shape(inputs["input_ids"], out_type=tf.int64)[0]
        context = tf.distribute.get_replica_context()
        replica_id = 0 if context is None else context.replica_id_in_sync_group
        first_row = tf.cast(replica_id, tf.int64) * local_batch
        row_ids = first_row + tf.range(local_batch, dtype=tf.int64)
        seed = tf.stack([tf.constant(self.config.seed, tf.int64),
                         tf.cast(self.optimizer.iterations, tf.int64)])
        return seed, row_ids

    def _data_randomness(self, inputs):
        """Evaluation draws keyed by each example's content: the same every time."""
        ids = tf.cast(inputs["input_ids"], tf.int64)
        positions = tf.range(1, tf.shape(ids)[1] + 1, dtype=tf.int64)
        row_ids = tf.reduce_sum(ids * (positions * 1000003 + 7), axis=1)
        seed = tf.constant([self.config.seed + _EVAL_SEED_OFFSET, 0], tf.int64)
        return seed, row_ids

    # ------------------------------------------------------------------ steps
    def _update_metrics(self, out):
        weights = out["masked_weights"]
        mlm_pred = tf.argmax(out["mlm_logits"], -1, output_type=tf.int32)
        losses = _sum_over_replicas(tf.stack([out["loss"], out["mlm_loss"], out["disc_loss"]]))
        self.loss_tracker.update_state(losses[0])
        self.mlm_loss_tracker.update_state(losses[1])
        self.disc_loss_tracker.update_state(losses[2])
        self.mlm_accuracy.update_state(
            tf.cast(tf.equal(mlm_pred, out["masked_original_ids"]), tf.float32), sample_weight=weights
        )
        self.sampled_accuracy.update_state(
            tf.cast(tf.equal(out["sampled_ids"], out["masked_original_ids"]), tf.float32),
            sample_weight=weights,
        )
        labels = tf.cast(out["disc_labels"], tf.float32)
        probs = tf.sigmoid(out["disc_logits"])
        token_weights = tf.cast(out["input_mask"], tf.float32)
        for metric in (self.disc_auc, self.disc_accuracy, self.disc_precision, self.disc_recall):
            metric.update_state(labels, probs, sample_weight=token_weights)
        return {m.name: m.result() for m in self.metrics}

    @staticmethod
    def _unpack(data):
        return data[0] if isinstance(data, (tuple, list)) else data

    def train_step(self, data):
        inputs = self._unpack(data)
        with tf.GradientTape() as tape:
            seed, row_ids = self._train_randomness(inputs)
            out = self.forward(inputs, seed, row_ids, training=True)
            # out["loss"] is this replica's share of the global-batch loss and
            # Keras sums gradients over replicas: no division by replica count.
            scaled_loss = self.optimizer.scale_loss(out["loss"])
        variables = self.trainable_variables
        grads = tape.gradient(scaled_loss, variables)
        self.optimizer.apply_gradients(zip(grads, variables))
        return self._update_metrics(out)

    def test_step(self, data):
        inputs = self._unpack(data)
        seed, row_ids = self._data_randomness(inputs)
        out = self.forward(inputs, seed, row_ids, training=False)
        return self._update_metrics(out)

    # -------------------------------------------------------------- config
    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "special_token_ids": dataclasses.asdict(self.special_token_ids),
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
