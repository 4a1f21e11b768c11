"""Where the pre-training step's time goes, and how fast it runs by batch size.

The model, optimizer and data are built as `python -m electra_tf.pretrain` builds them for
`pretrain_small_imdb.py run` (ElectraPretrainer, the AdamW with an adjustable horizon, Keras
compile with jit_compile and steps_per_execution, the training reader with its shuffle buffer).

  breakdown(...)  the first step cut into its parts, each timed on its own: the shuffle buffer's
                  fill (the first batch of a fresh iterator), tracing the train step into a graph,
                  lowering it to XLA's HLO, the XLA compile (the first call less a steady step; the
                  lowering is inside it), the generator's sampling (compiled and run alone), and a
                  steady step.
  bench(...)      for each batch size, a real `model.fit` with steps_per_execution: seconds to the
                  end of the first execution (trace, compile, data fill and the first steps) and
                  examples/s after it, within a wall-clock budget.

Both are reached through `pretrain_small_imdb.py profile` and `bench`; TensorFlow is imported
only when one of them runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Optional, Sequence


def load_config(config: str, vocab: Path, seq: int, recipe: dict, warmup: int):
    """The ElectraConfig `run` writes: the shipped config plus the recipe, the vocabulary's size."""
    from electra_tf.config import ElectraConfig

    repo = Path(__file__).resolve().parents[2]
    path = Path(config) if "/" in config or config.endswith(".json") else repo / "configs" / f"{config}.json"
    values = json.loads(path.read_text())
    values.update(recipe)
    values["num_warmup_steps"] = warmup
    values["vocab_size"] = sum(1 for _ in open(vocab, encoding="utf-8"))
    values["max_seq_length"] = seq
    return ElectraConfig.from_dict(values)


def build_model(config, vocab: Path, precision: str, jit: bool, steps_per_execution: int = 1):
    """The compiled ElectraPretrainer of pretrain_job.run_pretraining (one device, no resume)."""
    import keras

    from electra_tf.data.vocab import special_token_ids
    from electra_tf.pretrain.pretrain_optimizer import create_optimizer
    from electra_tf.pretrain.pretrainer import ElectraPretrainer
    from electra_tf.training.shared_flags import PRECISION_POLICIES

    keras.mixed_precision.set_global_policy(PRECISION_POLICIES[precision])
    try:
        keras.utils.set_random_seed(config.seed)
        model = ElectraPretrainer(config, special_token_ids(str(vocab)))
        optimizer = create_optimizer(config, train_steps=config.num_train_steps, model=model,
                                     adjustable_train_steps=True)
        if precision == "fp16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, jit_compile=jit, steps_per_execution=steps_per_execution)
        optimizer.build(model.trainable_variables)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return model


def _dataset(shards: Path, config, batch: int, shuffle_buffer: Optional[int] = None):
    from electra_tf.data.reader import DEFAULT_SHUFFLE_BUFFER, pretraining_dataset

    return pretraining_dataset(str(shards), config, batch, training=True, seed=config.seed,
                               shuffle_buffer=DEFAULT_SHUFFLE_BUFFER if shuffle_buffer is None else shuffle_buffer)


def _first_batch_seconds(shards: Path, config, batch: int, shuffle_buffer: Optional[int] = None):
    started = time.perf_counter()
    batch_value = next(iter(_dataset(shards, config, batch, shuffle_buffer)))
    return time.perf_counter() - started, batch_value


