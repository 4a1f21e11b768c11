"""Where our SavedModel's serving time goes, on the models benchmark_cpu_tasks.py left in its work
directory (run that first, or its --quick):

    python scripts/benchmarks/profile_serving.py [--work_dir runs/bench_cpu_tasks] [--models small,minilm] [--seq 256]
    python scripts/benchmarks/profile_serving.py --frozen_ab [--seq 128] [--widths 16,64,128] [--rounds 6]
    python scripts/benchmarks/profile_serving.py --short_only [--seq 128]     # only item 5 below

For each model, 2 threads (inter-op 1), IMDB dev reviews:
1. batch 32 and batch 1: `serve` on raw strings, against the in-graph tokenizer alone and against
   `serve_encoded` on the same ids (tokenizer vs encoder + head);
2. cold calls: the first batch-1 call at each padded width against the next call at that width
   (what a server pays the first time it meets a width);
3. op types by self time over 64 batch-1 calls (TF profiler trace, summed over threads);
4. short texts: `serve_encoded` at batch 1 x width 16 and 128 with the weights as variables (as saved) and
   frozen into constants (which lets oneDNN keep its reordered copy of each weight), and one
   [M, 256] x [256, 1024] matmul at M = 16, 128 and 4096 (the matmul rate at the sizes batch-1 calls make);
5. short sentences (64 SST-2 sentences the benchmark never serves), batch 1: the call as served against
   the tokenizer alone, the model alone on the sentence's ids, an empty `tf.function` on a string and
   the XLA export (`<model>_saved_model_<seq>_jit`, if there); under the profiler, the kernels a call
   runs, their number and self time, beside the executor's own events.

--frozen_ab measures only the export with `--freeze_weights` against the default export (the former
written beside it if missing, where the benchmark's "frozen weights" row finds it): batch-1 calls of
`encoded` (ids) and `serving_default` (a text of exactly that many pieces) at each of --widths, both
SavedModels in one process, the sides alternating within every round and the order reversed every
other round; per side, the median over rounds of each round's median call, and the frozen / default
ratio paired by round (median, min-max), so that a loaded machine slows both sides of a round alike.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path


from scripts.benchmarks.cpu_peers.traffic import ROOT, read_imdb  # noqa: E402


def op_self_times(logdir, counts=None):
    """{op type: self seconds} summed over the host threads of a TF profiler trace; `counts`, a
    Counter if given, receives the number of events of each type."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals = collections.Counter()
    for path in Path(logdir).rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            if not plane.name.startswith("/host:CPU"):
                continue
            names = {k: v.name for k, v in plane.event_metadata.items()}
            for line in plane.lines:
                stack = []  # (end, key, child time)
                events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))

                def close(until):
                    while stack and stack[-1][0] <= until:
                        end, key, start, dur, child = stack.pop()
                        totals[key] += (dur - child) * 1e-12
                        if counts is not None:
                            counts[key] += 1
                        if stack:
                            stack[-1][4] += dur

                for e in events:
                    close(e.offset_ps)
                    name = names.get(e.metadata_id, "?")
                    key = name.split(":")[-1] if ":" in name else name
                    stack.append([e.offset_ps + e.duration_ps, key, e.offset_ps, e.duration_ps, 0])
                close(float("inf"))
    return totals


