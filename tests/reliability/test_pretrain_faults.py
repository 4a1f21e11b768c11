"""Pre-training under faults: SIGKILL at random steps, a NaN loss, an output directory
that stops taking writes, corrupted and truncated shards.

A run is killed twice (the second time after it already resumed once) and the final
checkpoint is loaded back.
"""

import json
import os
import random
import re
import resource
import shutil
import signal
import stat

import h5py
import numpy as np
import pytest

from electra_tf.pretrain.__main__ import parse_args, run_cli
from reliability_helpers import (KILL_SEED, STEP_RE, Output, error_lines, is_root, lr_schedule, snapshot,
                                 start_pretrain, step_reached)

pytestmark = pytest.mark.large  # kills and resumes pre-training processes: not in the fast tier

SAVE_EVERY = 4
TRAIN_STEPS = 24
RESUME_RE = re.compile(r"resuming from \S+ckpt-(\d{8})\.weights\.h5 at step (\d+)")


def _checkpoint_steps(model_dir):
    directory = model_dir / "checkpoints"
    if not directory.is_dir():
        return []
    return sorted(int(n[5:13]) for n in os.listdir(directory) if re.match(r"ckpt-\d{8}\.weights\.h5$", n))


def _kill_at(args, step, timeout=240):
    out = Output(start_pretrain(args))
    out.wait_for(step_reached(step), timeout, f"step {step}")
    os.killpg(out.proc.pid, signal.SIGKILL)  # no cleanup of any kind
    out.finish(30)
    assert out.proc.returncode == -signal.SIGKILL
    return out


def _lrs(text):
    return {int(m.group(1)): float(m.group(3)) for m in map(STEP_RE.match, text.splitlines()) if m}


def test_sigkill_twice_at_random_steps_then_resume_exactly(tmp_path, job_args, job_data):
    rng = random.Random(KILL_SEED)
    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", str(TRAIN_STEPS), "--save_every", str(SAVE_EVERY),
                    "--log_every", "1", "--keep_checkpoints", "2", "--strategy", "cpu")
    outputs = []
    resumed_at = 0
    for _ in range(2):
        kill_at = rng.randint(resumed_at + SAVE_EVERY + 1, resumed_at + 2 * SAVE_EVERY + 2)
        out = _kill_at(args, kill_at)
        outputs.append(out)
        seen = out.steps()
        saved = max(_checkpoint_steps(model_dir))
        # At most one save interval is lost; the step counter continued from the resume point.
        assert seen[-1] - saved <= SAVE_EVERY, (seen, saved)
        assert seen == list(range(resumed_at + 1, seen[-1] + 1)), seen
        if resumed_at:
            match = RESUME_RE.search(out.text())
            assert match and int(match.group(1)) == int(match.group(2)) == resumed_at, out.text()[-2000:]
        assert not (model_dir / "pretrained").exists()
        resumed_at = saved

    final = Output(start_pretrain(args))
    assert final.finish(240) == 0, final.text()[-3000:]
    outputs.append(final)
    match = RESUME_RE.search(final.text())
    assert match and int(match.group(1)) == int(match.group(2)) == resumed_at
    assert final.steps() == list(range(resumed_at + 1, TRAIN_STEPS + 1))

    # lr(step) of all three processes is the schedule's: it is keyed by the restored counter.
    schedule = lr_schedule(job_data["config"], TRAIN_STEPS)
    for out in outputs:
        for step, lr in _lrs(out.text()).items():
            assert lr == pytest.approx(float(schedule(step)), rel=1e-2, abs=1e-9), step

    # The final checkpoint is complete and holds the final model.
    assert sorted(os.listdir(model_dir / "checkpoints")) == [
        f"ckpt-{TRAIN_STEPS - SAVE_EVERY:08d}.weights.h5", f"ckpt-{TRAIN_STEPS:08d}.weights.h5"]
    from electra_tf.config import ElectraConfig
    from electra_tf.data.vocab import special_token_ids
    from electra_tf.models.saving import load_discriminator
    from electra_tf.training.checkpoints import CheckpointManager
    from electra_tf.pretrain.pretrain_optimizer import create_optimizer
    from electra_tf.pretrain.pretrainer import ElectraPretrainer

    config = ElectraConfig.from_dict(json.loads((model_dir / "run.json").read_text())["settings"]["config"])
    model = ElectraPretrainer(config, special_token_ids(job_data["vocab_file"]))
    model.compile(optimizer=create_optimizer(config, train_steps=TRAIN_STEPS))
    path = str(model_dir / "checkpoints" / f"ckpt-{TRAIN_STEPS:08d}.weights.h5")
    assert CheckpointManager.restore(model, path) == TRAIN_STEPS
    encoder, _, _ = load_discriminator(str(model_dir / "pretrained"))
    for mine, theirs in zip(model.discriminator.weights, encoder.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def _in_process(capsys, args):
    code = run_cli(parse_args(args))
    captured = capsys.readouterr()
    return code, captured.out, error_lines(captured.err)


def test_nan_loss_mid_run_stops_naming_the_step_and_keeps_the_last_good_checkpoint(
        tmp_path, job_args, capsys, monkeypatch):
    """An absurd learning rate for the 7th update (injected into the schedule) makes the loss of
    step 8 NaN: step 8 is also a save step, where the guard must keep the checkpoint from being written."""
    import tensorflow as tf

    from electra_tf.training import optimization

    real = optimization.WarmupPolynomialDecay.__call__

    def absurd_from_update_7(self, step):  # `step` is the count of updates already applied
        lr = real(self, step)
        return tf.where(tf.cast(step, tf.int64) >= 6, tf.constant(1e30, lr.dtype), lr)

    monkeypatch.setattr(optimization.WarmupPolynomialDecay, "__call__", absurd_from_update_7)
    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", "12", "--save_every", "4", "--log_every", "1",
                    "--strategy", "cpu")
    code, out, err = _in_process(capsys, args)
    assert code == 2
    ckpt4 = model_dir / "checkpoints" / "ckpt-00000004.weights.h5"
    assert err == [f"error: the training loss became nan at step 8; training stopped and nothing was saved "
                   f"after it (the last good checkpoint, kept: {ckpt4}); lower the learning rate "
                   f"(--learning_rate) or check the data, and start again in a new --output_dir"]
    assert "step 7/12" in out and "step 8/12 loss=nan" in out
    # Nothing was written after the NaN: the last good checkpoint is the latest and intact.
    assert _checkpoint_steps(model_dir) == [4]
    assert sorted(os.listdir(model_dir / "checkpoints")) == [ckpt4.name]
    assert not (model_dir / "pretrained").exists() and not (model_dir / "summary.json").exists()
    with h5py.File(ckpt4) as f:
        assert all(np.isfinite(f[k][()]).all() for k in _datasets(f) if f[k].dtype.kind == "f")
    # With the cause gone, the same command resumes from it and finishes.
    monkeypatch.undo()
    code, out, err = _in_process(capsys, args)
    assert code == 0, err
    assert f"resuming from {ckpt4} at step 4" in out and "step 12/12" in out


