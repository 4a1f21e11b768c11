"""`fused_kernels` on and off: one train step gives the same losses, gradients and update.

The fused path (transformer_block.py, fused_ops, the XLA cross-entropy, the fused AdamW update) is a
faster layout of the same maths; dropout is off here because the fused path
draws its masks from a hash rather than Keras' streams.
"""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretrain import ElectraPretrainer, create_optimizer

from helpers import (pretrain_batch as make_batch, pretrain_config as make_config,
                     pretrain_model as make_model, pretrain_special_ids)

pytestmark = pytest.mark.large  # compiles train steps with and without fused kernels: not in the fast tier

SPECIAL = pretrain_special_ids()


def make_model(fused, objective):
    cfg = make_config(objective, fused_kernels=fused, num_hidden_layers=2)
    model = ElectraPretrainer(cfg, SPECIAL)
    model.compile(optimizer=create_optimizer(cfg))
    return model


@pytest.mark.parametrize("objective", ["electra", "mlm"])
def test_fused_and_plain_train_steps_agree(objective):
    fused, plain = make_model(True, objective), make_model(False, objective)
    batch = make_batch(rows=6)
    fused(batch)
    plain(batch)
    plain.set_weights(fused.get_weights())
    assert all(b.fused for b in fused.discriminator.transformer_layers)
    assert not any(b.fused for b in plain.discriminator.transformer_layers)
    assert fused.optimizer.fused and not plain.optimizer.fused

    seed = tf.constant([3, 7], tf.int64)

    def losses_and_grads(model):
        with tf.GradientTape() as tape:
            out = model.forward(batch, seed, training=True)
        grads = tape.gradient(out["loss"], model.trainable_variables)
        return out, [tf.convert_to_tensor(g).numpy() for g in grads]

    out_f, grads_f = losses_and_grads(fused)
    out_p, grads_p = losses_and_grads(plain)
    for name in ("loss", "mlm_loss", "disc_loss"):
        if name in out_f:
            assert float(out_f[name]) == pytest.approx(float(out_p[name]), rel=1e-5), name
    assert len(grads_f) == len(grads_p) == len(fused.trainable_variables)
    for variable, gf, gp in zip(fused.trainable_variables, grads_f, grads_p):
        scale = max(np.abs(gp).max(), 1e-4)
        np.testing.assert_allclose(gf, gp, atol=1e-4 * scale, err_msg=variable.path)

    # One optimizer step through fit: the fused AdamW update equals Keras' own.
    data = tf.data.Dataset.from_tensors(batch).repeat()
    before = fused.get_weights()
    h_f = fused.fit(data, steps_per_epoch=1, verbose=0, shuffle=False).history
    h_p = plain.fit(data, steps_per_epoch=1, verbose=0, shuffle=False).history
    assert h_f["loss"][-1] == pytest.approx(h_p["loss"][-1], rel=1e-5)
    moved = 0
    for start, a, b in zip(before, fused.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        moved += not np.allclose(a, start)
    assert moved > len(before) // 2
