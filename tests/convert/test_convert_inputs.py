"""Model paths that are not (yet) ours: a hub id, a missing directory, a keras-hub preset, a Hugging Face
directory. Each is one line that says what the path is and what to run (the tools never download)."""

import os
import subprocess
import sys

import pytest

import convert_helpers as h
from electra_tf.convert.__main__ import main as convert_main
from electra_tf.models.model_folder import find_init_files
from electra_tf.models import saving
from electra_tf.models.model_folder import ModelDirError
from electra_tf.scoring import Scorer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUB_ID = "google/electra-small-discriminator"
DOWNLOAD = ("it looks like a Hugging Face hub id, and the tools do not download (no network at run time): "
            f"run hf download {HUB_ID} --local-dir electra-small-discriminator first")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    out = str(root / "model")
    saving.save_pretrained(out, h.random_pretrainer(h.tiny_config(), seed=1), h.write_vocab(root / "vocab.txt"))
    return out


def test_scorer_on_a_missing_directory_says_it_does_not_exist(tmp_path):
    with pytest.raises(ModelDirError) as e:
        Scorer(str(tmp_path / "nope"))
    assert str(e.value) == (f"{tmp_path / 'nope'} does not exist; pass a model directory written by electra_tf "
                            f"(pretrain, convert), a pre-training run directory or an exported SavedModel directory")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelDirError, match="is not a directory; pass a model directory"):
        Scorer(str(tmp_path / "file"))


def test_convert_from_hf_given_a_hub_id_says_to_download_it_first(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert convert_main(["--from", "hf", "--input", HUB_ID, "--output_dir", "models/electra"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --input '{HUB_ID}' does not exist; {DOWNLOAD}, then pass --input electra-small-discriminator"]
    assert not (tmp_path / "models").exists()
    # Not a hub id: the directory is simply missing.
    assert convert_main(["--from", "keras_hub", "--input", "presets/a/b", "--output_dir", "models/electra"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --input 'presets/a/b' does not exist; pass a keras-hub ElectraBackbone preset directory")
    # Nor is a missing folder inside an existing one (a typo in a local path).
    (tmp_path / "runs").mkdir()
    assert convert_main(["--from", "hf", "--input", "runs/nope", "--output_dir", "models/electra"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --input 'runs/nope' does not exist; pass a Hugging Face ELECTRA or BERT model directory "
        "(config.json + model.safetensors)")
    assert not (tmp_path / "models").exists()


def test_finetune_init_given_a_hub_id_says_to_download_and_convert_it(tmp_path):
    """Through the real CLI: exit 2, one line, no output directory."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "electra_tf.finetune", "--task", "sst2", "--init", HUB_ID,
                           "--data_dir", os.path.join(REPO, "..", "shared", "data", "glue", "SST-2"),
                           "--output_dir", "ft"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: --init '{HUB_ID}' does not exist; {DOWNLOAD}, convert it with python -m electra_tf.convert "
        f"--from hf --input electra-small-discriminator --output_dir models/electra-small-discriminator, then pass "
        f"--init models/electra-small-discriminator")
    assert not (tmp_path / "ft").exists()


@pytest.mark.parametrize("fmt", ["keras_hub", "hf"])
def test_finetune_init_on_a_preset_or_hf_directory_points_to_convert(tmp_path, model_dir, fmt):
    assert convert_main(["--from", "electra_tf", "--input", model_dir, "--to", fmt,
                         "--output_dir", str(tmp_path / "exported")]) == 0
    init = str(tmp_path / "exported") if fmt == "keras_hub" else str(tmp_path / "exported" / "discriminator")
    name = os.path.basename(init)
    what = "a keras-hub preset directory" if fmt == "keras_hub" else "a Hugging Face model directory"
    with pytest.raises(ModelDirError) as e:
        find_init_files(init, None, None)
    assert str(e.value) == (f"--init {init!r} is {what}, not a model directory of electra_tf; convert it first: "
                            f"python -m electra_tf.convert --from {fmt} --input {init} --output_dir models/{name}, "
                            f"then pass --init models/{name}")
