"""The tools print their own lines: INFO lines logged through absl (TensorFlow's, e.g. a SavedModel's
renamed inputs) stay off unless asked for with --verbosity or TF_CPP_MIN_LOG_LEVEL=0."""

import os
import subprocess
import sys

import pytest

TOOL = ("from absl import logging\n"
        "from electra_tf.cli import run_absl\n"
        "def run(values):\n"
        "    logging.info('chatter')\n"
        "    logging.set_verbosity(logging.INFO)  # TensorFlow resets the level while it saves a model\n"
        "    logging.info('more chatter')\n"
        "    logging.warning('kept')\n"
        "    return 0\n"
        "run_absl(run)\n")


def _stderr(args, level=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    proc = subprocess.run([sys.executable, "-c", TOOL, *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_info_lines_stay_off():
    err = _stderr([])
    assert "kept" in err and "chatter" not in err


@pytest.mark.parametrize("args, level", [(["--verbosity", "0"], None), ([], "0")])
def test_asked_for_they_show(args, level):
    err = _stderr(args, level)
    assert "chatter" in err and "more chatter" in err and "kept" in err
