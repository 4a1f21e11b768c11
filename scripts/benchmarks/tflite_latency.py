"""Batch-1 latency, size and labels of a classifier's LiteRT exports against its SavedModel, on SST-2 dev sentences
(or IMDB dev reviews).

    python scripts/benchmarks/tflite_latency.py --seed_dir runs/sst2/seed_1 --work_dir runs/tflite_latency
    python scripts/benchmarks/tflite_latency.py --seed_dir runs/sst2/seed_1 --work_dir runs/tflite_latency \
        --dataset imdb --max_seq_length 128 --max_texts 500

Exports `--seed_dir` (a fine-tuned classifier) three ways into --work_dir (kept; reused by a later run): the
default SavedModel (`export --kind classifier`), and LiteRT text-in files (`export --format tflite`) in
float32 and dynamic-range int8. Then, with --threads threads everywhere (TensorFlow's intra-op pool, the
LiteRT interpreters):

* labels: every dev text (the first --max_texts) through each side at batch 1 (the order of the file):
  accuracy against the gold labels, agreement with the SavedModel's labels, largest logit difference to
  the SavedModel;
* latency: raw text in, label out, one text per call, --rounds rounds in which every side serves
  --calls texts in turn (the order of the sides rotates each round; fresh texts each round, the
  same ones for every side), after --warmup untimed calls per side. p50 / p90 over all warm calls,
  and each side's p50 against the SavedModel's as the median (min-max) of the per-round ratios: the rounds
  interleave the sides, so a load that comes and goes on the machine slows them alike.

The load average before and after is printed: on a machine that others share, the absolute times move with
their load, the ratios much less.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
DATASETS = {"sst2": DATA / "glue" / "SST-2" / "dev.tsv", "imdb": DATA / "imdb" / "dev.tsv.gz"}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed_dir", required=True, help="a fine-tuned classifier (finetune's seed_<n>/)")
    p.add_argument("--work_dir", required=True, help="the exports go here (kept and reused)")
    p.add_argument("--dataset", default="sst2", choices=sorted(DATASETS), help="SST-2 dev sentences or IMDB dev "
                   "reviews")
    p.add_argument("--data_file", help="a .tsv (or .tsv.gz) of sentence, label (default: the dataset's dev file)")
    p.add_argument("--max_texts", type=int, default=0, help="the first N texts only (0: all)")
    p.add_argument("--max_seq_length", type=int, default=None, help="word pieces (default: the classifier's)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--calls", type=int, default=80, help="batch-1 calls per side and round")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls per side before the rounds")
    p.add_argument("--json", help="also write the results here")
    return p.parse_args(argv)


def read_texts(path, limit=0):
    """(texts, gold labels) of a .tsv / .tsv.gz with sentence and label columns."""
    csv.field_size_limit(1 << 30)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    rows = rows[:limit] if limit else rows
    return [r["sentence"] for r in rows], [str(r["label"]) for r in rows]


def size_mb(path):
    path = Path(path)
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def exports(seed_dir, work, threads, seq):
    """{side: (runner of one text -> (label, logits), size in MB, what was measured)}."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    from electra_tf.export import build_module, export
    from electra_tf.export.tflite import TEXT_FILE, LiteRTModel, export_tflite

    work.mkdir(parents=True, exist_ok=True)
    saved = work / f"saved_model_{seq}"
    if not (saved / "saved_model.pb").exists():
        export(seed_dir, str(saved), kind="classifier", max_seq_length=seq)
    fn = tf.saved_model.load(str(saved)).signatures["serving_default"]

    def run_saved(text):
        out = fn(text=tf.constant([text]))
        return out["label"].numpy()[0].decode(), out["logits"].numpy()[0]

    sides = {"our SavedModel (text in)": (run_saved, size_mb(saved), saved.name)}
    for quantize in ("none", "int8"):
        folder = work / f"litert_{quantize}_{seq}"
        if not (folder / TEXT_FILE).exists():
            export_tflite(build_module(seed_dir, "classifier", seq), str(folder), quantize, overwrite=True)
        model = LiteRTModel(str(folder / TEXT_FILE), num_threads=threads)

        def run_lite(text, model=model):
            out = model(text=np.array([text.encode("utf-8")], dtype=object))
            return out["label"][0].decode(), out["logits"][0]

        label = "LiteRT fp32 (text in)" if quantize == "none" else "LiteRT int8 (text in)"
        sides[label] = (run_lite, size_mb(folder / TEXT_FILE), f"{folder.name}/{TEXT_FILE}")
        sides[label + " runtime"] = model.runtime
    return sides


