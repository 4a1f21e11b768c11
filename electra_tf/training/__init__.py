"""The training machinery shared by pre-training and fine-tuning.

    optimization   ElectraAdamW (AdamW, optional per-variable learning-rate
                   multipliers, clipping of the replica-summed gradient) and
                   the one learning-rate schedule
    checkpoints    CheckpointManager: step-numbered .weights.h5 checkpoints
    distribution   --strategy -> tf.distribute strategy, the per-process
                   MirroredStrategy and the logical-CPU split
    shared_flags   the flags both command lines define (--strategy,
                   --mixed_precision, --jit_compile, --save_every, ...)
    callbacks      what both training loops log (current_learning_rate)

This layer sits below `pretraining` and `finetune` and imports only the layers
under it (models, data, config, errors, paths) and TensorFlow/Keras; the
modules are imported one by one (nothing here imports TensorFlow).
"""
