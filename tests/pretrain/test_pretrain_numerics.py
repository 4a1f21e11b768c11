"""Gradient accumulation == the large batch in one step; bf16 / fp16 on CPU."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.pretrain import ElectraPretrainer, create_optimizer

pytestmark = pytest.mark.large  # pre-trains under each precision: not in the fast tier

SPECIAL = SpecialTokenIds(0, 1, 2, 3, 4)


def _config(repo_root, **changes):
    cfg = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    return cfg.replace(vocab_size=300, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       num_warmup_steps=0, **changes)


def _batch(n=8, seq=64):
    rng = np.random.RandomState(0)
    ids = rng.randint(5, 300, (n, seq)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    mask[::3, 40:] = 0  # uneven lengths: per-micro-batch normalisation would differ
    ids = ids * mask
    return {"input_ids": ids, "input_mask": mask, "segment_ids": (np.arange(seq) > 30).astype(np.int32)[None].repeat(n, 0) * mask}


def test_gradient_accumulation_equals_large_batch(repo_root):
    cfg = _config(repo_root)
    data = tf.data.Dataset.from_tensors(_batch()).repeat()
    keras.utils.set_random_seed(1)
    large = ElectraPretrainer(cfg, SPECIAL)
    large.compile(optimizer=create_optimizer(cfg))
    weights = large.get_weights()
    accum = ElectraPretrainer(cfg, SPECIAL, grad_accum_steps=4)  # 4 micro-batches of 2
    accum.compile(optimizer=create_optimizer(cfg))
    accum.set_weights(weights)
    h_large = large.fit(data, steps_per_epoch=1, verbose=0, shuffle=False).history
    h_accum = accum.fit(data, steps_per_epoch=1, verbose=0, shuffle=False).history
    for name in ("loss", "mlm_loss", "disc_loss", "mlm_accuracy", "disc_auc"):
        assert h_accum[name][0] == pytest.approx(h_large[name][0], rel=1e-5, abs=1e-6), name
    moved = 0
    for before, a, b in zip(weights, large.get_weights(), accum.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
        moved += not np.allclose(a, before)
    assert moved > len(weights) // 2
    assert int(accum.optimizer.iterations.numpy()) == 1  # one update for 4 micro-batches


def test_grad_accum_must_divide_the_batch(repo_root):
    cfg = _config(repo_root)
    model = ElectraPretrainer(cfg, SPECIAL, grad_accum_steps=3)
    model.compile(optimizer=create_optimizer(cfg))
    with pytest.raises(ValueError, match="not divisible by grad_accum_steps=3"):
        model.fit(tf.data.Dataset.from_tensors(_batch()).repeat(), steps_per_epoch=1, verbose=0,
                  shuffle=False)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_losses_finite_and_gradients_nonzero(repo_root, policy):
    cfg = _config(repo_root)
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = ElectraPretrainer(cfg, SPECIAL)
        optimizer = create_optimizer(cfg)
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer)
        batch = _batch()
        out = model(batch, training=True)
        assert out["mlm_logits"].dtype == tf.float32 and out["disc_logits"].dtype == tf.float32
        assert out["loss"].dtype == tf.float32
        with tf.GradientTape() as tape:
            loss = model(batch, training=True)["loss"]
        grads = tape.gradient(loss, model.trainable_variables)
        assert all(g is not None for g in grads)
        norms = [float(tf.norm(tf.cast(tf.convert_to_tensor(g), tf.float32))) for g in grads]
        assert all(np.isfinite(norms)) and sum(n > 0 for n in norms) > len(norms) * 0.9
        history = model.fit(tf.data.Dataset.from_tensors(batch).repeat(), steps_per_epoch=2,
                            verbose=0, shuffle=False).history
        assert np.isfinite(history["loss"]).all()
        if policy == "mixed_float16":
            # Loss scaling inside train_step: the first steps overflow fp16 at the
            # initial scale 2^15, are skipped, and the scale drops.
            assert float(model.optimizer.dynamic_scale.numpy()) < 2.0 ** 15
        else:
            assert int(model.optimizer.iterations.numpy()) == 2
        compute = model.discriminator.compute_dtype if hasattr(model.discriminator, "compute_dtype") else None
        assert compute in ("bfloat16", "float16")
        assert all(v.dtype == "float32" for v in model.trainable_variables)
    finally:
        keras.mixed_precision.set_global_policy("float32")
