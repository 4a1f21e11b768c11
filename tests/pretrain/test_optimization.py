"""The reference optimiser: schedule values and which variables are decayed."""

import numpy as np
import pytest

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.pretrain import ElectraPretrainer, create_optimizer
from electra_tf.training.optimization import WarmupPolynomialDecay


def test_schedule_is_linear_decay_times_linear_warmup():
    s = WarmupPolynomialDecay(1e-3, train_steps=1000, warmup_steps=100)
    got = [float(s(step)) for step in (0, 50, 100, 500, 1000, 2000)]
    expected = [0.0, 1e-3 * 0.95 * 0.5, 1e-3 * 0.9, 1e-3 * 0.5, 0.0, 0.0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)
    # No warmup: pure decay from the peak.
    assert float(WarmupPolynomialDecay(1.0, 10, 0)(0)) == 1.0


def test_optimizer_hyperparameters(repo_root):
    cfg = ElectraConfig.from_json(str(repo_root / "configs" / "small.json"))
    opt = create_optimizer(cfg)
    assert (opt.weight_decay, opt.beta_1, opt.beta_2, opt.epsilon, opt.clip_norm) == (
        0.01, 0.9, 0.999, 1e-6, 1.0)
    assert opt.global_clipnorm is None  # clipping happens after the replica sum
    sched = opt._learning_rate
    assert isinstance(sched, WarmupPolynomialDecay)
    assert (sched.peak_learning_rate, sched.warmup_steps, sched.train_steps) == (5e-4, 10000, 1000000)


def test_layer_norm_and_biases_are_not_decayed(repo_root):
    cfg = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    model = ElectraPretrainer(cfg, SpecialTokenIds(0, 1, 2, 3, 4))
    opt = create_optimizer(cfg)
    opt.build(model.trainable_variables)
    decayed = {v.path for v in model.trainable_variables if opt._use_weight_decay(v)}
    skipped = {v.path for v in model.trainable_variables if not opt._use_weight_decay(v)}
    assert skipped and decayed
    for path in skipped:
        assert path.endswith(("/gamma", "/beta", "/bias", "output_bias")), path
    for path in decayed:
        assert path.endswith(("kernel", "embeddings")), path
    assert any("token_embedding" in p for p in decayed)  # embeddings are decayed, as in the reference


def test_clipping_acts_on_the_aggregated_gradient():
    import keras
    import tensorflow as tf

    from electra_tf.training.optimization import ElectraAdamW

    var = keras.Variable([1.0, 1.0])
    opt = ElectraAdamW(clip_norm=1.0, learning_rate=0.1, weight_decay=0.0)
    opt.apply_gradients([(tf.constant([3.0, 4.0]), var)])  # norm 5 -> clipped to 1
    first_moment = keras.ops.convert_to_numpy(opt._momentums[0])
    np.testing.assert_allclose(first_moment, 0.1 * np.array([0.6, 0.8]), rtol=1e-6)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_fused_update_matches_keras_adamw(weight_decay):
    """ElectraAdamW's fused update gives Keras AdamW's values, step after step."""
    import keras
    import tensorflow as tf

    from electra_tf.training.optimization import ElectraAdamW

    rng = np.random.default_rng(0)
    init = {"dense/kernel": rng.normal(size=(5, 3)), "dense/bias": rng.normal(size=(3,)),
            "norm/gamma": rng.normal(size=(3,))}
    schedule = WarmupPolynomialDecay(0.05, train_steps=20, warmup_steps=3)

    def run(optimizer):
        variables = [keras.Variable(value.astype("float32"), name=name.split("/")[1])
                     for name, value in init.items()]
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma"])
        for step in range(6):
            grads = [tf.constant(rng_step.normal(size=v.shape), tf.float32)
                     for v, rng_step in zip(variables, [np.random.default_rng(step * 3 + i)
                                                        for i in range(3)])]
            optimizer.apply_gradients(zip(grads, variables))
        return [keras.ops.convert_to_numpy(v) for v in variables], optimizer

    ours, fused = run(ElectraAdamW(learning_rate=schedule, weight_decay=weight_decay,
                                   beta_1=0.9, beta_2=0.999, epsilon=1e-6))
    theirs, keras_opt = run(keras.optimizers.AdamW(learning_rate=schedule,
                                                   weight_decay=weight_decay,
                                                   beta_1=0.9, beta_2=0.999, epsilon=1e-6))
    for a, b, value in zip(ours, theirs, init.values()):
        # float32 rounding (XLA contracts multiply-adds); the updates are ~1e-2
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert np.abs(a - value).max() > 1e-3  # the variables did move
    for mine, ref in zip(fused._momentums + fused._velocities,
                         keras_opt._momentums + keras_opt._velocities):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(mine),
                                   keras.ops.convert_to_numpy(ref), rtol=1e-5, atol=1e-9)


