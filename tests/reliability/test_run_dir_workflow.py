"""The documented workflow on a pre-training run directory, as written.

    python -m electra_tf.pretrain --config configs/tiny.json --data_dir shards/ --vocab_file vocab.txt \\
        --output_dir runs/x                    # vocab.txt smaller than the config's vocab_size
    python -m electra_tf.finetune --task sst2 --init runs/x ...
    python -m electra_tf.export --model_dir runs/x --output_dir serving/x/1
    Scorer("runs/x")

The run directory holds its model in pretrained/: every reader finds it there and
says so in one line; the vocab_size comes from the vocabulary, so fine-tuning with
the run's own vocab.txt works.
"""

from __future__ import annotations

import json
import logging

import pytest

from reliability_helpers import SST2_DIR

pytestmark = pytest.mark.large  # runs the documented workflow, jobs included: not in the fast tier


def _errors(text):
    return [line for line in text.splitlines() if line.startswith("error: ")]


def test_pretrain_sets_vocab_size_and_its_run_dir_feeds_finetune_export_and_scorer(
        tmp_path, job_data, capsys, caplog):
    import electra_tf.finetune.__main__ as finetune_cli
    from electra_tf.config import ElectraConfig
    from electra_tf.export.__main__ import main as export_main
    from electra_tf.pretrain.__main__ import parse_args, run_cli
    from electra_tf.scoring import Scorer

    run = tmp_path / "run"
    model = run / "pretrained"
    config_size = ElectraConfig.from_json(job_data["config"]).vocab_size
    assert config_size != job_data["vocab_size"]  # the trap: no --override vocab_size

    capsys.readouterr()
    code = run_cli(parse_args([
        "--config", job_data["config"], "--data_dir", job_data["data_dir"], "--vocab_file",
        job_data["vocab_file"], "--output_dir", str(run), "--train_steps", "2", "--save_every", "2",
        "--batch_size", "8", "--strategy", "cpu", "--verbose", "0"]))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (f"vocab_size set to {job_data['vocab_size']} from {job_data['vocab_file']} "
            f"(config said {config_size})") in out.splitlines()
    assert json.loads((model / "config.json").read_text())["vocab_size"] == job_data["vocab_size"]

    # finetune --init <run dir>
    code = finetune_cli.main([
        "--task", "sst2", "--init", str(run), "--data_dir", str(SST2_DIR), "--output_dir", str(tmp_path / "ft"),
        "--max_train_examples", "16", "--max_eval_examples", "8", "--max_seq_length", "32", "--train_steps", "1"])
    out, err = capsys.readouterr()
    assert code == 0, _errors(err)
    assert f"--init {run} is a pre-training run directory: using its model in {model}" in out.splitlines()
    results = json.loads((tmp_path / "ft" / "results.json").read_text())
    assert results["weights"] == str(model / "discriminator.weights.h5")

    # export --model_dir <run dir>
    saved = tmp_path / "serving" / "electra" / "1"
    code = export_main(["--model_dir", str(run), "--output_dir", str(saved)])
    _, err = capsys.readouterr()
    assert code == 0, _errors(err)
    assert err.splitlines() == [f"--model_dir {run} is a pre-training run directory: using its model in {model}"]
    assert (saved / "saved_model.pb").is_file()

    # Scorer(<run dir>)
    with caplog.at_level(logging.INFO, logger="electra_tf.scoring"):
        scores = Scorer(str(run)).score(["the cat sat on the mat"])
    assert len(scores) == 1 and len(scores[0].probabilities) == len(scores[0].tokens) > 0
    assert f"Scorer {run} is a pre-training run directory: using its model in {model}" in caplog.messages
