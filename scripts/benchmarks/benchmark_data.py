"""Benchmarks data preparation at corpus scale: vocabulary learning, and the shard builder with
1 and 2 processes, beside google-research/electra's builder when it is set up.

    python scripts/benchmarks/benchmark_data.py --out_dir /tmp/electra_data_bench
    bash scripts/benchmarks/setup_reference_builder.sh   # once, to add the reference builder's row

Corpora (written by scripts/benchmarks/make_big_corpus.py into --out_dir unless they exist): the shared
corpus repeated in shuffled document order, --size_mb MB (default 100) as a directory of
--num_files files (the layout the reference builder reads and parallelises over), and a
--small_mb corpus (default 10) to show that peak memory does not grow with the corpus.

Every tool runs as its command line in a subprocess, so times include start-up (the
TensorFlow import); CPU seconds and peak RSS come from the child's resource usage (os.wait4:
the largest single process of the tree, workers included). The load average is recorded
beside every row: on a shared machine the wall times depend on it.

Rows: vocabulary (--vocab_size pieces from --vocab_lines sampled lines of the large corpus),
builder with 1 and 2 processes on the large corpus, builder with 2 processes on the small one,
reference builder (if set up) on the large corpus. Results go to --json (default
out_dir/bench.json) and a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / ".reference" / "electra" / "build_pretraining_dataset.py"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> float:
    return round(os.getloadavg()[0], 2)


def run(cmd: List[str], log_path: Path, cwd: Path = REPO) -> dict:
    """Runs `cmd`; wall seconds, CPU seconds and peak RSS (MiB) of its process tree."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    load_before = load()
    start = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"error: {' '.join(cmd[:4])} ... failed ({proc.returncode}): " + " | ".join(tail))
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
            "load_before": load_before, "load_after": load()}


def ensure_corpus(path: Path, size_mb: float, num_files: int, seed: int) -> Path:
    if not path.exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "benchmarks" / "make_big_corpus.py"), "--output", str(path),
                        "--size_mb", str(size_mb), "--num_files", str(num_files), "--seed", str(seed)],
                       check=True)
    return path


def corpus_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size


def bench_vocab(corpus: Path, out: Path, vocab_size: int, lines: int, min_count: int) -> dict:
    vocab = out / "vocab.txt"
    row = run([sys.executable, "-m", "electra_tf.data.build_vocab", f"--corpus={corpus}",
               f"--vocab_size={vocab_size}", f"--sample_lines={lines}", f"--min_count={min_count}",
               f"--output_file={vocab}"], out / "vocab.log")
    row.update(pieces=sum(1 for _ in open(vocab, encoding="utf-8")), lines=lines, vocab_file=str(vocab))
    return row


def bench_builder(corpus: Path, vocab: Path, out: Path, processes: int, shards: int, seq: int) -> dict:
    target = out / f"shards_{corpus.name}_p{processes}"
    shutil.rmtree(target, ignore_errors=True)
    row = run([sys.executable, "-m", "electra_tf.data.build_pretraining_data", f"--corpus={corpus}",
               f"--vocab_file={vocab}", f"--output_dir={target}", f"--max_seq_length={seq}",
               f"--num_shards={shards}", f"--num_processes={processes}", "--noprogress"],
              out / f"{target.name}.log")
    manifest = json.loads((target / "manifest.json").read_text())
    row.update(processes=processes, corpus_tokens=manifest["num_corpus_tokens"], examples=manifest["num_examples"],
               build_s=manifest["build_seconds"], shards_sha256=[s["sha256"] for s in manifest["shards"]],
               corpus_tokens_per_s=round(manifest["num_corpus_tokens"] / row["wall_s"]))
    shutil.rmtree(target)  # keep the disk free for the next row
    return row