def test_fused_update_under_mirrored_strategy_matches_one_device(mirrored_strategy):
    """Under MirroredStrategy (update per device) 2 replicas give the one-device step."""
    import keras
    import tensorflow as tf

    from electra_tf.training.optimization import ElectraAdamW

    grads = [np.full((4, 2), 0.5, np.float32), np.array([1.0, -2.0], np.float32)]

    def run(strategy):
        with strategy.scope():
            variables = [keras.Variable(np.ones((4, 2), np.float32), name="kernel"),
                         keras.Variable(np.zeros(2, np.float32), name="bias")]
            opt = ElectraAdamW(clip_norm=1.0, learning_rate=0.1, weight_decay=0.1)
            opt.exclude_from_weight_decay(var_names=["bias"])
            opt.build(variables)

        @tf.function
        def step():
            def replica_fn():
                # Each replica holds 1/N of the summed gradient.
                n = tf.distribute.get_replica_context().num_replicas_in_sync
                opt.apply_gradients([(tf.constant(g) / tf.cast(n, tf.float32), v)
                                     for g, v in zip(grads, variables)])
            strategy.run(replica_fn)

        for _ in range(3):
            step()
        return [keras.ops.convert_to_numpy(v) for v in variables]

    one = run(tf.distribute.get_strategy())
    mirrored = run(mirrored_strategy)
    for a, b in zip(one, mirrored):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not np.allclose(one[0], 1.0)  # kernels moved (decayed and updated)


def _step_vars(optimizer, variables, grads, steps):
    import tensorflow as tf

    for _ in range(steps):
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
    return [v.numpy().copy() for v in variables]


def test_frozen_variables_hold_then_start_with_a_fresh_adam_step():
    """frozen_paths: no Adam step and no weight decay while frozen; after the thaw the first step
    has Adam's first-step size (bias correction counts the variable's own steps)."""
    import keras

    from electra_tf.training.optimization import adamw

    frozen = keras.Variable(np.ones(3, "float32"), name="frozen_kernel")
    free = keras.Variable(np.ones(3, "float32"), name="free_kernel")
    opt = adamw(1e-2, weight_decay=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-6, clip_norm=1.0,
                frozen_paths=[frozen.path], frozen_steps=5)
    grads = [np.full(3, 0.5, "float32"), np.full(3, 0.5, "float32")]
    after5 = _step_vars(opt, [frozen, free], grads, 5)
    np.testing.assert_array_equal(after5[0], np.ones(3))  # not even decayed
    assert np.all(after5[1] < 1.0)
    after6 = _step_vars(opt, [frozen, free], grads, 1)
    # A first Adam step: |update| = lr (m_hat / sqrt(v_hat) = 1), plus the decay lr * wd * w.
    np.testing.assert_allclose(after6[0], 1.0 - 1e-2 - 1e-2 * 0.1, rtol=0, atol=1e-5)


def test_frozen_gradients_do_not_count_in_the_clipped_norm():
    import keras

    from electra_tf.training.optimization import adamw

    frozen = keras.Variable(np.zeros(1, "float32"), name="frozen_kernel")
    free = keras.Variable(np.zeros(1, "float32"), name="free_kernel")
    opt = adamw(1.0, weight_decay=0.0, beta_1=0.0, beta_2=0.0, epsilon=0.0, clip_norm=1.0,
                frozen_paths=[frozen.path], frozen_steps=1)
    # beta = 0: the step is lr * g / |g| = sign(g) whatever the clip; a clip that counted the frozen
    # gradient would still give sign(g), so look at the reduced gradients instead.
    import tensorflow as tf

    opt.build([frozen, free])
    reduced = opt.reduce_gradients([(tf.constant([100.0]), frozen), (tf.constant([0.6]), free)])
    assert float(reduced[0][0][0]) == 0.0
    np.testing.assert_allclose(float(reduced[1][0][0]), 0.6, rtol=1e-6)  # under the clip: untouched


def test_encoder_lr_multiplier_scales_only_the_encoder(repo_root):
    cfg = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json")).replace(
        vocab_size=60, encoder_lr_multiplier=0.1, encoder_freeze_steps=3)
    model = ElectraPretrainer(cfg, SpecialTokenIds(0, 1, 2, 3, 4))
    with pytest.raises(ValueError, match="need the model"):
        create_optimizer(cfg)
    opt = create_optimizer(cfg, model=model)
    encoder = {v.path for v in model.discriminator.trainable_variables}
    generator_only = [v.path for v in model.generator.trainable_variables if v.path not in encoder]
    assert encoder and generator_only
    assert all(opt.lr_multipliers[p] == 0.1 for p in encoder)
    assert all(opt.lr_multipliers[p] == 1.0 for p in generator_only)
    assert set(opt.frozen_paths) == encoder and opt.frozen_steps == 3