def breakdown(shards: Path, vocab: Path, config, batch: int, precision: str, jit: bool = True,
              steady_steps: int = 3, log: Callable[[str], None] = print) -> dict:
    """The first training step's parts, in seconds (see the module docstring)."""
    import tensorflow as tf

    from electra_tf.data.reader import DEFAULT_SHUFFLE_BUFFER
    from electra_tf.objectives.sampling import sample_from_logits

    result = {"batch": batch, "seq": config.max_seq_length, "vocab_size": config.vocab_size,
              "precision": precision, "jit_compile": jit, "device": tf.config.list_logical_devices()[-1].name}
    started = time.perf_counter()
    model = build_model(config, vocab, precision, jit)
    result["build_and_compile_model_s"] = time.perf_counter() - started
    log(f"model built and compiled (Keras) in {result['build_and_compile_model_s']:.1f}s")

    # The input pipeline: a fresh iterator fills its shuffle buffer before the first batch leaves it.
    result["first_batch_shuffle_buffer"] = DEFAULT_SHUFFLE_BUFFER
    result["first_batch_s"], data = _first_batch_seconds(shards, config, batch)
    result["first_batch_no_shuffle_s"], _ = _first_batch_seconds(shards, config, batch, shuffle_buffer=1)
    log(f"first batch of a fresh iterator: {result['first_batch_s']:.2f}s (shuffle buffer of "
        f"{DEFAULT_SHUFFLE_BUFFER:,}), {result['first_batch_no_shuffle_s']:.2f}s with a buffer of 1")

    # The train step Keras runs (strategy.run(train_step) inside a tf.function with jit_compile):
    # tracing it, then its first call (the XLA compile and one step), then steady steps.
    def one_step(batch_data):
        return model.distribute_strategy.run(model.train_step, args=(batch_data,))

    step = tf.function(one_step, jit_compile=jit, reduce_retracing=True)
    t0 = time.perf_counter()
    concrete = step.get_concrete_function(data)
    result["trace_s"] = time.perf_counter() - t0
    result["graph_ops"] = len(concrete.graph.get_operations())
    log(f"tracing the train step: {result['trace_s']:.1f}s ({result['graph_ops']:,} graph ops)")
    if jit:
        # TensorFlow's graph lowered to XLA's HLO: part of every first call, a cached one included
        # (the persistent cache is keyed by the HLO, so it is built before the cache is asked).
        t0 = time.perf_counter()
        step.experimental_get_compiler_ir(data)(stage="hlo")
        result["lowering_to_hlo_s"] = time.perf_counter() - t0
        log(f"lowering the traced graph to XLA HLO (inside the first call, also when the compiled step is "
            f"cached): {result['lowering_to_hlo_s']:.1f}s")
    t0 = time.perf_counter()
    out = step(data)
    float(out["loss"])
    first_call = time.perf_counter() - t0
    times = []
    for _ in range(steady_steps):
        t0 = time.perf_counter()
        float(step(data)["loss"])
        times.append(time.perf_counter() - t0)
    result["steady_step_s"] = min(times)
    result["first_call_s"] = first_call
    result["xla_compile_s"] = max(first_call - result["steady_step_s"], 0.0)
    log(f"first call {first_call:.1f}s: XLA compile {result['xla_compile_s']:.1f}s + one step "
        f"{result['steady_step_s']:.2f}s (steady, best of {steady_steps})")

    # The generator's sampling alone: Gumbel noise over [batch, predictions, vocabulary].
    predictions = config.predictions_per_seq
    logits = tf.random.normal([batch, predictions, config.vocab_size])
    seed = tf.constant([config.seed, 1], tf.int64)
    sample = tf.function(lambda x, s: sample_from_logits(x, seed=s, temperature=config.temperature),
                         jit_compile=jit)
    t0 = time.perf_counter()
    sample(logits, seed).numpy()
    sample_first = time.perf_counter() - t0
    sample_times = []
    for _ in range(steady_steps):
        t0 = time.perf_counter()
        sample(logits, seed).numpy()
        sample_times.append(time.perf_counter() - t0)
    result["sampling_first_call_s"] = sample_first
    result["sampling_step_s"] = min(sample_times)
    log(f"generator sampling alone ([{batch}, {predictions}, {config.vocab_size}]): first call {sample_first:.2f}s, "
        f"then {result['sampling_step_s'] * 1000:.1f} ms a step")
    result["first_step_s"] = result["first_batch_s"] + result["trace_s"] + first_call
    log(f"first step = first batch {result['first_batch_s']:.1f}s + tracing {result['trace_s']:.1f}s + "
        f"XLA compile {result['xla_compile_s']:.1f}s + one step {result['steady_step_s']:.2f}s = "
        f"{result['first_step_s']:.1f}s")
    return result


class _StepClock:
    """Keras callback: the time of each execution's end (steps_per_execution steps)."""

    def __new__(cls, *args, **kwargs):
        import keras

        class Clock(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.begin = None
                self.ends = []

            def on_train_begin(self, logs=None):
                self.begin = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                self.ends.append((int(self.model.optimizer.iterations.numpy()), time.perf_counter()))
                if logs and "loss" in logs:
                    self.loss = float(logs["loss"])

        return Clock()


def bench_one(shards: Path, vocab: Path, config, batch: int, precision: str, jit: bool, steps_per_execution: int,
              measure_seconds: float, max_steps: int = 100_000) -> dict:
    """One variant through model.fit: seconds to the first execution's end, then examples/s."""
    import keras

    keras.backend.clear_session()
    model = build_model(config, vocab, precision, jit, steps_per_execution)
    data = _dataset(shards, config, batch)
    clock = _StepClock()

    class Stop(keras.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            ends = clock.ends
            if len(ends) >= 2 and ends[-1][1] - ends[0][1] >= measure_seconds:
                self.model.stop_training = True

    steps = max_steps - max_steps % steps_per_execution
    model.fit(data, epochs=1, steps_per_epoch=steps, callbacks=[clock, Stop()], verbose=0, shuffle=False)
    (first_step, first_end), (last_step, last_end) = clock.ends[0], clock.ends[-1]
    rate = (last_step - first_step) * batch / (last_end - first_end) if last_step > first_step else None
    return {"batch": batch, "steps_per_execution": steps_per_execution, "precision": precision, "jit_compile": jit,
            "first_execution_s": round(first_end - clock.begin, 2), "steps_measured": last_step - first_step,
            "seconds_measured": round(last_end - first_end, 2),
            "examples_per_s": None if rate is None else round(rate, 1), "loss": getattr(clock, "loss", None)}


def bench(shards: Path, vocab: Path, config, batches: Sequence[int], precision: str, jit: bool,
          steps_per_execution: int, measure_seconds: float, budget_seconds: float,
          log: Callable[[str], None] = print) -> list:
    """bench_one for each batch size in order, while the budget leaves room for another one.

    A variant is started only when the time left is at least the previous variant's whole time
    (its compile grows little with the batch); the skipped ones are reported as skipped."""
    started = time.perf_counter()
    rows, last_cost = [], 0.0
    for batch in batches:
        left = budget_seconds - (time.perf_counter() - started)
        if left < max(last_cost, measure_seconds):
            rows.append({"batch": batch, "steps_per_execution": steps_per_execution, "skipped": True,
                         "why": f"{left:.0f}s of the budget left, the previous variant took {last_cost:.0f}s"})
            log(f"batch {batch}: skipped ({rows[-1]['why']})")
            continue
        t0 = time.perf_counter()
        row = bench_one(shards, vocab, config, batch, precision, jit, steps_per_execution, measure_seconds)
        last_cost = time.perf_counter() - t0
        row["variant_s"] = round(last_cost, 1)
        rows.append(row)
        log(f"batch {batch} x steps_per_execution {steps_per_execution}: first execution "
            f"{row['first_execution_s']:.1f}s, then {row['examples_per_s']} examples/s "
            f"({row['steps_measured']} steps in {row['seconds_measured']}s; variant {last_cost:.0f}s in all)")
    return rows
