"""Benchmarks one ELECTRA pre-training step, beside the TF Model Garden peer.

    # ours vs Model Garden, ELECTRA-Small, seq 128, batch 32, fp32, no XLA:
    bash scripts/benchmarks/setup_model_garden_peer.sh            # once: .venv-model-garden/
    python scripts/benchmarks/benchmark_pretrain.py --config small --seq 128 --batch 32 \
        --steps 5 --rounds 4 --json runs/bench_small.json
    # options: --xla, --mixed_precision (bf16), --no_peer, --data_rss, --peak_only,
    #          --peak_n, --spec_peak_tflops

For the chosen config, sequence length and global batch it reports the
steady-state step time (median over rounds x steps timed steps, after
warm-up), examples/s and tokens/s, the analytic train FLOPs per step
(`electra_tf.flops`, reference convention and executed convention), achieved
FLOP/s and its fraction of this machine's matmul peak, measured here with
`tf.linalg.matmul` (fp32 on CPU, bf16 on GPU), and peak RSS.

Both sides run as long-lived worker processes (scripts/benchmarks/model_garden_step.py):
ours in this interpreter's venv, the peer in its own TF 2.20 venv. After both
are warm, they take turns, `--steps` steps each, for `--rounds` rounds (the
order flips every round), so that load from other processes on a shared
machine hits both alike; the ratio is of the medians.

`--data_rss` also measures the peak RSS of `python -m
electra_tf.data.build_pretraining_data` on two corpus sizes (it must not grow
with the corpus).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "data" / "corpus"
DEFAULT_PEER_PYTHON = REPO / ".venv-model-garden" / "bin" / "python"
WORKER = Path(__file__).resolve().parent / "model_garden_step.py"


# ------------------------------------------------------------------ peak
def matmul_peak(n=None, repeats=5, dtype=None):
    """Best-of-`repeats` FLOP/s of one n x n x n `tf.linalg.matmul` (2 n^3 FLOPs).

    n defaults to 4096 on CPU and 8192 on GPU, where 4096 is too small to fill the device."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    gpu = bool(gpus)
    dtype = dtype or (tf.bfloat16 if gpu else tf.float32)
    n = n or (8192 if gpu else 4096)
    # On GPU one product takes ~1 ms: time several on distinct inputs (no CSE) per call.
    count = 8 if gpu else 1
    lhs = [tf.cast(tf.random.normal([n, n], seed=i), dtype) for i in range(count)]
    rhs = tf.cast(tf.random.normal([n, n], seed=count), dtype)
    mm = tf.function(lambda xs, y: tf.add_n(
        [tf.reduce_sum(tf.cast(tf.linalg.matmul(x, y)[:1, :1], tf.float32)) for x in xs]))
    mm(lhs, rhs).numpy()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        mm(lhs, rhs).numpy()
        best = min(best, (time.perf_counter() - t0) / count)
    return {"flops_per_s": 2 * n ** 3 / best, "n": n, "dtype": dtype.name,
            "device": (tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
                       if gpu else "CPU")}


