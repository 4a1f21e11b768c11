"""The pre-training optimiser from an `ElectraConfig`: the config's fields as the one
`OptimizerSpec` (`electra_tf.training.optimization`), plus continued pre-training's
encoder freeze and rate multiplier.
"""

from electra_tf.training.optimization import OptimizerSpec, build_optimizer


def create_optimizer(config, train_steps=None, learning_rate=None, model=None, adjustable_train_steps=False):
    """AdamW configured as the reference's `AdamWeightDecayOptimizer`.

    Deviations: Keras' AdamW applies Adam's bias correction; the reference
    optimizer does not. Clipping acts on the replica-summed gradient (see
    `ElectraAdamW`). With a warmup of thousands of steps the difference is
    confined to the first steps, where the learning rate is near 0 anyway.

    Args:
        config: an `ElectraConfig`.
        train_steps: overrides `config.num_train_steps` for the decay horizon.
        learning_rate: overrides `config.learning_rate`.
        model: the built `ElectraPretrainer`, needed when `config.encoder_freeze_steps` > 0 or
            `config.encoder_lr_multiplier` < 1 (continued pre-training): its discriminator encoder
            is held for that many steps, then trains at that fraction of the rate.
        adjustable_train_steps: the decay horizon can move while training runs (`--train_minutes`);
            call this under the strategy's scope then.
    """
    frozen = multipliers = None
    if config.encoder_freeze_steps or config.encoder_lr_multiplier != 1.0:
        if model is None:
            raise ValueError("config.encoder_freeze_steps / encoder_lr_multiplier need the model (model=)")
        encoder = {v.path for v in model.discriminator.trainable_variables}
        if config.encoder_freeze_steps:
            frozen = sorted(encoder)
        if config.encoder_lr_multiplier != 1.0:
            multipliers = {v.path: config.encoder_lr_multiplier if v.path in encoder else 1.0
                           for v in model.trainable_variables}
    spec = OptimizerSpec(
        learning_rate=learning_rate if learning_rate is not None else config.learning_rate,
        train_steps=train_steps if train_steps is not None else config.num_train_steps,
        warmup_steps=config.num_warmup_steps, decay_power=config.lr_decay_power,
        weight_decay=config.weight_decay_rate, beta_1=config.adam_beta_1, beta_2=config.adam_beta_2,
        epsilon=config.adam_epsilon, clip_norm=config.clip_norm if config.clip_norm > 0 else None,
        fused=config.fused_kernels, adjustable_train_steps=adjustable_train_steps)
    return build_optimizer(spec, lr_multipliers=multipliers, frozen_paths=frozen,
                           frozen_steps=config.encoder_freeze_steps)
