"""The pre-trainer's train step, by hand: one SGD update of every weight from ELECTRA's loss.

With plain SGD the update is -lr x gradient, so the step's gradient can be read
off the weights and compared with the gradient of gen_weight x L_MLM +
disc_weight x L_Disc taken here from the objective's outputs at the step's own
seed (config seed, step). The shared token table gets both losses' gradients,
the generator's own layers the MLM loss's only (no gradient through the
samples), the discriminator's the replaced-token loss's only.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import pretrain_batch, pretrain_model

LR = 0.5


def _dense(grad, variable):
    return np.zeros(variable.shape, np.float32) if grad is None else tf.convert_to_tensor(grad).numpy()


def _by_hand(model, batch, step, training=True):
    """{variable path: (d gen_weight*mlm, d disc_weight*disc)} at the step's seed (config seed, step)."""
    cfg = model.config
    rows = batch["input_ids"].shape[0]
    seed = tf.constant([cfg.seed, step], tf.int64)
    with tf.GradientTape(persistent=True) as tape:
        out = model.forward(batch, seed, tf.range(rows, dtype=tf.int64), training=training)
        gen = cfg.gen_weight * out["mlm_loss"]
        disc = cfg.disc_weight * out["disc_loss"]
    variables = model.trainable_variables
    from_gen = tape.gradient(gen, variables)
    from_disc = tape.gradient(disc, variables)
    return {v.path: (_dense(g, v), _dense(d, v)) for v, g, d in zip(variables, from_gen, from_disc)}


def test_two_sgd_steps_apply_the_gradient_of_the_electra_loss_at_each_steps_seed():
    model = pretrain_model("electra")
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=LR))
    batch = pretrain_batch(rows=6, seed=4)
    variables = model.trainable_variables
    assert len({id(v) for v in variables}) == len(variables)

    # The token table is one variable, read by both networks.
    token = model.discriminator.embeddings.token_embedding.embeddings
    assert model.generator_head.token_embedding.embeddings is token
    assert [v.path for v in variables].count(token.path) == 1

    for step in (0, 1):
        before = {v.path: v.numpy() for v in variables}
        grads = _by_hand(model, batch, step)
        other = _by_hand(model, batch, 1 - step)  # the other step's draws give another gradient
        model.train_on_batch(batch)
        assert int(model.optimizer.iterations.numpy()) == step + 1
        moved_other = 0.0
        for v in variables:
            gen, disc = grads[v.path]
            want = before[v.path] - LR * (gen + disc)
            np.testing.assert_allclose(v.numpy(), want, rtol=1e-4, atol=1e-6, err_msg=f"{v.path} at step {step}")
            moved_other = max(moved_other, np.abs(sum(other[v.path]) - (gen + disc)).max())
        assert moved_other > 1e-4  # the step's seed decides its masks and samples

        # Which loss reaches which weights.
        gen_token, disc_token = grads[token.path]
        assert np.abs(gen_token).max() > 0 and np.abs(disc_token).max() > 0
        for v in variables:
            gen, disc = grads[v.path]
            shared = "/embeddings/" in v.path  # the one embeddings layer both networks read
            if v.path.startswith("generator") and not shared:
                assert not np.any(disc), f"the replaced-token loss reaches {v.path}"
            if v.path.startswith(("discriminator/", "discriminator_predictions")) and not shared:
                assert not np.any(gen), f"the MLM loss reaches {v.path}"
        assert any(np.any(grads[v.path][0]) for v in variables if v.path.startswith("generator"))
        assert any(np.any(grads[v.path][1]) for v in variables if v.path.startswith("discriminator_predictions"))


@pytest.mark.large
def test_xla_and_plain_train_steps_agree():
    """`jit_compile=True` (one XLA program per step) takes the same step as TensorFlow's kernels."""
    plain = pretrain_model("electra")
    xla = pretrain_model("electra")
    xla.set_weights(plain.get_weights())
    plain.compile(optimizer=keras.optimizers.SGD(learning_rate=LR), jit_compile=False)
    xla.compile(optimizer=keras.optimizers.SGD(learning_rate=LR), jit_compile=True)
    batch = pretrain_batch(rows=6, seed=6)
    before = [w.copy() for w in plain.get_weights()]
    for step in range(2):
        a = plain.train_on_batch(batch, return_dict=True)
        b = xla.train_on_batch(batch, return_dict=True)
        for name in ("loss", "mlm_loss", "disc_loss"):
            assert b[name] == np.float32(a[name]) or abs(b[name] - a[name]) <= 1e-4 * abs(a[name]), (step, name)
    moved = 0.0
    for p, x, w0 in zip(plain.get_weights(), xla.get_weights(), before):
        np.testing.assert_allclose(x, p, rtol=1e-4, atol=1e-5)
        moved = max(moved, float(np.abs(p - w0).max()))
    assert moved > 1e-3  # the steps did move the weights


def test_the_step_trains_with_dropout():
    """With dropout on, the step's update is not the dropout-free gradient's (training=True)."""
    model = pretrain_model("electra", hidden_dropout_prob=0.3)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=LR))
    batch = pretrain_batch(rows=6, seed=4)
    before = {v.path: v.numpy() for v in model.trainable_variables}
    without_dropout = _by_hand(model, batch, 0, training=False)
    model.train_on_batch(batch)
    gap = max(float(np.abs(v.numpy() - (before[v.path] - LR * sum(without_dropout[v.path]))).max())
              for v in model.trainable_variables)
    assert gap > 1e-4
