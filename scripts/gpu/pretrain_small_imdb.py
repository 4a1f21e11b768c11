#!/usr/bin/env python3
"""ELECTRA-Small pre-trained on the IMDB text on a GPU lent for minutes, kept, and continued.

The GPU only pre-trains; everything else (staging, judging) happens on the CPU. Four steps
(scripts/gpu/README.md gives the exact calls):

  stage    (CPU)  the TensorFlow wheels packed in parts (scripts/gpu/stage_tf.sh) and the IMDB text,
                  in .gpu_stage/, each part small enough for one call
  receive  (GPU)  each carried part into $ELECTRA_GPU_DIR (default /tmp/electra_gpu), which a warm
                  machine keeps between calls
  run      (GPU)  vocabulary and shards, then ELECTRA-Small for a wall-clock budget (bf16, XLA,
                  temperature 2); every --snapshot_minutes the weights so far (float16) go to
                  --out in parts of at most --out_part_mib, so a call cut off at its limit still
                  returns the latest. When --model_dir already holds weights, the run continues from
                  them (--init: fresh optimizer, warm-up again, decay to 0 at this run's last step).
  unpack   (CPU)  the returned parts, checked and joined, into --model_dir with a row in its
                  history.json and README.md (steps, tokens, FLOPs, minutes, held-out AUC measured
                  here on the CPU)

Only the standard library is imported before `unpack`, so `receive` and `run` work before
TensorFlow is set up.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAGE = Path(os.environ.get("ELECTRA_GPU_STAGE", REPO / ".gpu_stage"))  # tests stage elsewhere
SHARED = REPO.parent / "shared" / "data"
DEFAULT_CORPUS = (SHARED / "corpus" / "imdb.unsup.txt.gz", SHARED / "corpus" / "imdb.train.txt.gz")
# Held-out text for the discriminator's AUC: the last reviews of imdb/dev.tsv.gz. The first 2,000
# are the rows fine-tuning is scored on, so they stay out of everything here.
HELDOUT_SOURCE = SHARED / "imdb" / "dev.tsv.gz"
HELDOUT_ROWS = 1000
HELDOUT_FILE = "heldout.txt"
DEFAULT_MODEL_DIR = REPO / "models" / "electra-small-imdb"
CALL_MIB = 64  # what one device call may carry, the working tree included
MANIFEST = "snapshot_parts.json"  # in --out: which parts make the newest snapshot
LOG_FILE = "pretrain.log"
HISTORY_FILE = "history.json"

# The recipe (configs/small.json plus these): the paper's ELECTRA-Small, with the sampling
# temperature of the later ELECTRA code, and a warm-up of 1,200 steps (shorter warm-ups let a
# 12-block discriminator collapse on this kind of card).
RECIPE = {"temperature": 2.0, "num_warmup_steps": 1200, "num_train_steps": 200_000}


def say(message: str) -> None:
    print(f"[gpu {time.strftime('%H:%M:%S')}] {message}", flush=True)


def die(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def device_dir() -> Path:
    return Path(os.environ.get("ELECTRA_GPU_DIR", "/tmp/electra_gpu"))


# ---------------------------------------------------------------------------------------- stage
def tracked_mib() -> float:
    """MiB of the files git tracks: they travel with every device call."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    total = sum((REPO / n).stat().st_size for n in names.decode().split("\0") if n and (REPO / n).is_file())
    return total / 2**20


