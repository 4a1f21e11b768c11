"""ElectraPretrainer: generator + discriminator with the replaced-token-detection step."""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from electra_tf.config import GENERATOR_OBJECTIVES, MLM_OBJECTIVES, ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.models import (
    DiscriminatorHead,
    build_embeddings,
    build_encoder,
    build_generator_encoder,
    build_generator_head,
)
from electra_tf import objectives
from electra_tf.objectives import masking as _masking

# Offsets folded into the first seed word so every random draw of a step gets
# its own stream.
# mask_tokens derives its streams from its seed word m as 2m, 2m + 1 and
# -(2m + 1), i.e. 16s + 2, 16s + 3 for m = 8s + 1; the sampling word 8s + 4 is
# 4 mod 8 and never equals one of them (8s + 2 did, for s = 0: the Gumbel noise
# of slot 0 repeated the masking scores).
_SEED_MASKING, _SEED_SAMPLING = 1, 4
# BERT's corruption of the chosen positions (objective mlm): 80% [MASK],
# 10% a random token, 10% kept.
BERT_KEEP_PROB, BERT_RANDOM_PROB = 0.1, 0.1
# Objectives with ELECTRA's replaced-token discriminator (two_stage after its MLM phase).
DISCRIMINATOR_OBJECTIVES = ("electra", "electra_15", "two_stage", "adversarial")
_EVAL_SEED_OFFSET = 1 << 20

def _autocast_mlm_head(head):
    """keras-hub's MaskedLMHead turns autocast off, then adds its float32 output
    bias to bf16/fp16 logits, which fails under mixed precision; with autocast
    on the bias is read in the compute dtype."""
    if head.compute_dtype != head.variable_dtype:
        head.autocast = True
    return head


def _masked_outputs(masked, input_mask):
    """The masking results every objective's forward returns (metrics read them)."""
    return {
        "masked_input_ids": masked.input_ids,
        "masked_positions": masked.positions,
        "masked_original_ids": masked.original_ids,
        "masked_weights": masked.weights,
        "mlm_weights": masked.weights,
        "input_mask": input_mask,
    }


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


