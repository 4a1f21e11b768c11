"""MultiWorkerMirroredStrategy on loopback with a worker killed (SIGKILL, as a preemption or an
OOM kill does): the survivor fails within a bounded time with one clear line (TensorFlow's
coordination service stops hearing the dead task's heartbeats, ~10 s), and restarting both
workers with the same command resumes from the chief's last checkpoint.

Killed in turn: the non-chief (worker 1, the chief survives), then, after both restarted and
resumed, the chief (worker 0, which also hosts the coordination service).
"""

import json
import os
import random
import re
import signal
import time

import pytest

from reliability_helpers import (KILL_SEED, Output, error_lines, kill_group, start_pretrain, step_reached,
                                 subprocess_env)

pytestmark = pytest.mark.large  # kills and resumes worker processes: not in the fast tier

TRAIN_STEPS = 24
SAVE_EVERY = 4
FAIL_WITHIN_S = 90  # survivor's exit after the kill; the heartbeat timeout is ~10 s
RESUME_RE = re.compile(r"resuming from \S+ckpt-(\d{8})\.weights\.h5 at step (\d+)")


def _start_both(args, cluster):
    outs = []
    for index in range(2):
        env = subprocess_env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        outs.append(Output(start_pretrain(args, env=env)))
    return outs


def _latest(model_dir):
    names = [n for n in os.listdir(model_dir / "checkpoints") if re.match(r"ckpt-\d{8}\.weights\.h5$", n)]
    return max(int(n[5:13]) for n in names)


def _kill_one(outs, victim, kill_at, model_dir):
    survivor = 1 - victim
    try:
        outs[0].wait_for(step_reached(kill_at), 300, f"step {kill_at} on the chief")
        os.killpg(outs[victim].proc.pid, signal.SIGKILL)
        killed = time.time()
        outs[victim].finish(30)
        code = outs[survivor].finish(FAIL_WITHIN_S)
        took = time.time() - killed
    finally:
        for out in outs:  # never leave a worker behind, whatever failed
            kill_group(out.proc)
    assert code == 2, outs[survivor].text()[-4000:]
    assert took < FAIL_WITHIN_S
    errors = error_lines(outs[survivor].text())
    assert len(errors) == 1, outs[survivor].text()[-4000:]
    saved = _latest(model_dir)
    return errors[0], saved


def test_killed_worker_fails_the_survivor_in_bounded_time_and_both_resume(tmp_path, job_args,
                                                                       free_ports):
    rng = random.Random(KILL_SEED)
    model_dir = tmp_path / "run"
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    args = job_args(model_dir, "--strategy", "multi_worker", "--train_steps", str(TRAIN_STEPS),
                    "--save_every", str(SAVE_EVERY), "--log_every", "1")
    ckpt = lambda step: f"{model_dir}/checkpoints/ckpt-{step:08d}.weights.h5"  # noqa: E731

    # 1. The non-chief dies: the chief reports the dead task.
    error, saved = _kill_one(_start_both(args, cluster), 1, rng.randint(SAVE_EVERY + 1, 2 * SAVE_EVERY + 1),
                             model_dir)
    # The dead task is named: by the heartbeat check, or by the RPC that lost its socket first.
    assert re.fullmatch(
        r"error: \[worker:0\] lost contact with another worker \(/job:worker/replica:0/task:1 (stopped sending "
        r"heartbeats|closed the connection)\); restart every worker with the same command to resume from the "
        r"last checkpoint \(" + re.escape(ckpt(saved)) + r"\)", error), error

    # 2. Both restarted: both resume at the chief's last checkpoint and train on; now the chief
    # dies. (Finishing a resumed run is what the single-process resume tests show.)
    outs = _start_both(args, cluster)
    kill_at = saved + rng.randint(SAVE_EVERY + 1, 2 * SAVE_EVERY)
    error, saved2 = _kill_one(outs, 0, kill_at, model_dir)
    for out in outs:
        match = RESUME_RE.search(out.text())
        assert match and int(match.group(1)) == int(match.group(2)) == saved, out.text()[-3000:]
    assert outs[0].steps()[0] == saved + 1  # the step counter continues from the checkpoint
    assert re.fullmatch(
        r"error: \[worker:1\] lost contact with another worker \((/job:worker/replica:0/task:0 (stopped sending "
        r"heartbeats|closed the connection)|the coordination service on the chief is unreachable)\); restart "
        r"every worker with the same command to resume from the last checkpoint \(" + re.escape(ckpt(saved2))
        + r"\)", error), error
    assert saved2 > saved

