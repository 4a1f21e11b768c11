"""Layer-wise lr: every variable assigned, values follow the formula, the optimizer applies them."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "tiny.json")


@pytest.fixture(scope="module")
def tiny_model():
    from electra_tf.config import ElectraConfig
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    cfg = ElectraConfig.from_json(CONFIG)
    encoder = build_encoder(cfg)
    model = build_and_call(ClassifierModel(encoder, 2, name="clf"), 16)
    return cfg, encoder, model


def test_every_variable_gets_the_formula_value(tiny_model):
    from electra_tf.training.layerwise_lr import layerwise_lr_multipliers, variable_depths

    cfg, encoder, model = tiny_model
    n = cfg.num_hidden_layers
    assert n == 2 and encoder.embeddings_projection is not None
    mult = layerwise_lr_multipliers(model, encoder, 0.8)
    # every trainable variable has exactly one entry
    assert sorted(mult) == sorted(v.path for v in model.trainable_variables)
    assert len(mult) == len(model.trainable_variables)
    emb = {v.path for v in encoder.embeddings.trainable_variables}
    proj = {v.path for v in encoder.embeddings_projection.trainable_variables}
    layer = [{v.path for v in l.trainable_variables} for l in encoder.transformer_layers]
    head = {v.path for v in model.head.trainable_variables}
    assert len(emb) >= 4 and len(head) == 2 and all(len(l) >= 10 for l in layer)
    for p in emb | proj:
        assert mult[p] == pytest.approx(0.8 ** 3)  # lr * d^(L+1)
    for p in layer[0]:
        assert mult[p] == pytest.approx(0.8 ** 2)
    for p in layer[1]:
        assert mult[p] == pytest.approx(0.8)  # top layer: lr * d
    for p in head:
        assert mult[p] == 1.0
    depths = variable_depths(model, encoder)
    assert set(depths.values()) == {0, 1, 2, 3}
    # the reference's extra power (google-research/electra #51)
    ref = layerwise_lr_multipliers(model, encoder, 0.8, reference_extra_power=True)
    for p in emb:
        assert ref[p] == pytest.approx(0.8 ** 4)
    for p in layer[1]:
        assert ref[p] == pytest.approx(0.8 ** 2)
    for p in head:
        assert ref[p] == 1.0
    assert set(layerwise_lr_multipliers(model, encoder, 1.0).values()) == {1.0}


def test_unassigned_variable_is_an_error(tiny_model):
    import keras

    from electra_tf.training.layerwise_lr import LayerwiseLRError, layerwise_lr_multipliers
    from electra_tf.training.optimization import ElectraAdamW

    cfg, encoder, model = tiny_model
    mult = layerwise_lr_multipliers(model, encoder, 0.8)
    mult.pop(model.head.trainable_variables[0].path)
    opt = ElectraAdamW(lr_multipliers=mult, learning_rate=1e-3, weight_decay=0.0)
    with pytest.raises(LayerwiseLRError, match="1 variable\\(s\\) have no learning-rate multiplier"):
        opt.build(model.trainable_variables)
    # an encoder variable outside embeddings/projection/layers cannot be placed
    extra = keras.Variable(np.zeros(3, "float32"), name="stray")
    encoder._tracker.unlock()
    encoder.stray = extra
    encoder._tracker.lock()
    try:
        with pytest.raises(LayerwiseLRError, match="stray"):
            layerwise_lr_multipliers(model, encoder, 0.8)
    finally:
        encoder._tracker.unlock()
        del encoder.stray
        encoder._tracker.lock()


def test_optimizer_applies_multipliers_and_decay():
    import keras

    from electra_tf.training.optimization import adamw

    def optimizer(mult, weight_decay, epsilon=1e-7):
        return adamw(0.1, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=epsilon,
                     clip_norm=None, lr_multipliers=mult)

    a = keras.Variable(np.ones((2, 2), "float32"), name="a")
    b = keras.Variable(np.ones((2, 2), "float32"), name="b")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    opt = optimizer({a.path: 1.0, b.path: 0.25, bias.path: 0.5}, 0.0, epsilon=1e-12)
    g = np.full((2, 2), 3.0, "float32")
    opt.apply_gradients([(g, a), (g, b), (np.ones(2, "float32"), bias)])
    # first Adam step moves by lr * mult * sign(g)
    np.testing.assert_allclose(a.numpy(), 1 - 0.1, rtol=1e-5)
    np.testing.assert_allclose(b.numpy(), 1 - 0.025, rtol=1e-5)
    np.testing.assert_allclose(bias.numpy(), 1 - 0.05, rtol=1e-5)
    # decoupled decay scaled by lr*mult on weights; none on biases and LayerNorm (the
    # reference's name rule, also for the attention layers' rank-2 per-head biases)
    c = keras.Variable(np.ones((2, 2), "float32"), name="c")
    d = keras.Variable(np.ones((2,), "float32"), name="bias")
    e = keras.Variable(np.ones((2, 2), "float32"), name="bias")
    g = keras.Variable(np.ones((2,), "float32"), name="gamma")
    opt = optimizer({v.path: 0.5 for v in (c, d, e, g)}, 0.1)
    opt.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in (c, d, e, g)])
    np.testing.assert_allclose(c.numpy(), 1 - 0.1 * 0.5 * 0.1, rtol=1e-6)
    for v in (d, e, g):
        np.testing.assert_allclose(v.numpy(), 1.0)


def test_finetune_schedule_is_the_pretraining_schedule_with_linear_decay(tiny_model):
    # One schedule for both jobs, as the reference's create_optimizer: the linear
    # decay is multiplied by the warmup factor over warmup_proportion of the steps.
    from electra_tf.finetune.settings import Settings
    from electra_tf.training.finetune_optimizer import make_optimizer
    from electra_tf.training.optimization import WarmupPolynomialDecay

    _, encoder, model = tiny_model
    s = Settings(task="sst2", init="random", data_dir=None, output_dir="unused", warmup_proportion=0.1)
    opt, _ = make_optimizer(model, encoder, s, 1e-4, 0.8, 100)
    schedule = opt.learning_rate if callable(opt.learning_rate) else opt._learning_rate
    assert isinstance(schedule, WarmupPolynomialDecay)
    assert (schedule.train_steps, schedule.warmup_steps, schedule.power) == (100, 10, 1.0)
    assert float(schedule(0)) == 0.0
    assert float(schedule(5)) == pytest.approx(1e-4 * 0.95 * 0.5)
    assert float(schedule(10)) == pytest.approx(1e-4 * 0.9)
    assert float(schedule(55)) == pytest.approx(1e-4 * 0.45)
    assert float(schedule(100)) == 0.0


@pytest.mark.large
def test_fit_under_mirrored_strategy():
    # Needs two logical CPU devices, set before TensorFlow starts: own process.
    code = textwrap.dedent(f"""
        import numpy as np, tensorflow as tf, keras
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from electra_tf.config import ElectraConfig
        from electra_tf.models import build_encoder
        from electra_tf.models.classifier_model import ClassifierModel, build_and_call
        from electra_tf.training.layerwise_lr import layerwise_lr_multipliers
        from electra_tf.training.optimization import adamw
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        cfg = ElectraConfig.from_json({CONFIG!r})
        with strategy.scope():
            enc = build_encoder(cfg)
            model = build_and_call(ClassifierModel(enc, 2), 16)
            mult = layerwise_lr_multipliers(model, enc, 0.8)
            model.compile(adamw(1e-3, weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                                clip_norm=1.0, lr_multipliers=mult),
                          keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        emb_before = enc.embeddings.trainable_variables[0].numpy().copy()
        head_before = model.head.trainable_variables[0].numpy().copy()
        rng = np.random.default_rng(0)
        x = {{"input_ids": rng.integers(5, 100, (8, 16)).astype("int32"),
              "input_mask": np.ones((8, 16), "int32"), "segment_ids": np.zeros((8, 16), "int32")}}
        y = rng.integers(0, 2, 8).astype("int32")
        h = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=1, verbose=0,
                      shuffle=False)
        assert np.isfinite(h.history["loss"][0])
        assert not np.allclose(head_before, model.head.trainable_variables[0].numpy())
        assert not np.allclose(emb_before, enc.embeddings.trainable_variables[0].numpy())
        print("OK", strategy.num_replicas_in_sync)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK 2" in out.stdout
