"""The training machinery of every job: the one training loop and what it is made of.

    trainer        `Trainer`: model.fit to exactly the last step with the callback
                   stack, the failures it diagnoses as one line, `precision_policy`,
                   `settings_conflicts` (the resume guard), the --verbose mapping
    callbacks      `StopOnNonFiniteLoss`, `TrainingCallback` (progress lines,
                   TensorBoard, periodic evaluation, checkpoints, job checks)
    optimization   `OptimizerSpec` -> `build_optimizer`: ElectraAdamW (per-variable
                   learning-rate multipliers, frozen variables, clipping of the
                   replica-summed gradient) and the one learning-rate schedule
    layerwise_lr   fine-tuning's layer-wise learning-rate multipliers
    finetune_optimizer
                   `make_optimizer`: fine-tuning's ElectraAdamW (finetune and
                   `ElectraClassifier.fit`), `FinetuneOptimizerSettings`
    checkpoints    CheckpointManager: step-numbered .weights.h5 checkpoints
    distribution   --strategy -> tf.distribute strategy, the per-process
                   MirroredStrategy, the logical-CPU split, `split_batch`
    shared_flags   the flags both command lines define (--strategy,
                   --mixed_precision, --jit_compile, --save_every, ...)

Pre-training, fine-tuning and `ElectraClassifier.fit` use it (docs/architecture.md,
"One training loop"). This layer sits below `pretrain` and `finetune` and imports
only the layers under it (models, data, config, errors, paths) and TensorFlow/Keras.
"""
