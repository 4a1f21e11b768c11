"""The reference optimiser: AdamW with linear warmup and linear (polynomial) decay."""

import keras
import tensorflow as tf

# Variables whose name matches one of these are not weight-decayed, as in the
# reference (LayerNorm scale/offset and every bias, incl. the MLM output bias).
NO_DECAY_NAME_PATTERNS = ("gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * (1 - step/train_steps)^power * min(1, step/warmup_steps).

    The reference multiplies the decay by the warmup factor (it does not switch
    from one to the other), so the peak actually reached is slightly below
    `peak`; we keep that.

    Args:
        peak_learning_rate: the base learning rate.
        train_steps: steps after which the rate reaches 0.
        warmup_steps: length of the linear warmup (0 for none).
        power: decay power (1.0: linear).
    """

    def __init__(self, peak_learning_rate, train_steps, warmup_steps, power=1.0):
        self.peak_learning_rate = float(peak_learning_rate)
        self.train_steps = int(train_steps)
        self.warmup_steps = int(warmup_steps)
        self.power = float(power)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        progress = tf.minimum(step, float(self.train_steps)) / float(self.train_steps)
        lr = self.peak_learning_rate * tf.pow(1.0 - progress, self.power)
        if self.warmup_steps > 0:
            lr *= tf.minimum(1.0, step / float(self.warmup_steps))
        return lr

    def get_config(self):
        return dict(
            peak_learning_rate=self.peak_learning_rate,
            train_steps=self.train_steps,
            warmup_steps=self.warmup_steps,
            power=self.power,
        )


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraAdamW(keras.optimizers.AdamW):
    """AdamW that clips the global norm of the gradient *summed over replicas*.

    Keras' own `global_clipnorm` clips each replica's gradient before the
    cross-replica sum, so N replicas would not reproduce one device on the same
    global batch (the reference's TPU code clipped per core too). Clipping the
    aggregated gradient makes the update independent of the device count.

    Args:
        clip_norm: maximum global norm of the aggregated gradient (None: off).
        **kwargs: passed to `keras.optimizers.AdamW`.
    """

    def __init__(self, clip_norm=None, **kwargs):
        super().__init__(**kwargs)
        self.clip_norm = clip_norm

    def apply(self, grads, trainable_variables=None):
        # Embedding lookups give `tf.IndexedSlices` gradients with repeated rows
        # (every [PAD], every segment-0 token). Keras' sparse Adam path
        # scatter-adds those duplicates into m and v separately, so a row's step
        # grows with how often it repeats (up to sqrt(n) x lr); the reference
        # (and dense Adam) sums the duplicates first. Densify to match it; this
        # also makes micro-batch accumulation equal to the large batch.
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        return super().apply(grads, trainable_variables)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Called by the TensorFlow backend right after clipping and before the
        # update; the gradients returned here are the replica-summed ones.
        grads_and_vars = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if not self.clip_norm:
            return grads_and_vars
        grads = [g for g, _ in grads_and_vars]
        clipped, _ = tf.clip_by_global_norm(grads, self.clip_norm)
        return [(g, v) for g, (_, v) in zip(clipped, grads_and_vars)]

    def get_config(self):
        config = super().get_config()
        config["clip_norm"] = self.clip_norm
        return config


def create_optimizer(config, train_steps=None, learning_rate=None):
    """AdamW configured as the reference's `AdamWeightDecayOptimizer`.

    Deviations: Keras' AdamW applies Adam's bias correction; the reference
    optimizer does not. Clipping acts on the replica-summed gradient (see
    `ElectraAdamW`). With a warmup of thousands of steps the difference is
    confined to the first steps, where the learning rate is near 0 anyway.

    Args:
        config: an `ElectraConfig`.
        train_steps: overrides `config.num_train_steps` for the decay horizon.
        learning_rate: overrides `config.learning_rate`.
    """
    schedule = WarmupPolynomialDecay(
        learning_rate if learning_rate is not None else config.learning_rate,
        train_steps if train_steps is not None else config.num_train_steps,
        config.num_warmup_steps,
        config.lr_decay_power,
    )
    optimizer = ElectraAdamW(
        learning_rate=schedule,
        weight_decay=config.weight_decay_rate,
        beta_1=config.adam_beta_1,
        beta_2=config.adam_beta_2,
        epsilon=config.adam_epsilon,
        clip_norm=config.clip_norm if config.clip_norm > 0 else None,
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAME_PATTERNS))
    return optimizer
