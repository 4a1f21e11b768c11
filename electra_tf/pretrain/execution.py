"""Multi-step train / test functions for the two multi-replica cases Keras gets wrong."""

import tensorflow as tf


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