def metric_names(objective="electra"):
    """The metrics `fit` and `evaluate` report for a pre-training objective.

    `mlm_*` is always the objective's masked-LM term: the generator's in the
    ELECTRA objectives (electra, electra_15, adversarial; two_stage after its
    switch), the full-size network's in mlm, replace_mlm, all_tokens_mlm and
    two_stage's first phase. `gen_*` is the generator where both exist;
    `sampled_accuracy` is the share of generator samples equal to the
    original; `disc_*` only exist with a discriminator.
    """
    if objective == "mlm":
        return ("loss", "mlm_loss", "mlm_accuracy")
    if objective in ("replace_mlm", "all_tokens_mlm"):
        return ("loss", "mlm_loss", "mlm_accuracy", "gen_loss", "gen_accuracy", "sampled_accuracy")
    return METRIC_NAMES


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

    def __init__(self, config, special_token_ids, grad_accum_steps=1, **kwargs):
        super().__init__(**kwargs)
        grad_accum_steps = int(grad_accum_steps)
        if grad_accum_steps < 1:
            raise ValueError(f"grad_accum_steps={grad_accum_steps} must be >= 1")
        # Each train_step splits its (per-replica) batch into this many
        # micro-batches, sums their gradients and applies one update.
        self.grad_accum_steps = grad_accum_steps
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

        objective = config.objective
        if grad_accum_steps > 1 and objective != "electra":
            raise ValueError(f"grad_accum_steps={grad_accum_steps} supports objective 'electra' only "
                             f"(got {objective!r}); use grad_accum_steps=1 with a batch that fits")
        # Which networks the objective trains (docs/pretraining.md, "Objectives").
        # `discriminator` is always the full-size encoder, the one to fine-tune;
        # the layers an objective does not use are None.
        self.embeddings = build_embeddings(config, name="embeddings")
        self.generator = self.generator_head = None
        if objective in GENERATOR_OBJECTIVES:
            generator_embeddings = (
                build_embeddings(config, name="generator_embeddings")
                if config.untied_generator_embeddings
                else self.embeddings
            )
            self.generator = build_generator_encoder(config, generator_embeddings, name="generator")
            self.generator_head = _autocast_mlm_head(build_generator_head(
                generator_embeddings.token_embedding,
                layer_norm_epsilon=config.layer_norm_eps,
                initializer_range=config.initializer_range,
            ))
        self.discriminator = build_encoder(config, self.embeddings, name="discriminator")
        self.discriminator_head = None
        if objective in DISCRIMINATOR_OBJECTIVES:
            self.discriminator_head = DiscriminatorHead(
                config.hidden_size, initializer_range=config.initializer_range,
                activation=config.hidden_act, name="discriminator_predictions",
            )
        # The full-size network's masked-LM head (BERT-style objectives and
        # two_stage's first phase), tied to the shared token embeddings.
        self.mlm_head = None
        if objective in MLM_OBJECTIVES or objective == "two_stage":
            self.mlm_head = _autocast_mlm_head(build_generator_head(
                self.embeddings.token_embedding, layer_norm_epsilon=config.layer_norm_eps,
                initializer_range=config.initializer_range, name="mlm_predictions"))
        # All-Tokens MLM's copy gate: D = sigmoid(logit), the probability of
        # copying the input token (same shape as the discriminator head).
        self.copy_head = None
        if objective == "all_tokens_mlm":
            self.copy_head = DiscriminatorHead(
                config.hidden_size, initializer_range=config.initializer_range,
                activation=config.hidden_act, name="copy_gate")

        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        names = metric_names(objective)
        self.gen_loss_tracker = self.gen_accuracy = None
        if "gen_loss" in names:
            self.gen_loss_tracker = keras.metrics.Mean(name="gen_loss")
            self.gen_accuracy = keras.metrics.Mean(name="gen_accuracy")
        self.sampled_accuracy = (keras.metrics.Mean(name="sampled_accuracy")
                                 if "sampled_accuracy" in names else None)
        self.disc_loss_tracker = self.disc_auc = self.disc_accuracy = None
        self.disc_precision = self.disc_recall = None
        if "disc_loss" in names:
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
        if self.generator is not None:
            self.generator.build(shape)
            self.generator_head.build((None, seq, cfg.generator_hidden_dim),
                                      (None, cfg.predictions_per_seq))
        self.discriminator.build(shape)
        for head in (self.discriminator_head, self.copy_head):
            if head is not None:
                head.build((None, seq, cfg.hidden_size))
        if self.mlm_head is not None:
            predicted = seq if cfg.objective == "all_tokens_mlm" else cfg.predictions_per_seq
            self.mlm_head.build((None, seq, cfg.hidden_size), (None, predicted))
        self.built = True

    def build(self, input_shape=None):
        # All sub-layers are built in __init__; Keras may still call this.
        self.built = True

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Every layer is built in __init__. Keras' symbolic build under a strategy
        # would only peek (and drop) a batch, and under MultiWorkerMirroredStrategy
        # it fails (strategy.reduce of a dict of per-replica ints). Just build the
        # optimizer, in the strategy's scope.
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)

    @property
    def metrics(self):
        every = [
            self.loss_tracker, self.mlm_loss_tracker, self.mlm_accuracy,
            self.gen_loss_tracker, self.gen_accuracy,
            self.sampled_accuracy, self.disc_loss_tracker, self.disc_auc,
            self.disc_accuracy, self.disc_precision, self.disc_recall,
        ]
        return [m for m in every if m is not None]

    # ---------------------------------------------------------------- forward
    def forward(self, inputs, seed, row_ids=None, training=False, denominators=None,
                mlm_phase=None):
        """Runs the configured objective (`config.objective`) on one batch.

        Args:
            inputs: dict of int `input_ids`, `input_mask`, `segment_ids` [B, L].
            seed: int [2]; with `row_ids` it determines every random draw.
            row_ids: int64 [B] stable example ids (default 0..B-1).
            training: enables dropout.
            denominators: optional float [2] (total masked weight, total real
                tokens) of the *global* batch; by default computed from this
                batch and summed over replicas. Gradient accumulation passes the
                whole step's totals so micro-batch losses sum to the batch loss.
            mlm_phase: two_stage only: bool scalar, True for the MLM phase;
                default: the optimizer's step < `two_stage_mlm_steps`.

        Returns a dict of tensors: losses, masked-LM logits [B, P, V] of the
        objective's MLM term (`mlm_logits`), masked batch fields, and the
        objective's other outputs (sampled ids, discriminator inputs, labels
        and logits, ...). Metric weights: `mlm_weights`, `sample_weights`
        [B, P] and, with a discriminator, `disc_weights` [B, L]. Under a
        distribution strategy the losses are this replica's share of the
        global-batch losses (they sum to it across replicas).
        """
        inputs = {name: tf.cast(inputs[name], tf.int32)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        seed = tf.cast(seed, tf.int64)
        objective = self.config.objective
        if objective == "two_stage":
            return self._forward_two_stage(inputs, seed, row_ids, training, denominators, mlm_phase)
        if objective == "mlm":
            return self._forward_mlm(inputs, seed, row_ids, training, denominators)
        if objective in ("replace_mlm", "all_tokens_mlm"):
            return self._forward_replace_mlm(inputs, seed, row_ids, training, denominators)
        return self._forward_electra(inputs, seed, row_ids, training, denominators)

    def _mask(self, input_ids, input_mask, seed, row_ids, bert=False):
        """The positions to predict; ELECTRA's 85/15 corruption, or BERT's 80/10/10."""
        cfg, special = self.config, self.special_token_ids
        return objectives.mask_tokens(
            input_ids,
            input_mask,
            max_predictions=cfg.predictions_per_seq,
            mask_prob=cfg.mask_prob,
            mask_token_id=special.mask,
            never_masked_ids=special.never_masked,
            seed=tf.stack([seed[0] * 8 + _SEED_MASKING, seed[1]]),
            row_ids=row_ids,
            keep_original_prob=BERT_KEEP_PROB if bert else cfg.mask_token_keep_prob,
            random_token_prob=BERT_RANDOM_PROB if bert else 0.0,
            vocab_size=cfg.vocab_size,
        )

    def _generate(self, masked, inputs, seed, row_ids, training, never_sample=None):
        """Generator logits at the masked positions [B, P, V] and one sample per slot."""
        cfg = self.config
        generator_output = self.generator(
            {"input_ids": masked.input_ids, "input_mask": inputs["input_mask"],
             "segment_ids": inputs["segment_ids"]},
            training=training,
        )
        logits = tf.cast(
            self.generator_head(generator_output, mask_positions=masked.positions), tf.float32
        )
        sampling_logits = logits
        if never_sample is not None:
            sampling_logits = logits - 1000.0 * tf.one_hot(never_sample, cfg.vocab_size)
        sampled_ids = objectives.sample_from_logits(
            sampling_logits,
            seed=tf.stack([seed[0] * 8 + _SEED_SAMPLING, seed[1]]),
            row_ids=row_ids,
            temperature=cfg.temperature,
            disallow_ids=masked.original_ids if cfg.disallow_correct else None,
        )
        return logits, sampled_ids

    @staticmethod
    def _global_denominators(masked_weights, input_mask):
        # Normalise by the weight of the *global* batch: each replica's loss is
        # then its share of the global-batch mean, the shares sum (like the
        # gradients) across replicas, and N replicas match one device exactly.
        return _sum_over_replicas(tf.stack([
            tf.reduce_sum(masked_weights), tf.reduce_sum(tf.cast(input_mask, tf.float32))
        ]))

    def _forward_electra(self, inputs, seed, row_ids, training, denominators):
        """electra, electra_15 and adversarial: generator + replaced-token discriminator."""
        cfg = self.config
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        segment_ids = inputs["segment_ids"]
        masked = self._mask(input_ids, input_mask, seed, row_ids)
        mlm_logits, sampled_ids = self._generate(masked, inputs, seed, row_ids, training)
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

        if denominators is None:
            denominators = self._global_denominators(masked.weights, input_mask)
        mlm_loss = objectives.masked_lm_loss(
            mlm_logits, masked.original_ids, masked.weights, denominator=denominators[0])
        if cfg.objective == "electra_15":
            # ELECTRA 15%: the discriminator learns only from the masked positions.
            disc_weights = objectives.position_weights(
                masked.positions, masked.weights, input_ids.shape[1])
            disc_denominator = denominators[0]
        else:
            disc_weights = tf.cast(input_mask, tf.float32)
            disc_denominator = denominators[1]
        disc_loss = objectives.replaced_token_detection_loss(
            disc_logits, labels, disc_weights, denominator=disc_denominator)
        generator_loss = mlm_loss
        if cfg.objective == "adversarial":
            # The generator maximises the discriminator's loss on its samples
            # (REINFORCE, the paper's Appendix F); its MLM loss is only reported.
            per_token = tf.nn.sigmoid_cross_entropy_with_logits(
                labels=tf.cast(labels, tf.float32), logits=tf.cast(disc_logits, tf.float32))
            rewards = tf.gather(per_token, masked.positions, batch_dims=1)
            baseline = _sum_over_replicas(tf.reduce_sum(rewards * masked.weights)) / (
                denominators[0] + 1e-6)
            generator_loss = objectives.reinforce_generator_loss(
                mlm_logits, sampled_ids, rewards, masked.weights, baseline,
                denominator=denominators[0])
        total = objectives.electra_loss(generator_loss, disc_loss, cfg.gen_weight, cfg.disc_weight)
        return {
            **_masked_outputs(masked, input_mask),
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
        }

    def _forward_mlm(self, inputs, seed, row_ids, training, denominators):
        """mlm (BERT): the full-size network predicts the 80/10/10-corrupted positions."""
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        masked = self._mask(input_ids, input_mask, seed, row_ids, bert=True)
        hidden = self.discriminator(
            {"input_ids": masked.input_ids, "input_mask": input_mask,
             "segment_ids": inputs["segment_ids"]},
            training=training,
        )
        mlm_logits = tf.cast(self.mlm_head(hidden, mask_positions=masked.positions), tf.float32)
        if denominators is None:
            denominators = self._global_denominators(masked.weights, input_mask)
        mlm_loss = objectives.masked_lm_loss(
            mlm_logits, masked.original_ids, masked.weights, denominator=denominators[0])
        return {
            **_masked_outputs(masked, input_mask),
            "loss": mlm_loss,
            "mlm_loss": mlm_loss,
            "mlm_logits": mlm_logits,
        }

    def _forward_replace_mlm(self, inputs, seed, row_ids, training, denominators):
        """replace_mlm / all_tokens_mlm: an MLM on generator-corrupted input, no [MASK].

        The generator is trained as in ELECTRA; its samples fill every chosen
        position (it never samples [MASK]). replace_mlm predicts the originals
        at those positions; all_tokens_mlm predicts every token through the
        copy mechanism (`objectives.all_tokens_mlm_loss`).
        """
        cfg, special = self.config, self.special_token_ids
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        masked = self._mask(input_ids, input_mask, seed, row_ids)
        gen_logits, sampled_ids = self._generate(masked, inputs, seed, row_ids, training,
                                                 never_sample=special.mask)
        model_input_ids = objectives.replace_at_positions(
            input_ids, masked.positions, sampled_ids, masked.weights)
        hidden = self.discriminator(
            {"input_ids": model_input_ids, "input_mask": input_mask,
             "segment_ids": inputs["segment_ids"]},
            training=training,
        )
        if denominators is None:
            denominators = self._global_denominators(masked.weights, input_mask)
        gen_loss = objectives.masked_lm_loss(
            gen_logits, masked.original_ids, masked.weights, denominator=denominators[0])
        out = {}
        if cfg.objective == "replace_mlm":
            mlm_logits = tf.cast(self.mlm_head(hidden, mask_positions=masked.positions), tf.float32)
            mlm_loss = objectives.masked_lm_loss(
                mlm_logits, masked.original_ids, masked.weights, denominator=denominators[0])
        else:
            seq_len = input_ids.shape[1]
            every = tf.broadcast_to(tf.range(seq_len, dtype=tf.int32), tf.shape(input_ids))
            all_logits = tf.cast(self.mlm_head(hidden, mask_positions=every), tf.float32)
            copy_logits = self.copy_head(hidden)
            mlm_loss = objectives.all_tokens_mlm_loss(
                all_logits, copy_logits, model_input_ids, input_ids, input_mask,
                denominator=denominators[1])
            # For the metrics: the mixture's log-probabilities at the masked positions.
            mlm_logits = objectives.copy_mechanism_log_probs(
                tf.gather(all_logits, masked.positions, batch_dims=1),
                tf.gather(copy_logits, masked.positions, batch_dims=1),
                tf.gather(model_input_ids, masked.positions, batch_dims=1))
            out["copy_logits"] = copy_logits
        out.update({
            "loss": cfg.gen_weight * gen_loss + mlm_loss,
            "mlm_loss": mlm_loss,
            "gen_loss": gen_loss,
            "mlm_logits": mlm_logits,
            "gen_logits": gen_logits,
            "sampled_ids": sampled_ids,
            "model_input_ids": model_input_ids,
            **_masked_outputs(masked, input_mask),
            "sample_weights": masked.weights,
        })
        return out

    def _forward_two_stage(self, inputs, seed, row_ids, training, denominators, mlm_phase):
        """two_stage: `mlm` before step `two_stage_mlm_steps`, `electra` from then on.

        Both phases train the same full-size encoder (`discriminator`), so the
        ELECTRA phase starts from the MLM-trained weights. Outputs have the
        ELECTRA keys in both phases; in the MLM phase the generator and
        discriminator fields are zeros with zero metric weights, `mlm_*` are
        the full-size network's and `disc_loss` is 0.
        """
        cfg, special = self.config, self.special_token_ids
        input_ids, input_mask = inputs["input_ids"], inputs["input_mask"]
        if mlm_phase is None:
            mlm_phase = self._two_stage_mlm_phase()
        if denominators is None:
            denominators = self._two_stage_denominators(input_ids, input_mask)

        def mlm_branch():
            out = self._forward_mlm(inputs, seed, row_ids, training, denominators)
            batch = tf.shape(input_ids)[0]
            seq_len, predictions = input_ids.shape[1], cfg.predictions_per_seq
            zeros_p = tf.zeros([batch, predictions], tf.int32)
            zeros_l = tf.zeros([batch, seq_len], tf.int32)
            out.update({
                "disc_loss": tf.zeros([], tf.float32),
                "sampled_ids": zeros_p,
                "disc_input_ids": out["masked_input_ids"],
                "disc_labels": zeros_l,
                "disc_logits": tf.zeros([batch, seq_len], tf.float32),
                "sample_weights": tf.zeros([batch, predictions], tf.float32),
                "disc_weights": tf.zeros([batch, seq_len], tf.float32),
                "disc_active": tf.zeros([], tf.float32),
            })
            return out

        def electra_branch():
            out = self._forward_electra(inputs, seed, row_ids, training, denominators)
            out["disc_active"] = tf.ones([], tf.float32)
            return out

        if isinstance(mlm_phase, bool):  # the phase is known (two_stage train step)
            return mlm_branch() if mlm_phase else electra_branch()
        return tf.cond(mlm_phase, mlm_branch, electra_branch)

    def _two_stage_denominators(self, input_ids, input_mask):
        # Outside any tf.cond: a cross-replica sum must not sit in a branch.
        # Both phases choose the same number of positions (a function of the input).
        cfg = self.config
        count, _ = _masking.prediction_counts(
            tf.cast(input_ids, tf.int32), input_mask, cfg.predictions_per_seq, cfg.mask_prob,
            self.special_token_ids.never_masked)
        return _sum_over_replicas(tf.stack([
            tf.reduce_sum(tf.cast(count, tf.float32)),
            tf.reduce_sum(tf.cast(input_mask, tf.float32))]))

    def _two_stage_mlm_phase(self):
        """True while the optimizer's step (0-based) is below `two_stage_mlm_steps`."""
        step = 0 if self.optimizer is None else self.optimizer.iterations
        return tf.less(tf.cast(step, tf.int64), self.config.two_stage_mlm_steps)

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
        if self.config.objective != "electra":
            return self._update_objective_metrics(out)
        losses = _sum_over_replicas(tf.stack([out["loss"], out["mlm_loss"], out["disc_loss"]]))
        return self._update_metrics_from(
            losses,
            mlm_pred=tf.argmax(out["mlm_logits"], -1, output_type=tf.int32),
            original_ids=out["masked_original_ids"],
            sampled_ids=out["sampled_ids"],
            weights=out["masked_weights"],
            labels=out["disc_labels"],
            probs=tf.sigmoid(out["disc_logits"]),
            input_mask=out["input_mask"],
        )

    def _update_metrics_from(self, losses, *, mlm_pred, original_ids, sampled_ids, weights,
                             labels, probs, input_mask):
        """`losses`: [total, mlm, disc] of the global batch (already summed)."""
        self.loss_tracker.update_state(losses[0])
        self.mlm_loss_tracker.update_state(losses[1])
        self.disc_loss_tracker.update_state(losses[2])
        self.mlm_accuracy.update_state(
            tf.cast(tf.equal(mlm_pred, original_ids), tf.float32), sample_weight=weights
        )
        self.sampled_accuracy.update_state(
            tf.cast(tf.equal(sampled_ids, original_ids), tf.float32), sample_weight=weights,
        )
        labels = tf.cast(labels, tf.float32)
        probs = tf.cast(probs, tf.float32)
        token_weights = tf.cast(input_mask, tf.float32)
        for metric in (self.disc_auc, self.disc_accuracy, self.disc_precision, self.disc_recall):
            metric.update_state(labels, probs, sample_weight=token_weights)
        return {m.name: m.result() for m in self.metrics}

    def _update_objective_metrics(self, out):
        """Metrics of the objectives other than electra (names: `metric_names`)."""
        names = [n for n in ("loss", "mlm_loss", "gen_loss", "disc_loss") if n in out]
        summed = _sum_over_replicas(tf.stack([out[n] for n in names]))
        losses = {n: summed[i] for i, n in enumerate(names)}
        original_ids = out["masked_original_ids"]

        def hits(ids):
            return tf.cast(tf.equal(tf.cast(ids, tf.int32), original_ids), tf.float32)

        self.loss_tracker.update_state(losses["loss"])
        self.mlm_loss_tracker.update_state(losses["mlm_loss"])
        self.mlm_accuracy.update_state(
            hits(tf.argmax(out["mlm_logits"], -1, output_type=tf.int32)),
            sample_weight=out["mlm_weights"])
        if self.gen_loss_tracker is not None:
            self.gen_loss_tracker.update_state(losses["gen_loss"])
            self.gen_accuracy.update_state(
                hits(tf.argmax(out["gen_logits"], -1, output_type=tf.int32)),
                sample_weight=out["masked_weights"])
        if self.sampled_accuracy is not None:
            self.sampled_accuracy.update_state(hits(out["sampled_ids"]),
                                               sample_weight=out["sample_weights"])
        if self.disc_loss_tracker is not None:
            # two_stage's MLM phase has no discriminator step: weight 0.
            self.disc_loss_tracker.update_state(
                losses["disc_loss"], sample_weight=out.get("disc_active", 1.0))
            labels = tf.cast(out["disc_labels"], tf.float32)
            probs = tf.sigmoid(tf.cast(out["disc_logits"], tf.float32))
            for metric in (self.disc_auc, self.disc_accuracy, self.disc_precision,
                           self.disc_recall):
                metric.update_state(labels, probs, sample_weight=out["disc_weights"])
        return {m.name: m.result() for m in self.metrics}

    @staticmethod
    def _unpack(data):
        return data[0] if isinstance(data, (tuple, list)) else data

    def train_step(self, data):
        inputs = self._unpack(data)
        if self.grad_accum_steps > 1:
            return self._accumulating_train_step(inputs)
        if self.config.objective == "two_stage":
            return self._two_stage_train_step(inputs)
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

    def _two_stage_train_step(self, inputs):
        """two_stage: the phase's forward *and* gradients run inside one tf.cond branch.

        Differentiating through a tf.cond fails for custom-gradient ops in the
        branch ("Could not find external tensor capture"); taking the gradient
        inside each branch avoids it. The other phase's variables get zero
        gradients; the update and the metrics run outside the cond.
        """
        seed, row_ids = self._train_randomness(inputs)
        denominators = self._two_stage_denominators(inputs["input_ids"], inputs["input_mask"])
        variables = self.trainable_variables

        def phase(mlm_phase):
            def run():
                with tf.GradientTape() as tape:
                    out = self.forward(inputs, seed, row_ids, training=True,
                                       denominators=denominators, mlm_phase=mlm_phase)
                    scaled_loss = self.optimizer.scale_loss(out["loss"])
                grads = tape.gradient(scaled_loss, variables)
                # Both branches must return the same structure: dense, never None.
                grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                         for g, v in zip(grads, variables)]
                return grads, out
            return run

        grads, out = tf.cond(self._two_stage_mlm_phase(), phase(True), phase(False))
        self.optimizer.apply_gradients(zip(grads, variables))
        return self._update_metrics(out)

    def _accumulating_train_step(self, inputs):
        """One optimizer update from `grad_accum_steps` micro-batches.

        The per-replica batch is cut into k equal micro-batches that run one
        after another in a `tf.while_loop` (activations of one micro-batch at a
        time). Every random draw is keyed by the example's index in the global
        batch and each loss is normalised by the whole step's weight, so the
        summed gradient equals the gradient of the large batch in one step.
        """
        cfg, special = self.config, self.special_token_ids
        k = self.grad_accum_steps
        inputs = {name: tf.cast(inputs[name], tf.int32)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        local = inputs["input_ids"].shape[0]
        seq = inputs["input_ids"].shape[1]
        if local is None:
            raise ValueError("gradient accumulation needs a static batch size "
                             "(batch the data with drop_remainder=True)")
        if local % k:
            raise ValueError(f"the per-replica batch of {local} is not divisible by "
                             f"grad_accum_steps={k}")
        micro = local // k
        seed, row_ids = self._train_randomness(inputs)
        # Loss normalisers of the whole (global) step; the masked count is a
        # function of the input alone (see objectives.masking).
        count, _ = _masking.prediction_counts(
            inputs["input_ids"], inputs["input_mask"], cfg.predictions_per_seq,
            cfg.mask_prob, special.never_masked)
        denominators = _sum_over_replicas(tf.stack([
            tf.reduce_sum(tf.cast(count, tf.float32)),
            tf.reduce_sum(tf.cast(inputs["input_mask"], tf.float32)),
        ]))
        split = {name: tf.reshape(value, [k, micro, seq]) for name, value in inputs.items()}
        split_rows = tf.reshape(row_ids, [k, micro])
        variables = self.trainable_variables
        P = cfg.predictions_per_seq

        def body(i, losses, grads, arrays):
            micro_inputs = {name: value[i] for name, value in split.items()}
            with tf.GradientTape() as tape:
                out = self.forward(micro_inputs, seed, split_rows[i], training=True,
                                   denominators=denominators)
                scaled_loss = self.optimizer.scale_loss(out["loss"])
            new_grads = tape.gradient(scaled_loss, variables)
            grads = [acc if g is None else acc + tf.cast(g, acc.dtype)
                     for acc, g in zip(grads, new_grads)]
            losses = losses + tf.stack([out["loss"], out["mlm_loss"], out["disc_loss"]])
            values = (
                tf.argmax(out["mlm_logits"], -1, output_type=tf.int32),
                out["masked_original_ids"], out["sampled_ids"], out["masked_weights"],
                out["disc_labels"], tf.sigmoid(tf.cast(out["disc_logits"], tf.float32)),
                out["input_mask"],
            )
            arrays = [a.write(i, tf.reshape(v, a.element_shape)) for a, v in zip(arrays, values)]
            return i + 1, losses, grads, arrays

        def array(dtype, shape):
            return tf.TensorArray(dtype, size=k, element_shape=tf.TensorShape(shape))

        arrays = [
            array(tf.int32, [micro, P]), array(tf.int32, [micro, P]), array(tf.int32, [micro, P]),
            array(tf.float32, [micro, P]), array(tf.int32, [micro, seq]),
            array(tf.float32, [micro, seq]), array(tf.int32, [micro, seq]),
        ]
        zero_grads = [tf.zeros(v.shape, dtype=v.dtype) for v in variables]
        _, losses, grads, arrays = tf.while_loop(
            lambda i, *_: i < k, body,
            [tf.constant(0), tf.zeros([3], tf.float32), zero_grads, arrays],
            parallel_iterations=1,
        )
        self.optimizer.apply_gradients(zip(grads, variables))
        (mlm_pred, original_ids, sampled_ids, weights, labels, probs,
         input_mask) = [tf.reshape(a.stack(), [local] + a.element_shape.as_list()[1:])
                        for a in arrays]
        return self._update_metrics_from(
            _sum_over_replicas(losses), mlm_pred=mlm_pred, original_ids=original_ids,
            sampled_ids=sampled_ids, weights=weights, labels=labels, probs=probs,
            input_mask=input_mask)

    # ------------------------------------------------- multi-step execution
    def make_train_function(self, force=False):
        """Keras' own train function, except in two multi-replica cases it gets wrong.

        1. steps_per_execution > 1 on >= 2 replicas: Keras 3's multi-step loop (a
           `tf.while_loop` over `tf.experimental.Optional` with a `tf.cond` per
           step) fails (keras-team/keras#19246; on MirroredStrategy over 2 CPUs:
           "You must feed a value for placeholder tensor ...").
        2. MultiWorkerMirroredStrategy: Keras reduces the scalar step outputs
           with `strategy.reduce("MEAN", v, axis=0)`, which fails on scalars.
        There we run the plain `for _ in tf.range(n): strategy.run(step, ...)`
        loop, the tf.distribute idiom for TPU host loops, and read the metric
        results once. The iterator must hold `steps_per_execution` more batches
        (pre-training data repeats; the job's eval data is repeated too).
        """
        if self.train_function is not None and not force:
            return self.train_function
        function = self._distributed_function(self.train_step)
        if function is None:
            return super().make_train_function(force)
        self.train_function = function
        return function

    def make_test_function(self, force=False):
        if self.test_function is not None and not force:
            return self.test_function
        function = self._distributed_function(self.test_step)
        if function is None:
            return super().make_test_function(force)
        self.test_function = function
        return function

    def _distributed_function(self, step):
        strategy = self.distribute_strategy
        steps = int(self.steps_per_execution)
        multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        if not multi_worker and (steps == 1 or strategy.num_replicas_in_sync == 1):
            return None
        step_fn = step
        if self.jit_compile:
            step_fn = tf.function(step, jit_compile=True, reduce_retracing=True)

        def metric_results():
            return {m.name: m.result() for m in self.metrics}

        @tf.function
        def multi_step(iterator):
            for _ in tf.range(steps):
                strategy.run(step_fn, args=(next(iterator),))
            results = strategy.run(metric_results)
            # Metric variables are mirrored and updated with cross-replica sums:
            # every replica holds the same result.
            return {k: strategy.reduce("MEAN", v, axis=None) for k, v in results.items()}

        return multi_step

    def test_step(self, data):
        inputs = self._unpack(data)
        seed, row_ids = self._data_randomness(inputs)
        out = self.forward(inputs, seed, row_ids, training=False)
        return self._update_metrics(out)

    # -------------------------------------------------------------- config
    def get_config(self):
        config = {
            "config": self.config.to_dict(),
            "special_token_ids": dataclasses.asdict(self.special_token_ids),
            "name": self.name,
        }
        if self.grad_accum_steps != 1:
            config["grad_accum_steps"] = self.grad_accum_steps
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
