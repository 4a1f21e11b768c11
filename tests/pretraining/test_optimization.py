"""The reference optimiser: schedule values and which variables are decayed."""

import numpy as np
import pytest

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.pretraining import ElectraPretrainer, WarmupPolynomialDecay, create_optimizer


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

    from electra_tf.pretraining import ElectraAdamW

    var = keras.Variable([1.0, 1.0])
    opt = ElectraAdamW(clip_norm=1.0, learning_rate=0.1, weight_decay=0.0)
    opt.apply_gradients([(tf.constant([3.0, 4.0]), var)])  # norm 5 -> clipped to 1
    first_moment = keras.ops.convert_to_numpy(opt._momentums[0])
    np.testing.assert_allclose(first_moment, 0.1 * np.array([0.6, 0.8]), rtol=1e-6)
