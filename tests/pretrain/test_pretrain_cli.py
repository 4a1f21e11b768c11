"""The pretrain CLI in-process: layout, TensorBoard, resume bookkeeping, bad input,
Mirrored == one device through the CLI path, steps_per_execution on 2 replicas."""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from electra_tf.pretrain.__main__ import parse_args, run_cli
from electra_tf.pretrain.pretrain_job import run_pretraining

from job_helpers import subprocess_env

pytestmark = pytest.mark.large  # pre-trains through the CLI: not in the fast tier


def _events(directory):
    import tensorflow as tf

    tags = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return tags


def test_short_run_writes_layout_tensorboard_and_resumes_as_done(tmp_path, job_args, job_data):
    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", "6", "--save_every", "2", "--keep_checkpoints", "2",
                    "--log_every", "2")
    eval_dir = job_data["eval_dir"]
    summary = run_pretraining(parse_args(args + ["--eval_data_dir", eval_dir, "--eval_every", "4"]))
    assert summary["step"] == 6 and summary["resumed_from_step"] == 0
    final = model_dir / "pretrained"
    for name in ("config.json", "vocab.txt", "discriminator.weights.h5", "discriminator_head.weights.h5",
                 "generator.weights.h5", "generator_head.weights.h5", "pretrainer.weights.h5",
                 "discriminator.keras"):
        assert (final / name).is_file(), name
    ckpts = sorted(os.listdir(model_dir / "checkpoints"))
    assert ckpts == ["ckpt-00000004.weights.h5", "ckpt-00000006.weights.h5"]  # the last K=2
    train_tags = _events(model_dir / "tensorboard" / "train")
    for tag in ("loss", "mlm_loss", "disc_loss", "disc_auc", "learning_rate", "examples_per_second"):
        assert tag in train_tags, (tag, sorted(train_tags))
    assert train_tags["loss"] == [2, 4, 6]
    eval_tags = _events(model_dir / "tensorboard" / "eval")
    assert eval_tags["disc_auc"] == [4, 6]
    assert np.isfinite(summary["eval_metrics"]["loss"])

    # The fine-tuning side reads it.
    from electra_tf.models.saving import load_discriminator

    encoder, head, config = load_discriminator(str(final))
    assert config.vocab_size == json.loads((model_dir / "run.json").read_text())["settings"]["config"]["vocab_size"]

    # Re-running the same command: restored at the last step, nothing more to train.
    again = run_pretraining(parse_args(args + ["--eval_data_dir", eval_dir, "--eval_every", "4"]))
    assert again["resumed_from_step"] == 6 and again["step"] == 6


def _error_of(capsys, args):
    code = run_cli(parse_args(args))
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


@pytest.mark.parametrize("extra, expect", [
    (["--grad_accum_steps", "3"], "not divisible by --grad_accum_steps=3"),
    (["--train_steps", "5", "--steps_per_execution", "2"], "not a multiple of --steps_per_execution=2"),
    (["--override", "no_such_key=1"], "unknown config key(s) no_such_key"),
    (["--override", "max_seq_length=32"], "max_seq_length=64"),
    (["--strategy", "gpu"], "sees no GPU"),
    (["--train_steps", "0"], "--train_steps=0 must be a positive integer"),
])
def test_bad_input_is_one_error_line_and_writes_nothing(tmp_path, job_args, capsys, extra, expect):
    model_dir = tmp_path / "run"
    code, err = _error_of(capsys, job_args(model_dir) + extra)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: ") and expect in err[0], err
    assert not model_dir.exists()


def test_bad_data_and_vocab_flags(tmp_path, job_args, job_data, capsys):
    model_dir = tmp_path / "run"
    args = job_args(model_dir)
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = list(args)
    bad[bad.index("--data_dir") + 1] = str(empty)
    code, err = _error_of(capsys, bad)
    assert code == 2 and "has no manifest.json" in err[0] and len(err) == 1
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nx\n")
    bad = list(args)
    bad[bad.index("--vocab_file") + 1] = str(other_vocab)
    code, err = _error_of(capsys, bad)
    assert code == 2 and "not the vocabulary the shards" in err[0]
    assert not model_dir.exists()
    # A run directory holding another run is refused, not overwritten.
    model_dir.mkdir()
    (model_dir / "run.json").write_text(json.dumps({"settings": {"train_steps": 999}}))
    code, err = _error_of(capsys, args)
    assert code == 2 and "holds a run with other settings" in err[0]
    assert sorted(os.listdir(model_dir)) == ["run.json"]


