"""keras-hub ElectraBackbone presets, both ways, and the GELU-form effect."""

import os

import numpy as np
import pytest

import convert_helpers as h
from electra_tf.convert import keras_hub as kh
from electra_tf.convert.__main__ import main as convert_main

pytestmark = pytest.mark.large  # builds keras-hub presets and runs the parity script: not in the fast tier


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from electra_tf.models.saving import save_pretrained

    config = h.tiny_config()
    model = h.random_pretrainer(config, seed=21)
    d = tmp_path_factory.mktemp("kh")
    out = str(d / "model")
    save_pretrained(out, model, h.write_vocab(d / "vocab.txt"))
    return out, config


@pytest.fixture(scope="module")
def preset(model_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("preset") / "electra_tiny")
    assert convert_main(["--from", "electra_tf", "--input", model_dir[0], "--to", "keras_hub",
                         "--output_dir", out]) == 0
    return out


def _backbone_output(backbone, batch):
    return backbone({"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
                     "padding_mask": batch["input_mask"]})["sequence_output"].numpy()


def test_preset_loads_with_keras_hub(preset, model_dir):
    import keras_hub

    from electra_tf.models.saving import load_discriminator

    assert {"config.json", "model.weights.h5", "metadata.json", "tokenizer.json"} <= set(os.listdir(preset))
    backbone = keras_hub.models.ElectraBackbone.from_preset(preset)
    tokenizer = keras_hub.models.ElectraTokenizer.from_preset(preset)
    assert tokenizer.vocabulary_size() == len(h.VOCAB)
    encoder, _, config = load_discriminator(model_dir[0])
    batch = h.model_batch(config)
    mask = batch["input_mask"].astype(bool)
    ours = encoder(batch).numpy()
    theirs = _backbone_output(backbone, batch)
    diff = np.abs(ours - theirs)[mask]
    print(f"keras-hub GELU effect (tiny random model, weights std 0.1): max {diff.max():.2e} "
          f"mean {diff.mean():.2e}")
    # The documented GELU-form effect: small, but far above float round-off.
    assert 1e-6 < diff.max() < 5e-2
    # With the tanh form on our side the two are the same network.
    approx = h.random_pretrainer(config.replace(hidden_act="gelu_approximate"), seed=0).discriminator
    for a, b in zip(approx.weights, encoder.weights):
        a.assign(b.value)
    np.testing.assert_allclose(approx(batch).numpy()[mask], theirs[mask], atol=1e-5)


def test_import_preset(preset, tmp_path, model_dir):
    import keras_hub

    from electra_tf.models.model_folder import absent_parts
    from electra_tf.models.model_folder import load_config
    from electra_tf.models.saving import load_discriminator

    out = str(tmp_path / "model")
    assert convert_main(["--from", "keras_hub", "--input", preset, "--output_dir", out,
                         "--hidden_act", "gelu_approximate"]) == 0
    assert absent_parts(out) == ["discriminator_head", "generator"]
    assert load_config(out).hidden_act == "gelu_approximate"
    encoder, _, config = load_discriminator(out)
    backbone = keras_hub.models.ElectraBackbone.from_preset(preset)
    batch = h.model_batch(config)
    mask = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(encoder(batch).numpy()[mask], _backbone_output(backbone, batch)[mask], atol=1e-5)
    # Default: the exact GELU of the original -> the original encoder back, bit for bit.
    out2 = str(tmp_path / "model_exact")
    assert convert_main(["--from", "keras_hub", "--input", preset, "--output_dir", out2]) == 0
    enc2, _, _ = load_discriminator(out2)
    orig, _, _ = load_discriminator(model_dir[0])
    np.testing.assert_array_equal(enc2(batch).numpy(), orig(batch).numpy())
    # No discriminator head in a backbone: export refuses without --allow_untrained_head.
    from electra_tf.export import ExportError, build_module
    with pytest.raises(ExportError, match="discriminator head"):
        build_module(out2, "discriminator")
    # Nothing was written for the absent parts; --allow_untrained_head serves a fresh head.
    assert not [n for n in os.listdir(out2) if n.startswith(("discriminator_head", "generator", "pretrainer"))]
    assert build_module(out2, "discriminator", None, True).max_seq_length == config.max_seq_length


def test_gelu_difference_helper(model_dir):
    from electra_tf.models.saving import load_discriminator

    encoder, _, config = load_discriminator(model_dir[0])
    stats = kh.gelu_difference(encoder, h.model_batch(config))
    assert 0 < stats["max_abs"] < 5e-2 and stats["mean_abs"] <= stats["max_abs"]


def test_export_says_the_pooler_is_random(model_dir, tmp_path, capsys):
    """The preset's pooler is not ours (ELECTRA has none): the printed line says it holds random weights."""
    import json

    import keras_hub

    outs = [str(tmp_path / name) for name in ("a", "b")]
    for out in outs:
        assert convert_main(["--from", "electra_tf", "--input", model_dir[0], "--to", "keras_hub",
                             "--output_dir", out]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "ElectraBackbone preset" in line]
    assert len(lines) == 2  # one for each export (other notes, e.g. on the tokenizer, may follow it)
    assert lines[0].startswith(f"{outs[0]}: keras-hub ElectraBackbone preset of the encoder (")
    assert lines[0].endswith("); its pooler (pooled_dense, tanh over [CLS]) has no ELECTRA counterpart and "
                             "holds random weights (seed 0): use sequence_output[:, 0] or fine-tune the pooler, "
                             "not pooled_output as it is; the blocks use keras-hub's tanh GELU (docs/serving.md)")
    assert json.loads(captured.out.splitlines()[0]) == {"output": outs[0], "format": "keras_hub",
                                                        "pooler": "random, seed 0"}
    # What the line says: random values (keras-hub's initializer, std 0.02), the same under the seed.
    kernels = [keras_hub.models.ElectraBackbone.from_preset(out).get_layer("pooled_dense").kernel.numpy()
               for out in outs]
    np.testing.assert_array_equal(kernels[0], kernels[1])
    assert 0.01 < kernels[0].std() < 0.03


def test_convert_parity_script_measures_both_exports(model_dir, tmp_path, capsys):
    """scripts/convert_parity.py (the documented measurement): the exported preset's difference is
    gelu_difference's, and the Hugging Face export is float round-off away."""
    import json

    from helpers import require_torch
    from scripts.convert_parity import main as parity_main

    require_torch()
    tsv = tmp_path / "reviews.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(f"{s}\t1\n" for s in h.SENTENCES))
    assert parity_main(["--model_dir", model_dir[0], "--reviews", str(tsv), "--rows", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["reviews"] == "first 2 rows of reviews.tsv" and report["seq"] == model_dir[1].max_seq_length
    preset, helper = report["keras_hub"]["sequence_output_exported_preset"], report["keras_hub"]["gelu_difference"]
    assert preset["max_abs"] == helper["max_abs"] and 1e-6 < preset["max_abs"] < 5e-2
    for name in ("discriminator_logits", "generator_logits"):
        assert 0 <= report["hf"][name]["max_abs"] <= 1e-5 < report["hf"][name]["largest_value"], name
