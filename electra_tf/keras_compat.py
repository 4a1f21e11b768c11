"""The one module that reaches into Keras internals (`keras.src`, private names).

Keras 3 has no public API for six things the package needs; each is wrapped
here under a public name, so a Keras release that moves them breaks one file,
with one clear message, instead of many:

- writing / reading the weights of a single layer or an already-built model
  without a model wrapper, strictly (`saving_lib.save_weights_only` /
  `load_weights_only`);
- building a `.weights.h5` file in memory (`saving_lib.H5IOStore`,
  `saving_lib._save_state`), so a full disk is an OSError and not an HDF5
  SIGSEGV (see `training/checkpoints.py`);
- dropping a replaced sub-layer from a layer's variable tracking (GDES swaps
  the discriminator's token table before the model is built);
- the optimizer hooks AdamW needs: per-variable slots, the weight-decay
  predicate, and the two methods the TensorFlow backend calls around the
  update (weight decay, replica sum of gradients), exposed to subclasses of
  `AdamWHooks` under public names;
- a model whose layers are all built in `__init__` skipping Keras' symbolic
  build (which peeks, and drops, a batch; `PrebuiltModel`);
- the multi-step train / test functions where Keras' own fail on several
  replicas (`MultiReplicaExecution`).

`check_keras()` runs at import and probes every internal used here; a missing
one is reported with the Keras version and the tested pin (setup.cfg's).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras.src.saving import saving_lib

from electra_tf.errors import ElectraError

TESTED = ("3.10", "3.15")  # oldest and newest minor versions the suite has run on
PIN = "keras>=3.10,<3.16"  # setup.cfg's requirement


class KerasVersionError(ElectraError, ImportError):
    """The installed Keras lacks an internal this package relies on."""


def check_keras() -> None:
    """Raises KerasVersionError when an internal used here is missing."""
    needed = {
        "keras.src.saving.saving_lib.save_weights_only": getattr(saving_lib, "save_weights_only", None),
        "keras.src.saving.saving_lib.load_weights_only": getattr(saving_lib, "load_weights_only", None),
        "keras.src.saving.saving_lib.H5IOStore": getattr(saving_lib, "H5IOStore", None),
        "keras.src.saving.saving_lib._save_state": getattr(saving_lib, "_save_state", None),
        "keras.optimizers.AdamW._all_reduce_sum_gradients":
            getattr(keras.optimizers.AdamW, "_all_reduce_sum_gradients", None),
        "keras.optimizers.AdamW._apply_weight_decay":
            getattr(keras.optimizers.AdamW, "_apply_weight_decay", None),
        "keras.Model._maybe_symbolic_build": getattr(keras.Model, "_maybe_symbolic_build", None),
    }
    missing = [name for name, value in needed.items() if value is None]
    if missing:
        raise KerasVersionError(
            f"keras {keras.__version__} lacks {missing[0]} (electra_tf is tested with keras "
            f"{TESTED[0]}-{TESTED[1]}.x); install a tested version: pip install '{PIN}'")


check_keras()


# --------------------------------------------------------------------- weights
def save_weights_only(layer, path: str, skip=()) -> None:
    """Writes the weights of `layer` (a layer or model, built) to a `.weights.h5` file.

    `skip`: objects tracked by `layer` whose state is left out (e.g. a compiled model's
    optimizer, whose slots would triple the file of a model trained with Adam).
    """
    saving_lib.save_weights_only(layer, path, objects_to_skip=list(skip) or None)


def load_weights_only(layer, path: str) -> None:
    """Loads a `.weights.h5` file into the built `layer`; a structure mismatch raises."""
    saving_lib.load_weights_only(layer, path)


def write_weights_in_memory(layer, buffer) -> "saving_lib.H5IOStore":
    """Writes `layer`'s weights into the file-like `buffer` as a `.weights.h5` image.

    Returns the open store; the caller may add groups to `store.h5_file` and
    must call `store.close()` (which leaves `buffer` open).
    """
    store = saving_lib.H5IOStore(buffer, mode="w")
    try:
        saving_lib._save_state(  # pylint: disable=protected-access
            layer, weights_store=store, assets_store=None, inner_path="", visited_saveables=set())
    except BaseException:
        store.close()
        raise
    return store


def untrack(layer, child) -> None:
    """Removes `child` (a replaced attribute value) from `layer`'s variable tracking."""
    layer._tracker.untrack(child)  # pylint: disable=protected-access


# ------------------------------------------------------------------- optimizer
class AdamWHooks(keras.optimizers.AdamW):
    """keras.optimizers.AdamW with its internal hooks under public names.

    Subclasses override `weight_decay_step(variables)` (default: Keras' own
    decoupled decay) and `reduce_gradients(grads_and_vars)` (default: Keras'
    replica sum), and read the Adam slots of a variable with `slots(index)`
    and the decay predicate with `decays(variable)`.
    """

    # Keras calls these two around `update_step`; they route to the public hooks.
    def _apply_weight_decay(self, variables):
        self.weight_decay_step(variables)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return self.reduce_gradients(grads_and_vars)

    def weight_decay_step(self, variables) -> None:
        """Keras' decoupled weight decay of `variables` (before the Adam update)."""
        super()._apply_weight_decay(variables)

    def reduce_gradients(self, grads_and_vars):
        """The replica-summed (gradient, variable) pairs (identity without a strategy)."""
        return list(super()._all_reduce_sum_gradients(grads_and_vars))

    def variable_index(self, variable) -> int:
        """The position of `variable` in the optimizer's variable list."""
        return self._get_variable_index(variable)

    def slots(self, index: int):
        """(momentum, velocity): the Adam moment variables of the variable at `index`
        (`variable_index(variable)`)."""
        return self._momentums[index], self._velocities[index]

    def decays(self, variable) -> bool:
        """Whether weight decay applies to `variable` (exclusions already set)."""
        return bool(self.weight_decay) and self._use_weight_decay(variable)


# ----------------------------------------------------------------------- model
class PrebuiltModel:
    """Mixin for a `keras.Model` whose layers are all built in `__init__`.

    Keras' symbolic build before `fit` / `evaluate` would only peek (and drop) a
    batch, and under MultiWorkerMirroredStrategy it fails (strategy.reduce of a
    dict of per-replica ints): this builds the optimizer, in the strategy's
    scope, instead.
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)


class MultiReplicaExecution:
    """Mixin for a `keras.Model`: its own loop where Keras' multi-step function fails.

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

    def make_train_function(self, force=False):
        return self._multi_replica_function("train_function", self.train_step,
                                            super().make_train_function, force)

    def make_test_function(self, force=False):
        return self._multi_replica_function("test_function", self.test_step,
                                            super().make_test_function, force)

    def _multi_replica_function(self, attribute, step, keras_make, force):
        """The cached `self.<attribute>`, else our loop for `step`, else Keras' own."""
        if getattr(self, attribute) is not None and not force:
            return getattr(self, attribute)
        function = self._distributed_function(step)
        if function is None:
            return keras_make(force)
        setattr(self, attribute, function)
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
