"""The paper's sizes train at least 160 optimizer steps on a small file (size_defaults.py).

3 epochs of 500 rows at batch 32 are 48 steps: the pre-trained ELECTRA-Small of
models/electra-small-imdb/ ends them at the majority class. The default epochs are raised to the
size's floor (the recipe line says so and why); an explicit --epochs is taken as it is;
--min_train_steps sets the floor (0: none). ElectraClassifier.fit without epochs does the same.
"""

import csv
import json
import types

import pytest

from electra_tf.training import size_defaults
from electra_tf.finetune.training_setup import train_steps
from finetune.cli_helpers import error_lines, finetune_main
from helpers import VOCAB, tiny_config, write_vocab


def _settings(batch_size=32, min_train_steps=0, max_steps=None):
    return types.SimpleNamespace(batch_size=batch_size, min_train_steps=min_train_steps, max_steps=max_steps)


def test_the_floor_raises_the_steps_of_a_small_file_only():
    assert train_steps(500, _settings(), 3) == (48, 16)
    assert train_steps(500, _settings(min_train_steps=160), 3) == (160, 16)
    assert train_steps(2000, _settings(min_train_steps=160), 3) == (189, 63)  # 3 epochs already give more
    assert train_steps(500, _settings(min_train_steps=160, max_steps=20), 3) == (20, 16)  # --train_steps caps it


def test_which_sizes_have_a_floor():
    for size in ("small", "small_plus", "base", "large", "not_a_size"):
        assert size_defaults.for_size(size).min_train_steps == 160, size
    for size in ("tiny", "cpu_demo", "mini", "imported"):
        assert size_defaults.for_size(size).min_train_steps == 0, size
    small = size_defaults.for_size("small")
    assert (small.learning_rate, small.layerwise_lr_decay, small.pooling) == (3e-4, 1.0, "mean")
    base = size_defaults.for_size("base")
    assert (base.learning_rate, base.layerwise_lr_decay, base.pooling) == (1e-4, 0.8, "cls")


@pytest.fixture
def small_sized(tmp_path):
    """A tiny encoder whose config says model_size small (the small row's defaults), and 24 rows."""
    config = tmp_path / "config.json"
    tiny_config(model_size="small").to_json(str(config))
    vocab = write_vocab(str(tmp_path / "vocab.txt"))
    rows = [("a great good film" if i % 2 else "a bad bad movie", "positive" if i % 2 else "negative")
            for i in range(24)]
    train = tmp_path / "train.csv"
    with open(train, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label")] + rows)
    return ["--init", "random", "--config", config, "--vocab_file", vocab, "--train_file", train,
            "--validation_split", "0.25", "--max_seq_length", "8"]


@pytest.mark.large
def test_the_recipe_line_says_why_and_the_run_trains_the_floor(tmp_path, capsys, small_sized):
    out = tmp_path / "run"
    code, stdout, _ = finetune_main(capsys, small_sized + ["--output_dir", out, "--train_steps", "2"])
    assert code == 0
    lines = stdout.splitlines()
    assert ("  --epochs=3 (3 steps, 1 an epoch; raised to 160 steps by --min_train_steps=160 [small default: "
            "a file this small would train too few steps]; --train_steps stops at 2)  [default for own_data]") in lines
    assert "  --learning_rate=0.0003  [small default]" in lines
    assert "  --pooling=mean (of the token vectors)  [small default]" in lines
    assert json.loads((out / "settings.json").read_text())["min_train_steps"] == 160

    # A floor given as a flag trains exactly that many steps.
    out = tmp_path / "run5"
    code, stdout, _ = finetune_main(capsys, small_sized + ["--output_dir", out, "--min_train_steps", "5"])
    assert code == 0
    assert "raised to 5 steps by --min_train_steps=5 [flag]" in stdout
    assert json.loads((out / "seed_1" / "result.json").read_text())["train_steps"] == 5


@pytest.mark.large
def test_an_explicit_epochs_is_taken_as_it_is(tmp_path, capsys, small_sized):
    out = tmp_path / "run"
    code, stdout, _ = finetune_main(capsys, small_sized + ["--output_dir", out, "--epochs", "2"])
    assert code == 0
    assert "  --epochs=2 (2 steps, 1 an epoch)  [flag]" in stdout.splitlines()
    assert json.loads((out / "seed_1" / "result.json").read_text())["train_steps"] == 2
    assert json.loads((out / "settings.json").read_text())["min_train_steps"] == 0


def test_a_negative_floor_is_refused_before_any_work(tmp_path, capsys, small_sized):
    out = tmp_path / "run"
    code, _, stderr = finetune_main(capsys, small_sized + ["--output_dir", out, "--min_train_steps", "-1"])
    assert code == 2 and not out.exists()
    assert error_lines(stderr) == ["error: --min_train_steps=-1 must be a non-negative integer (0: no floor)"]


def test_electra_classifier_fit_without_epochs_reaches_the_floor():
    from electra_tf import ElectraClassifier

    small = ElectraClassifier(tiny_config(model_size="small"), list(VOCAB), labels=["neg", "pos"], sequence_length=8)
    assert small.pooling == "mean"
    assert small.recommended_epochs(16) == 10  # 500 rows at batch 32: 160 steps
    assert small.recommended_epochs(1000) == 3  # a large file: the size's epochs
    tiny = ElectraClassifier(tiny_config(), list(VOCAB), labels=["neg", "pos"], sequence_length=8)
    assert tiny.recommended_epochs(1) == 10  # the CPU sizes: 10 epochs on a labelled file, no floor
