"""--config takes a shipped config's name (small) or a JSON file, from any folder."""

import os

import pytest

from electra_tf.config import ConfigError, ElectraConfig
from electra_tf.paths import CONFIG_DIR, config_names, resolve_config


def test_the_names_are_the_shipped_files():
    assert {"tiny", "small", "base", "large"} <= set(config_names())
    assert all(os.path.isfile(os.path.join(CONFIG_DIR, f"{name}.json")) for name in config_names())


@pytest.mark.parametrize("spelling", ["small", "small.json", "configs/small.json"])
def test_a_name_resolves_from_any_folder(spelling, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config(spelling) == os.path.join(CONFIG_DIR, "small.json")
    assert ElectraConfig.load(spelling) == ElectraConfig.from_json(os.path.join(CONFIG_DIR, "small.json"))


def test_a_file_wins_over_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small").write_text('{"hidden_size": 128, "num_attention_heads": 2}', encoding="utf-8")
    assert resolve_config("small") == "small"
    assert ElectraConfig.load("small").hidden_size == 128


@pytest.mark.parametrize("value, what", [("smal", "is neither a config file nor a config name"),
                                         ("nowhere/small.json", "does not exist")])
def test_an_unknown_name_lists_the_names(value, what):
    with pytest.raises(ConfigError) as e:
        ElectraConfig.load(value)
    message = str(e.value)
    assert what in message and ", ".join(config_names()) in message
    assert "\n" not in message


def test_finetune_takes_a_config_name_too(tmp_path):
    from electra_tf.models.model_folder import ModelDirError, find_init_files

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n", encoding="utf-8")
    assert find_init_files("random", "small", str(vocab)) == (None, os.path.join(CONFIG_DIR, "small.json"),
                                                              str(vocab))
    with pytest.raises(ModelDirError, match="use a name"):
        find_init_files("random", "smal", str(vocab))