def test_cli_subprocess_bad_config_exits_nonzero_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "electra_tf.pretrain", "--config", "nope.json",
                           "--data_dir", str(tmp_path), "--output_dir", str(tmp_path / "m")],
                          capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --config 'nope.json' does not exist; pass a JSON file such as configs/small.json or a config "
        "name (base, continue, cpu_demo, large, mini, small, small_plus, tiny)")
    assert not (tmp_path / "m").exists()


def _final_weights(model_dir):
    import h5py

    out = {}
    with h5py.File(os.path.join(model_dir, "pretrained", "pretrainer.weights.h5")) as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if hasattr(obj, "shape") else None)
    return out


def test_mirrored_cli_run_equals_single_device(tmp_path, job_args):
    """2 logical CPUs (tests/conftest.py) vs one device: same global batch, seed, weights.

    Step 1 has learning rate 0 (warmup 1), so step 2 starts from identical
    weights and its update is compared: loss within float tolerance, weights
    within 1e-4. (Over several full-lr steps a float-level difference can flip
    a Gumbel-max sample, so longer runs are not bit-comparable.)
    steps_per_execution=2 on 2 replicas is the keras-team/keras#19246 case: our
    own multi-step loop runs it and matches one device too.
    """
    # --log_every 2: the logged train metrics are windowed since the previous log line, and
    # with steps_per_execution=2 a window cannot be shorter than 2 steps.
    common = ["--train_steps", "2", "--save_every", "2", "--log_every", "2",
              "--deterministic_data", "--override", "hidden_dropout_prob=0.0",
              "--override", "attention_probs_dropout_prob=0.0", "--warmup_proportion", "0.5"]
    runs = {
        "one": run_pretraining(parse_args(job_args(tmp_path / "one", *common, "--strategy", "cpu"))),
        "two": run_pretraining(parse_args(job_args(tmp_path / "two", *common, "--strategy", "mirrored"))),
        "two_spe2": run_pretraining(parse_args(job_args(
            tmp_path / "two_spe2", *common, "--strategy", "mirrored", "--steps_per_execution", "2"))),
    }
    assert runs["two"]["replicas"] == runs["two_spe2"]["replicas"] == 2
    reference = _final_weights(tmp_path / "one")
    for name in ("two", "two_spe2"):
        assert runs[name]["step"] == 2
        assert runs[name]["train_metrics"]["loss"] == pytest.approx(
            runs["one"]["train_metrics"]["loss"], rel=1e-5), name
        weights = _final_weights(tmp_path / name)
        assert weights.keys() == reference.keys()
        for key in reference:
            np.testing.assert_allclose(weights[key], reference[key], rtol=1e-4, atol=1e-6,
                                       err_msg=f"{name}: {key}")


def test_evaluation_batches_hold_the_config_eval_batch_size(job_data):
    # ElectraConfig.eval_batch_size sizes the held-out batches (the training batch does not).
    from electra_tf.pretrain.data_setup import make_inputs, split_job_batch
    from electra_tf.pretrain.options import validate_options

    opts = parse_args(["--config", job_data["config"], "--data_dir", job_data["data_dir"],
                       "--eval_data_dir", job_data["eval_dir"], "--vocab_file", job_data["vocab_file"],
                       "--output_dir", "unused", "--override", f"vocab_size={job_data['vocab_size']}",
                       "--override", "eval_batch_size=3", "--batch_size", "8", "--strategy", "cpu"])
    plan = validate_options(opts, log=lambda _: None)
    batch = split_job_batch(plan, opts, 1, "the CPU")
    inputs = make_inputs(plan, opts, strategy=None, batch=batch, worker="main", excluded=[], data_seed=0,
                         log=lambda _: None)
    train_batch, eval_batch = next(iter(inputs.train)), next(iter(inputs.eval))
    assert train_batch["input_ids"].shape[0] == 8 and eval_batch["input_ids"].shape[0] == 3
    num_examples = json.loads((Path(job_data["eval_dir"]) / "manifest.json").read_text())["num_examples"]
    # Every held-out example: the last batch is filled with zero-weight padding rows.
    assert inputs.eval_steps == max(1, min(100, -(-num_examples // 3)))