# ------------------------------------------------------------------ workers
class Worker:
    def __init__(self, side, python, spec, warmup):
        self.side = side
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)
        self.proc = subprocess.Popen(
            [str(python), str(WORKER), "--side", side, "--spec", json.dumps(spec),
             "--warmup", str(warmup)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=str(REPO), env=env)
        self.info = self._read()

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read().strip().splitlines()
            raise SystemExit(f"{self.side} worker died: {err[-1] if err else 'no output'}")
        return json.loads(line)

    def run(self, steps):
        self.proc.stdin.write(json.dumps({"cmd": "run", "steps": steps}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
        self.proc.stdin.flush()
        out = self._read()
        self.proc.wait(timeout=60)
        self.proc.stderr.close()
        return out


# ------------------------------------------------------------------ data RSS
def _run_measured(cmd, cwd):
    """Runs cmd; returns (returncode, wall seconds, peak RSS bytes of the process tree's largest)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read()
    proc.stderr.close()
    # ru_maxrss of wait4 covers the child and its waited-for descendants (max, not sum).
    return proc.returncode, time.perf_counter() - t0, usage.ru_maxrss * 1024, err


def data_builder_rss(work_dir: Path, processes=1):
    """Peak RSS of the data builder on a small and a ~10x larger corpus."""
    from electra_tf.data.build_vocab import build_vocab

    files = [CORPUS / "wikitext2.valid.txt", CORPUS / "wikitext2.test.txt", CORPUS / "brown.txt"]
    work_dir.mkdir(parents=True, exist_ok=True)
    vocab = work_dir / "vocab.txt"
    if not vocab.exists():
        build_vocab([str(files[0])], 8000, str(vocab), sample_lines=20000)
    small = work_dir / "corpus_small.txt"
    shutil.copyfile(files[0], small)
    large = work_dir / "corpus_large.txt"
    with open(large, "wb") as out:
        for _ in range(3):
            for f in files:
                out.write(f.read_bytes())
                out.write(b"\n\n")
    results = []
    for corpus in (small, large):
        out_dir = work_dir / ("shards_" + corpus.stem)
        shutil.rmtree(out_dir, ignore_errors=True)
        cmd = [sys.executable, "-m", "electra_tf.data.build_pretraining_data",
               f"--corpus={corpus}", f"--vocab_file={vocab}", f"--output_dir={out_dir}",
               "--max_seq_length=128", "--num_shards=4", f"--num_processes={processes}",
               "--noprogress"]
        rc, wall, rss, err = _run_measured(cmd, str(REPO))
        if rc:
            raise SystemExit(f"data builder failed: {err.strip().splitlines()[-1:]}")
        manifest = json.loads((out_dir / "manifest.json").read_text())
        results.append({"corpus_bytes": corpus.stat().st_size,
                        "corpus_tokens": manifest["num_corpus_tokens"],
                        "examples": manifest["num_examples"], "wall_s": round(wall, 1),
                        "peak_rss_bytes": rss, "num_processes": processes})
    return results


# ------------------------------------------------------------------ main
def load_config(name, seq, batch):
    from electra_tf.config import ElectraConfig

    path = Path(name)
    if not path.is_file():
        path = REPO / "configs" / f"{name}.json"
    config = ElectraConfig.from_json(str(path))
    changes = {"train_batch_size": batch, "max_seq_length": seq}
    if seq > config.max_position_embeddings:
        changes["max_position_embeddings"] = seq
    return config.replace(**changes)


def make_spec(config, args):
    return {
        "config": config.to_dict(), "vocab_size": config.vocab_size,
        "hidden": config.hidden_size, "layers": config.num_hidden_layers,
        "heads": config.num_attention_heads, "intermediate": config.intermediate_size,
        "embedding_size": config.embedding_size,
        "gen_hidden": config.generator_hidden_dim, "gen_layers": config.generator_num_layers,
        "gen_heads": config.generator_num_heads,
        "gen_intermediate": config.generator_intermediate_size,
        "dropout": config.hidden_dropout_prob,
        "attention_dropout": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size, "predictions": config.predictions_per_seq,
        "seq_length": config.max_seq_length, "batch_size": args.batch,
        "learning_rate": config.learning_rate, "data_seed": 0,
        "xla": args.xla, "mixed_precision": args.mixed_precision,
    }


def summarise(side, times, info, rss, flops, peak, batch, seq):
    med = statistics.median(times)
    row = {
        "side": side, "steps_timed": len(times), "step_s_median": med,
        "step_s_min": min(times), "step_s_max": max(times),
        "examples_per_s": batch / med, "tokens_per_s": batch * seq / med,
        "flops_per_s_reference": flops["reference"] / med,
        "flops_per_s_executed": flops["executed"] / med,
        "peak_rss_bytes": rss, "params": info.get("params"),
        "tf_version": info.get("tf_version"), "first_step_s": info.get("first_step_s"),
    }
    if peak:
        row["fraction_of_peak_reference"] = row["flops_per_s_reference"] / peak
        row["fraction_of_peak_executed"] = row["flops_per_s_executed"] / peak
    return row


def table(result):
    lines = []
    head = (f"{'side':13s} {'step ms':>8s} {'ex/s':>7s} {'tok/s':>8s} {'GFLOP/s ref':>11s} "
            f"{'%peak ref':>9s} {'GFLOP/s exe':>11s} {'%peak exe':>9s} {'RSS GB':>7s}")
    lines.append(head)
    for row in result["sides"]:
        lines.append(
            f"{row['side']:13s} {row['step_s_median'] * 1e3:8.0f} {row['examples_per_s']:7.2f} "
            f"{row['tokens_per_s']:8.0f} {row['flops_per_s_reference'] / 1e9:11.1f} "
            f"{100 * row.get('fraction_of_peak_reference', float('nan')):8.1f}% "
            f"{row['flops_per_s_executed'] / 1e9:11.1f} "
            f"{100 * row.get('fraction_of_peak_executed', float('nan')):8.1f}% "
            f"{row['peak_rss_bytes'] / 2 ** 30:7.2f}")
    for row in result["sides"]:
        if "mfu_spec_reference" in row:
            lines.append(f"{row['side']}: MFU vs the datasheet's {result['spec_peak_flops_per_s'] / 1e12:.0f} "
                         f"TFLOP/s: {100 * row['mfu_spec_reference']:.1f}% ref, "
                         f"{100 * row['mfu_spec_executed']:.1f}% exe")
    if "ratio_examples_per_s" in result:
        lines.append(f"ours / model_garden examples/s: {result['ratio_examples_per_s']:.2f}x")
    peak = result.get("matmul_peak")
    if peak:
        lines.append(f"matmul peak ({peak['dtype']}, n={peak['n']}): "
                     f"{peak['flops_per_s'] / 1e9:.0f} GFLOP/s (max of {len(peak['samples'])} "
                     f"measurements, median {peak['median_flops_per_s'] / 1e9:.0f})")
    f = result["flops_per_step"]
    lines.append(f"train FLOPs/step: reference {f['reference'] / 1e9:.1f} G "
                 f"(gen {f['reference_generator'] / 1e9:.1f}, disc "
                 f"{f['reference_discriminator'] / 1e9:.1f}, attention {f['reference_attention'] / 1e9:.1f}), "
                 f"executed {f['executed'] / 1e9:.1f} G")
    for d in result.get("data_builder", []):
        lines.append(f"data builder: corpus {d['corpus_bytes'] / 1e6:.1f} MB "
                     f"({d['corpus_tokens']} tokens) -> peak RSS {d['peak_rss_bytes'] / 2 ** 20:.0f} MiB, "
                     f"{d['wall_s']} s")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="small", help="tiny, small, base, ... or a JSON path")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32, help="global batch size")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per side per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    parser.add_argument("--xla", action="store_true", help="jit_compile the train step (both sides)")
    parser.add_argument("--mixed_precision", action="store_true", help="bf16 compute (both sides)")
    parser.add_argument("--no_peer", dest="peer", action="store_false")
    parser.add_argument("--no_ours", dest="ours", action="store_false")
    parser.add_argument("--peer_python", default=str(DEFAULT_PEER_PYTHON))
    parser.add_argument("--no_peak", dest="peak", action="store_false")
    parser.add_argument("--peak_only", action="store_true")
    parser.add_argument("--peak_n", type=int, default=None,
                        help="matmul size for the peak (default 4096 on CPU, 8192 on GPU)")
    parser.add_argument("--spec_peak_tflops", type=float, default=None,
                        help="the device's datasheet peak (e.g. 989 for H100 SXM dense bf16): "
                             "adds MFU against it")
    parser.add_argument("--data_rss", action="store_true", help="peak RSS of the data builder, 2 corpus sizes")
    parser.add_argument("--data_dir", default=None, help="work dir for --data_rss (default: a temp dir)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    for name in ("peak_n", "spec_peak_tflops"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            parser.error(f"--{name}={getattr(args, name)} must be positive")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # On a GPU this process (the peak) and each worker share the device: without growth the first
    # to start takes all of its memory and the others die of OOM. Inherited by the workers.
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

    from electra_tf.flops import electra_train_flops

    config = load_config(args.config, args.seq, args.batch)
    ref = electra_train_flops(config, args.batch, args.seq, "reference")
    exe = electra_train_flops(config, args.batch, args.seq, "executed")
    result = {
        "config": args.config, "seq_length": args.seq, "batch_size": args.batch,
        "xla": args.xla, "mixed_precision": args.mixed_precision,
        "steps_per_round": args.steps, "rounds": args.rounds, "warmup": args.warmup,
        "machine": {"platform": platform.platform(), "processor": _cpu_name(),
                    "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_start": os.getloadavg()},
        "flops_per_step": {"reference": ref["total"], "reference_generator": ref["generator"],
                           "reference_discriminator": ref["discriminator"],
                           "reference_attention": ref["attention"], "executed": exe["total"]},
        "sides": [],
    }
    peaks = []
    if args.peak or args.peak_only:
        peaks.append(matmul_peak(args.peak_n))
    if args.peak_only:
        print(json.dumps(peaks[0], indent=2))
        return
    flops = {"reference": ref["total"], "executed": exe["total"]}

    spec = make_spec(config, args)
    workers = []
    if args.ours:
        workers.append(Worker("ours", sys.executable, spec, args.warmup))
        print(f"ours ready: {workers[-1].info}", file=sys.stderr)
    if args.peer:
        if not Path(args.peer_python).exists():
            raise SystemExit(f"{args.peer_python} not found: run bash scripts/benchmarks/setup_model_garden_peer.sh "
                             "first, or pass --no_peer")
        workers.append(Worker("model_garden", args.peer_python, spec, args.warmup))
        print(f"model_garden ready: {workers[-1].info}", file=sys.stderr)
    times = {w.side: [] for w in workers}
    rss = {w.side: 0 for w in workers}
    for r in range(args.rounds):
        order = workers if r % 2 == 0 else workers[::-1]
        for w in order:
            out = w.run(args.steps)
            times[w.side] += out["times"]
            rss[w.side] = max(rss[w.side], out["peak_rss_bytes"])
            print(f"round {r} {w.side}: " + " ".join(f"{t:.2f}" for t in out["times"]), file=sys.stderr)
        if args.peak and r % 2 == 1:
            peaks.append(matmul_peak(args.peak_n, repeats=3))
    for w in workers:
        rss[w.side] = max(rss[w.side], w.close()["peak_rss_bytes"])
    if args.peak:
        peaks.append(matmul_peak(args.peak_n))
        result["matmul_peak"] = dict(peaks[0], flops_per_s=max(p["flops_per_s"] for p in peaks),
                                     median_flops_per_s=statistics.median(p["flops_per_s"] for p in peaks),
                                     samples=[p["flops_per_s"] for p in peaks])
    peak = result.get("matmul_peak", {}).get("flops_per_s")
    for w in workers:
        result["sides"].append(summarise(w.side, times[w.side], w.info, rss[w.side], flops, peak,
                                         args.batch, args.seq))
    if args.spec_peak_tflops:
        result["spec_peak_flops_per_s"] = args.spec_peak_tflops * 1e12
        for row in result["sides"]:
            row["mfu_spec_reference"] = row["flops_per_s_reference"] / result["spec_peak_flops_per_s"]
            row["mfu_spec_executed"] = row["flops_per_s_executed"] / result["spec_peak_flops_per_s"]
    by_side = {row["side"]: row for row in result["sides"]}
    if "ours" in by_side and "model_garden" in by_side:
        result["ratio_examples_per_s"] = (by_side["ours"]["examples_per_s"]
                                          / by_side["model_garden"]["examples_per_s"])
    if args.data_rss:
        work = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="electra_rss_"))
        result["data_builder"] = data_builder_rss(work)
    result["machine"]["load_avg_end"] = os.getloadavg()
    print(table(result))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


def _cpu_name():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