def _load(path: Path, name: str, seq: int):
    """(the SavedModel at `path`, the tokenizer of model `name` beside it, as the export's)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from electra_tf.preprocessing import TextPreprocessor

    return (tf.saved_model.load(str(path)),
            TextPreprocessor(str(path.parent / name / "vocab.txt"), seq, do_lower_case=True))


def profile(path: Path, name: str, texts, seq: int) -> None:
    import tensorflow as tf

    loaded, pre = _load(path, name, seq)
    encode = tf.function(lambda t: pre(t), input_signature=[tf.TensorSpec([None], tf.string)])
    print(f"== {name}, max_seq_length {seq}")
    for batch, n in ((32, 96), (1, 48)):
        chunks = [tf.constant(texts[i:i + batch]) for i in range(0, n, batch)]
        encoded = [encode(c) for c in chunks]
        for c, e in zip(chunks, encoded):  # warm-up
            loaded.serve(c)
            loaded.serve_encoded(e["input_ids"], e["input_mask"], e["segment_ids"])
        times = {"serve": [], "tokenizer": [], "encoder + head": []}
        for _ in range(3):
            t = time.perf_counter()
            for c in chunks:
                loaded.serve(c)
            times["serve"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for c in chunks:
                encode(c)
            times["tokenizer"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for e in encoded:
                loaded.serve_encoded(e["input_ids"], e["input_mask"], e["segment_ids"])
            times["encoder + head"].append(time.perf_counter() - t)
        med = {k: 1000 * statistics.median(v) / len(chunks) for k, v in times.items()}
        print(f"  batch {batch}: per call serve {med['serve']:.1f} ms; tokenizer {med['tokenizer']:.2f} ms "
              f"({med['tokenizer'] / med['serve']:.0%}); encoder + head {med['encoder + head']:.1f} ms "
              f"({med['encoder + head'] / med['serve']:.0%})")
    # Cold: first call at each padded width, then the next call at that width.
    lengths = pre(tf.constant(texts))["input_mask"].numpy().sum(1)
    by_width = collections.defaultdict(list)
    for text, n in zip(texts, lengths):
        by_width[min(seq, -(-int(n) // 16) * 16)].append(text)
    rows = []
    for width in sorted(by_width):
        pair = by_width[width][:2]
        if len(pair) < 2:
            continue
        ms = []
        for text in pair:
            t = time.perf_counter()
            loaded.serve(tf.constant([text]))
            ms.append(1000 * (time.perf_counter() - t))
        rows.append((width, ms[0], ms[1]))
    print("  first batch-1 call at a width vs the next (width: ms first / ms next): "
          + ", ".join(f"{w}: {a:.0f}/{b:.0f}" for w, a, b in rows))
    # Op types by self time, 64 warm batch-1 calls.
    calls = [tf.constant([t]) for t in texts[:64]]
    for c in calls:
        loaded.serve(c)
    wall, self_ms, _ = _profiled(calls, loaded.serve)
    total = sum(self_ms.values())
    print(f"  64 batch-1 calls, {wall:.1f} ms per call under the profiler; op self time "
          f"{total:.1f} ms per call summed over threads; top op types:")
    for key, ms in sorted(self_ms.items(), key=lambda kv: -kv[1])[:14]:
        print(f"    {key:40s} {ms:7.2f} ms/call  {ms / total:5.1%}")
    short_texts(loaded)
    short_sentences(loaded, pre, path.parent / f"{path.name}_jit")


def _profiled(calls, run):
    """(wall ms per call, {op type: self ms per call}, {op type: events per call}) of `run` on each
    of `calls`, under the TF profiler."""
    import tensorflow as tf

    counts = collections.Counter()
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        t = time.perf_counter()
        for c in calls:
            run(c)
        wall = time.perf_counter() - t
        tf.profiler.experimental.stop()
        totals = op_self_times(logdir, counts)
    n = len(calls)
    return (1000 * wall / n, {k: 1000 * v / n for k, v in totals.items()}, {k: v / n for k, v in counts.items()})


# Profiler events that are not kernels: the call's own span on the calling thread ("Run", whose self
# time is mostly waiting for kernels on the pool's threads), the executor's scheduling of each node
# ("Process"), the function and eager runtimes, and markers. "ParallelFor" (a kernel's shards on the
# pool's threads) is counted as kernel time.
NOT_KERNELS = {"Run", "Process", "restored_function_body", "EagerCopyToDevice", "TFE_Py_ExecuteCancelable",
               "ExecutorDoneCallback", "FunctionRun", "EagerKernelExecute", "EagerExecute", "TFE_DeleteTensorHandle",
               "ValidateInputTypeAndPlacement", "Record", "StartRegion", "StopRegion", "MemoryAllocation",
               "MemoryDeallocation"}


def is_kernel(event_type: str) -> bool:
    return event_type not in NOT_KERNELS and not event_type.strip().startswith("__inference")


def short_sentences(loaded, pre, xla: Path) -> None:
    """Where a batch-1 call of the SavedModel `loaded` on a short SST-2 sentence spends its time: the
    call as served against its tokenizer `pre` alone, the model alone on its ids, an empty function's
    call, the XLA export at `xla` (if there) on the same sentences, and the kernels the TF profiler
    sees per call (how many, and their self time)."""
    import tensorflow as tf

    from scripts.benchmarks.cpu_peers.traffic import read_sst2

    sentences, _ = read_sst2(64, offset=60000)  # far past what the benchmark serves
    calls = [tf.constant([s]) for s in sentences]
    ids = []
    for c in calls:
        e = pre(c)
        n = int(tf.reduce_sum(e["input_mask"]))
        ids.append(tuple(e[k][:, :n] for k in ("input_ids", "input_mask", "segment_ids")))
    encode = tf.function(lambda t: pre(t), input_signature=[tf.TensorSpec([None], tf.string)])
    empty = tf.function(lambda t: tf.size(t), input_signature=[tf.TensorSpec([None], tf.string)])
    pieces = statistics.median(int(i[0].shape[1]) for i in ids)

    def per_call(run, items):
        for item in items[:8]:
            run(item)
        rounds = []
        for _ in range(5):
            t = time.perf_counter()
            for item in items:
                run(item)
            rounds.append(1000 * (time.perf_counter() - t) / len(items))
        return statistics.median(rounds)

    served = per_call(loaded.serve, calls)
    tokenizer = per_call(encode, calls)
    model = per_call(lambda i: loaded.serve_encoded(*i), ids)
    floor = per_call(empty, calls)
    parts = [f"served {served:.2f} ms", f"tokenizer alone {tokenizer:.2f} ms", f"model on its ids {model:.2f} ms",
             f"an empty tf.function {floor:.3f} ms"]
    # The profile before the XLA export is loaded: after it, the profiler saw a fraction of the kernels.
    wall, self_ms, events = _profiled(calls, loaded.serve)
    if (xla / "saved_model.pb").exists():
        compiled = tf.saved_model.load(str(xla))
        for c in calls:  # compiles each padded width once
            compiled.serve(c)
        parts.append(f"the XLA export served {per_call(compiled.serve, calls):.2f} ms")
    print(f"  SST-2 sentences at batch 1 ({len(calls)}, median {pieces:g} pieces), per call: " + "; ".join(parts))
    kernels = {k: v for k, v in self_ms.items() if is_kernel(k)}
    n_kernels = sum(events[k] for k in kernels if k != "ParallelFor")
    nodes = graph_nodes(loaded.serve.get_concrete_function(tf.TensorSpec([None], tf.string)))
    print(f"    its graphs hold {sum(nodes.values())} nodes a call runs (constants and inputs aside), "
          f"{sum(n for k, n in nodes.items() if 'MatMul' in k)} of them matmuls; under the profiler {wall:.2f} ms "
          f"per call: {n_kernels:.0f} kernels traced per call (TF stops tracing kernels it has timed as cheap), "
          f"{sum(kernels.values()):.2f} ms of their self time summed over both threads, the executor's own "
          f"{self_ms.get('Process', 0):.2f} ms; top kernels (self time per call, per kernel):")
    for key, ms in sorted(kernels.items(), key=lambda kv: -kv[1])[:10]:
        print(f"      {key:32s} {ms:6.3f} ms  {events[key]:5.0f} x {1000 * ms / events[key]:6.1f} us")


def graph_nodes(concrete) -> collections.Counter:
    """{op type: count} over a concrete function's graph and the functions it calls, constants,
    inputs and identities aside."""
    graph = concrete.graph.as_graph_def()
    nodes = [n.op for n in graph.node] + [n.op for f in graph.library.function for n in f.node_def]
    return collections.Counter(op for op in nodes if op not in ("Const", "Placeholder", "Identity", "NoOp"))


def _median_ms(fn, calls=100, warmup=10):
    """Median milliseconds of `calls` calls of `fn`, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