def bench_reference(corpus: Path, vocab: Path, out: Path, processes: int, seq: int, tokens: int) -> dict:
    """google-research/electra's builder; its corpus tokens are ours (same vocab, same text)."""
    target = out / f"reference_p{processes}"
    shutil.rmtree(target, ignore_errors=True)
    row = run([sys.executable, str(REFERENCE), f"--corpus-dir={corpus}", f"--vocab-file={vocab}",
               f"--output-dir={target}", f"--max-seq-length={seq}", f"--num-processes={processes}"],
              out / f"{target.name}.log", cwd=REFERENCE.parent)
    row.update(processes=processes, corpus_tokens=tokens, corpus_tokens_per_s=round(tokens / row["wall_s"]))
    shutil.rmtree(target)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", default="/tmp/electra_data_bench")
    parser.add_argument("--size_mb", type=float, default=100.0, help="large corpus size")
    parser.add_argument("--small_mb", type=float, default=10.0, help="small corpus size (memory check)")
    parser.add_argument("--num_files", type=int, default=8, help="files per corpus")
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--vocab_lines", type=int, default=1_000_000, help="--sample_lines for the vocabulary")
    parser.add_argument("--vocab_mb", type=float, default=140.0,
                        help="corpus the vocabulary samples from (big enough for --vocab_lines lines)")
    parser.add_argument("--min_count", type=int, default=10)
    parser.add_argument("--vocab_file", default=None, help="skip learning; use this vocabulary for the builder")
    parser.add_argument("--num_shards", type=int, default=16)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--reference_processes", default="2", help="comma list; empty: skip the reference")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="where to write the results (default out_dir/bench.json)")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    large = ensure_corpus(out / f"corpus_{args.size_mb:g}mb", args.size_mb, args.num_files, args.seed)
    small = ensure_corpus(out / f"corpus_{args.small_mb:g}mb", args.small_mb, args.num_files, args.seed)
    results = {
        "date": datetime.date.today().isoformat(), "cpu": cpu_name(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "corpora": {"large_bytes": corpus_bytes(large), "small_bytes": corpus_bytes(small)},
        "vocab": None, "builder": [], "reference": [],
    }
    if args.vocab_file:
        vocab = Path(args.vocab_file)
    else:
        source = ensure_corpus(out / f"corpus_{args.vocab_mb:g}mb", args.vocab_mb, args.num_files, args.seed)
        results["vocab"] = bench_vocab(source, out, args.vocab_size, args.vocab_lines, args.min_count)
        vocab = Path(results["vocab"]["vocab_file"])
        print(f"vocab: {results['vocab']}", file=sys.stderr)

    for corpus, processes in ((large, 1), (large, 2), (small, 2)):
        row = bench_builder(corpus, vocab, out, processes, args.num_shards, args.max_seq_length)
        row["corpus"] = corpus.name
        results["builder"].append(row)
        print(f"builder: { {k: v for k, v in row.items() if k != 'shards_sha256'} }", file=sys.stderr)
    one, two = results["builder"][0], results["builder"][1]
    results["identical_shards_1_vs_2_processes"] = one["shards_sha256"] == two["shards_sha256"]
    results["peak_rss_large_over_small"] = round(two["peak_rss_mib"] / results["builder"][2]["peak_rss_mib"], 3)

    wanted = [int(p) for p in args.reference_processes.split(",") if p.strip()]
    if wanted and not REFERENCE.exists():
        results["reference_skipped"] = "not set up: run bash scripts/benchmarks/setup_reference_builder.sh"
        print(f"reference builder skipped: {REFERENCE.relative_to(REPO)} is missing; "
              f"set it up with: bash scripts/benchmarks/setup_reference_builder.sh", file=sys.stderr)
    elif wanted:
        for processes in wanted:
            row = bench_reference(large, vocab, out, processes, args.max_seq_length, one["corpus_tokens"])
            results["reference"].append(row)
            print(f"reference: {row}", file=sys.stderr)

    print(f"{results['date']}, {results['cpu']}, {results['cpus']} CPUs; large corpus "
          f"{results['corpora']['large_bytes'] / 1e6:.1f} MB, small {results['corpora']['small_bytes'] / 1e6:.1f} MB "
          f"({args.num_files} files each), seq {args.max_seq_length}, {args.num_shards} shards")
    print("| step | wall s | CPU s | result | peak RSS MiB | load avg (before/after) |")
    print("|---|---|---|---|---|---|")
    v = results["vocab"]
    if v:
        print(f"| vocabulary, {v['lines']:,} lines | {v['wall_s']} | {v['cpu_s']} | {v['pieces']:,} pieces | "
              f"{v['peak_rss_mib']} | {v['load_before']} / {v['load_after']} |")
    for r in results["builder"] + results["reference"]:
        who = "reference builder" if r in results["reference"] else "builder"
        corpus = r.get("corpus", large.name)
        print(f"| {who}, {r['processes']} process(es), {corpus} | {r['wall_s']} | {r['cpu_s']} | "
              f"{r['corpus_tokens_per_s']:,} corpus tokens/s | {r['peak_rss_mib']} | "
              f"{r['load_before']} / {r['load_after']} |")
    for r in results["reference"]:
        mine = [b for b in results["builder"] if b["processes"] == r["processes"] and b["corpus"] == large.name]
        if mine:
            r["ours_over_reference"] = round(mine[0]["corpus_tokens_per_s"] / r["corpus_tokens_per_s"], 2)
            print(f"ours / reference, {r['processes']} process(es): {r['ours_over_reference']}x")
    if "reference_skipped" in results:
        print(f"reference builder: {results['reference_skipped']}")
    print(f"shards identical for 1 and 2 processes: {results['identical_shards_1_vs_2_processes']}; "
          f"peak RSS large/small corpus (2 processes): {results['peak_rss_large_over_small']}")
    path = Path(args.json) if args.json else out / "bench.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