def _datasets(group, prefix=""):
    names = []
    for key, value in group.items():
        if isinstance(value, h5py.Dataset):
            names.append(prefix + key)
        else:
            names.extend(_datasets(value, prefix + key + "/"))
    return names


def test_absurd_learning_rate_flag_stops_at_step_2_with_nothing_saved(tmp_path, job_args, capsys):
    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", "8", "--save_every", "4", "--log_every", "1",
                    "--strategy", "cpu", "--learning_rate", "1e30", "--warmup_proportion", "0")
    code, _, err = _in_process(capsys, args)
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error: the training loss became nan at step 2; "), err
    assert "lower the learning rate" in err[0]
    assert not (model_dir / "checkpoints").exists() and not (model_dir / "pretrained").exists()


def _make_read_only(model_dir):
    for root, dirs, files in os.walk(model_dir):
        for name in dirs + files:
            path = os.path.join(root, name)
            os.chmod(path, os.stat(path).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    os.chmod(model_dir, 0o555)


def _make_writable(model_dir):
    for root, dirs, files in os.walk(model_dir):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


@pytest.mark.parametrize("fault", ["disk_full", "read_only"])
def test_output_dir_stops_taking_writes_mid_run(tmp_path, job_args, fault):
    """disk_full: the file-size limit of the running process drops to 64 KiB (what a full
    disk or a quota does to its writes; works as root too). read_only: chmod a-w, which
    root ignores, so that case is skipped under root."""
    if fault == "read_only" and is_root():
        pytest.skip("running as root: permission bits do not stop root's writes (disk_full covers the path)")
    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", "40", "--save_every", "10", "--log_every", "1",
                    "--keep_checkpoints", "5", "--strategy", "cpu")
    out = Output(start_pretrain(args))
    first = model_dir / "checkpoints" / "ckpt-00000010.weights.h5"
    out.wait_for(lambda lines: any(l == f"saved checkpoint {first}" for l in lines), 240, "the first checkpoint")
    if fault == "disk_full":
        resource.prlimit(out.proc.pid, resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
    else:
        _make_read_only(model_dir)
    try:
        before = snapshot(model_dir / "checkpoints")
        code = out.finish(240)
    finally:
        if fault == "read_only":
            _make_writable(model_dir)
    assert code == 2, out.text()[-3000:]
    errors = error_lines(out.text())
    assert len(errors) == 1, out.text()[-3000:]
    failed = int(re.search(r"cannot write checkpoint \S+ckpt-(\d{8})\.weights\.h5 \(", errors[0]).group(1))
    reason = "File too large" if fault == "disk_full" else "Permission denied"
    assert errors[0].startswith(f"error: cannot write checkpoint {model_dir}/checkpoints/ckpt-{failed:08d}"
                                f".weights.h5 ("), errors[0]
    assert reason in errors[0].split(")")[0], errors[0]
    saved = _checkpoint_steps(model_dir)
    assert errors[0].endswith(
        f"; the last checkpoint, {model_dir}/checkpoints/ckpt-{saved[-1]:08d}.weights.h5, is intact; free disk "
        f"space or make {model_dir}/checkpoints writable, then re-run the same command to resume")
    # Earlier checkpoints are untouched, no partial file is left, no model was written.
    assert failed > saved[-1] and saved[0] == 10
    assert {k: v for k, v in snapshot(model_dir / "checkpoints").items()} == before
    assert sorted(os.listdir(model_dir / "checkpoints")) == [f"ckpt-{s:08d}.weights.h5" for s in saved]
    assert not (model_dir / "pretrained").exists()

    # Space back: the same command resumes from the last intact checkpoint and finishes.
    again = Output(start_pretrain(args))
    assert again.finish(240) == 0, again.text()[-3000:]
    match = RESUME_RE.search(again.text())
    assert match and int(match.group(2)) == saved[-1]
    assert (model_dir / "pretrained" / "discriminator.weights.h5").is_file()


def _corrupt_copy(src, dst, how):
    """A copy of a shard directory with shard 0 bit-flipped (same size) or truncated."""
    shutil.copytree(src, dst)
    victim = dst / "pretrain_data.tfrecord-00000-of-00002"
    data = bytearray(victim.read_bytes())
    if how == "flipped":
        data[len(data) // 3] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    victim.write_bytes(bytes(data))
    return victim


def _with_data(args, data_dir):
    args = list(args)
    args[args.index("--data_dir") + 1] = str(data_dir)
    return args


def test_corrupted_shard_at_read_time_names_the_shard_or_is_skipped_and_counted(
        tmp_path, job_args, job_data, capsys):
    victim = _corrupt_copy(job_data["data_dir"], tmp_path / "shards", "flipped")
    model_dir = tmp_path / "run"
    args = _with_data(job_args(model_dir, "--train_steps", "40", "--save_every", "20", "--log_every", "20",
                               "--strategy", "cpu"), victim.parent)
    # The bytes differ but the size does not: found only when training reads the record.
    code, _, err = _in_process(capsys, args)
    assert code == 2
    assert len(err) == 1 and err[0].startswith(
        f"error: shard {victim} is corrupted (sha256 differs from the manifest)"), err
    assert err[0].endswith("; rebuild it with python -m electra_tf.data.build_pretraining_data, or pass "
                           "--skip_corrupt_shards to train without it")
    assert not (model_dir / "pretrained").exists()

    # With the flag: verified up front, left out, counted, and the run completes.
    skip_dir = tmp_path / "skip"
    code, out, err = _in_process(capsys, _with_data(job_args(
        skip_dir, "--train_steps", "4", "--save_every", "4", "--strategy", "cpu", "--skip_corrupt_shards"),
        victim.parent))
    assert code == 0, err
    assert (f"warning: skipping 1 corrupt shard(s) of {victim.parent}: {victim.name} "
            f"(sha256 differs from the manifest)") in out
    summary = json.loads((skip_dir / "summary.json").read_text())
    assert summary["skipped_corrupt_shards"] == [str(victim)] and summary["step"] == 4


def test_truncated_shard_is_refused_before_anything_is_written(tmp_path, job_args, job_data, capsys):
    victim = _corrupt_copy(job_data["data_dir"], tmp_path / "shards", "truncated")
    model_dir = tmp_path / "run"
    code, _, err = _in_process(capsys, _with_data(job_args(model_dir, "--train_steps", "4"), victim.parent))
    assert code == 2 and len(err) == 1, err
    manifest = json.loads((victim.parent / "manifest.json").read_text())
    assert err[0].startswith(f"error: shard {victim} is {victim.stat().st_size} bytes but its manifest "
                             f"says {manifest['shards'][0]['size']}: it is truncated or corrupted; re-run the same "
                             f"python -m electra_tf.data.build_pretraining_data command")
    assert err[0].endswith("; or pass --skip_corrupt_shards to train without it")
    assert not model_dir.exists()