def percentile(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main(argv=None):
    args = parse(argv)
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    texts, gold = read_texts(args.data_file or DATASETS[args.dataset], args.max_texts)
    with open(os.path.join(args.seed_dir, "classifier.json"), encoding="utf-8") as f:
        seq = args.max_seq_length or json.load(f)["max_seq_length"]
    found = exports(args.seed_dir, Path(args.work_dir), args.threads, seq)
    runtime = {k[:-len(" runtime")]: v for k, v in found.items() if k.endswith(" runtime")}
    sides = {k: v for k, v in found.items() if not k.endswith(" runtime")}
    names = list(sides)
    load_before = os.getloadavg()

    # Labels: every dev sentence at batch 1.
    answers = {name: [sides[name][0](t) for t in texts] for name in names}
    ref = answers[names[0]]
    quality = {}
    for name in names:
        labels = [a[0] for a in answers[name]]
        quality[name] = {
            "accuracy": sum(a == g for a, g in zip(labels, gold)) / len(gold),
            "same_label_as_saved_model": sum(a[0] == r[0] for a, r in zip(answers[name], ref)) / len(ref),
            "max_abs_logit_diff": float(max(np.abs(a[1] - r[1]).max() for a, r in zip(answers[name], ref))),
        }
    fp32, int8 = answers["LiteRT fp32 (text in)"], answers["LiteRT int8 (text in)"]
    int8_vs_fp32 = sum(a[0] == b[0] for a, b in zip(int8, fp32)) / len(fp32)

    # Latency: interleaved rounds, rotating order, fresh texts each round.
    for name in names:
        for t in texts[:args.warmup]:
            sides[name][0](t)
    calls = {name: [] for name in names}
    round_p50 = {name: [] for name in names}
    pool = texts[args.warmup:] + texts[:args.warmup]
    for r in range(args.rounds):
        batch = [pool[(r * args.calls + i) % len(pool)] for i in range(args.calls)]
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            run = sides[name][0]
            times = []
            for t in batch:
                start = time.perf_counter()
                run(t)
                times.append(time.perf_counter() - start)
            calls[name] += times
            round_p50[name].append(statistics.median(times))
    load_after = os.getloadavg()

    base = round_p50[names[0]]
    results = {"dataset": args.dataset, "max_seq_length": seq, "threads": args.threads, "rounds": args.rounds, "calls_per_round": args.calls,
               "texts": len(texts), "load_before": load_before, "load_after": load_after,
               "int8_same_label_as_fp32": int8_vs_fp32, "runtime": runtime, "sides": {}}
    print(f"{args.dataset} dev, {len(texts)} texts at up to {seq} pieces; batch 1, {args.threads} threads; {args.rounds} rounds x {args.calls} "
          f"calls per side; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print("| side | file MB | p50 ms | p90 ms | p50 vs SavedModel (median of rounds; min-max) | accuracy | "
          "same label as SavedModel | max abs logit diff |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        ratios = [a / b for a, b in zip(round_p50[name], base)]
        ms = [1000 * x for x in calls[name]]
        row = {"size_mb": sides[name][1], "file": sides[name][2], "p50_ms": percentile(ms, 50),
               "p90_ms": percentile(ms, 90), "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
               "ratio_max": max(ratios), **quality[name]}
        results["sides"][name] = row
        print(f"| {name} | {row['size_mb']:.1f} | {row['p50_ms']:.2f} | {row['p90_ms']:.2f} | "
              f"{row['ratio_median']:.2f}x ({row['ratio_min']:.2f}-{row['ratio_max']:.2f}) | "
              f"{100 * row['accuracy']:.2f}% | {100 * row['same_label_as_saved_model']:.2f}% | "
              f"{row['max_abs_logit_diff']:.2g} |")
    print(f"int8 labels equal to fp32's on {100 * int8_vs_fp32:.2f}% of the texts; LiteRT runtime: "
          f"{', '.join(sorted(set(runtime.values())))}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
