"""Test set-up shared by every test module.

The CPU is split into two logical devices before TensorFlow starts, so that
MirroredStrategy tests have two replicas on any machine. Tests that do not use
a strategy run on the first device as usual.
"""

import os
import pathlib
import socket

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

_cpus = tf.config.list_physical_devices("CPU")
try:
    tf.config.set_logical_device_configuration(
        _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
    )
except RuntimeError:  # runtime already initialised by an earlier import
    pass

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def free_ports():
    """free_ports(n): n distinct loopback ports nobody listens on (multi-worker clusters)."""
    def pick(n):
        socks = [socket.socket() for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in socks]
        for s in socks:
            s.close()
        return ports
    return pick


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}; tests expect ../shared/data beside the repo")
    return SHARED_DATA


@pytest.fixture(scope="session")
def mirrored_strategy():
    """One MirroredStrategy over the two logical CPUs, shared by the whole process
    (a second one aborts collectives: see `distribution.mirrored_strategy`)."""
    from electra_tf.training.distribution import mirrored_devices, mirrored_strategy

    devices = mirrored_devices()
    assert len(devices) == 2, "tests/conftest.py should have made two logical CPUs"
    # The product's cached strategy: in-process jobs (--strategy mirrored) share it.
    return mirrored_strategy(devices)
