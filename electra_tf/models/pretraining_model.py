"""The pre-training networks as one forward-only Keras model: `ElectraPretrainingModel`.

It owns which networks exist and how they are built and share their embeddings
(generator, discriminator and heads, from an `ElectraConfig` and the network names an
objective asks for); the objective runs them and the pre-training task trains them
(`electra_tf.pretrain.pretrainer.ElectraPretrainer` subclasses this model and adds the
objective, the train step, gradient accumulation and the metrics). Tools that only
read, convert or write the weights (`convert`) build this model with the networks the
config's objective declares (`Objective.networks`): its variables, names and saved layout
are the pre-trainer's.
"""

from __future__ import annotations

import keras

from electra_tf.config import ElectraConfig
from electra_tf.keras_compat import PrebuiltModel
from electra_tf.models.builders import build_embeddings, build_encoder, build_generator_encoder
from electra_tf.models.embedding_sharing import build_shared_embeddings, merged_discriminator
from electra_tf.models.heads import DiscriminatorHead, build_generator_head

@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainingModel(PrebuiltModel, keras.Model):
    """The full-size encoder (`discriminator`) and the optional networks an objective trains.

    Every variable is created in the constructor, inside whatever distribution strategy
    scope is active, so that `fit` never builds layers inside a replica context. The
    networks an objective does not use are None (docs/pretraining.md).

    Args:
        config: an `ElectraConfig` (or its dict).
        networks: the optional networks to build, a subset of ("generator",
            "discriminator_head", "mlm_head", "copy_head"): the objective's
            `Objective.networks`.
        mlm_head_on_every_position: the full-size masked-LM head predicts every position
            (else the `predictions_per_seq` masked slots); decides its built shape: the
            objective's `Objective.mlm_head_on_every_position`.
    """

    def __init__(self, config, networks, mlm_head_on_every_position, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ElectraConfig.from_dict(config)
        self.config = config
        self.networks = tuple(networks)
        self.mlm_head_on_every_position = bool(mlm_head_on_every_position)
        networks = set(self.networks)

        # `discriminator` is always the full-size encoder, the one to fine-tune.
        self.generator = self.generator_head = None
        if "generator" in networks:
            self.embeddings, generator_embeddings = build_shared_embeddings(config)
            self.generator = build_generator_encoder(config, generator_embeddings,
                                                     name="generator")
            self.generator_head = build_generator_head(
                generator_embeddings.token_embedding,
                layer_norm_epsilon=config.layer_norm_eps,
                initializer_range=config.initializer_range,
            )
        else:
            self.embeddings = build_embeddings(config, name="embeddings")
        self.discriminator = build_encoder(config, self.embeddings, name="discriminator")
        self.discriminator_head = None
        if "discriminator_head" in networks:
            self.discriminator_head = DiscriminatorHead(
                config.hidden_size, initializer_range=config.initializer_range,
                activation=config.hidden_act, name="discriminator_predictions",
            )
        # The full-size network's masked-LM head, tied to its token table.
        self.mlm_head = None
        if "mlm_head" in networks:
            self.mlm_head = build_generator_head(
                self.embeddings.token_embedding, layer_norm_epsilon=config.layer_norm_eps,
                initializer_range=config.initializer_range, name="mlm_predictions")
        # A copy gate: D = sigmoid(logit), the probability of copying the input
        # token (same shape as the discriminator head).
        self.copy_head = None
        if "copy_head" in networks:
            self.copy_head = DiscriminatorHead(
                config.hidden_size, initializer_range=config.initializer_range,
                activation=config.hidden_act, name="copy_gate")
        self._build_networks()

    def _build_networks(self):
        cfg = self.config
        seq = cfg.max_seq_length
        shape = {"input_ids": (None, seq), "input_mask": (None, seq), "segment_ids": (None, seq)}
        if self.generator is not None:
            self.generator.build(shape)
            self.generator_head.build((None, seq, cfg.generator_hidden_dim),
                                      (None, cfg.predictions_per_seq))
        self.discriminator.build(shape)
        for head in (self.discriminator_head, self.copy_head):
            if head is not None:
                head.build((None, seq, cfg.hidden_size))
        if self.mlm_head is not None:
            self.mlm_head.build((None, seq, cfg.hidden_size),
                                (None, seq if self.mlm_head_on_every_position else cfg.predictions_per_seq))
        self.built = True

    def build(self, input_shape=None):
        # All sub-layers are built in __init__; Keras may still call this.
        self.built = True

    def merged_discriminator(self):
        """The full-size encoder to save for fine-tuning (GDES: with E_gen + E_delta merged)."""
        return merged_discriminator(self)

    def call(self, inputs, training=False):
        """The full-size encoder's sequence output [batch, seq, hidden] (the objective runs
        the other networks: `ElectraPretrainer.forward`)."""
        return self.discriminator(inputs, training=training)

    def get_config(self):
        return {"config": self.config.to_dict(), "networks": list(self.networks),
                "mlm_head_on_every_position": self.mlm_head_on_every_position, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
