"""--override acts on the embedded default (no --data_dir) or is refused; it is never recorded in
run.json and then overruled. The embedded default trains configs/tiny.json as it stands (300 steps
at batch 32), so num_train_steps / train_batch_size / do_lower_case overrides change the run."""

import json

import pytest

from electra_tf.data import manifest as mf
from electra_tf.data.vocab import load_vocab
from electra_tf.pretrain.__main__ import parse_args, run_cli
from electra_tf.pretrain.options import validate_options
from electra_tf.pretrain.pretrain_job import run_pretraining


@pytest.mark.large
def test_embedded_default_overrides_act(tmp_path):
    run_dir = tmp_path / "run"
    summary = run_pretraining(parse_args([
        "--output_dir", str(run_dir), "--override", "num_train_steps=4", "--override", "train_batch_size=8",
        "--override", "do_lower_case=false", "--override", "max_seq_length=32", "--save_every", "4",
        "--verbose", "0"]), log=lambda line: None)
    assert summary["step"] == 4  # not configs/tiny.json's 300
    settings = json.loads((run_dir / "run.json").read_text())["settings"]
    assert settings["train_steps"] == 4 and settings["batch_size"] == 8
    assert settings["config"]["num_train_steps"] == 4 and settings["config"]["train_batch_size"] == 8
    assert settings["config"]["do_lower_case"] is False
    # The data the run trained on is cased too: the vocabulary keeps capitals, the manifest records it.
    assert mf.load_manifest(str(run_dir / "data" / "train"))["do_lower_case"] is False
    assert any(t[:1].isupper() for t in load_vocab(str(run_dir / "vocab.txt")))


def test_embedded_default_without_overrides_takes_the_config_values(tmp_path):
    plan = validate_options(parse_args(["--output_dir", str(tmp_path / "run")]), log=lambda line: None)
    assert (plan.train_steps, plan.batch_size) == (plan.config.num_train_steps, plan.config.train_batch_size)
    assert (plan.train_steps, plan.batch_size) == (300, 32)  # configs/tiny.json
    plan = validate_options(parse_args(["--output_dir", str(tmp_path / "run"), "--train_steps", "7",
                                        "--override", "num_train_steps=7"]), log=lambda line: None)
    assert plan.train_steps == 7 == plan.config.num_train_steps


@pytest.mark.parametrize("args, message", [
    (["--train_steps", "100", "--override", "num_train_steps=1500"],
     "error: --train_steps=100 and --override num_train_steps=1500 disagree; pass one of them"),
    (["--batch_size", "16", "--override", "train_batch_size=8"],
     "error: --batch_size=16 and --override train_batch_size=8 disagree; pass one of them"),
    (["--seed", "3", "--override", "seed=5"],
     "error: --seed=3 and --override seed=5 disagree; pass one of them"),
    (["--override", "vocab_size=3000"],
     "error: --override vocab_size cannot act on the embedded default: its model takes the size of the vocabulary "
     "it learns from data/sample_corpus.txt; drop it, or pass --data_dir and --vocab_file"),
])
def test_override_that_cannot_act_is_refused(tmp_path, capsys, args, message):
    run_dir = tmp_path / "run"
    assert run_cli(parse_args(["--output_dir", str(run_dir), *args])) == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not run_dir.exists()
