"""Heads: [CLS] classification, end conditioned on start, beams, and loading pre-trained weights."""

import os

import numpy as np
import pytest

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "tiny.json")


def test_classification_head_uses_cls_only():
    from electra_tf.models.classification_head import ClassificationHead

    head = ClassificationHead(3, dropout=0.1)
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    y1 = head(x, training=False).numpy()
    x2 = x.copy()
    x2[:, 1:] = 0.0  # only position 0 ([CLS]) matters
    np.testing.assert_allclose(head(x2, training=False).numpy(), y1, rtol=1e-6)
    assert y1.shape == (2, 3)
    two = ClassificationHead(1, two_layer=True, hidden_dim=8)
    assert two(x).shape == (2, 1) and len(two.trainable_variables) == 4


def test_classification_head_mean_pooling_averages_the_real_tokens():
    from electra_tf.models.classification_head import ClassificationHead

    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")
    head = ClassificationHead(2, dropout=0.0, pooling="mean")
    y = head(x, input_mask=mask, training=False).numpy()
    kernel, bias = (v.numpy() for v in head.out.weights)
    pooled = np.stack([x[0, :3].mean(0), x[1].mean(0)])  # padding left out
    np.testing.assert_allclose(y, pooled @ kernel + bias, rtol=1e-5, atol=1e-6)
    x2 = x.copy()
    x2[0, 3:] = 100.0  # padded positions do not matter
    np.testing.assert_allclose(head(x2, input_mask=mask, training=False).numpy(), y, rtol=1e-6)
    assert head.get_config()["pooling"] == "mean"
    with pytest.raises(ValueError, match="pooling"):
        ClassificationHead(2, pooling="max")
    with pytest.raises(ValueError, match="input_mask"):
        head(x, training=False)


def test_span_head_end_conditioned_on_start_and_beams():
    from electra_tf.models.span_head import SpanHead

    rng = np.random.default_rng(1)
    h = rng.normal(size=(2, 6, 8)).astype("float32")
    mask = np.array([[1, 0, 1, 1, 1, 0]] * 2, "float32")
    head = SpanHead(beam_size=3, hidden_units=16)
    a = head(h, mask, np.array([2, 2], "int32"))
    b = head(h, mask, np.array([3, 3], "int32"))
    assert not np.allclose(a["end_logits"].numpy(), b["end_logits"].numpy())  # depends on the start
    np.testing.assert_allclose(a["start_logits"].numpy(), b["start_logits"].numpy())
    assert np.all(a["start_logits"].numpy()[:, [1, 5]] < -900)  # masked positions
    beams = head(h, mask)
    assert beams["start_top_index"].shape == (2, 3) and beams["end_top_index"].shape == (2, 3, 3)
    assert set(beams["start_top_index"].numpy().ravel()) <= {0, 2, 3, 4}
    # end beam of the best start equals the training-mode end logits for that start, ranked
    s0 = int(beams["start_top_index"].numpy()[0, 0])
    train = head(h, mask, np.array([s0, s0], "int32"))["end_logits"].numpy()[0]
    assert list(beams["end_top_index"].numpy()[0, 0]) == list(np.argsort(-train)[:3])


def test_load_pretrained_encoder_weights(tmp_path):
    import tensorflow as tf
    from keras.src.saving import saving_lib

    from electra_tf.config import ElectraConfig
    from electra_tf.models.model_folder import ModelDirError
    from electra_tf.models.saving import load_encoder_weights
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    cfg = ElectraConfig.from_json(CONFIG)
    src = build_and_call(ClassifierModel(build_encoder(cfg), 2), 8).encoder
    path = str(tmp_path / "discriminator.weights.h5")
    saving_lib.save_weights_only(src, path)
    tf.train.Checkpoint(discriminator=src).write(str(tmp_path / "ckpt"))
    dst = build_and_call(ClassifierModel(build_encoder(cfg), 2), 8).encoder
    assert not np.allclose(dst.get_weights()[0], src.get_weights()[0])
    load_encoder_weights(dst, path)
    for a, b in zip(src.get_weights(), dst.get_weights()):
        np.testing.assert_array_equal(a, b)
    # A TF checkpoint restores completely or fails loudly, never partially.
    dst = build_and_call(ClassifierModel(build_encoder(cfg), 2), 8).encoder
    n_ckpt = sum(1 for n, _ in tf.train.list_variables(str(tmp_path / "ckpt"))
                 if n.startswith("discriminator/"))
    if n_ckpt == len(src.weights):
        load_encoder_weights(dst, str(tmp_path / "ckpt"))
        for a, b in zip(src.get_weights(), dst.get_weights()):
            np.testing.assert_array_equal(a, b)
    else:
        with pytest.raises(ModelDirError, match=f"holds {n_ckpt} variables under 'discriminator/'"):
            load_encoder_weights(dst, str(tmp_path / "ckpt"))
    with pytest.raises(ModelDirError, match="not a readable TF checkpoint"):
        load_encoder_weights(dst, str(tmp_path / "nothing"))


@pytest.mark.parametrize("kind", ["classifier", "tagger", "squad2"])
def test_finetuning_models_rebuild_from_their_config(kind):
    # get_config holds every constructor argument (the encoder as a nested layer):
    # from_config gives the same network, which with the same weights gives the same outputs.
    import keras

    from electra_tf.config import ElectraConfig
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models.squad_model import SquadModel
    from electra_tf.models.tagger_model import TaggerModel
    from electra_tf.models import build_encoder

    encoder = build_encoder(ElectraConfig.from_json(CONFIG))
    model = {"classifier": lambda: ClassifierModel(encoder, 3, pooling="mean", two_layer_head=True),
             "tagger": lambda: TaggerModel(encoder, 5, dropout=0.2),
             "squad2": lambda: SquadModel(encoder, version_2=True, beam_size=3, hidden_units=24)}[kind]()
    build_and_call(model, 16)
    config = model.get_config()
    rebuilt = build_and_call(type(model).from_config(config), 16)
    assert rebuilt.get_config() == config
    rebuilt.set_weights(model.get_weights())
    ids = np.random.default_rng(0).integers(5, 100, (2, 16)).astype("int32")
    x = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    want, got = model(x), rebuilt(x)
    for key in (want if isinstance(want, dict) else [None]):
        w = want[key] if key else want
        g = got[key] if key else got
        np.testing.assert_allclose(keras.ops.convert_to_numpy(g), keras.ops.convert_to_numpy(w), atol=1e-6)
    if kind == "squad2":  # the hidden width comes from the model's config, not a literal
        assert rebuilt.span_head.end_hidden.units == rebuilt.answerable_head.hidden.units == 24