def short_texts(loaded) -> None:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    encoded = loaded.signatures["encoded"]
    frozen = convert_variables_to_constants_v2(encoded)
    parts = []
    for width in (16, 128):
        ids = {"input_ids": tf.fill([1, width], 7), "input_mask": tf.ones([1, width], tf.int32),
               "segment_ids": tf.zeros([1, width], tf.int32)}
        as_saved = _median_ms(lambda: encoded(**ids))
        as_constants = _median_ms(lambda: frozen(**ids))
        parts.append(f"width {width}: {as_saved:.1f} ms as saved, {as_constants:.1f} ms with constant weights")
    print("  serve_encoded, batch 1: " + "; ".join(parts))
    weight = tf.random.normal([256, 1024])
    rates = []
    for rows in (16, 128, 4096):
        x = tf.random.normal([rows, 256])
        matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(x, weight)))
        ms = _median_ms(matmul)
        rates.append(f"M={rows}: {ms:.2f} ms, {2 * rows * 256 * 1024 / ms / 1e6:.0f} GFLOP/s")
    print("  one [M, 256] x [256, 1024] matmul (call included): " + "; ".join(rates))


def _frozen_export(work: Path, name: str, seq: int) -> Path:
    """`<name>_saved_model_<seq>_frozen` (the path `Ours.saved_model` uses), exported from `<name>_seed` if
    missing."""
    from electra_tf.export import export

    path = work / f"{name}_saved_model_{seq}_frozen"
    if not (path / "saved_model.pb").exists():
        export(str(work / f"{name}_seed"), str(path), kind="classifier", max_seq_length=seq, freeze_weights=True)
    return path


