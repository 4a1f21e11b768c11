"""Benchmarks the data pipeline: builder tokens/s (1 and 2 processes) and reader
examples/s, against what one pre-training step of the tiny and small configs
consumes.

    python scripts/benchmark_data.py --out_dir /tmp/electra_bench --json bench.json

The builder runs as the CLI in a subprocess (wall time includes the ~3 s TF
import, as in the reference measurement in TOOLCHAIN.md) on the full Brown +
both WikiText-2 files, seq 128.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "corpus"
FILES = [CORPUS / "brown.txt", CORPUS / "wikitext2.valid.txt", CORPUS / "wikitext2.test.txt"]


def run_builder(vocab: Path, out: Path, processes: int, seq: int, shards: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "electra_tf.data.build_pretraining_data",
           "--corpus=" + ",".join(map(str, FILES)), f"--vocab_file={vocab}", f"--output_dir={out}",
           f"--max_seq_length={seq}", f"--num_shards={shards}", f"--num_processes={processes}",
           "--noprogress"]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.time() - start
    if proc.returncode:
        raise SystemExit(f"builder failed: {proc.stderr.strip().splitlines()[-1]}")
    manifest = json.loads((out / "manifest.json").read_text())
    return {
        "processes": processes, "wall_s": round(wall, 2), "build_s": manifest["build_seconds"],
        "corpus_tokens": manifest["num_corpus_tokens"], "written_tokens": manifest["num_tokens"],
        "examples": manifest["num_examples"],
        "corpus_tokens_per_s_wall": round(manifest["num_corpus_tokens"] / wall),
        "corpus_tokens_per_s_build": round(manifest["num_corpus_tokens"] / manifest["build_seconds"]),
    }


def reader_rate(data_dir: Path, cfg, batch: int, steps: int) -> float:
    from electra_tf.data.reader import pretraining_dataset

    it = iter(pretraining_dataset(str(data_dir), cfg, batch))
    for _ in range(5):  # fill the shuffle buffer / warm up
        next(it)
    start = time.time()
    for _ in range(steps):
        next(it)
    return steps * batch / (time.time() - start)


def train_rate(data_dir: Path, cfg, vocab: Path, batch: int, steps: int):
    """Examples/s of ElectraPretrainer.fit on these shards (None if unavailable)."""
    try:
        from electra_tf.data.reader import pretraining_dataset
        from electra_tf.data.vocab import special_token_ids
        from electra_tf.pretraining import ElectraPretrainer, create_optimizer

        model = ElectraPretrainer(cfg, special_token_ids(str(vocab)))
        model.compile(optimizer=create_optimizer(cfg))
        ds = pretraining_dataset(str(data_dir), cfg, batch)
        model.fit(ds, epochs=1, steps_per_epoch=2, verbose=0, shuffle=False)  # trace + first steps
        start = time.time()
        model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False)
        return steps * batch / (time.time() - start)
    except Exception as e:  # another team's module may be mid-change  # pylint: disable=broad-except
        print(f"note: training-step measurement skipped ({type(e).__name__}: {e})", file=sys.stderr)
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", default="/tmp/electra_data_bench")
    parser.add_argument("--vocab_file", default=None, help="default: learn one (30522 asked, 20k-line sample)")
    parser.add_argument("--num_shards", type=int, default=8)
    parser.add_argument("--reader_steps", type=int, default=200)
    parser.add_argument("--train_steps", type=int, default=5)
    parser.add_argument("--json", default=None, help="where to write the results (default out_dir/bench.json)")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    vocab = Path(args.vocab_file) if args.vocab_file else out / "vocab.txt"
    vocab_s = None
    if not vocab.exists():
        from electra_tf.data.build_vocab import build_vocab

        start = time.time()
        build_vocab([str(f) for f in FILES], 30522, str(vocab), sample_lines=20000)
        vocab_s = round(time.time() - start, 1)
    vocab_size = sum(1 for _ in open(vocab, encoding="utf-8"))

    results = {"corpus_bytes": sum(f.stat().st_size for f in FILES), "vocab_size": vocab_size,
               "vocab_learn_s": vocab_s, "builder": [], "reader": {}, "train": {}}
    for processes in (1, 2):
        results["builder"].append(run_builder(vocab, out / f"shards_p{processes}", processes, 128,
                                              args.num_shards))
    tiny_dir = out / "shards_seq64"
    run_builder(vocab, tiny_dir, 2, 64, args.num_shards)

    from electra_tf.config import ElectraConfig

    tiny = ElectraConfig.from_json(str(REPO / "configs" / "tiny.json")).replace(vocab_size=vocab_size)
    small = ElectraConfig.from_json(str(REPO / "configs" / "small.json")).replace(
        vocab_size=max(vocab_size, 30522))
    for name, cfg, data, batch in (("tiny", tiny, tiny_dir, tiny.train_batch_size),
                                   ("small", small, out / "shards_p2", 32)):
        results["reader"][name] = {"batch": batch, "seq": cfg.max_seq_length,
                                   "examples_per_s": round(reader_rate(data, cfg, batch, args.reader_steps))}
        rate = train_rate(data, cfg, vocab, batch, args.train_steps)
        results["train"][name] = {"batch": batch, "examples_per_s": None if rate is None else round(rate, 1)}

    path = Path(args.json) if args.json else out / "bench.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"corpus: Brown + WikiText-2 valid/test, {results['corpus_bytes']:,} bytes; vocab {vocab_size} tokens")
    print("| builder | wall s | build s | corpus tokens | corpus tokens/s (wall) | (build only) | examples |")
    print("|---|---|---|---|---|---|---|")
    for r in results["builder"]:
        print(f"| {r['processes']} process(es) | {r['wall_s']} | {r['build_s']} | {r['corpus_tokens']:,} | "
              f"{r['corpus_tokens_per_s_wall']:,} | {r['corpus_tokens_per_s_build']:,} | {r['examples']:,} |")
    print("\n| config | batch x seq | reader examples/s | train step consumes examples/s |")
    print("|---|---|---|---|")
    for name in ("tiny", "small"):
        r, t = results["reader"][name], results["train"][name]
        print(f"| {name} | {r['batch']} x {r['seq']} | {r['examples_per_s']:,} | {t['examples_per_s']} |")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
