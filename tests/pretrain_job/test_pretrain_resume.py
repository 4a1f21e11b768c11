"""kill -9 a running pretrain at a random step, re-run the same command: it resumes
from the last checkpoint (<= 1 save interval lost) with the step counter exact."""

import os
import random
import re
import subprocess
import threading
import time

import pytest

from conftest import kill_group, start

SAVE_EVERY = 4
TRAIN_STEPS = 24


def _reader(proc, lines):
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))


def test_kill_9_then_rerun_resumes_at_last_checkpoint(tmp_path, job_args):
    model_dir = tmp_path / "run"
    args = job_args(model_dir, "--train_steps", str(TRAIN_STEPS), "--save_every", str(SAVE_EVERY),
                    "--log_every", "1", "--keep_checkpoints", "2", "--strategy", "cpu")
    kill_at = random.Random().randint(SAVE_EVERY + 1, TRAIN_STEPS - 3)
    proc = start(args)
    lines = []
    thread = threading.Thread(target=_reader, args=(proc, lines), daemon=True)
    thread.start()
    step_re = re.compile(r"^step (\d+)/")
    last_seen = 0
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            steps = [int(m.group(1)) for m in map(step_re.match, list(lines)) if m]
            if steps and steps[-1] >= kill_at:
                os.killpg(proc.pid, 9)  # SIGKILL: no cleanup at all
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"never reached step {kill_at} (rc={proc.poll()}):\n" + "\n".join(lines[-30:]))
    finally:
        kill_group(proc)
        thread.join(timeout=10)
    steps = [int(m.group(1)) for m in map(step_re.match, lines) if m]
    last_seen = steps[-1]
    assert proc.returncode == -9
    ckpts = sorted(os.listdir(model_dir / "checkpoints"))
    assert ckpts and all(re.match(r"ckpt-\d{8}\.weights\.h5$", c) or ".tmp" in c for c in ckpts)
    saved = max(int(c[5:13]) for c in ckpts if not c.startswith("."))
    assert last_seen - saved <= SAVE_EVERY, (last_seen, saved)
    assert not (model_dir / "pretrained").exists()

    # Same command again.
    proc = start(args)
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        kill_group(proc)
    assert proc.returncode == 0, out[-3000:]
    match = re.search(r"resuming from \S+ckpt-(\d{8})\.weights\.h5 at step (\d+)", out)
    assert match, out[-3000:]
    assert int(match.group(1)) == int(match.group(2)) == saved
    resumed_steps = [int(m.group(1)) for m in map(step_re.match, out.splitlines()) if m]
    # The step counter continues exactly where the checkpoint stopped.
    assert resumed_steps[0] == saved + 1 and resumed_steps[-1] == TRAIN_STEPS, resumed_steps
    assert resumed_steps == list(range(saved + 1, TRAIN_STEPS + 1))
    # The learning-rate schedule is keyed by the restored counter: lr(step) exact.
    from electra_tf.config import ElectraConfig
    from electra_tf.training.optimization import WarmupPolynomialDecay

    cfg = ElectraConfig.from_json(args[args.index("--config") + 1])
    schedule = WarmupPolynomialDecay(cfg.learning_rate, TRAIN_STEPS, cfg.num_warmup_steps)
    lrs = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^step (\d+)/\d+ .* lr=(\S+)", out, re.M)}
    for step, lr in lrs.items():
        assert lr == pytest.approx(float(schedule(step)), rel=1e-2, abs=1e-9), step
    assert (model_dir / "pretrained" / "discriminator.weights.h5").is_file()
    assert sorted(os.listdir(model_dir / "checkpoints"))[-1] == f"ckpt-{TRAIN_STEPS:08d}.weights.h5"
