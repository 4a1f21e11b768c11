"""Where our SavedModel's serving time goes: the in-graph tokenizer against the encoder + head, and
which batch-1 calls are slow.

Reads the models `benchmark_cpu_tasks.py` left in its work directory (run that first):

    python scripts/benchmarks/profile_serving.py [--work_dir runs/bench_cpu_tasks] [--models minilm,small]

For each model: 96 IMDB dev reviews at batch 32 through the SavedModel's `serve` (raw strings), the same
batches pre-tokenized through its `serve_encoded`, and the tokenizer alone (medians of 3 rounds); then the
same 16 reviews one at a time in 3 rounds, naming the calls slower than 3x the median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def profile(work: Path, name: str, texts) -> None:
    import tensorflow as tf

    from electra_tf.export.serving_loader import build_module

    loaded = tf.saved_model.load(str(work / f"{name}_saved_model"))
    module = build_module(str(work / f"{name}_seed"), "classifier", int(loaded.max_seq_length)
                          if hasattr(loaded, "max_seq_length") else 256)
    encode = tf.function(module.encode, input_signature=[tf.TensorSpec([None], tf.string)])
    batches = [tf.constant(texts[i:i + 32]) for i in range(0, 96, 32)]
    encoded = [encode(b) for b in batches]
    for b, e in zip(batches, encoded):  # warm-up: every width once
        loaded.serve(b)
        loaded.serve_encoded(e["input_ids"], e["input_mask"], e["segment_ids"])
    times = {"serve": [], "tokenizer": [], "encoder + head": []}
    for _ in range(3):
        t = time.perf_counter()
        for b in batches:
            loaded.serve(b)
        times["serve"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for b in batches:
            encode(b)
        times["tokenizer"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for e in encoded:
            loaded.serve_encoded(e["input_ids"], e["input_mask"], e["segment_ids"])
        times["encoder + head"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{name}: batch 32, 96 reviews: serve {med['serve']:.2f} s ({96 / med['serve']:.1f} reviews/s); "
          f"tokenizer {med['tokenizer']:.3f} s ({100 * med['tokenizer'] / med['serve']:.0f}%); "
          f"encoder + head {med['encoder + head']:.2f} s ({100 * med['encoder + head'] / med['serve']:.0f}%)")
    latencies = []
    for _ in range(3):
        for text in texts[:16]:
            t = time.perf_counter()
            loaded.serve(tf.constant([text]))
            latencies.append(1000 * (time.perf_counter() - t))
    p50 = statistics.median(latencies)
    slow = [(i, round(ms)) for i, ms in enumerate(latencies) if ms > 3 * p50]
    print(f"{name}: batch 1, 16 reviews x 3 rounds: p50 {p50:.1f} ms, max {max(latencies):.1f} ms; calls over 3x "
          f"the median (index, ms; round r holds indices 16r..16r+15): {slow}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work_dir", default=str(ROOT / "runs" / "bench_cpu_tasks"))
    p.add_argument("--models", default="minilm,small")
    args = p.parse_args(argv)
    work = Path(args.work_dir)
    missing = [m for m in args.models.split(",") if not (work / f"{m}_saved_model").is_dir()]
    if missing:
        raise SystemExit(f"error: {work} has no {missing[0]}_saved_model; run "
                         f"scripts/benchmarks/benchmark_cpu_tasks.py first (or pass --work_dir)")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    from scripts.benchmarks.benchmark_cpu_tasks import read_reviews

    texts, _ = read_reviews("dev", 96)
    for name in args.models.split(","):
        profile(work, name, texts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