def write_heldout(source: Path, rows: int, target: Path) -> int:
    """The text of the last `rows` reviews of a sentence/label TSV, one document per review."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()[1:]
    reviews = [line.split("\t", 1)[0].strip() for line in lines[-rows:] if line.strip()]
    target.write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
    return len(reviews)


def stage(args) -> None:
    part_mib = args.part_mib or int(CALL_MIB - 2 - tracked_mib())
    if part_mib <= 0:
        die(f"--part_mib {part_mib}: the tracked files leave no room in a call; free the working tree first")
    corpus = [Path(p) for p in (args.corpus or DEFAULT_CORPUS)]
    for path in corpus:
        if not path.is_file():
            die(f"{path} does not exist; pass --corpus (text files, .gz too)")
    for old in STAGE.glob("corpus_*"):
        shutil.rmtree(old)
    STAGE.mkdir(exist_ok=True)
    files = [(p, p.name) for p in corpus]
    # Files are packed into folders of at most part_mib, one folder per call; a larger file is cut.
    limit = int(part_mib * 2**20)
    folders, used = [], limit
    for path, name in files:
        data_left, piece = path.stat().st_size, 0
        with open(path, "rb") as f:
            while data_left:
                if used >= limit:
                    folders.append(STAGE / f"corpus_{len(folders):02d}")
                    folders[-1].mkdir()
                    used = 0
                size = min(data_left, limit - used)
                (folders[-1] / f"{name}.{piece:03d}").write_bytes(f.read(size))
                data_left, used, piece = data_left - size, used + size, piece + 1
        (folders[-1] / f"{name}.sha256").write_text(f"{sha256(path)} {piece}\n")
    say(f"corpus: {', '.join(n for _, n in files)} in {len(folders)} part(s) "
        f"of <= {part_mib} MiB: {', '.join(f.name for f in folders)}")
    if not args.no_tf:
        subprocess.run(["bash", str(REPO / "scripts" / "gpu" / "stage_tf.sh"), str(int(part_mib))], check=True)
    calls = sorted(p.name for p in STAGE.glob("tf_part_*")) + [f.name for f in folders]
    say(f"{len(calls)} receive calls, one per folder: " + " ".join(calls))


# -------------------------------------------------------------------------------------- receive
def receive(args) -> None:
    """Copies the corpus pieces carried in this call into the device folder (TF parts: setup_tf.sh)."""
    if any(STAGE.glob("tf_part_*")):
        subprocess.run(["bash", str(REPO / "scripts" / "gpu" / "setup_tf.sh"), "receive"], check=True)
    target = device_dir() / "corpus"
    target.mkdir(parents=True, exist_ok=True)
    carried = sorted(STAGE.glob("corpus_*/*"))
    for piece in carried:
        shutil.copy2(piece, target / piece.name)
    say(f"received {len(carried)} corpus file(s) into {target}")
    for checksum in sorted(target.glob("*.sha256")):
        name = checksum.name[: -len(".sha256")]
        digest, count = checksum.read_text().split()
        pieces = [target / f"{name}.{i:03d}" for i in range(int(count))]
        if all(p.is_file() for p in pieces) and not (target / name).is_file():
            joined = target / (name + ".tmp")
            with open(joined, "wb") as out:
                for p in pieces:
                    out.write(p.read_bytes())
            if sha256(joined) != digest:
                joined.unlink()
                die(f"{name}: the joined pieces do not match their checksum; stage and send them again")
            joined.rename(target / name)
            for p in pieces:
                p.unlink()
            say(f"joined {name}")


# ------------------------------------------------------------------------------------------ run
def pack_snapshot(folder: Path, out: Path, part_mib: float, slot: str, extra: dict) -> dict:
    """Writes `folder` as a tar in parts of <= part_mib into `out` (slot a or b), then the manifest.

    The manifest is replaced last and names the slot just written; the other slot keeps the
    previous snapshot, so a copy of `out` taken at any moment (a call cut off) has one whole.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=folder.name)
    data = buffer.getvalue()
    for old in out.glob(f"snapshot_{slot}.tar.*"):
        old.unlink()
    size, parts = int(part_mib * 2**20), []
    for i in range(0, max(len(data), 1), size):
        name = f"snapshot_{slot}.tar.{i // size}"
        chunk = data[i:i + size]
        (out / (name + ".tmp")).write_bytes(chunk)
        os.replace(out / (name + ".tmp"), out / name)
        parts.append({"name": name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    manifest = {"slot": slot, "folder": folder.name, "sha256": hashlib.sha256(data).hexdigest(),
                "parts": parts, **extra}
    (out / (MANIFEST + ".tmp")).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(out / (MANIFEST + ".tmp"), out / MANIFEST)
    return manifest


def gpu_name() -> str:
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30).stdout.strip().splitlines()
        return names[0] if names else "no GPU"
    except (OSError, subprocess.SubprocessError):
        return "no GPU"


def python_module(module: str, *flags: str, log=None) -> None:
    command = [sys.executable, "-m", module, *flags]
    say(" ".join(command[1:]))
    result = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT if log else None)
    if result.returncode:
        die(f"{module} failed (exit {result.returncode}); its output is above")


