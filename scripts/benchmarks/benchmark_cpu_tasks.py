"""Fine-tuning and serving on a 2-core CPU: ours against the strongest PyTorch and ONNX Runtime peers.

    python scripts/benchmarks/benchmark_cpu_tasks.py --json runs/cpu_tasks.json     # everything (several hours idle)
    python scripts/benchmarks/benchmark_cpu_tasks.py --quick                         # smoke run

The first run creates the peers' venv (.venv-peers, pinned: torch 2.13.0+cpu, transformers 5.24.0,
onnxruntime 1.32.0, onnx 1.23.2; scripts/benchmarks/setup_cpu_peers.sh). Results go to
<work_dir>/results/, one file per (fine-tuning | serving, model, max length) as each ends; a later
run keeps them (resumes) unless --redo or they were measured by an earlier method. The tables,
with a verdict beside each ratio and the goals met and missed per export, are printed and written
to <work_dir>/report.md.

What is compared and how: scripts/benchmarks/cpu_peers/ (cases.py lists the rows and sides;
traffic.py the texts, widths and token-id check; timing.py the rounds, cold calls, CPU time and
load; report.py the paired ratios, verdicts and goal counts).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path


from scripts.benchmarks.cpu_peers import cases, report  # noqa: E402
from scripts.benchmarks.cpu_peers.timing import LoadProbe, Worker, load  # noqa: E402
from scripts.benchmarks.cpu_peers.traffic import ROOT  # noqa: E402

DEFAULT_PEERS = ROOT / ".venv-peers" / "bin" / "python"


def machine():
    model, flags = "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
        model = next(line for line in info if line.startswith("model name")).split(":", 1)[1].strip()
        flags = next(line for line in info if line.startswith("flags")).split()
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "avx512_bf16": "avx512_bf16" in flags,
            "amx": any(f.startswith("amx") for f in flags), "python": platform.python_version()}


def _ints(text):
    return [int(x) for x in str(text).split(",") if x]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work_dir", default=str(ROOT / "runs" / "bench_cpu_tasks"),
                   help="models, exports, logs and results/ (kept between runs)")
    p.add_argument("--json", help="also write every unit's results and the machine here")
    p.add_argument("--peer_python", default=str(DEFAULT_PEERS), help="python of the peers' venv")
    p.add_argument("--models", default="small,minilm", help="small (ELECTRA-Small shape) and/or minilm")
    p.add_argument("--ft_seqs", default="128,256")
    p.add_argument("--serve_seqs", default="128,256")
    p.add_argument("--sst2_seqs", default="128", help="serving lengths that also serve SST-2 sentences")
    p.add_argument("--ft_xla_seqs", default="128", help="lengths to time our XLA fine-tuning step at")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--steps", type=int, default=None,
                   help="fine-tuning steps per side and round, one timed sample (default 8, --quick 1); the "
                        "paired rounds spread as much with 16 as with 8 on the measured CPU")
    p.add_argument("--throughput_texts", type=int, default=64, help="texts per side and round at batch 32")
    p.add_argument("--latency_calls", type=int, default=1000, help="batch-1 calls per side and data set")
    p.add_argument("--max_load", type=float, default=3.0,
                   help="mark rounds that start above this 1-minute load average")
    p.add_argument("--skip_sides", default="",
                   help="serving side labels to leave out, separated by ';' (the labels hold commas), e.g. "
                        "'ours, XLA (opt-in); ours, frozen weights (opt-in)'")
    p.add_argument("--peer_padding", default="both", choices=sorted(cases.PEER_PADDINGS),
                   help="peers padded like ours (16), to the longest row, or both (the faster counts)")
    p.add_argument("--threads", type=int, default=2,
                   help="threads per side (intra-op; inter-op 1); the measured tables use 2")
    p.add_argument("--no_finetune", dest="finetune", action="store_false")
    p.add_argument("--no_serving", dest="serving", action="store_false")
    p.add_argument("--redo", action="store_true", help="measure units again even if results/ has them")
    p.add_argument("--report_only", action="store_true",
                   help="print the tables of the units already in <work_dir>/results/ (measures nothing)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: Small, 128, 2 rounds, 40 calls, into <work_dir>/quick")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.quick:
        args.models, args.ft_seqs, args.serve_seqs, args.ft_xla_seqs = "small", "128", "128", ""
        args.rounds, args.latency_calls, args.throughput_texts = 2, 40, 32
        args.steps = 1 if args.steps is None else args.steps
        args.work_dir = str(Path(args.work_dir) / "quick")
    if args.steps is None:
        args.steps = 8
    if args.steps < 1 or args.threads < 1:
        p.error("--steps and --threads must be at least 1")
    for key in ("ft_seqs", "serve_seqs", "sst2_seqs", "ft_xla_seqs"):
        setattr(args, key, _ints(getattr(args, key)))
    try:
        args.skip_sides = cases.skip_labels(args.skip_sides)
    except ValueError as e:
        p.error(str(e))
    return args


class Context:
    def __init__(self, args, work, workers, log):
        self.args, self.work, self.workers, self.log = args, work, workers, log
        self.probe = LoadProbe([w.pid for w in workers.values()])


def report_only(work: Path) -> int:
    units = [json.loads(p.read_text()) for p in sorted((work / "results").glob("*.json"))]
    old = [u for u in units if u.get("schema") != cases.SCHEMA]
    if old:
        sys.exit(f"error: {len(old)} results in {work / 'results'} were measured by an earlier method "
                 f"(no paired rounds or same-width cold calls); measure them again without --report_only")
    meta_path = work / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"machine": machine(), "versions": "?",
                                                                          "max_load": 3.0}
    order = {"serving": 0, "finetune": 1}
    units.sort(key=lambda u: (u["seq"], order[u["kind"]], u["model"]))
    text = report.report(meta, units)
    print(text)
    (work / "report.md").write_text(text)
    return 0


def main(argv=None):
    args = parse(argv)
    if args.report_only:
        return report_only(Path(args.work_dir))
    if not Path(args.peer_python).exists():
        if Path(args.peer_python) != DEFAULT_PEERS:
            sys.exit(f"{args.peer_python} not found")
        subprocess.run(["bash", str(ROOT / "scripts" / "benchmarks" / "setup_cpu_peers.sh")], check=True)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    def log(msg):
        print(f"[{time.time() - t0:6.0f}s] {msg}", flush=True)

    models = [m for m in args.models.split(",") if m]
    logs = {side: open(work / f"{side}.log", "a") for side in ("ours", "torch", "ort")}
    workers = {"ours": Worker("ours", sys.executable, work, logs["ours"], args.threads)}
    for side in ("torch", "ort"):
        workers[side] = Worker(side, args.peer_python, work, logs[side], args.threads)
    meta = {"machine": machine(), "versions": {k: w.info["versions"] for k, w in workers.items()},
            "max_load": args.max_load, "load_start": load(), "threads": args.threads, "steps": args.steps,
            "command": " ".join(["python", "scripts/benchmarks/benchmark_cpu_tasks.py"] + list(argv or sys.argv[1:]))}
    log(f"workers up: {meta['versions']}; load {meta['load_start']}")
    (work / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    ctx = Context(args, work, workers, log)
    paths = {}
    for name in models:
        paths[name] = workers["ours"].call("make_model", name, args.seed, max(args.ft_seqs + args.serve_seqs))
        log(f"{name}: models written ({paths[name]['model_dir']})")
    units = cases.run_units(ctx, models, paths)
    for side, w in workers.items():
        meta.setdefault("peak_rss_bytes", {})[side] = w.close().get("peak_rss_bytes")
    text = report.report(meta, units)
    print(text)
    (work / "report.md").write_text(text)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"meta": meta, "units": units}) + "\n")
    log(f"tables in {work / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
