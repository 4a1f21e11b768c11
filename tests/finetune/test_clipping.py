"""Fine-tuning clips the replica-summed gradient, as pre-training does.

With a clip norm far below the gradient's norm, clipping decides the step. If
each replica clipped its own half of the gradient (Keras' `global_clipnorm`),
two replicas would step up to twice as far as one device on the same global
batch; clipping after the cross-replica sum gives the one-device step.
"""

import os

import numpy as np
import pytest

pytestmark = pytest.mark.large  # fine-tunes under MirroredStrategy: not in the fast tier

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "tiny.json")
BATCH = 8
SEQ = 16


def _batch():
    rng = np.random.default_rng(0)
    x = {"input_ids": rng.integers(5, 100, (BATCH, SEQ)).astype("int32"),
         "input_mask": np.ones((BATCH, SEQ), "int32"), "segment_ids": np.zeros((BATCH, SEQ), "int32")}
    return x, rng.integers(0, 2, BATCH).astype("int32")


def _one_step(strategy, make_optimizer):
    """Weights after one step on the same global batch; returns (weights before, after)."""
    import keras
    import tensorflow as tf

    from electra_tf.config import ElectraConfig
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    # No dropout: the replicas would draw other masks than the single device.
    cfg = ElectraConfig.from_json(CONFIG).replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        encoder = build_encoder(cfg)
        model = build_and_call(ClassifierModel(encoder, 2, dropout=0.0), SEQ)
        optimizer = make_optimizer(model, encoder)
        optimizer.build(model.trainable_variables)
    before = [v.numpy().copy() for v in model.trainable_variables]
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @tf.function
    def step(x, y):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                # The global-batch mean, as Keras' fit computes it per replica.
                loss = loss_fn(y, model(x, training=True)) / BATCH
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        strategy.run(replica_fn, args=(x, y))

    data = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(_batch()).batch(BATCH))
    step(*next(iter(data)))
    return before, [v.numpy() for v in model.trainable_variables]


def test_finetune_clips_the_summed_gradient(mirrored_strategy):
    import keras
    import tensorflow as tf

    from electra_tf.finetune.settings import Settings
    from electra_tf.training.finetune_optimizer import make_optimizer

    s = Settings(task="sst2", init="random", data_dir=None, output_dir="unused", clip_norm=1e-5,
                 warmup_proportion=0.0, weight_decay=0.0)

    def finetune_optimizer(model, encoder):
        return make_optimizer(model, encoder, s, lr=1e-2, decay=0.8, steps=10)[0]

    one_before, one = _one_step(tf.distribute.get_strategy(), finetune_optimizer)
    two_before, two = _one_step(mirrored_strategy, finetune_optimizer)
    for a, b in zip(one_before, two_before):
        np.testing.assert_array_equal(a, b)  # same start
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(one, one_before))
    assert moved > 1e-4  # the step is not empty
    for a, b in zip(one, two):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=moved * 1e-3)

    # Per-replica clipping (what fine-tuning used before: Keras' global_clipnorm) differs,
    # so the comparison above can tell the two rules apart.
    def per_replica_clip(model, encoder):
        return keras.optimizers.AdamW(learning_rate=1e-2 * 0.9, weight_decay=0.0, epsilon=1e-6,
                                      global_clipnorm=1e-5)

    _, keras_one = _one_step(tf.distribute.get_strategy(), per_replica_clip)
    _, keras_two = _one_step(mirrored_strategy, per_replica_clip)
    differs = max(float(np.max(np.abs(a - b))) for a, b in zip(keras_one, keras_two))
    assert differs > moved * 0.1