def model_dir_has_weights(model_dir: Path) -> bool:
    return all((model_dir / n).is_file() for n in ("config.json", "vocab.txt", "discriminator.weights.h5"))


def run(args) -> None:
    started = time.time()
    out = Path(args.out or os.environ.get("OUT") or device_dir() / "out")
    out.mkdir(parents=True, exist_ok=True)
    if args.corpus:
        corpus = [Path(p) for p in args.corpus.split(",")]
        missing = [str(p) for p in corpus if not p.is_file()]
        if missing:
            die(f"--corpus {', '.join(missing)} does not exist; pass text files (.gz too), comma-separated")
    else:
        corpus_dir = Path(args.corpus_dir) if args.corpus_dir else device_dir() / "corpus"
        # The default files in the order docs/domain_study.md learns its vocabulary from them.
        order = [p.name for p in DEFAULT_CORPUS]
        corpus = sorted((p for p in corpus_dir.glob("*") if p.suffix in (".gz", ".txt")),
                        key=lambda p: (order.index(p.name) if p.name in order else len(order), p.name))
        if not corpus:
            die(f"{corpus_dir} has no corpus; run `stage` here and `receive` there first, or pass --corpus")
    check = subprocess.run([sys.executable, "-c", "import tensorflow, keras_hub, tensorflow_text"],
                           capture_output=True, text=True)
    if check.returncode:
        die("TensorFlow is not importable here (" + (check.stderr.strip().splitlines() or ["?"])[-1]
            + "); run scripts/gpu/setup_tf.sh install and source its env.sh first")
    work = Path(args.work or device_dir() / "run")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    model_dir = Path(args.model_dir)
    continuing = model_dir_has_weights(model_dir)
    corpus_flag = ",".join(str(p) for p in corpus)

    # 1. vocabulary (a continued model keeps its own) and shards
    if continuing:
        vocab = model_dir / "vocab.txt"
        say(f"continuing from {model_dir} (its vocabulary and weights; fresh optimizer and warm-up)")
    else:
        vocab = work / "vocab.txt"
        python_module("electra_tf.data.build_vocab", "--corpus", corpus_flag, "--vocab_size", str(args.vocab_size),
                      "--output_file", str(vocab))
    python_module("electra_tf.data.build_pretraining_data", "--corpus", corpus_flag, "--vocab_file", str(vocab),
                  "--output_dir", str(work / "shards"), "--max_seq_length", str(args.seq), "--num_shards",
                  str(max(16, args.processes)), "--num_processes", str(args.processes), "--progress=false")

    # 2. the config: the shipped one plus the recipe (a continued model keeps its own shape)
    config = json.loads((REPO / "configs" / f"{args.config}.json").read_text()) if "/" not in args.config \
        else json.loads(Path(args.config).read_text())
    config.update(RECIPE)
    config["num_warmup_steps"] = args.warmup
    config["vocab_size"] = sum(1 for _ in open(vocab, encoding="utf-8"))
    config["max_seq_length"] = args.seq
    config_path = work / "config.json"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    # 3. pre-training for what is left of the budget, snapshots packed into --out as they come
    left = args.budget_minutes - (time.time() - started) / 60.0 - args.reserve_minutes
    if left <= 0:
        die(f"the data took the whole --budget_minutes {args.budget_minutes:g}; give it more")
    snapshots = work / "snapshots"
    flags = ["--config", str(config_path), "--data_dir", str(work / "shards"), "--vocab_file", str(vocab),
             "--output_dir", str(work / "pretrain"), "--batch_size", str(args.batch),
             "--train_minutes", f"{left:.3f}", "--snapshot_dir", str(snapshots),
             "--snapshot_minutes", str(args.snapshot_minutes), "--snapshot_dtype", "fp16",
             "--log_every", str(args.log_every), "--save_every", "0", "--verbose", "0", *args.pretrain_flags.split()]
    if continuing:
        flags += ["--init", str(model_dir)]
    env = dict(os.environ)
    if args.xla_flags:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + args.xla_flags).strip()
    extra = {"device": gpu_name(), "continued_from": str(model_dir) if continuing else None,
             "budget_minutes": args.budget_minutes, "xla_flags": env.get("XLA_FLAGS", ""),
             "pretrain_flags": args.pretrain_flags, "date": datetime.date.today().isoformat(),
             "batch_size": args.batch, "seq": args.seq}
    say(f"pre-training for {left:.2f} minutes on {extra['device']}")
    command = [sys.executable, "-m", "electra_tf.pretrain", *flags]
    say(" ".join(command[1:]))
    packed, slot = None, "a"
    with open(out / LOG_FILE, "ab") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        os.set_blocking(process.stdout.fileno(), False)

        def pump():
            chunk = process.stdout.read()
            if chunk:
                log.write(chunk)
                log.flush()
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()

        def pack_newest():
            nonlocal packed, slot
            latest = snapshots / "latest"
            if not latest.is_file():
                return
            name = latest.read_text().strip()
            if name == packed or not (snapshots / name / "snapshot.json").is_file():
                return
            extra["minutes_since_start"] = round((time.time() - started) / 60.0, 2)
            pack_snapshot(snapshots / name, out, args.out_part_mib, slot, extra)
            say(f"packed {name} into {out} (slot {slot})")
            packed, slot = name, "b" if slot == "a" else "a"

        while process.poll() is None:
            time.sleep(2)
            pump()
            pack_newest()
        pump()
        pack_newest()
    if process.returncode:
        die(f"pre-training failed (exit {process.returncode}); the log is {out / LOG_FILE}")
    say(f"done in {(time.time() - started) / 60:.2f} minutes; newest snapshot {packed} in {out}")


