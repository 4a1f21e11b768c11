"""Where our fine-tuning step's time goes, by length, on the model and batches benchmark_cpu_tasks.py left
in its work directory (run that first, or its --quick for Small at 128):

    python scripts/benchmarks/profile_finetune.py [--work_dir runs/bench_cpu_tasks] [--model small] [--seqs 128,256]

For each length, the benchmark's own step (ClassifierModel + fine-tuning's optimizer, `train_on_batch`, IMDB
batches of 32 cut to their longest row rounded up to 16), 2 threads (inter-op 1): the median of 6 steps, then
op types by self time over 4 steps (TF profiler trace, summed over threads), so that the lengths can be
compared share by share.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from scripts.benchmarks.cpu_peers.ours import Ours
from scripts.benchmarks.cpu_peers.traffic import ROOT
from scripts.benchmarks.profile_serving import op_self_times


def profile(work: Path, name: str, seq: int, top: int) -> None:
    import tensorflow as tf

    case = {"kind": "ft", "variant": "default", "seq": seq, "batch": 32, "model_dir": str(work / name),
            "head": str(work / f"{name}_head.npz"), "batches": str(work / f"{name}_ft_{seq}.npz")}
    step = Ours(work).prepare(case)["step"]
    times = []
    for _ in range(6):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(4):
            step()
        tf.profiler.experimental.stop()
        totals = op_self_times(logdir)
    total = sum(totals.values())
    print(f"== {name}, {seq} pieces: step {1000 * statistics.median(times):.0f} ms (median of 6); op self time "
          f"{1000 * total / 4:.0f} ms per step summed over threads; top op types:")
    for key, sec in totals.most_common(top):
        print(f"    {key:48s} {1000 * sec / 4:8.1f} ms/step  {sec / total:5.1%}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work_dir", default=str(ROOT / "runs" / "bench_cpu_tasks"))
    p.add_argument("--model", default="small")
    p.add_argument("--seqs", default="128,256")
    p.add_argument("--top", type=int, default=16)
    args = p.parse_args(argv)
    work = Path(args.work_dir)
    seqs = [int(s) for s in args.seqs.split(",")]
    missing = [f for s in seqs for f in (f"{args.model}_ft_{s}.npz", f"{args.model}_head.npz", args.model)
               if not (work / f).exists()]
    if missing:
        raise SystemExit(f"error: {work} has no {missing[0]}; run scripts/benchmarks/benchmark_cpu_tasks.py first "
                         f"(or pass --work_dir / --model / --seqs)")
    for seq in seqs:  # Ours sets 2 intra-op threads, 1 inter-op, like the benchmark's worker
        profile(work, args.model, seq, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
