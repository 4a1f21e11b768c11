"""A model folder's finetune_recipe.json: its settings replace the size's defaults in `finetune` and
`ElectraClassifier.from_pretrained`, a flag (argument) overrides each, and a recipe measured on
fewer pre-training steps than the folder now holds is set aside with a note."""

import csv
import json

import numpy as np
import pytest

import helpers
from electra_tf.models.model_folder import RECIPE_FILE, ModelDirError, read_model_recipe
from finetune.cli_helpers import finetune_main

WHY = "measured on IMDB 500"


def _write(folder, settings, steps=7, why=WHY, history_steps=None):
    (folder / RECIPE_FILE).write_text(json.dumps({"settings": settings, "why": why, "pretraining_steps": steps}))
    if history_steps is not None:
        (folder / "history.json").write_text(json.dumps([{"steps": 3, "cumulative_steps": history_steps}]))


def test_reading_the_file(tmp_path):
    assert read_model_recipe(str(tmp_path)) == (None, None)  # no file: the size's defaults
    assert read_model_recipe(None) == (None, None)
    _write(tmp_path, {"learning_rate": 1e-3, "reinit_top_layers": 12, "pooling": "mean"}, history_steps=7)
    recipe, note = read_model_recipe(str(tmp_path))
    assert note is None
    assert recipe.settings == {"learning_rate": 1e-3, "reinit_top_layers": 12, "pooling": "mean"}
    assert recipe.why == WHY and recipe.path.endswith(RECIPE_FILE)

    # The weights were pre-trained further after the recipe was measured: set aside, with the reason.
    _write(tmp_path, {"learning_rate": 1e-3}, steps=6942, history_steps=13884)
    recipe, note = read_model_recipe(str(tmp_path))
    assert recipe is None
    assert "at 6,942 pre-training steps; they now have 13,884" in note