# --------------------------------------------------------------------------------------- unpack
def read_packed(files: Path, target: Path) -> dict:
    """Checks and joins the parts that `run` returned; extracts the snapshot into `target`."""
    manifest_path = files / MANIFEST
    if not manifest_path.is_file():
        die(f"{files} has no {MANIFEST}; pass the folder the device call's files came back to")
    manifest = json.loads(manifest_path.read_text())
    data = bytearray()
    for part in manifest["parts"]:
        path = files / part["name"]
        if not path.is_file():
            die(f"{path} is missing; the call's files are incomplete (fetch them again)")
        chunk = path.read_bytes()
        if hashlib.sha256(chunk).hexdigest() != part["sha256"]:
            die(f"{path} does not match its checksum in {MANIFEST}; fetch the call's files again")
        data += chunk
    if hashlib.sha256(bytes(data)).hexdigest() != manifest["sha256"]:
        die(f"the joined parts of {files} do not match their checksum")
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        for member in tar.getmembers():
            if member.name.startswith(("/", "..")) or ".." in Path(member.name).parts:
                die(f"{member.name}: unexpected path in the snapshot archive")
        tar.extractall(target, filter="data")
    return manifest


def heldout_auc(model_dir: Path, heldout_dir: Path, batch: int = 64, seed: int = 0) -> dict:
    """The discriminator's held-out metrics of a model directory, on the CPU (fixed sampling seed)."""
    import keras

    from electra_tf.config import ElectraConfig
    from electra_tf.data.reader import pretraining_dataset
    from electra_tf.pretrain.pretrainer_loading import load_pretrainer

    keras.utils.set_random_seed(seed)
    model = load_pretrainer(str(model_dir))
    model.compile(optimizer="sgd")
    config = ElectraConfig.from_json(str(model_dir / "config.json"))
    data = pretraining_dataset(str(heldout_dir), config, batch, training=False)
    return {k: round(float(v), 4) for k, v in model.evaluate(data, verbose=0, return_dict=True).items()}


