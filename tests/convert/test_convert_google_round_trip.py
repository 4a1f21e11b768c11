"""`convert --to google` then `--from google` gives back the same model, and what cannot be known is refused.

The checkpoint alone cannot show the attention head count (nor the GELU form, LayerNorm epsilon or
casing); `--to google` writes them to electra_config.json beside it, with vocab.txt, and the import
reads them. Both configs below have a head count other than the reference's hidden_size // 64.
"""

import json
import os

import numpy as np
import pytest

import convert_helpers as h
from electra_tf.config import ElectraConfig
from electra_tf.convert import google
from electra_tf.convert.__main__ import main as convert_main
from electra_tf.models import model_folder, saving
from electra_tf.scoring import Scorer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(name: str) -> ElectraConfig:
    if name == "tiny":  # configs/tiny.json: hidden 64, 2 heads (64 // 64 would give 1)
        return ElectraConfig.from_json(os.path.join(REPO, "configs", "tiny.json")).replace(vocab_size=len(h.VOCAB))
    # ELECTRA-Small's widths (hidden 256, E 128, FFN 1024) with 2 of its 12 layers to stay fast, 8 heads
    # instead of 4, and the facts a checkpoint cannot show set away from their defaults.
    return ElectraConfig.from_json(os.path.join(REPO, "configs", "small.json")).replace(
        vocab_size=len(h.VOCAB), num_hidden_layers=2, num_attention_heads=8, hidden_act="gelu_approximate",
        layer_norm_eps=1e-7, do_lower_case=False, max_seq_length=48)


def _model_dir(tmp_path, config, seed) -> str:
    """A pre-training run directory's layout: the model is in <run>/pretrained/."""
    model = h.random_pretrainer(config, seed=seed)
    saving.save_pretrained(str(tmp_path / "run" / "pretrained"), model, h.write_vocab(tmp_path / "vocab.txt"))
    return str(tmp_path / "run")


def _to_google(model_dir, ckpt_dir) -> str:
    assert convert_main(["--from", "electra_tf", "--input", model_dir, "--to", "google",
                         "--output_dir", str(ckpt_dir / "model.ckpt")]) == 0
    return str(ckpt_dir)


@pytest.mark.parametrize("name", ["tiny", "small_shaped"])
def test_round_trip_gives_equal_scores(tmp_path, name):
    config = _config(name)
    assert config.num_attention_heads != max(1, config.hidden_size // 64)
    source = _model_dir(tmp_path, config, seed=11)
    ckpt = _to_google(source, tmp_path / "ckpt")
    assert {"vocab.txt", google.SIDECAR_FILE} <= set(os.listdir(ckpt))
    back = str(tmp_path / "back")
    assert convert_main(["--from", "google", "--input", ckpt, "--output_dir", back]) == 0  # no flag needed

    got = model_folder.load_config(back)
    for key in google.MODEL_FACTS + google.SETTINGS + ("hidden_size", "num_hidden_layers", "intermediate_size",
                                                       "embedding_size", "generator_hidden_dim"):
        assert getattr(got, key) == getattr(config, key), key
    texts = h.SENTENCES + ["The River was BIG", ""]
    want, have = Scorer(source).score(texts), Scorer(back).score(texts)  # the run directory's model, the import
    for a, b in zip(want, have):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(b.probabilities, a.probabilities, rtol=0, atol=1e-6)
        assert abs(a.sentence_score - b.sentence_score) < 1e-6


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    """A tiny model exported with --to google (vocab.txt and electra_config.json beside it)."""
    root = tmp_path_factory.mktemp("google_ckpt")
    return _to_google(_model_dir(root, _config("tiny"), seed=3), root / "ckpt")


def _convert(capsys, *argv):
    code = convert_main(list(argv))
    return code, capsys.readouterr().err.strip().splitlines()


def test_checkpoint_without_its_sidecar_refuses_to_guess_the_head_count(tmp_path, tiny_ckpt, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in os.listdir(tiny_ckpt):
        if name != google.SIDECAR_FILE:
            (bare / name).write_bytes(open(os.path.join(tiny_ckpt, name), "rb").read())
    out = tmp_path / "o"
    code, err = _convert(capsys, "--from", "google", "--input", str(bare), "--output_dir", str(out))
    assert code == 2 and len(err) == 1
    assert err[0] == (f"error: {bare} does not record its attention heads (no electra_config.json beside it) and "
                      f"the weights cannot show them; pass --num_attention_heads (checkpoints of "
                      f"google-research/electra use hidden_size // 64 = 1)")
    assert not out.exists()
    # The flag is the fix: with the right count the model is the original one.
    assert convert_main(["--from", "google", "--input", str(bare), "--output_dir", str(out),
                         "--num_attention_heads", "2"]) == 0
    assert model_folder.load_config(str(out)).num_attention_heads == 2


def test_head_flag_that_contradicts_the_sidecar_is_refused(tmp_path, tiny_ckpt, capsys):
    out = tmp_path / "o"
    code, err = _convert(capsys, "--from", "google", "--input", tiny_ckpt, "--output_dir", str(out),
                         "--num_attention_heads", "4")
    assert code == 2 and len(err) == 1
    assert err[0] == (f"error: --num_attention_heads 4 contradicts {os.path.join(tiny_ckpt, google.SIDECAR_FILE)}, "
                      f"which records 2 heads for these weights; drop the flag")
    assert not out.exists()


def test_sidecar_naming_an_unknown_field_is_refused(tmp_path, tiny_ckpt, capsys):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in os.listdir(tiny_ckpt):
        (ckpt / name).write_bytes(open(os.path.join(tiny_ckpt, name), "rb").read())
    facts = json.loads((ckpt / google.SIDECAR_FILE).read_text())
    facts["num_heads"] = 2
    (ckpt / google.SIDECAR_FILE).write_text(json.dumps(facts))
    out = tmp_path / "o"
    code, err = _convert(capsys, "--from", "google", "--input", str(ckpt), "--output_dir", str(out))
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"error: {ckpt / google.SIDECAR_FILE} holds key(s) num_heads; it may name only "
                             f"num_attention_heads, hidden_act")
    assert not out.exists()
