"""Fine-tuning killed with SIGKILL at a random step, then the same command again: it resumes
at the last checkpoint (<= 1 save interval lost) with the step counter, the learning rate and
the dropout and data streams exact, so it ends with the uninterrupted run's result."""

import collections
import json
import os
import random
import signal

import h5py
import numpy as np
import pytest

from reliability_helpers import KILL_SEED, SST2_DIR, TESTS, Output, _load, start_module, step_reached

pytestmark = pytest.mark.large  # kills and resumes fine-tuning processes: not in the fast tier

SAVE_EVERY = 5
TOTAL = 40  # 320 examples / batch 8, one epoch


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    from electra_tf.config import ElectraConfig

    write_vocab = _load("finetune_conftest_for_reliability", TESTS / "finetune" / "conftest.py").write_vocab
    d = tmp_path_factory.mktemp("ft_model")
    rows = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()[1:2001]
    counts = collections.Counter(w for r in rows for w in r.split("\t")[0].split())
    vocab = write_vocab(str(d / "vocab.txt"), [w for w, _ in counts.most_common(800)])
    size = sum(1 for _ in open(vocab, encoding="utf-8"))
    config = ElectraConfig.from_json(str(TESTS.parent / "configs" / "tiny.json")).replace(vocab_size=size)
    config.to_json(str(d / "config.json"))
    return d


def _args(model_files, output_dir):
    return ["--task", "sst2", "--init", "random", "--config", model_files / "config.json",
            "--vocab_file", model_files / "vocab.txt", "--data_dir", SST2_DIR, "--output_dir", output_dir,
            "--seed", "1", "--max_train_examples", "320", "--max_eval_examples", "100",
            "--max_seq_length", "48", "--epochs", "1", "--batch_size", "8", "--learning_rate", "1e-3",
            "--save_every", str(SAVE_EVERY), "--log_every", "1"]


def _step_lines(out):
    """step -> its progress line without the throughput (the step, loss and learning rate)."""
    return {int(l.split()[1].split("/")[0]): l.split(" examples/s=")[0] for l in out.lines if l.startswith("step ")}


def _h5_arrays(path):
    arrays = {}
    with h5py.File(path) as f:
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return arrays


def test_sigkill_at_random_step_then_resume_gives_the_uninterrupted_result(tmp_path, model_files):
    reference = Output(start_module("electra_tf.finetune", _args(model_files, tmp_path / "ref")))
    assert reference.finish(300) == 0, reference.text()[-3000:]

    out_dir = tmp_path / "killed"
    kill_at = random.Random(KILL_SEED).randint(SAVE_EVERY + 1, TOTAL - 3)
    killed = Output(start_module("electra_tf.finetune", _args(model_files, out_dir)))
    killed.wait_for(step_reached(kill_at), 300, f"step {kill_at}")
    os.killpg(killed.proc.pid, signal.SIGKILL)
    killed.finish(30)
    seen = max(_step_lines(killed))
    ckpts = os.listdir(out_dir / "seed_1" / "checkpoints")
    saved = max(int(n[5:13]) for n in ckpts if n.startswith("ckpt-"))
    assert seen - saved <= SAVE_EVERY, (seen, saved)
    assert not (out_dir / "results.json").exists() and not (out_dir / "seed_1" / "result.json").exists()

    resumed = Output(start_module("electra_tf.finetune", _args(model_files, out_dir)))
    assert resumed.finish(300) == 0, resumed.text()[-3000:]
    assert (f"resuming seed 1 from {out_dir}/seed_1/checkpoints/ckpt-{saved:08d}.weights.h5 at step {saved}"
            in resumed.text()), resumed.text()[-3000:]
    # Same step counter, loss and learning rate on every step after the resume point.
    ref_lines, new_lines = _step_lines(reference), _step_lines(resumed)
    assert sorted(new_lines) == list(range(saved + 1, TOTAL + 1))
    for step in new_lines:
        assert new_lines[step] == ref_lines[step], step
    # The same result: metrics, predictions and the fine-tuned weights.
    want = json.loads((tmp_path / "ref" / "seed_1" / "result.json").read_text())
    got = json.loads((out_dir / "seed_1" / "result.json").read_text())
    assert got.pop("resumed_from_step") == saved
    for key in ("train_seconds",):
        want.pop(key), got.pop(key)
    assert got == want
    assert ((out_dir / "seed_1" / "dev_predictions.tsv").read_text()
            == (tmp_path / "ref" / "seed_1" / "dev_predictions.tsv").read_text())
    a = _h5_arrays(tmp_path / "ref" / "seed_1" / "classifier.weights.h5")
    b = _h5_arrays(out_dir / "seed_1" / "classifier.weights.h5")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    # The finished seed's checkpoints are cleaned up; results.json is complete.
    assert not (out_dir / "seed_1" / "checkpoints").exists()
    assert json.loads((out_dir / "results.json").read_text())["seeds"][0]["accuracy"] == want["accuracy"]
