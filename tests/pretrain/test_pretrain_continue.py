"""--continue_from: a new run starts from another run's newest checkpoint (weights,
optimizer state, step) and goes on to --train_steps, e.g. on in-domain text."""

import re

import numpy as np
import pytest

from electra_tf.pretrain.__main__ import parse_args, run_cli

FIRST_STEPS = 6
SECOND_STEPS = 10


def _run(capsys, args):
    code = run_cli(parse_args(args))
    out = capsys.readouterr()
    return code, out.out, out.err.strip().splitlines()


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    return tmp_path_factory.mktemp("first") / "run"


def _first(capsys, job_args, first_run):
    if not (first_run / "checkpoints").exists():
        code, out, err = _run(capsys, job_args(first_run, "--train_steps", str(FIRST_STEPS),
                                               "--save_every", "3", "--log_every", "1", "--strategy", "cpu"))
        assert code == 0, err
    return first_run


@pytest.mark.large
def test_continue_from_starts_at_the_other_runs_step_and_schedule(tmp_path, job_args, job_data,
                                                                     capsys, first_run):
    from electra_tf.config import ElectraConfig
    from electra_tf.models.saving import load_discriminator
    from electra_tf.training.optimization import WarmupPolynomialDecay

    first = _first(capsys, job_args, first_run)
    before = [w.numpy() for w in load_discriminator(str(first / "pretrained"))[0].weights]
    second = tmp_path / "second"
    # Other text: the held-out shards stand in for an in-domain corpus.
    args = job_args(second, "--train_steps", str(SECOND_STEPS), "--log_every", "1", "--strategy", "cpu",
                    "--continue_from", str(first))
    args[args.index("--data_dir") + 1] = job_data["eval_dir"]
    code, out, err = _run(capsys, args)
    assert code == 0, err
    assert re.search(rf"continuing from \S+ckpt-{FIRST_STEPS:08d}\.weights\.h5 at step {FIRST_STEPS} ", out), out
    steps = [int(s) for s in re.findall(r"^step (\d+)/", out, re.M)]
    assert steps == list(range(FIRST_STEPS + 1, SECOND_STEPS + 1))
    # The schedule of the new run (its own --train_steps), keyed by the carried-over step.
    cfg = ElectraConfig.from_json(job_data["config"])
    schedule = WarmupPolynomialDecay(cfg.learning_rate, SECOND_STEPS, cfg.num_warmup_steps)
    for step, lr in re.findall(r"^step (\d+)/\d+ .* lr=(\S+)", out, re.M):
        assert float(lr) == pytest.approx(float(schedule(int(step))), rel=1e-2, abs=1e-9), step
    after = load_discriminator(str(second / "pretrained"))[0].weights
    # Trained on from the first run's weights: close to them, but moved.
    assert any(not np.array_equal(a, b.numpy()) for a, b in zip(before, after))
    assert all(np.abs(a - b.numpy()).max() < 0.05 for a, b in zip(before, after))
    # The first run is untouched; re-running the same command resumes the new run instead.
    assert sorted(p.name for p in (first / "checkpoints").iterdir())[-1] == f"ckpt-{FIRST_STEPS:08d}.weights.h5"
    code, out, err = _run(capsys, args)
    assert code == 0, err
    assert f"resuming from {second}" in out and "continuing from" not in out, out


@pytest.mark.parametrize("case", ["no_checkpoint", "past_the_end", "same_dir", "embedded"])
def test_bad_continue_from_is_one_line_and_writes_nothing(tmp_path, job_args, capsys, first_run, case):
    first = _first(capsys, job_args, first_run)
    model_dir = tmp_path / "new"
    if case == "no_checkpoint":
        (tmp_path / "empty").mkdir()
        args, expect = job_args(model_dir, "--continue_from", str(tmp_path / "empty")), "holds no checkpoint"
    elif case == "past_the_end":
        args, expect = (job_args(model_dir, "--continue_from", str(first), "--train_steps", str(FIRST_STEPS)),
                        f"is at step {FIRST_STEPS}; pass --train_steps")
    elif case == "same_dir":
        args, expect = job_args(first, "--continue_from", str(first)), "is --output_dir"
    else:
        args, expect = ["--continue_from", str(first), "--output_dir", str(model_dir)], "needs --data_dir"
    code, _, err = _run(capsys, args)
    assert code != 0
    assert len(err) == 1 and expect in err[0] and "--continue_from" in err[0], err
    assert not model_dir.exists()