@pytest.mark.parametrize("settings, steps, why, message", [
    ({"epochs": 3}, 7, WHY, "settings epochs cannot be set here"),
    ({"learning_rate": -1}, 7, WHY, "settings.learning_rate=-1 must be a positive number"),
    ({"reinit_top_layers": 1.5}, 7, WHY, "settings.reinit_top_layers=1.5 must be a non-negative integer"),
    ({"pooling": "max"}, 7, WHY, "settings.pooling='max' must be \"cls\" or \"mean\""),
    ({"learning_rate": 1e-3}, 7, "", '"why" must say what the recipe was chosen on'),
    ({"learning_rate": 1e-3}, "many", WHY, "pretraining_steps='many' must be an integer"),
    ({}, 7, WHY, "needs {\"settings\""),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path, settings, steps, why, message):
    _write(tmp_path, settings, steps=steps, why=why)
    with pytest.raises(ModelDirError) as e:
        read_model_recipe(str(tmp_path))
    text = str(e.value)
    assert "\n" not in text and text.startswith(str(tmp_path / RECIPE_FILE)) and message in text
    assert text.endswith("fix the file or delete it (the model size's defaults then apply)")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny pre-trained model folder (2 blocks, model_size tiny: lr 1e-3, no floor, mean pooling)."""
    path, _, _ = helpers.make_model_dir(tmp_path_factory.mktemp("m") / "model")
    return path


@pytest.fixture
def train_file(tmp_path):
    rows = [("a great good film" if i % 2 else "a bad bad movie", "positive" if i % 2 else "negative")
            for i in range(16)]
    path = tmp_path / "train.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label")] + rows)
    return path


@pytest.mark.large
def test_finetune_takes_the_recipe_and_a_flag_overrides_it(tmp_path, capsys, model_dir, train_file):
    import pathlib
    folder = pathlib.Path(model_dir)
    _write(folder, {"learning_rate": 0.01, "reinit_top_layers": 1, "pooling": "cls"})
    base = ["--init", model_dir, "--train_file", train_file, "--validation_split", "0.25", "--max_seq_length", "8",
            "--train_steps", "1"]
    try:
        code, stdout, _ = finetune_main(capsys, base + ["--output_dir", tmp_path / "a"])
        assert code == 0
        lines = stdout.splitlines()
        assert "  --learning_rate=0.01  [the model's finetune_recipe.json]" in lines
        assert "  --pooling=cls (the [CLS] vector)  [the model's finetune_recipe.json]" in lines
        assert ("  --reinit_top_layers=1 (the top blocks re-drawn after loading)  [the model's "
                "finetune_recipe.json]") in lines
        assert f"  the model's own recipe ({folder / RECIPE_FILE}): {WHY}" in lines
        settings = json.loads((tmp_path / "a" / "settings.json").read_text())
        assert (settings["learning_rate"], settings["reinit_top_layers"], settings["pooling"]) == (0.01, 1, "cls")

        code, stdout, _ = finetune_main(capsys, base + ["--output_dir", tmp_path / "b", "--learning_rate", "0.005",
                                                        "--reinit_top_layers", "0"])
        assert code == 0
        assert "  --learning_rate=0.005  [flag]" in stdout.splitlines()
        assert "  --reinit_top_layers=0 (the top blocks re-drawn after loading)  [flag]" in stdout.splitlines()
        settings = json.loads((tmp_path / "b" / "settings.json").read_text())
        assert (settings["learning_rate"], settings["reinit_top_layers"], settings["pooling"]) == (0.005, 0, "cls")

        # Pre-trained further since: the size's defaults (tiny: 1e-3, mean pooling, nothing re-drawn), and why.
        (folder / "history.json").write_text(json.dumps([{"cumulative_steps": 9}]))
        code, stdout, _ = finetune_main(capsys, base + ["--output_dir", tmp_path / "c"])
        assert code == 0
        assert "measured on these weights at 7 pre-training steps; they now have 9" in stdout
        assert "  --learning_rate=0.001  [tiny default]" in stdout.splitlines()
        assert "reinit_top_layers" not in stdout
        settings = json.loads((tmp_path / "c" / "settings.json").read_text())
        assert (settings["learning_rate"], settings["reinit_top_layers"], settings["pooling"]) == (1e-3, 0, "mean")
    finally:
        for name in (RECIPE_FILE, "history.json"):
            (folder / name).unlink(missing_ok=True)


@pytest.mark.large
def test_the_recipes_floor_raises_the_default_epochs_only(tmp_path, capsys, model_dir, train_file):
    """As the size's floor: an explicit --epochs is taken as it is (12 rows at batch 4: 3 steps an epoch,
    tiny's default 10 epochs 30 steps, raised to the recipe's 40)."""
    import pathlib
    folder = pathlib.Path(model_dir)
    _write(folder, {"min_train_steps": 40})
    base = ["--init", model_dir, "--train_file", train_file, "--validation_split", "0.25", "--max_seq_length", "8",
            "--batch_size", "4"]
    try:
        code, stdout, _ = finetune_main(capsys, base + ["--output_dir", tmp_path / "a", "--epochs", "1"])
        assert code == 0 and "raised to" not in stdout
        settings = json.loads((tmp_path / "a" / "settings.json").read_text())
        assert (settings["epochs"], settings["min_train_steps"]) == (1.0, 0)

        code, stdout, _ = finetune_main(capsys, base + ["--output_dir", tmp_path / "b"])
        assert code == 0, stdout
        assert "raised to 40 steps by --min_train_steps=40 [the model's finetune_recipe.json]" in stdout, stdout
        assert json.loads((tmp_path / "b" / "settings.json").read_text())["min_train_steps"] == 40
    finally:
        (folder / RECIPE_FILE).unlink(missing_ok=True)


def test_from_pretrained_takes_the_recipe(tmp_path, model_dir):
    import pathlib

    from electra_tf import ElectraClassifier
    from electra_tf.api.model_locator import ApiError

    folder = pathlib.Path(model_dir)
    plain = ElectraClassifier.from_pretrained(model_dir, num_classes=2, sequence_length=8)
    _write(folder, {"learning_rate": 0.01, "reinit_top_layers": 1, "pooling": "cls"})
    try:
        clf = ElectraClassifier.from_pretrained(model_dir, num_classes=2, sequence_length=8)
        assert clf.pooling == "cls" and clf._size_defaults["learning_rate"] == 0.01  # what fit's optimizer takes
        for old, new in zip(plain.encoder.embeddings.weights, clf.encoder.embeddings.weights):
            np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
        for old, new in zip(plain.encoder.transformer_layers[0].weights, clf.encoder.transformer_layers[0].weights):
            np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
        top = zip(plain.encoder.transformer_layers[-1].weights, clf.encoder.transformer_layers[-1].weights)
        assert all(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in top)

        kept = ElectraClassifier.from_pretrained(model_dir, num_classes=2, sequence_length=8, reinit_top_layers=0,
                                                 pooling="mean")
        assert kept.pooling == "mean"
        for old, new in zip(plain.encoder.weights, kept.encoder.weights):
            np.testing.assert_array_equal(np.asarray(old), np.asarray(new))

        with pytest.raises(ApiError, match=r"^reinit_top_layers=3 must be between 0 and the encoder's 2 layers$"):
            ElectraClassifier.from_pretrained(model_dir, num_classes=2, reinit_top_layers=3)

        _write(folder, {"reinit_top_layers": "all"})
        with pytest.raises(ApiError, match=r"finetune_recipe.json: settings.reinit_top_layers='all' must be"):
            ElectraClassifier.from_pretrained(model_dir, num_classes=2)
    finally:
        (folder / RECIPE_FILE).unlink(missing_ok=True)


def test_the_kept_model_ships_a_current_recipe(repo_root):
    """models/electra-small-imdb's own recipe (docs/domain_study.md, "The kept ELECTRA-Small") is
    read, is not stale against its history.json, and re-draws every block of its config."""
    folder = repo_root / "models" / "electra-small-imdb"
    recipe, note = read_model_recipe(str(folder))
    assert note is None and recipe is not None
    layers = json.loads((folder / "config.json").read_text())["num_hidden_layers"]
    assert recipe.settings == {"learning_rate": 3e-4, "layerwise_lr_decay": 1.0, "pooling": "mean",
                               "reinit_top_layers": layers, "min_train_steps": 320}
    assert "docs/domain_study.md" in recipe.why
