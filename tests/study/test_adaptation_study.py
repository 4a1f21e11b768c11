"""scripts/adaptation_study.py: its bad flags, the task text it pre-trains on, the minutes it
reads off a pre-training log, and a checkpoint turned into a model directory that fine-tunes.
(The study itself takes hours; the path it drives is tested end to end by test_adapt_demo.py.)"""

import json

import numpy as np
import pytest

from scripts import adaptation_study


@pytest.fixture
def study():
    return adaptation_study


@pytest.mark.parametrize("argv, culprit", [
    (["--runs", "electra_everything"], "--runs: unknown run 'electra_everything'"),
    (["--tasks", "imdb5000"], "--tasks: unknown task 'imdb5000'"),
    (["--inits", "electra_domain@late"], "--inits: 'electra_domain@late' is not asis, random or <run>@<step>"),
])
def test_bad_flags_are_refused_in_one_line(study, tmp_path, capsys, argv, culprit):
    with pytest.raises(SystemExit) as exc:
        study.main(argv + ["--work", str(tmp_path / "work")])
    assert exc.value.code == 2
    assert culprit in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "work").exists()


def test_task_text_splits_reviews_at_html_breaks(study):
    text = study.review_text([("First part.<br /><br />Second part.", "1"), ("Only one.", "0")])
    assert text == "First part.\nSecond part.\n\nOnly one.\n"


def test_training_minutes_sum_the_logged_windows(study, tmp_path):
    (tmp_path / "pretrain").mkdir()
    (tmp_path / "pretrain" / "r.log").write_text(
        "step 20/60 loss=1 examples/s=4.0\nsaved checkpoint x\nstep 40/60 loss=1 examples/s=8.0\n"
        "step 60/60 loss=1 examples/s=16.0\n")
    # 20 steps x 32 examples at 4, 8 and 16 examples/s: 160 + 80 + 40 s.
    assert study.training_minutes(tmp_path, "r", 40) == pytest.approx(240 / 60)
    assert study.training_minutes(tmp_path, "r", 60) == pytest.approx(280 / 60)


@pytest.mark.large
def test_checkpoint_becomes_a_model_directory_with_its_weights(study, tmp_path, job_args, job_data, capsys):
    from electra_tf.models.saving import load_encoder
    from electra_tf.pretrain.__main__ import parse_args, run_cli

    run_dir = tmp_path / "pretrain" / "electra_domain"
    assert run_cli(parse_args(job_args(run_dir, "--train_steps", "4", "--save_every", "2",
                                       "--strategy", "cpu"))) == 0
    capsys.readouterr()
    at2 = study.checkpoint_model(tmp_path, "electra_domain@2")
    assert json.loads((at2 / "config.json").read_text())["vocab_size"] == job_data["vocab_size"]
    mid, _ = load_encoder(str(at2))
    end, _ = load_encoder(str(run_dir / "pretrained"))
    at4, _ = load_encoder(str(study.checkpoint_model(tmp_path, "electra_domain@4")))
    for a, b in zip(at4.weights, end.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert any(not np.array_equal(a.numpy(), b.numpy()) for a, b in zip(mid.weights, end.weights))
    with pytest.raises(SystemExit, match="ckpt-00000003.weights.h5 does not exist"):
        study.checkpoint_model(tmp_path, "electra_domain@3")
