"""`pretrain --train_minutes` (a run sized by wall-clock minutes) and `--snapshot_dir`, as a user runs them."""

import json
import os
import re

import h5py
import numpy as np
import pytest

from helpers import error_lines

from electra_tf.pretrain.__main__ import parse_args, run_cli
from electra_tf.pretrain.snapshots import latest_snapshot, read_snapshot

pytestmark = pytest.mark.large  # pre-trains against the clock: not in the fast tier


def _run(capsys, args):
    code = run_cli(parse_args(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_run_sized_by_minutes_ends_where_it_decided_with_the_rate_at_zero(tmp_path, job_args, capsys):
    run_dir, snapshots = tmp_path / "run", tmp_path / "snapshots"
    args = job_args(run_dir, "--train_minutes", "0.5", "--train_steps", "100000", "--log_every", "5",
                    "--snapshot_dir", str(snapshots), "--snapshot_minutes", "0.1", "--snapshot_dtype", "fp16",
                    "--strategy", "cpu")
    code, out, err = _run(capsys, args)
    assert code == 0, err
    decided = json.loads((run_dir / "time_budget.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    end = decided["end_step"]
    assert 2 <= end < 100000
    assert summary["step"] == summary["train_steps"] == end
    assert re.search(rf"step {end}/{end} .* lr=0 ", out), out
    budget_seconds = 0.5 * 60
    if decided["cut_short"]:  # a loaded machine: the time ran out inside the measuring window
        assert f"the time is up at step {end}; training stops there" in out
    elif decided["first_step_seconds"] < 0.5 * budget_seconds:  # a loaded machine may spend it all compiling
        assert f"training to step {end}, where the learning rate reaches 0" in out
        assert end > 5 and not decided["cut_short"]
        # Training (compile included) took the budget, give or take the measuring window's error.
        assert 0.75 * budget_seconds < summary["fit_seconds"] < 1.35 * budget_seconds, summary["fit_seconds"]

    # The last snapshot is the last step, in float16, beside at most one older one.
    newest = latest_snapshot(str(snapshots))
    assert newest == str(snapshots / f"step_{end:07d}")
    assert len([n for n in os.listdir(snapshots) if n.startswith("step_")]) <= 2
    record = read_snapshot(newest)
    assert record["step"] == end and record["train_steps"] == end
    assert record["time_budget"]["end_step"] == end
    with h5py.File(os.path.join(newest, "discriminator.weights.h5"), "r") as f:
        dtypes = set()
        f.visititems(lambda name, item: dtypes.add(item.dtype) if isinstance(item, h5py.Dataset) else None)
    assert dtypes == {np.dtype("float16")}

    # Re-running the command keeps the step it decided: nothing more is trained.
    code, out, err = _run(capsys, args)
    assert code == 0, err
    assert f"this run decided on step {end}" in out
    assert json.loads((run_dir / "summary.json").read_text())["step"] == end


@pytest.mark.parametrize("flags, culprit", [
    (["--train_minutes", "0"], "--train_minutes=0.0 must be a positive number of minutes"),
    (["--snapshot_dir", "SNAP", "--snapshot_minutes", "-1"], "--snapshot_minutes=-1.0 must be a positive number"),
    (["--snapshot_dir", "gs://bucket/snapshots"], "--snapshot_dir 'gs://bucket/snapshots' must be a local folder"),
])
def test_bad_time_and_snapshot_flags_are_one_line_and_write_nothing(tmp_path, job_args, capsys, flags, culprit):
    flags = [f.replace("SNAP", str(tmp_path / "snap")) for f in flags]
    code, out, err = _run(capsys, job_args(tmp_path / "run", *flags))
    assert code == 2
    assert len(error_lines(err)) == 1 and culprit in error_lines(err)[0], err
    assert not (tmp_path / "run").exists() and not (tmp_path / "snap").exists()
