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


# Seconds each module took in a full `python -m pytest -n 2 tests --durations=0` on a 2-core VM
# like CI's (setup + call + teardown of its tests; 2026-11-28, 1,162 s in all). Only the order
# of the modules depends on these numbers, never what a test checks: refresh them when a module's
# time changes a lot. A module not listed counts a tenth of a second a test, a `large` test in it 30 s.
MODULE_SECONDS = {
    "study/test_domain_study.py": 196,
    "study/test_gpu_pretrain_command.py": 132,
    "study/test_adapt_demo.py": 127,
    "test_readme_commands.py": 108,
    "finetune/test_own_data_docs.py": 85,
    "reliability/test_pretrain_faults.py": 79,
    "pretrain/test_pretrainer.py": 65,
    "export/test_cpp_loader.py": 60,
    "reliability/test_error_catalogue.py": 64,
    "reliability/test_multiworker_faults.py": 58,
    "reliability/test_run_dir_workflow.py": 55,
    "test_cli_basics.py": 54,
    "pretrain/test_pretrain_init_from.py": 52,
    "pretrain/test_pretrain_cli.py": 51,
    "pretrain/test_pretrain_numerics.py": 51,
    "finetune/test_own_data.py": 47,
    "study/test_domain_demo.py": 46,
    "finetune/test_end_to_end.py": 42,
    "api/test_electra_classifier.py": 35,
    "reliability/test_finetune_faults.py": 34,
    "pretrain/test_pretrain_new_objectives_cli.py": 32,
    "study/test_baselines.py": 29,
    "study/test_efficiency_study.py": 28,
    "predict/test_predictor_length_order.py": 27,
    "pretrain/test_pretrain_time_budget.py": 26,
    "pretrain/test_electric_gdes.py": 24,
    "pretrain/test_objectives.py": 20,
    "finetune/test_model_recipe.py": 19,
    "study/test_reference_check.py": 19,
    "test_wheel_install.py": 18,
    "benchmarks/test_ours_serving_rows.py": 32,
    "convert/test_convert_keras_hub.py": 22,
    "export/test_tflite.py": 45,
    "export/test_export_serving.py": 17,
    "finetune/test_layerwise_lr.py": 17,
    "pretrain/test_accumulation.py": 17,
    "pretrain/test_pretrain_multiworker.py": 17,
    "finetune/test_few_label_floor.py": 15,
    "export/test_casing.py": 15,
    "pretrain/test_fused_switch.py": 15,
    "pretrain/test_pretrain_overrides.py": 14,
    "finetune/test_imported_encoder_recipe.py": 14,
    "convert/test_convert_bert.py": 13,
    "export/test_width_buckets.py": 11,
    "export/test_freeze_weights.py": 10,
    "export/test_saved_variables.py": 8,
    "finetune/test_clipping.py": 10,
    "data/test_cli_errors.py": 10,
    "data/test_reader.py": 10,
    "pretrain/test_pretrain_continue.py": 10,
    "finetune/test_rerun_and_recipe.py": 9,
    "pretrain/test_train_step.py": 9,
    "finetune/test_finetune_loop.py": 8,
    "training/test_shared_flags.py": 7,
    "study/test_adaptation_study.py": 7,
    "predict/test_bf16_precision.py": 7,
    "pretrain/test_config_fields_read.py": 7,
    "reliability/test_data_build_faults.py": 6,
    "finetune/test_pad_to_longest.py": 5,
    "data/test_text_normalization.py": 35,
}


# A module listed above at this many seconds or more is `large` as a whole (a module-level
# `pytestmark`), so `-m "not large"` stays a fast tier (tests/test_scheduling.py checks it;
# docs/contributing.md). A lighter module marks its own slow tests one by one.
LARGE_MODULE_SECONDS = 25


def _module_of(item) -> str:
    path = pathlib.Path(str(item.path))
    try:
        return path.relative_to(pathlib.Path(__file__).resolve().parent).as_posix()
    except ValueError:
        return path.as_posix()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The longest modules first, each module's tests together and in their own order.

    setup.cfg runs `-n 2` with `--dist loadscope --no-loadscope-reorder`: xdist hands out whole
    modules (so a module-scoped fixture is built once, not once per worker) in this order, each to
    the worker that runs out of work first. The long modules then start at once and the short ones
    fill in around them, instead of the alphabetically last study tests running alone at the end.
    """
    seconds = {}
    for item in items:
        module = _module_of(item)
        if module in MODULE_SECONDS:
            seconds[module] = MODULE_SECONDS[module]
        else:
            seconds[module] = seconds.get(module, 0.0) + (30.0 if item.get_closest_marker("large") else 0.1)
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-seconds[_module_of(item)], order[id(item)]))
