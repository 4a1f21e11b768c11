"""Starting and stopping `python -m electra_tf.pretrain` processes in the job tests."""

import os
import signal
import subprocess
import sys


def subprocess_env(**extra):
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("TF_CONFIG", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def kill_group(proc):
    """Kills a test-started process (its own session) and reaps it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def start(args, env=None, **kwargs):
    """Starts python -m electra_tf.pretrain in its own process group."""
    return subprocess.Popen([sys.executable, "-m", "electra_tf.pretrain", *args],
                            env=env or subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **kwargs)
