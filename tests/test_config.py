"""The config dataclass: reference defaults, the shipped JSON files, and bad values."""

import json

import pytest

from electra_tf.config import ConfigError, ElectraConfig


def test_reference_defaults():
    c = ElectraConfig()
    assert (c.vocab_size, c.max_position_embeddings, c.hidden_dropout_prob) == (30522, 512, 0.1)
    assert (c.mask_prob, c.gen_weight, c.disc_weight, c.temperature) == (0.15, 1.0, 50.0, 1.0)
    assert c.disallow_correct is False and c.untied_generator_embeddings is False
    assert (c.generator_layers, c.learning_rate, c.num_warmup_steps) == (1.0, 5e-4, 10000)
    assert (c.weight_decay_rate, c.adam_epsilon, c.layer_norm_eps) == (0.01, 1e-6, 1e-12)
    assert c.predictions_per_seq == int((0.15 + 0.005) * 128) == 19


@pytest.mark.parametrize(
    "name, shape, generator, predictions",
    [
        ("small", (256, 12, 4, 1024, 128), (64, 12, 1, 256), 19),
        ("small_plus", (256, 12, 4, 1024, 128), (256, 12, 4, 1024), 79),
        ("base", (768, 12, 12, 3072, 768), (256, 12, 4, 1024), 79),
        ("large", (1024, 24, 16, 4096, 1024), (256, 24, 4, 1024), 130),
    ],
)
def test_shipped_configs(repo_root, name, shape, generator, predictions):
    c = ElectraConfig.from_json(str(repo_root / "configs" / f"{name}.json"))
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
            c.intermediate_size, c.embedding_size) == shape
    assert (c.generator_hidden_dim, c.generator_num_layers, c.generator_num_heads,
            c.generator_intermediate_size) == generator
    assert c.predictions_per_seq == predictions


def test_paper_hyperparameters(repo_root):
    load = lambda n: ElectraConfig.from_json(str(repo_root / "configs" / f"{n}.json"))  # noqa: E731
    base, large, small = load("base"), load("large"), load("small")
    assert (base.train_batch_size, base.learning_rate, base.max_seq_length) == (256, 2e-4, 512)
    assert (large.train_batch_size, large.learning_rate, large.mask_prob) == (2048, 2e-4, 0.25)
    assert (small.learning_rate, small.max_seq_length, small.generator_hidden_size) == (5e-4, 128, 0.25)
    assert load("small_plus").generator_hidden_size == 1.0


def test_json_round_trip(tmp_path):
    c = ElectraConfig(hidden_size=64, num_attention_heads=2, seed=3)
    path = tmp_path / "c.json"
    c.to_json(str(path))
    assert ElectraConfig.from_json(str(path)) == c


@pytest.mark.parametrize(
    "values, message",
    [
        ({"hiden_size": 3}, "unknown config key"),
        ({"hidden_size": 250, "num_attention_heads": 4}, "divisible by num_attention_heads"),
        ({"mask_prob": 0.0}, "mask_prob"),
        ({"mask_prob": 1.0}, "mask_prob"),
        ({"num_hidden_layers": -1}, "num_hidden_layers"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"max_seq_length": 1024}, "max_position_embeddings"),
        ({"hidden_size": "big"}, "must be an integer"),
        ({"objective": "gan"}, "objective"),
        ({"objective": "two_stage"}, "two_stage_mlm_steps"),
        ({"two_stage_mlm_steps": -3}, "two_stage_mlm_steps"),
        ({"temperature": 0}, "temperature"),
    ],
)
def test_bad_values_fail_with_one_clear_message(tmp_path, values, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ConfigError, match=message) as info:
        ElectraConfig.from_json(str(path))
    assert "\n" not in str(info.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        ElectraConfig.from_json(str(tmp_path / "nope.json"))
    (tmp_path / "x.json").write_text("{ not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ElectraConfig.from_json(str(tmp_path / "x.json"))


def test_overrides():
    c = ElectraConfig().with_overrides(["learning_rate=1e-4", "disallow_correct=true", "model_size=mine"])
    assert (c.learning_rate, c.disallow_correct, c.model_size) == (1e-4, True, "mine")
    with pytest.raises(ConfigError, match="key=value"):
        ElectraConfig().with_overrides(["learning_rate"])
    with pytest.raises(ConfigError, match="unknown config key"):
        ElectraConfig().with_overrides(["lr=1"])


def test_objective_is_set_by_override():
    # `python -m electra_tf.pretrain --override objective=... ` goes through with_overrides.
    c = ElectraConfig().with_overrides(["objective=two_stage", "two_stage_mlm_steps=100"])
    assert (c.objective, c.two_stage_mlm_steps) == ("two_stage", 100)
    with pytest.raises(ConfigError, match="choose one of electra, mlm"):
        ElectraConfig().with_overrides(["objective=bert"])


def test_for_vocab_takes_the_size_of_the_vocabulary(repo_root, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]))
    small = ElectraConfig.from_json(str(repo_root / "configs" / "small.json"))
    fitted = small.for_vocab(str(vocab))
    assert fitted.vocab_size == 7 and small.vocab_size == 30522
    assert fitted == small.replace(vocab_size=7)
