"""ElectraPretrainer: generator + discriminator with the replaced-token-detection step."""

from __future__ import annotations

import dataclasses

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
from electra_tf.objectives import masking as _masking

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
        if self.generator_head.compute_dtype != self.generator_head.variable_dtype:
            # keras-hub's MaskedLMHead turns autocast off, then adds its float32
            # output bias to bf16/fp16 logits, which fails under mixed precision;
            # with autocast on the bias is read in the compute dtype.
            self.generator_head.autocast = True
        self.discriminator = build_encoder(config, self.embeddings, name="discriminator")
        self.discriminator_head = DiscriminatorHead(
            config.hidden_size, initializer_range=config.initializer_range,
            activation=config.hidden_act, name="discriminator_predictions",
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
        return [
            self.loss_tracker, self.mlm_loss_tracker, self.mlm_accuracy,
            self.sampled_accuracy, self.disc_loss_tracker, self.disc_auc,
            self.disc_accuracy, self.disc_precision, self.disc_recall,
        ]

    # ---------------------------------------------------------------- forward
    def forward(self, inputs, seed, row_ids=None, training=False, denominators=None):
        """Runs the full ELECTRA objective on one batch.

        Args:
            inputs: dict of int `input_ids`, `input_mask`, `segment_ids` [B, L].
            seed: int [2]; with `row_ids` it determines every random draw.
            row_ids: int64 [B] stable example ids (default 0..B-1).
            training: enables dropout.
            denominators: optional float [2] (total masked weight, total real
                tokens) of the *global* batch; by default computed from this
                batch and summed over replicas. Gradient accumulation passes the
                whole step's totals so micro-batch losses sum to the batch loss.

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
        if denominators is None:
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

    @staticmethod
    def _unpack(data):
        return data[0] if isinstance(data, (tuple, list)) else data

    def train_step(self, data):
        inputs = self._unpack(data)
        if self.grad_accum_steps > 1:
            return self._accumulating_train_step(inputs)
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
