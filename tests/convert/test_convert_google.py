"""Original google-research/electra TF1 checkpoints -> our model directory."""

import json
import os

import numpy as np
import pytest

import convert_helpers as h
from electra_tf.convert import common, google
from electra_tf.convert.__main__ import main as convert_main
from electra_tf.convert.mapping import ConversionError
from electra_tf.models.model_folder import absent_parts


@pytest.fixture(scope="module")
def tf1_checkpoint(tmp_path_factory):
    """A reference-layout checkpoint (tf.compat.v1 Saver, Adam slots, global_step) and its weights."""
    d = tmp_path_factory.mktemp("electra_small_tf1")
    config = h.tiny_config()
    weights = h.reference_weights(config, seed=3)
    h.save_tf1_checkpoint(weights, str(d / "model.ckpt"))
    h.write_vocab(d / "vocab.txt")
    return d, config, weights


@pytest.fixture(scope="module")
def converted(tf1_checkpoint, tmp_path_factory):
    d, config, weights = tf1_checkpoint
    out = str(tmp_path_factory.mktemp("out") / "model")
    assert convert_main(["--from", "google", "--input", str(d), "--output_dir", out,
                         "--num_attention_heads", str(config.num_attention_heads)]) == 0
    return out


def test_layout_and_record(converted, tf1_checkpoint):
    assert {"config.json", "vocab.txt", "discriminator.weights.h5", "discriminator_head.weights.h5",
            "generator.weights.h5", "generator_head.weights.h5",
            "conversion.json"} == set(os.listdir(converted))  # each weight once
    record = json.load(open(os.path.join(converted, "conversion.json")))
    assert record["parts"] == {"discriminator": "converted", "discriminator_head": "converted",
                               "generator": "converted"}
    assert record["skipped"] > 0  # adam_m / adam_v / global_step
    from electra_tf.models.model_folder import load_config
    cfg = load_config(converted)
    want = tf1_checkpoint[1]
    for key in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                "max_position_embeddings", "generator_hidden_dim", "generator_num_layers"):
        assert getattr(cfg, key) == getattr(want, key), key


def test_discriminator_matches_numpy_reference(converted, tf1_checkpoint):
    _, config, weights = tf1_checkpoint
    batch = h.model_batch(config)
    want = h.np_discriminator_logits(weights, batch, config.num_attention_heads)
    got = h.ours_discriminator_logits(converted, batch)
    mask = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4, rtol=1e-4)


def test_generator_matches_numpy_reference(converted, tf1_checkpoint):
    _, config, weights = tf1_checkpoint
    batch = h.model_batch(config)
    want = h.np_generator_logits(weights, batch, config.generator_num_heads)
    got = h.ours_generator_logits(converted, batch)
    mask = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4, rtol=1e-4)


def test_round_trip_our_weights_through_tf1_names(tmp_path):
    """our weights -> TF1-named checkpoint -> import -> identical outputs."""
    config = h.tiny_config(untied_generator_embeddings=True)
    model = h.random_pretrainer(config, seed=5)
    google.export_pretrainer(model, str(tmp_path / "ckpt" / "model.ckpt"), global_step=7)
    h.write_vocab(tmp_path / "ckpt" / "vocab.txt")
    out = str(tmp_path / "model")
    assert convert_main(["--from", "google", "--input", str(tmp_path / "ckpt"), "--output_dir", out,
                         "--num_attention_heads", "2", "--require_all"]) == 0
    from electra_tf.models.model_folder import load_config
    assert load_config(out).untied_generator_embeddings
    batch = h.model_batch(config)
    np.testing.assert_array_equal(h.ours_discriminator_logits(out, batch),
                                  model.discriminator_head(model.discriminator(batch)).numpy())
    b, t = batch["input_ids"].shape
    pos = np.tile(np.arange(t), (b, 1)).astype("int32")
    np.testing.assert_array_equal(h.ours_generator_logits(out, batch),
                                  model.generator_head(model.generator(batch), mask_positions=pos).numpy())


def test_unmapped_missing_and_mismatched_names_are_listed(tmp_path, tf1_checkpoint, capsys):
    _, config, weights = tf1_checkpoint
    bad = dict(weights)
    bad["electra/encoder/layer_0/attention/self/rotary/kernel"] = np.zeros((32, 32), "float32")
    bad["cls/predictions/transform/dense/kernel"] = np.zeros((32, 32), "float32")
    del bad["electra/encoder/layer_1/output/dense/bias"]
    bad["discriminator_predictions/dense/kernel"] = np.zeros((32, 31), "float32")
    google.write_checkpoint(bad, str(tmp_path / "bad" / "model.ckpt"))
    h.write_vocab(tmp_path / "bad" / "vocab.txt")
    assert convert_main(["--from", "google", "--input", str(tmp_path / "bad"),
                         "--output_dir", str(tmp_path / "o"), "--num_attention_heads", "2"]) == 2
    err = capsys.readouterr().err
    for name in ("electra/encoder/layer_0/attention/self/rotary/kernel", "cls/predictions/transform/dense/kernel",
                 "electra/encoder/layer_1/output/dense/bias", "discriminator_predictions/dense/kernel"):
        assert name in err
    assert "(32, 31)" in err and "(32, 32)" in err
    assert not os.path.exists(tmp_path / "o" / "config.json")


def test_discriminator_only_checkpoint(tmp_path, tf1_checkpoint, capsys):
    """A checkpoint without generator converts without it (nothing written for it), and says so in one line."""
    _, config, weights = tf1_checkpoint
    disc = {k: v for k, v in weights.items() if not k.startswith("generator")}
    google.write_checkpoint(disc, str(tmp_path / "d" / "model.ckpt"))
    h.write_vocab(tmp_path / "d" / "vocab.txt")
    out = str(tmp_path / "model")
    assert convert_main(["--from", "google", "--input", str(tmp_path / "d" / "model.ckpt"),
                         "--output_dir", out, "--num_attention_heads", "2"]) == 0
    assert absent_parts(out) == ["generator"]
    assert not os.path.exists(os.path.join(out, "generator.weights.h5"))
    err = capsys.readouterr().err
    assert "warning" not in err
    assert "the encoder, its replaced-token head" in err and "the source has no generator" in err
    with pytest.raises(ConversionError, match="generator"):
        tensors, _ = google.read_checkpoint(str(tmp_path / "d"))
        cfg = common.build_config(common.sizes_from_tensors(tensors), config, config.num_attention_heads)
        common.load_canonical(cfg, h.VOCAB, tensors, "d", optional_parts=())


def test_missing_vocab(tmp_path, tf1_checkpoint, capsys):
    _, _, weights = tf1_checkpoint
    google.write_checkpoint(weights, str(tmp_path / "nv" / "model.ckpt"))
    assert convert_main(["--from", "google", "--input", str(tmp_path / "nv"), "--output_dir", str(tmp_path / "o"),
                         "--num_attention_heads", "2"]) == 2
    assert "--vocab" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o")
