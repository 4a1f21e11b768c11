"""Fine-tuning the ELECTRA discriminator: GLUE, SQuAD 1.1/2.0 and tagging.

Run it with ``python -m electra_tf.finetune --task sst2 ...`` (see docs/finetune.md).
Heavy modules (TensorFlow models) are imported lazily by the CLI so that the
data and metric helpers can be used without building a model.
"""