def frozen_ab(work: Path, name: str, seq: int, widths, rounds: int, calls: int) -> None:
    """The default export against `--freeze_weights`, batch 1 (module docstring)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    paths = {"default": work / f"{name}_saved_model_{seq}", "frozen": _frozen_export(work, name, seq)}
    signatures = {side: tf.saved_model.load(str(p)).signatures for side, p in paths.items()}
    cases = {}  # (signature, width) -> {side: call}
    for width in widths:
        ids = {"input_ids": tf.fill([1, width], 7), "input_mask": tf.ones([1, width], tf.int32),
               "segment_ids": tf.zeros([1, width], tf.int32)}
        text = {"text": tf.constant([" ".join(["the"] * (width - 2))])}  # [CLS] + one piece a word + [SEP]
        for sig, args in (("encoded", ids), ("serving_default", text)):
            cases[sig, width] = {side: (lambda f=sigs[sig], a=args: f(**a)) for side, sigs in signatures.items()}
    for calls_of in cases.values():  # warm-up: oneDNN primitives, the frozen side's reordered weights
        for call in calls_of.values():
            for _ in range(5):
                call()
    per_round = {key: {side: [] for side in paths} for key in cases}
    for r in range(rounds):
        for key, calls_of in cases.items():
            for side in (list(paths) if r % 2 == 0 else list(reversed(paths))):
                per_round[key][side].append(_median_ms(calls_of[side], calls, warmup=0))
    print(f"== {name}, max_seq_length {seq}: batch 1, {rounds} rounds x {calls} calls per side, signature and "
          f"width (median over rounds of each round's median ms; frozen / default paired by round)")
    for (sig, width), sides in per_round.items():
        ratios = [f / d for f, d in zip(sides["frozen"], sides["default"])]
        print(f"  {sig:15s} width {width:3d}: default {statistics.median(sides['default']):6.1f} ms, frozen "
              f"{statistics.median(sides['frozen']):6.1f} ms, frozen / default {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work_dir", default=str(ROOT / "runs" / "bench_cpu_tasks"))
    p.add_argument("--models", default="small,minilm")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--frozen_ab", action="store_true",
                   help="only the batch-1 A/B of the default export against --freeze_weights (see above)")
    p.add_argument("--short_only", action="store_true",
                   help="only where a batch-1 call on a short SST-2 sentence spends its time (the full run ends with it)")
    p.add_argument("--widths", default="16,64,128", help="--frozen_ab: padded widths (multiples of 16, <= --seq)")
    p.add_argument("--rounds", type=int, default=6, help="--frozen_ab: rounds")
    p.add_argument("--calls", type=int, default=20, help="--frozen_ab: calls per side, signature and width a round")
    args = p.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",") if w]
    if args.frozen_ab and (not widths or any(w % 16 or not 16 <= w <= args.seq for w in widths)):
        p.error(f"--widths {args.widths}: multiples of 16 from 16 to --seq {args.seq}")
    work = Path(args.work_dir)
    missing = [m for m in args.models.split(",") if not (work / f"{m}_saved_model_{args.seq}").is_dir()]
    if missing:
        raise SystemExit(f"error: {work} has no {missing[0]}_saved_model_{args.seq}; run "
                         f"scripts/benchmarks/benchmark_cpu_tasks.py first (or pass --work_dir / --seq)")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if args.frozen_ab:
        for name in args.models.split(","):
            frozen_ab(work, name, args.seq, widths, args.rounds, args.calls)
        return 0
    if args.short_only:
        for name in args.models.split(","):
            print(f"== {name}, max_seq_length {args.seq}")
            path = work / f"{name}_saved_model_{args.seq}"
            short_sentences(*_load(path, name, args.seq), path.parent / f"{path.name}_jit")
        return 0
    texts, _ = read_imdb("dev", 400, offset=4600)  # the end of dev: fresh to the benchmark's servers
    for name in args.models.split(","):
        profile(work / f"{name}_saved_model_{args.seq}", name, texts, args.seq)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
