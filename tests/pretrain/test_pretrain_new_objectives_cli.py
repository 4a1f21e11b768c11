"""`python -m electra_tf.pretrain` with objective=electric and embedding_sharing=gdes: a few
steps on the tiny job data, then the saved model fine-tunes (SST-2, a handful of steps)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from job_helpers import subprocess_env

pytestmark = pytest.mark.large  # pre-trains and fine-tunes through the CLIs: not in the fast tier


@pytest.mark.parametrize("override", ["objective=electric", "embedding_sharing=gdes"])
def test_pretrain_cli_then_finetune(tmp_path, job_args, shared_data, override):
    from electra_tf.finetune.settings import Settings
    from electra_tf.finetune.finetune_job import run_task
    from electra_tf.models.model_folder import load_config

    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", "3", "--save_every", "3", "--log_every", "3",
                    "--override", override)
    proc = subprocess.run([sys.executable, "-m", "electra_tf.pretrain", *args], env=subprocess_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = model_dir / "pretrained"
    key, value = override.split("=")
    assert getattr(load_config(str(final)), key) == value
    for name in ("discriminator.weights.h5", "discriminator_head.weights.h5", "generator.weights.h5",
                 "pretrainer.weights.h5", "discriminator.keras"):
        assert (final / name).is_file(), name

    if override == "objective=electric":
        # The scorer reports ELECTRIC's energies; its probabilities are their sigmoid.
        from electra_tf.scoring import Scorer

        scores = Scorer(str(final)).score(["the first of the two"])[0]
        assert scores.energies is not None and len(scores.energies) == len(scores.tokens) > 0
        np.testing.assert_allclose(scores.probabilities,
                                   1 / (1 + np.exp(-np.asarray(scores.energies))), rtol=1e-5)

    results = run_task(Settings(
        task="sst2", init=str(final), data_dir=str(shared_data / "glue" / "SST-2"),
        output_dir=str(tmp_path / "sst2"), seeds=(1,), epochs=1, batch_size=8,
        max_seq_length=32, max_train_examples=16, max_eval_examples=8, log_every=1))
    seed = results["seeds"][0]
    assert seed["train_steps"] == 2 and 0.0 <= seed["accuracy"] <= 1.0
    assert json.loads((tmp_path / "sst2" / "results.json").read_text())["task"] == "sst2"