def unpack(args) -> None:
    files, model_dir = Path(args.files), Path(args.model_dir)
    scratch = model_dir.parent / (model_dir.name + ".unpack.tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        manifest = read_packed(files, scratch)
        snapshot_dir = scratch / manifest["folder"]
        record = json.loads((snapshot_dir / "snapshot.json").read_text())
        history_path = model_dir / HISTORY_FILE
        history = json.loads(history_path.read_text()) if history_path.is_file() else []
        if manifest.get("continued_from") and not history:
            die(f"the run continued from a model, but {model_dir} has no {HISTORY_FILE} to add to")
        if not manifest.get("continued_from") and history:
            die(f"the run started from scratch, but {model_dir} already holds a model; unpack into a new "
                f"--model_dir")
        heldout = None
        if not args.no_heldout:
            write_heldout(Path(args.heldout_source), args.heldout_rows, scratch / HELDOUT_FILE)
            python_module("electra_tf.data.build_pretraining_data", "--corpus", str(scratch / HELDOUT_FILE),
                          "--vocab_file", str(snapshot_dir / "vocab.txt"), "--output_dir", str(scratch / "heldout"),
                          "--max_seq_length", str(manifest["seq"]), "--num_shards", "1", "--progress=false")
            heldout = heldout_auc(snapshot_dir, scratch / "heldout")
        row = run_row(manifest, record, history, snapshot_dir, heldout)
        model_dir.mkdir(parents=True, exist_ok=True)
        for item in snapshot_dir.iterdir():
            target = model_dir / ("last_snapshot.json" if item.name == "snapshot.json" else item.name)
            shutil.copy2(item, target)
        history.append(row)
        (model_dir / HISTORY_FILE).write_text(json.dumps(history, indent=2, sort_keys=True) + "\n")
        (model_dir / "README.md").write_text(model_readme(history))
        say(f"{model_dir}: step {row['steps']} of this run, {row['cumulative_steps']} in all; "
            f"held-out AUC {row['heldout_disc_auc']}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_row(manifest: dict, record: dict, history: list, snapshot_dir: Path, heldout) -> dict:
    from electra_tf.config import ElectraConfig
    from electra_tf.flops import total_train_flops

    config = ElectraConfig.from_json(str(snapshot_dir / "config.json"))
    steps, batch, seq = int(record["step"]), int(manifest["batch_size"]), int(manifest["seq"])
    flops = total_train_flops(config, batch, steps, seq)
    before = history[-1] if history else {"cumulative_steps": 0, "cumulative_tokens": 0, "cumulative_flops": 0.0}
    budget = record.get("time_budget") or {}
    return {
        "date": manifest["date"], "device": manifest["device"], "steps": steps,
        "cumulative_steps": before["cumulative_steps"] + steps,
        "tokens": steps * batch * seq, "cumulative_tokens": before["cumulative_tokens"] + steps * batch * seq,
        "flops": flops, "cumulative_flops": before["cumulative_flops"] + flops,
        "minutes_trained": record.get("minutes"), "minutes_on_device": manifest.get("minutes_since_start"),
        "first_step_seconds": budget.get("first_step_seconds"), "steps_per_second": budget.get("steps_per_second"),
        "xla_flags": manifest.get("xla_flags"), "train_metrics": record.get("train_metrics"),
        "heldout": heldout, "heldout_disc_auc": None if heldout is None else heldout.get("disc_auc"),
        "complete": record.get("train_steps") == steps,
    }


def model_readme(history: list) -> str:
    last = history[-1]

    def cell(value, form="{:,}"):
        return "-" if value is None else form.format(value)

    rows = "\n".join(
        f"| {r['date']} | {r['device']} | {r['steps']:,} | {r['cumulative_steps']:,} | {r['cumulative_tokens']:,} | "
        f"{r['cumulative_flops']:.2e} | {cell(r['minutes_trained'], '{:.1f}')} | "
        f"{cell(r['first_step_seconds'], '{:.0f}')} | {cell(r['steps_per_second'], '{:.1f}')} | "
        f"{cell(r['heldout_disc_auc'], '{:.3f}')} |" for r in history)
    return f"""# ELECTRA-Small pre-trained on IMDB reviews

An ELECTRA-Small discriminator and generator (`configs/small.json`: 12 blocks of 256, generator a
quarter as wide) pre-trained from scratch on the IMDB review text (`imdb.unsup` and `imdb.train`,
about 75,000 reviews) with an 8,000-piece WordPiece vocabulary learned from it, 128 tokens per
example, batch 128, bf16 with XLA, sampling temperature 2, warm-up 1,200 steps, linear decay to 0
at each run's last step. Weights are stored in float16 (the tools load them into float32).

Use it like any model directory:

```bash
python -m electra_tf.finetune --init models/electra-small-imdb --train_file reviews.csv --output_dir runs/imdb
```

Made by `scripts/gpu/pretrain_small_imdb.py` (scripts/gpu/README.md), on GPUs lent for minutes:
each row is one run; a later run continues from the weights here with a fresh optimizer, its
own warm-up and decay. Held-out AUC: the discriminator's replaced-token AUC on the last 1,000
reviews of the IMDB dev split, measured on a CPU after the run.

| date | GPU | steps | steps in all | tokens in all | train FLOPs in all | minutes trained | first step (s, XLA compile) | steps/s | held-out AUC |
|---|---|---|---|---|---|---|---|---|---|
{rows}

Newest: {last['cumulative_steps']:,} steps in all; the last run {'reached' if last['complete'] else 'was cut before'} its
planned end.
"""


# ----------------------------------------------------------------------------------------- main
def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("stage", help="CPU: pack TensorFlow and the corpus into .gpu_stage/ parts")
    p.add_argument("--part_mib", type=float, default=None,
                   help=f"MiB per part (default: {CALL_MIB} MiB less the tracked files and 2 MiB of room)")
    p.add_argument("--corpus", nargs="+", default=None, help="text files (default: the IMDB text in ../shared)")
    p.add_argument("--no_tf", action="store_true", help="stage the corpus only")
    verbs.add_parser("receive", help="GPU: keep the parts carried in this call")
    p = verbs.add_parser("run", help="GPU: shards, pre-training, snapshots into --out")
    p.add_argument("--out", default=None, help="folder whose files come back (default $OUT)")
    p.add_argument("--work", default=None, help="scratch folder (default $ELECTRA_GPU_DIR/run)")
    p.add_argument("--corpus_dir", default=None, help="what `receive` joined (default $ELECTRA_GPU_DIR/corpus)")
    p.add_argument("--corpus", default=None, help="instead: comma-separated text files (.gz too)")
    p.add_argument("--model_dir", default=str(DEFAULT_MODEL_DIR), help="continue from it when it holds weights")
    p.add_argument("--config", default="small", help="a shipped config's name or a JSON file")
    p.add_argument("--budget_minutes", type=float, default=7.0, help="the whole command's wall clock")
    p.add_argument("--reserve_minutes", type=float, default=0.6,
                   help="kept for start-up before training and the last snapshot")
    p.add_argument("--vocab_size", type=int, default=8000)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--warmup", type=int, default=RECIPE["num_warmup_steps"])
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--log_every", type=int, default=500)
    p.add_argument("--snapshot_minutes", type=float, default=2.0)
    p.add_argument("--out_part_mib", type=float, default=15.0, help="at most 16 MiB come back per file")
    p.add_argument("--pretrain_flags", default="--mixed_precision bf16 --jit_compile")
    p.add_argument("--xla_flags", default="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false",
                   help="added to XLA_FLAGS: GEMM autotuning and Triton GEMMs off cut the first step's compile")
    p = verbs.add_parser("unpack", help="CPU: the returned parts into --model_dir, with its history row")
    p.add_argument("--files", required=True, help="the folder the device call's files came back to")
    p.add_argument("--model_dir", default=str(DEFAULT_MODEL_DIR))
    p.add_argument("--heldout_source", default=str(HELDOUT_SOURCE), help="the held-out text's TSV (its last rows)")
    p.add_argument("--heldout_rows", type=int, default=HELDOUT_ROWS)
    p.add_argument("--no_heldout", action="store_true", help="skip the held-out AUC")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    {"stage": stage, "receive": receive, "run": run, "unpack": unpack}[args.verb](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
