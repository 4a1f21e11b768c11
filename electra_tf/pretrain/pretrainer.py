"""ElectraPretrainer: the configured objective's training step on its networks.

The networks themselves (which exist, how they share embeddings, how they are built) are
`electra_tf.models.pretraining_model.ElectraPretrainingModel`, which this model extends
with the objective, the train step, gradient accumulation and the metrics.
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.keras_compat import MultiReplicaExecution
from electra_tf.models.pretraining_model import ElectraPretrainingModel
from electra_tf.objectives.base import sum_over_replicas
from electra_tf.objectives.objective_registry import get_objective
from electra_tf.pretrain import pretrain_metrics as _metrics

_EVAL_SEED_OFFSET = 1 << 20


def _dense(grads, variables):
    """Gradients as dense tensors, zeros for None (both tf.cond branches must match)."""
    return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(grads, variables)]


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainer(MultiReplicaExecution, ElectraPretrainingModel):
    """Pre-training of the full-size encoder with the objective `config.objective`.

    The objective (`electra_tf.objectives.objective_registry`) says which networks exist
    and computes the losses; `ElectraPretrainingModel` builds those networks;
    this model runs the optimisation step (with gradient accumulation and any
    distribution strategy) and the metrics. ELECTRA's default: each step masks ~15% of the
    tokens, a small generator predicts them, its samples replace them, and the
    discriminator learns, for every token, whether it was replaced. The
    embeddings are shared as `config.embedding_sharing` says.

    Args:
        config: an `ElectraConfig` (or its dict).
        special_token_ids: a `SpecialTokenIds` (or its dict) from the vocabulary.
        grad_accum_steps: micro-batches per optimizer update (>= 1).

    Inputs (to `fit`, `evaluate` and `__call__`): a dict with int `input_ids`,
    `input_mask` and `segment_ids` of shape [batch, max_seq_length].

    Example:

    >>> from electra_tf.config import ElectraConfig
    >>> from electra_tf.data.vocab import SpecialTokenIds
    >>> from electra_tf.pretrain.pretrain_optimizer import create_optimizer
    >>> cfg = ElectraConfig.from_json("configs/tiny.json")
    >>> model = ElectraPretrainer(cfg, SpecialTokenIds(0, 1, 2, 3, 4))
    >>> model.compile(optimizer=create_optimizer(cfg))
    >>> sorted(model.objective.networks)
    ['discriminator_head', 'generator']

    Then `model.fit(dataset)` on batches of `pretraining_dataset` (electra_tf.data.reader).
    """

    def __init__(self, config, special_token_ids, grad_accum_steps=1, **kwargs):
        grad_accum_steps = int(grad_accum_steps)
        if grad_accum_steps < 1:
            raise ValueError(f"grad_accum_steps={grad_accum_steps} must be >= 1")
        if isinstance(config, dict):
            config = ElectraConfig.from_dict(config)
        if isinstance(special_token_ids, dict):
            special_token_ids = SpecialTokenIds(**special_token_ids)
        for name in ("pad", "cls", "sep", "mask"):
            if not 0 <= getattr(special_token_ids, name) < config.vocab_size:
                raise ValueError(
                    f"special token {name} id {getattr(special_token_ids, name)} is outside "
                    f"vocab_size={config.vocab_size}; the vocabulary and the config disagree"
                )
        objective = get_objective(config.objective)(config, special_token_ids)
        # The networks the objective trains, every variable created now.
        super().__init__(config, objective.networks, objective.mlm_head_on_every_position, **kwargs)
        # Each train_step splits its (per-replica) batch into this many
        # micro-batches, sums their gradients and applies one update.
        self.grad_accum_steps = grad_accum_steps
        self.special_token_ids = special_token_ids
        self.objective = objective
        _metrics.create_metrics(self, self.objective.metric_names)

    @property
    def metrics(self):
        return _metrics.model_metrics(self)

    # ---------------------------------------------------------------- forward
    def _step(self):
        # An uncompiled model (e.g. loaded for evaluation) has no optimizer: step 0.
        optimizer = getattr(self, "optimizer", None)
        return 0 if optimizer is None else optimizer.iterations

    def denominators(self, inputs):
        """Global-batch loss normalisers [2] (masked positions, real tokens), summed over replicas."""
        return sum_over_replicas(self.objective.denominators(
            tf.cast(inputs["input_ids"], tf.int32), inputs["input_mask"]))

    def forward(self, inputs, seed, row_ids=None, training=False, denominators=None, phase=None):
        """Runs the configured objective on one batch.

        Args:
            inputs: dict of int `input_ids`, `input_mask`, `segment_ids` [B, L].
            seed: int [2]; with `row_ids` it determines every random draw.
            row_ids: int64 [B] stable example ids (default 0..B-1).
            training: enables dropout.
            denominators: optional float [2] (total masked weight, total real
                tokens) of the *global* batch; by default computed from this
                batch and summed over replicas. Gradient accumulation passes the
                whole step's totals so micro-batch losses sum to the batch loss.
            phase: for an objective with phases (`Objective.phase`), the phase
                to run; default: the phase of the optimizer's step.

        Returns the objective's outputs (`Objective.forward`): losses, masked-LM
        logits [B, P, V] (`mlm_logits`), masked batch fields and the metric
        inputs. Under a distribution strategy the losses are this replica's
        share of the global-batch losses (they sum to it across replicas).
        """
        inputs = {name: tf.cast(inputs[name], tf.int32)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        seed = tf.cast(seed, tf.int64)
        if row_ids is None:
            row_ids = tf.range(tf.shape(inputs["input_ids"])[0], dtype=tf.int64)
        if denominators is None:
            denominators = self.denominators(inputs)
        if phase is None:
            phase = self.objective.phase(self._step())
        return self.objective.forward(self, inputs, seed, row_ids, training=training,
                                      denominators=denominators, phase=phase)

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
        names = self.objective.metric_names
        losses, values, disc_active = _metrics.metric_inputs(out, names)
        return _metrics.update_metrics(self, sum_over_replicas(losses), values, disc_active)

    @staticmethod
    def _unpack(data):
        return data[0] if isinstance(data, (tuple, list)) else data

    def _gradients(self, inputs, seed, row_ids, denominators, phase):
        """(gradients, forward outputs) of one (micro-)batch.

        With a phased objective the phase's forward *and* gradients run inside
        one tf.cond branch: differentiating through a tf.cond fails for
        custom-gradient ops in the branch ("Could not find external tensor
        capture"). The other phase's variables get zero gradients there.
        """
        variables = self.trainable_variables

        def run(branch_phase):
            with tf.GradientTape() as tape:
                out = self.forward(inputs, seed, row_ids, training=True,
                                   denominators=denominators, phase=branch_phase)
                # out["loss"] is this replica's share of the global-batch loss and
                # Keras sums gradients over replicas: no division by replica count.
                scaled_loss = self.optimizer.scale_loss(out["loss"])
            return tape.gradient(scaled_loss, variables), out

        if phase is None:
            return run(None)

        def branch(value):
            def fn():
                grads, out = run(value)
                return _dense(grads, variables), out
            return fn

        return tf.cond(phase, branch(True), branch(False))

    def train_step(self, data):
        inputs = self._unpack(data)
        if self.grad_accum_steps > 1:
            return self._accumulating_train_step(inputs)
        inputs = {name: tf.cast(inputs[name], tf.int32)
                  for name in ("input_ids", "input_mask", "segment_ids")}
        seed, row_ids = self._train_randomness(inputs)
        # Outside any tf.cond: a cross-replica sum must not sit in a branch.
        denominators = self.denominators(inputs)
        grads, out = self._gradients(inputs, seed, row_ids, denominators,
                                     self.objective.phase(self._step()))
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return self._update_metrics(out)

    def _accumulating_train_step(self, inputs):
        """One optimizer update from `grad_accum_steps` micro-batches.

        The per-replica batch is cut into k equal micro-batches that run one
        after another in a `tf.while_loop` (activations of one micro-batch at a
        time). Every random draw is keyed by the example's index in the global
        batch and each loss is normalised by the whole step's weight, so the
        summed gradient equals the gradient of the large batch in one step.
        """
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
        denominators = self.denominators(inputs)
        phase = self.objective.phase(self._step())
        names = self.objective.metric_names
        split = {name: tf.reshape(value, [k, micro, seq]) for name, value in inputs.items()}
        split_rows = tf.reshape(row_ids, [k, micro])
        variables = self.trainable_variables

        def micro_step(i):
            micro_inputs = {name: value[i] for name, value in split.items()}
            grads, out = self._gradients(micro_inputs, seed, split_rows[i], denominators, phase)
            return grads, _metrics.metric_inputs(out, names)

        def body(i, losses, grads, active, arrays):
            new_grads, (new_losses, values, disc_active) = micro_step(i)
            grads = [acc if g is None else acc + tf.cast(g, acc.dtype)
                     for acc, g in zip(grads, new_grads)]
            arrays = {n: arrays[n].write(i, values[n]) for n in arrays}
            return i + 1, losses + new_losses, grads, active + disc_active, arrays

        shapes = _metrics.value_shapes(names, micro, self.config.predictions_per_seq, seq)
        arrays = {n: tf.TensorArray(tf.float32, size=k, element_shape=shape)
                  for n, shape in shapes.items()}
        zero_grads = [tf.zeros(v.shape, dtype=v.dtype) for v in variables]
        _, losses, grads, active, arrays = tf.while_loop(
            lambda i, *_: i < k, body,
            [tf.constant(0), tf.zeros([len(_metrics.loss_names(names))], tf.float32), zero_grads,
             tf.zeros([], tf.float32), arrays],
            parallel_iterations=1,
        )
        self.optimizer.apply_gradients(zip(grads, variables))
        values = {n: tf.reshape(a.stack(), [local] + a.element_shape.as_list()[1:])
                  for n, a in arrays.items()}
        return _metrics.update_metrics(self, sum_over_replicas(losses), values, active / k)

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
