"""Choosing the tf.distribute strategy of a job (pre-training and fine-tuning alike).

    strategy, name, text = create_strategy("auto")     # TPU / several GPUs / one GPU / CPU
    strategy, name, text = create_strategy("tpu", tpu="local")  # Colab TPU runtime, TPU VM

Names (`--strategy`): `auto`, `cpu` (default strategy), `gpu` (one GPU),
`mirrored` (all local GPUs, else all logical CPUs), `multi_worker`
(MultiWorkerMirroredStrategy from TF_CONFIG), `tpu` (TPUStrategy via
TPUClusterResolver).

MultiWorkerMirroredStrategy and the logical-CPU split must be set up before
TensorFlow runs its first op: call `split_cpu` / `create_strategy` first.
Every MirroredStrategy numbers its collectives from the same start, so a
second one in the same process breaks the first; `mirrored_strategy` hands out
one per device set.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Optional

import tensorflow as tf

from electra_tf.errors import ElectraError


class StrategyError(ElectraError, ValueError):
    """A strategy that cannot run on this machine, with the fix in the message."""


def split_cpu(num_devices: Optional[int]) -> int:
    """Splits the physical CPU into `num_devices` logical devices (tests, demos).

    Returns the number of logical CPU devices. Must run before TensorFlow is
    initialised; if it already is, the existing split is accepted when it has
    at least `num_devices` devices.
    """
    if not num_devices or num_devices < 2:
        return len(tf.config.list_logical_devices("CPU"))
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError:
        pass  # runtime already initialised (e.g. by a test's conftest)
    have = len(tf.config.list_logical_devices("CPU"))
    if have < num_devices:
        raise StrategyError(
            f"--num_cpu_devices={num_devices} came after TensorFlow started with {have} CPU device(s); "
            f"pass it before anything else runs (the CLI does this first)")
    return have


def mirrored_devices():
    """All GPUs, or else all logical CPU devices."""
    gpus = tf.config.list_logical_devices("GPU")
    return tuple(d.name for d in gpus) or tuple(d.name for d in tf.config.list_logical_devices("CPU"))


def mirrored_strategy(devices=None):
    """One MirroredStrategy per device set and process.

    Every MirroredStrategy numbers its collective all-reduces from the same
    start; a second one in the same process re-uses the first one's instance
    keys with other shapes ("Shape mismatch in the collective instance") and
    aborts the collective executor for the rest of the process. Jobs, seeds
    and tests that run in one process therefore share this one.

    Args:
        devices: device names (default `mirrored_devices()`); the cache is
            keyed by the resolved names, so the default and an explicit list
            of the same devices give the same strategy.
    """
    return _mirrored_strategy(tuple(devices or mirrored_devices()))


@functools.lru_cache(maxsize=None)
def _mirrored_strategy(devices):
    return tf.distribute.MirroredStrategy(list(devices))


STRATEGIES = ("auto", "cpu", "gpu", "mirrored", "multi_worker", "tpu")


def tf_config() -> dict:
    raw = os.environ.get("TF_CONFIG", "")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({e}); see docs/pretraining.md for its form") from None
    if not isinstance(value, dict):
        raise StrategyError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
    return value


def _num_tf_config_workers(config: dict) -> int:
    cluster = config.get("cluster", {})
    return sum(len(v) for k, v in cluster.items() if k in ("chief", "worker"))


def resolve_name(name: str, tpu: Optional[str]) -> str:
    """What `auto` means on this machine (no TF op is run)."""
    if name not in STRATEGIES:
        raise StrategyError(f"--strategy={name!r} is unknown; choose one of {', '.join(STRATEGIES)}")
    if name != "auto":
        return name
    if tpu:
        return "tpu"
    if _num_tf_config_workers(tf_config()) > 1:
        return "multi_worker"
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) > 1:
        return "mirrored"
    if len(gpus) == 1:
        return "gpu"
    return "cpu"


def check_jit_compile(strategy_name: str, jit_compile: bool) -> None:
    """Refuses --jit_compile with MirroredStrategy over CPU devices, which XLA cannot run
    (variables on another device). Asks TensorFlow for its GPUs only; runs no op."""
    if jit_compile and strategy_name == "mirrored" and not tf.config.list_physical_devices("GPU"):
        raise StrategyError("--jit_compile with --strategy=mirrored over CPU devices fails in XLA (variables on "
                            "another device); drop --jit_compile, or use --strategy=cpu to test XLA on CPU")


def create_strategy(name: str = "auto", tpu: Optional[str] = None,
                    collective_timeout_s: Optional[float] = None):
    """Returns (strategy, resolved name, one-line description)."""
    name = resolve_name(name, tpu)
    if name == "cpu":
        return tf.distribute.get_strategy(), name, "default strategy (one device, CPU)"
    if name == "gpu":
        gpus = tf.config.list_logical_devices("GPU")
        if not gpus:
            raise StrategyError("--strategy=gpu but TensorFlow sees no GPU; install a CUDA build of "
                                "TensorFlow (pip install 'tensorflow[and-cuda]') or use --strategy=cpu")
        return tf.distribute.OneDeviceStrategy(gpus[0].name), name, f"one GPU ({gpus[0].name})"
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = mirrored_devices()
        strategy = mirrored_strategy(devices)
        kind = "GPU" if gpus else "logical CPU"
        return strategy, name, f"MirroredStrategy over {len(devices)} {kind} device(s)"
    if name == "multi_worker":
        config = tf_config()
        if _num_tf_config_workers(config) < 1 or "task" not in config:
            raise StrategyError(
                "--strategy=multi_worker needs TF_CONFIG with 'cluster' (worker addresses) and 'task' "
                "(this process); see docs/pretraining.md")
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=collective_timeout_s or None,
        )
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        task = config["task"]
        return strategy, name, (f"MultiWorkerMirroredStrategy, {strategy.num_replicas_in_sync} replica(s), "
                                f"this is {task.get('type')}:{task.get('index')}")
    # TPU
    target = tpu or "local"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu="" if target == "colab" else target)
        if target not in ("local",):
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise StrategyError(
            f"no TPU reachable with --tpu={target} ({first}); on a Colab TPU runtime or a TPU VM use "
            f"--tpu local with tensorflow-tpu installed (docs/colab_tpu.md), else pick another --strategy"
        ) from None
    return strategy, name, f"TPUStrategy ({target}), {strategy.num_replicas_in_sync} cores"


def is_chief(strategy) -> bool:
    """True on the one process that writes checkpoints, TensorBoard and the model."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    cluster = resolver.cluster_spec().as_dict()
    if "chief" in cluster:
        return task_type == "chief"
    return task_type == "worker" and task_id == 0


