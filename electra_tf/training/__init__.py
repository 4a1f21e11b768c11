"""The training machinery shared by pre-training and fine-tuning.

    optimization   ElectraAdamW (AdamW, optional per-variable learning-rate
                   multipliers, clipping of the replica-summed gradient) and
                   the two learning-rate schedules
    checkpoints    CheckpointManager: step-numbered .weights.h5 checkpoints
    distribution   the per-process MirroredStrategy and the logical-CPU split
    callbacks      what both training loops log (current_learning_rate)

This layer sits below `pretraining` and `finetune` and imports only the layers
under it (models, data, config, errors, paths) and TensorFlow/Keras; the
modules are imported one by one (nothing here imports TensorFlow).
"""
