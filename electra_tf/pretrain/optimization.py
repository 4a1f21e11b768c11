"""The pre-training optimiser from an `ElectraConfig`: the shared AdamW
(`electra_tf.training.optimization`) with the reference's warmup + polynomial decay.
"""

from electra_tf.training.optimization import WarmupPolynomialDecay, adamw


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
    return adamw(schedule, weight_decay=config.weight_decay_rate, beta_1=config.adam_beta_1,
                 beta_2=config.adam_beta_2, epsilon=config.adam_epsilon,
                 clip_norm=config.clip_norm if config.clip_norm > 0 else None,
                 fused=config.fused_kernels)