def worker_label(strategy) -> str:
    resolver = getattr(strategy, "cluster_resolver", None)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and resolver is not None:
        return f"{resolver.task_type}:{resolver.task_id}"
    return "main"


@dataclasses.dataclass(frozen=True)
class BatchSplit:
    """How one global batch is spread: over replicas, then over micro-batches on a replica.

    Computed once by a job from its global --batch_size and handed down: the data
    pipeline reads `per_replica`, the train step cuts it into `grad_accum_steps`
    micro-batches of `micro`, the logs count `global_batch`.
    """
    global_batch: int
    replicas: int
    per_replica: int
    grad_accum_steps: int
    micro: int
    eval_global: Optional[int] = None
    eval_per_replica: Optional[int] = None


def split_batch(global_batch: int, replicas: int, grad_accum_steps: int, strategy_text: str,
                eval_global: Optional[int] = None) -> BatchSplit:
    """The `BatchSplit` of a global batch (and an evaluation batch, also global).

    Raises:
      StrategyError: a batch that does not split evenly, naming the flag and a size that does.
    """
    if global_batch % replicas:
        raise StrategyError(f"--batch_size={global_batch} (global) is not divisible by the {replicas} replicas "
                            f"of {strategy_text}; use a multiple of {replicas}")
    per_replica = global_batch // replicas
    if per_replica % grad_accum_steps:
        raise StrategyError(f"the per-replica batch {per_replica} is not divisible by --grad_accum_steps="
                            f"{grad_accum_steps}; use a --batch_size that is a multiple of "
                            f"{replicas * grad_accum_steps}")
    eval_per_replica = None
    if eval_global is not None:
        if eval_global % replicas:
            raise StrategyError(f"the config's eval_batch_size={eval_global} (global) is not divisible by the "
                                f"{replicas} replicas of {strategy_text}; add --override eval_batch_size=<a "
                                f"multiple of {replicas}>")
        eval_per_replica = eval_global // replicas
    return BatchSplit(global_batch, replicas, per_replica, grad_accum_steps, per_replica // grad_accum_steps,
                      eval_global, eval_per_replica)
