"""The model-directory layout: save a pre-trainer, reload each part, same outputs."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import special_token_ids
from electra_tf.models import model_folder, saving
from electra_tf.pretrain.pretrainer_loading import load_pretrainer  # the pre-trainer class is above models/
from electra_tf.pretrain import ElectraPretrainer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory, repo_root):
    cfg = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json")).replace(vocab_size=100)
    vocab_file = tmp_path_factory.mktemp("v") / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    model = ElectraPretrainer(cfg, special_token_ids(VOCAB))
    # Move every weight away from its initial value so a non-loaded weight shows.
    for v in model.weights:
        v.assign(v + tf.random.normal(v.shape, stddev=0.01, seed=1))
    model_dir = str(tmp_path_factory.mktemp("m") / "model")
    saving.save_pretrained(model_dir, model, str(vocab_file))
    return model, model_dir, cfg


def _batch(cfg):
    ids = np.random.default_rng(0).integers(5, 100, size=(2, cfg.max_seq_length)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def test_layout(saved):
    _, model_dir, _ = saved
    import os
    assert sorted(os.listdir(model_dir)) == sorted([
        "config.json", "vocab.txt", "discriminator.weights.h5", "discriminator_head.weights.h5",
        "generator.weights.h5", "generator_head.weights.h5", "pretrainer.weights.h5",
        "discriminator.keras"])


def test_discriminator_round_trip(saved):
    model, model_dir, cfg = saved
    encoder, head, loaded_cfg = saving.load_discriminator(model_dir)
    assert loaded_cfg == cfg
    batch = _batch(cfg)
    want = model.discriminator_head(model.discriminator(batch)).numpy()
    got = head(encoder(batch)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_discriminator_keras_file_loads_in_safe_mode(saved):
    import os

    import keras

    model, model_dir, cfg = saved
    loaded = keras.models.load_model(os.path.join(model_dir, "discriminator.keras"), safe_mode=True)
    batch = _batch(cfg)
    want = model.discriminator_head(model.discriminator(batch)).numpy()
    np.testing.assert_allclose(loaded(batch)["replaced_logits"].numpy(), want, atol=1e-5)


def test_generator_round_trip(saved):
    model, model_dir, cfg = saved
    loaded = load_pretrainer(model_dir)
    encoder, head = loaded.generator, loaded.generator_head
    batch = _batch(cfg)
    positions = np.tile(np.arange(1, cfg.predictions_per_seq + 1), (2, 1)).astype("int32")
    want = model.generator_head(model.generator(batch), mask_positions=positions).numpy()
    got = head(encoder(batch), mask_positions=positions).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_pretrainer_round_trip(saved):
    model, model_dir, cfg = saved
    loaded = load_pretrainer(model_dir)
    batch = _batch(cfg)
    np.testing.assert_allclose(loaded(batch)["loss"].numpy(), model(batch)["loss"].numpy(), rtol=1e-5)


def test_mismatched_config_is_refused(saved, tmp_path):
    _, model_dir, cfg = saved
    import shutil
    other = tmp_path / "other"
    shutil.copytree(model_dir, other)
    cfg.replace(hidden_size=128, num_attention_heads=2).to_json(str(other / "config.json"))
    with pytest.raises(model_folder.ModelDirError, match="does not fit"):
        saving.load_discriminator(str(other))
    with pytest.raises(model_folder.ModelDirError, match="no config.json"):
        saving.load_discriminator(str(tmp_path))


def test_finetune_init_gives_the_pretrained_discriminator(saved):
    """`finetune --init <model dir>` builds its own encoder and loads it: same outputs."""
    from electra_tf.models.model_folder import find_init_files
    from electra_tf.models.saving import load_encoder_weights
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    model, model_dir, cfg = saved
    weights, config_path, _ = find_init_files(model_dir, None, None)
    assert weights.endswith("discriminator.weights.h5")
    encoder = build_and_call(ClassifierModel(build_encoder(ElectraConfig.from_json(config_path)), 2),
                             cfg.max_seq_length).encoder
    batch = _batch(cfg)
    before = encoder(batch).numpy()
    load_encoder_weights(encoder, weights)
    want = model.discriminator(batch).numpy()
    np.testing.assert_array_equal(encoder(batch).numpy(), want)
    assert np.abs(before - want).max() > 1e-2
