"""MultiWorkerMirroredStrategy: two local worker processes on 127.0.0.1 (TF_CONFIG)
pre-train a few steps, each reading its own shard, and only the chief writes."""

import json
import os

import pytest

from job_helpers import kill_group, start, subprocess_env

pytestmark = pytest.mark.large  # pre-trains in two worker processes: not in the fast tier


def test_two_workers_on_loopback(tmp_path, job_args, free_ports):
    model_dir = tmp_path / "run"
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    args = job_args(model_dir, "--strategy", "multi_worker", "--train_steps", "4", "--save_every", "2",
                    "--log_every", "1", "--collective_timeout_s", "200")
    procs = []
    try:
        for index in range(2):
            env = subprocess_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                                       "task": {"type": "worker", "index": index}}))
            procs.append(start(args, env=env))
        outs = []
        for proc in procs:
            out, _ = proc.communicate(timeout=280)
            outs.append(out)
    finally:
        for proc in procs:
            kill_group(proc)
    for proc, out in zip(procs, outs):
        assert proc.returncode == 0, out[-4000:]
    chief, other = outs
    assert "2 replica(s), this is worker:0" in chief and "this is worker:1" in other
    # Each worker's input pipeline reads its own file subset (reader: files[k::n]).
    assert "input pipeline 1/2" in chief and "input pipeline 2/2" in other
    assert "step 4/4" in chief and "done at step 4; the chief writes the model" in other
    assert sorted(os.listdir(model_dir / "checkpoints")) == [
        "ckpt-00000002.weights.h5", "ckpt-00000004.weights.h5"]
    assert (model_dir / "pretrained" / "discriminator.weights.h5").is_file()
    assert "saved checkpoint" not in other
