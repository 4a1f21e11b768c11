"""Shared by the fault-injection and bad-input tests: processes, their output, data.

The pre-training job helpers (vocabulary, shards, `start`, `kill_group`) are
those of tests/pretrain/conftest.py and job_helpers.py, loaded here under their own module
name so both folders use one copy.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, List

from helpers import error_lines

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS = REPO_ROOT / "tests"
# Seed of the kill -9 tests' random kill steps: fixed, so a failure reproduces (change it to
# try other steps).
KILL_SEED = 20261125
SST2_DIR = REPO_ROOT.parent / "shared" / "data" / "glue" / "SST-2"


def _load(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# tests/pretrain: job_data / job_args fixtures (conftest.py), start(), kill_group(), subprocess_env()
# (job_helpers.py)
pretrain_job = _load("pretrain_job_conftest", TESTS / "pretrain" / "conftest.py")
_job_helpers = _load("pretrain_job_helpers", TESTS / "pretrain" / "job_helpers.py")
start_pretrain = _job_helpers.start
kill_group = _job_helpers.kill_group
subprocess_env = _job_helpers.subprocess_env

STEP_RE = re.compile(r"^step (\d+)/(\d+) .*lr=(\S+)")


class Output:
    """Collects a process's merged stdout/stderr lines on a thread, with timestamps."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: List[str] = []
        self.times: List[float] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.times.append(time.time())
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def steps(self) -> List[int]:
        return [int(m.group(1)) for m in map(STEP_RE.match, list(self.lines)) if m]

    def wait_for(self, predicate: Callable[[List[str]], bool], timeout: float, what: str):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate(list(self.lines)):
                return
            if self.proc.poll() is not None:
                self._thread.join(timeout=5)
                if predicate(list(self.lines)):
                    return
                raise AssertionError(f"process ended (rc={self.proc.returncode}) before {what}:\n"
                                     + "\n".join(self.lines[-40:]))
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}:\n" + "\n".join(self.lines[-40:]))

    def finish(self, timeout: float) -> int:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            kill_group(self.proc)
            self._thread.join(timeout=10)
        return self.proc.returncode


def step_reached(step: int):
    return lambda lines: any((m := STEP_RE.match(l)) and int(m.group(1)) >= step for l in lines)


def start_module(module: str, args, env=None, cwd=None) -> subprocess.Popen:
    """python -m module args, in its own process group, stdout+stderr merged."""
    return subprocess.Popen([sys.executable, "-m", module, *map(str, args)],
                            env=env or subprocess_env(), cwd=str(cwd or REPO_ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def lr_schedule(config_path: str, train_steps: int, **overrides):
    from electra_tf.config import ElectraConfig
    from electra_tf.training.optimization import WarmupPolynomialDecay

    cfg = ElectraConfig.from_json(config_path).replace(**overrides)
    return WarmupPolynomialDecay(cfg.learning_rate, train_steps, cfg.num_warmup_steps)


def snapshot(directory: Path) -> dict:
    """{relative path: (size, mtime_ns)} of every file under directory."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = Path(root) / name
            st = path.stat()
            out[str(path.relative_to(directory))] = (st.st_size, st.st_mtime_ns)
    return out


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


__all__ = ["Output", "REPO_ROOT", "SST2_DIR", "STEP_RE", "TESTS", "error_lines",
           "is_root", "kill_group", "lr_schedule", "pretrain_job", "snapshot", "start_module", "start_pretrain",
           "step_reached", "subprocess_env", "wait_until"]
