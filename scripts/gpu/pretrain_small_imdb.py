#!/usr/bin/env python3
"""ELECTRA-Small pre-trained on the IMDB text on a GPU lent for minutes, kept, and continued.

The GPU only trains; everything else (vocabulary, shards, packing, judging) happens on the CPU
(scripts/gpu/README.md gives the exact calls):

  stage    (CPU)  the vocabulary (a model that continues keeps its own) and the shards built here,
                  packed as tar.xz; the TensorFlow wheels packed (scripts/gpu/stage_tf.sh); both cut
                  into .gpu_stage/ folders that fill one call each (the data in the room the last
                  TensorFlow part leaves), checksummed; the calls printed with what each carries
  receive  (GPU)  each carried part into $ELECTRA_GPU_DIR (default /tmp/electra_gpu), which a warm
                  machine keeps between calls; the data unpacked once all its pieces are there
  run      (GPU)  ELECTRA-Small on the carried shards for a wall-clock budget (bf16, XLA,
                  temperature 2), the compiled step kept in TensorFlow's persistent XLA cache in
                  $ELECTRA_GPU_DIR; every --snapshot_minutes the weights so far (float16) go to
                  --out in parts of at most --out_part_mib, so a call cut off at its limit still
                  returns the latest. When --model_dir already holds weights, the run continues from
                  them (--init: fresh optimizer, warm-up again, decay to 0 at this run's last step).
                  --next_minutes plans the run for this call and a next one on the same machine:
                  this call pauses right after its last checkpoint, the next call's `run` resumes it.
  unpack   (CPU)  the returned parts, checked and joined, into --model_dir with a row in its
                  history.json and README.md (steps, tokens, FLOPs, minutes, held-out AUC measured
                  here on the CPU)
  profile  (any)  the first step cut into its parts (scripts/gpu/step_timing.py)
  bench    (GPU)  seconds to the first execution and examples/s by batch size, in a few minutes

Only the standard library is imported before `unpack`, `profile` and `bench`, so `receive` and
`run` work before TensorFlow is set up.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import importlib.util
import io
import json
import os
import re
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
DATA_RECORD = "data.json"  # in the staged data folder: what the shards were built from
DATA_PARTS = "data_parts.json"  # in each data_NN folder: the archive's and its pieces' sha256
RUN_STATE = "call_state.json"  # in run's work folder: the pre-training command and the calls so far
MAX_RETURNED_FILES = 8  # what one device call returns from $OUT

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


def build_data(corpus: list, model_dir: Path, work: Path, vocab_size: int, seq: int, processes: int) -> dict:
    """Vocabulary (a model that continues keeps its own) and shards in `work`; returns data.json's record."""
    started = time.time()
    work.mkdir(parents=True, exist_ok=True)
    corpus_flag = ",".join(str(p) for p in corpus)
    vocab = work / "vocab.txt"
    if model_dir_has_weights(model_dir):
        shutil.copy2(model_dir / "vocab.txt", vocab)
        say(f"vocabulary: {model_dir / 'vocab.txt'} (the model continues with its own)")
    else:
        python_module("electra_tf.data.build_vocab", "--corpus", corpus_flag, "--vocab_size", str(vocab_size),
                      "--output_file", str(vocab))
    vocab_seconds = time.time() - started
    python_module("electra_tf.data.build_pretraining_data", "--corpus", corpus_flag, "--vocab_file", str(vocab),
                  "--output_dir", str(work / "shards"), "--max_seq_length", str(seq), "--num_shards",
                  str(max(16, processes)), "--num_processes", str(processes), "--progress=false")
    manifest = json.loads((work / "shards" / "manifest.json").read_text())
    record = {"seq": seq, "vocab_sha256": sha256(vocab), "vocab_size": sum(1 for _ in open(vocab, encoding="utf-8")),
              "examples": manifest.get("num_examples"), "corpus": [p.name for p in corpus],
              "continues": str(model_dir) if model_dir_has_weights(model_dir) else None,
              "vocab_seconds": round(vocab_seconds, 1),
              "shards_seconds": round(time.time() - started - vocab_seconds, 1)}
    (work / DATA_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def pack_data(data: Path, target: Path) -> Path:
    """`data` (vocab.txt, shards/, data.json) as one tar.xz; returns its path."""
    archive = target / "data.tar.xz"
    with open(archive.with_suffix(".tmp"), "wb") as raw:
        tar_cmd = ["tar", "-C", str(data.parent), "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
                   "--mtime=@1735689600", "-cf", "-", data.name]
        tar = subprocess.Popen(tar_cmd, stdout=subprocess.PIPE)
        subprocess.run(["xz", "-T2", "-6", "-c"], stdin=tar.stdout, stdout=raw, check=True)
        if tar.wait():
            die(f"packing {data} failed (tar exit {tar.returncode})")
    os.replace(archive.with_suffix(".tmp"), archive)
    return archive


def plan_calls(tf_parts: list, data_bytes: int, part_bytes: int) -> list:
    """[(folders one call carries, data bytes in its data folder)] for [(tf part folder, bytes)]:
    the TensorFlow parts one per call, the data archive first in the room the last TensorFlow
    part leaves, then in whole parts."""
    calls = [([name], 0) for name, _ in tf_parts]
    room = part_bytes - tf_parts[-1][1] if tf_parts else 0
    left = data_bytes
    if room > 0 and left:
        calls[-1] = ([tf_parts[-1][0], "data_00"], min(room, left))
        left -= calls[-1][1]
    while left > 0:
        size = min(part_bytes, left)
        calls.append(([f"data_{sum(1 for c in calls if c[1]):02d}"], size))
        left -= size
    return calls


def stage(args) -> None:
    part_mib = args.part_mib or int(CALL_MIB - 2 - tracked_mib())
    if part_mib <= 0:
        die(f"--part_mib {part_mib}: the tracked files leave no room in a call; free the working tree first")
    corpus = [Path(p) for p in (args.corpus or DEFAULT_CORPUS)]
    for path in corpus:
        if not path.is_file():
            die(f"{path} does not exist; pass --corpus (text files, .gz too)")
    if not shutil.which("xz"):
        die("xz is not installed here; install it (apt-get install xz-utils) and stage again")
    STAGE.mkdir(exist_ok=True)
    for old in [*STAGE.glob("data_[0-9]*"), *STAGE.glob("corpus_*"), STAGE / "data", STAGE / "data.tar.xz"]:
        shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)
    # 1. vocabulary and shards, here on the CPU (the GPU machine only trains)
    record = build_data(corpus, Path(args.model_dir), STAGE / "data", args.vocab_size, args.seq, args.processes)
    say(f"data: {record['examples']:,} examples of {args.seq} tokens, {record['vocab_size']:,}-piece vocabulary "
        f"(vocabulary {record['vocab_seconds']:.0f}s, shards {record['shards_seconds']:.0f}s)")
    # 2. TensorFlow in parts of part_mib (stage_tf.sh), unless told not to
    if not args.no_tf:
        subprocess.run(["bash", str(REPO / "scripts" / "gpu" / "stage_tf.sh"), str(int(part_mib))], check=True)
    tf_parts = sorted((p.name, next(p.glob("tf.tar.xz.*")).stat().st_size) for p in STAGE.glob("tf_part_*"))
    # 3. the data packed, cut into the room the calls leave, checksummed
    t0 = time.time()
    archive = pack_data(STAGE / "data", STAGE)
    data = archive.read_bytes()
    calls = plan_calls(tf_parts, len(data), int(part_mib * 2**20))
    offset, pieces = 0, []
    for folders, size in calls:
        if size:
            folder = STAGE / folders[-1]
            folder.mkdir()
            name = f"data.tar.xz.{len(pieces):03d}"
            (folder / name).write_bytes(data[offset:offset + size])
            pieces.append({"name": name, "sha256": hashlib.sha256(data[offset:offset + size]).hexdigest()})
            offset += size
    listing = json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "pieces": pieces},
                         indent=2, sort_keys=True) + "\n"
    for folders, size in calls:
        if size:
            (STAGE / folders[-1] / DATA_PARTS).write_text(listing)
    say(f"data: {len(data) / 2**20:.1f} MiB packed (xz, {time.time() - t0:.0f}s) in {len(pieces)} piece(s)")
    (STAGE / "calls.json").write_text(json.dumps([folders for folders, _ in calls], indent=1) + "\n")
    say(f"{len(calls)} calls, each carrying its folders (the last one runs `install` and `run`):")
    for i, (folders, _) in enumerate(calls):
        last = "   <- with run" if i == len(calls) - 1 else ""
        print("  " + json.dumps([f".gpu_stage/{f}" for f in folders]) + last)


# -------------------------------------------------------------------------------------- receive
def receive(args) -> None:
    """Keeps the data pieces carried in this call; joins and unpacks them once all are here.
    TensorFlow's parts go to setup_tf.sh."""
    if any(STAGE.glob("tf_part_*")):
        subprocess.run(["bash", str(REPO / "scripts" / "gpu" / "setup_tf.sh"), "receive"], check=True)
    parts = device_dir() / "data_parts"
    carried = sorted(STAGE.glob("data_[0-9]*/*"))
    if not carried and not any(STAGE.glob("tf_part_*")):
        die("this call carries no .gpu_stage/tf_part_NN or data_NN folder; name one in carry "
            "(stage prints them)")
    listings = sorted(p for p in carried if p.name == DATA_PARTS)
    if listings:
        parts.mkdir(parents=True, exist_ok=True)
        listing = json.loads(listings[0].read_text())
        if (parts / DATA_PARTS).is_file() and json.loads((parts / DATA_PARTS).read_text()) != listing:
            say("these data pieces belong to a new staging; dropping the old ones")
            shutil.rmtree(parts)
            parts.mkdir(parents=True)
        (parts / DATA_PARTS).write_text(listings[0].read_text())
        wanted = {p["name"]: p["sha256"] for p in listing["pieces"]}
        for piece in carried:
            if piece.name == DATA_PARTS:
                continue
            if piece.name not in wanted:
                die(f"{piece} is not listed in {DATA_PARTS}; stage again and carry the new folders")
            if sha256(piece) != wanted[piece.name]:
                die(f"{piece} is damaged (sha256 differs from {DATA_PARTS}); carry it again")
            shutil.copy2(piece, parts / piece.name)
        have = [p["name"] for p in listing["pieces"] if (parts / p["name"]).is_file()]
        say(f"data: {len(have)} of {len(listing['pieces'])} piece(s) here")
        if len(have) == len(listing["pieces"]):
            unpack_data(parts, listing)


def unpack_data(parts: Path, listing: dict) -> None:
    """Joins the pieces, checks the archive and extracts it into $ELECTRA_GPU_DIR/data."""
    target = device_dir() / "data"
    marker = target / ".archive_sha256"
    if marker.is_file() and marker.read_text().strip() == listing["sha256"]:
        say(f"data: {target} already holds this archive")
        return
    digest = hashlib.sha256()
    joined = parts / "data.tar.xz"
    with open(joined, "wb") as out:
        for piece in listing["pieces"]:
            chunk = (parts / piece["name"]).read_bytes()
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != listing["sha256"]:
        joined.unlink()
        die("the joined data pieces do not match their checksum; stage and carry them again")
    scratch = device_dir() / "data.tmp"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    with tarfile.open(joined, "r:xz") as tar:
        tar.extractall(scratch, filter="data")
    (scratch / "data" / ".archive_sha256").write_text(listing["sha256"] + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(scratch / "data", target)
    shutil.rmtree(scratch)
    joined.unlink()
    record = json.loads((target / DATA_RECORD).read_text())
    say(f"data: unpacked into {target} ({record['examples']:,} examples)")


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


def newest_checkpoint(folder: Path):
    """(step, path) of the newest complete checkpoint pretrain wrote into `folder`, or None."""
    found = sorted((int(m.group(1)), p) for p in folder.glob("ckpt-*.weights.h5")
                   if (m := re.match(r"^ckpt-(\d{8})\.weights\.h5$", p.name)))
    return found[-1] if found else None


def stop_reason(now: float, deadline: float, hard_end: float, newest_step, fresh: bool, decided: dict,
                save_every: int):
    """Why a call's pre-training must stop at `now`, or None.

    Args:
        now: the time (seconds since the epoch).
        deadline: when this call's training must have stopped (its budget less the time packing takes).
        hard_end: the end of the call's whole budget.
        newest_step: the step of the newest checkpoint, or None.
        fresh: whether that checkpoint appeared since the last look (the run stops right after one).
        decided: pretrain's time_budget.json (`end_step`, `steps_per_second`), {} before it is written.
        save_every: steps between checkpoints.
    """
    last = decided.get("end_step")
    if last and newest_step is not None and newest_step >= last:
        # Its training is over and it is writing its final model, which takes seconds: stopping it
        # would leave a finished run for the next call to resume for nothing. Only the budget's end stops it.
        return "this call's time is up" if now >= hard_end else None
    if now >= deadline:
        return "this call's time is up"
    rate = decided.get("steps_per_second")
    if not fresh or not rate:
        return None  # no new checkpoint to stop after, or the speed is not measured yet
    if last and now + (last - newest_step) / rate <= deadline:
        return None  # it ends by itself in time
    interval = save_every / rate
    if now + interval + 5.0 >= deadline:
        return f"the next checkpoint would land after this call's end (one every {interval:.1f}s)"
    return None


def return_cache(cache: Path, out: Path, part_mib: float) -> None:
    """Copies the compilation cache's entries into `out` where they fit what a call returns."""
    entries = sorted(p for p in cache.glob("*") if p.is_file()) if cache.is_dir() else []
    if not entries:
        return
    room = MAX_RETURNED_FILES - sum(1 for p in out.rglob("*") if p.is_file() and p.parent != out / "xla_cache")
    target = out / "xla_cache"
    returned, kept = [], []
    for entry in entries:
        if entry.stat().st_size <= part_mib * 2**20 and len(returned) < room:
            target.mkdir(exist_ok=True)
            shutil.copy2(entry, target / entry.name)
            returned.append(entry)
        else:
            kept.append(entry)
    mib = lambda files: sum(p.stat().st_size for p in files) / 2**20  # noqa: E731
    say(f"compilation cache: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} ({mib(entries):.1f} MiB) in "
        f"{cache}; {len(returned)} returned in {target}" + (
            f", {len(kept)} ({mib(kept):.1f} MiB) too large or too many to return (at most "
            f"{MAX_RETURNED_FILES} files of {part_mib:g} MiB), kept on this machine for its next call" if kept else ""))


def run(args) -> None:
    started = time.time()
    out = Path(args.out or os.environ.get("OUT") or device_dir() / "out")
    out.mkdir(parents=True, exist_ok=True)
    # Found, not imported: an import here would cost the call seconds that pre-training pays again.
    missing = [m for m in ("tensorflow", "keras_hub", "tensorflow_text") if importlib.util.find_spec(m) is None]
    if missing:
        die(f"{', '.join(missing)} not found here; run scripts/gpu/setup_tf.sh install and source its env.sh first")
    work = Path(args.work or device_dir() / "run")
    model_dir = Path(args.model_dir)
    state_path = work / RUN_STATE
    state = json.loads(state_path.read_text()) if state_path.is_file() and not args.fresh else None
    checkpoint = newest_checkpoint(work / "pretrain" / "checkpoints") if state else None
    if state and state.get("finished"):
        say(f"the run in {work} finished at step {state.get('step')} (its call returned it); starting a new one")
    if state and checkpoint and not state.get("finished"):
        # 1'. a previous call on this machine paused the run: the same pre-training command resumes it
        flags, extra = state["flags"], state["extra"]
        say(f"resuming the run in {work} from its checkpoint at step {checkpoint[0]} (paused by the previous "
            f"call); its last step and learning-rate decay stay as that call decided")
    else:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        continuing = model_dir_has_weights(model_dir)
        # 1. vocabulary and shards: carried (built by `stage` on the CPU), or built here from --corpus
        if args.corpus:
            corpus = [Path(p) for p in args.corpus.split(",")]
            missing = [str(p) for p in corpus if not p.is_file()]
            if missing:
                die(f"--corpus {', '.join(missing)} does not exist; pass text files (.gz too), comma-separated")
            data = work / "data"
            build_data(corpus, model_dir, data, args.vocab_size, args.seq, args.processes)
        else:
            data = Path(args.data or device_dir() / "data")
            if not (data / DATA_RECORD).is_file():
                die(f"{data} holds no staged data ({DATA_RECORD}); run `stage` on the CPU and carry its folders "
                    f"with `receive` here, or pass --corpus to build the data on this machine")
        record = json.loads((data / DATA_RECORD).read_text())
        vocab = data / "vocab.txt"
        if continuing and sha256(model_dir / "vocab.txt") != record["vocab_sha256"]:
            die(f"the shards in {data} were built with another vocabulary than {model_dir}/vocab.txt; "
                f"stage again (stage builds them with the model's vocabulary)")
        if record["seq"] != args.seq:
            die(f"the shards in {data} hold {record['seq']} tokens an example, not --seq {args.seq}; "
                f"stage again with --seq {args.seq}")
        if continuing:
            say(f"continuing from {model_dir} (its vocabulary and weights; fresh optimizer and warm-up)")

        # 2. the config: the shipped one plus the recipe (a continued model keeps its own shape)
        config = json.loads((REPO / "configs" / f"{args.config}.json").read_text()) if "/" not in args.config \
            else json.loads(Path(args.config).read_text())
        config.update(RECIPE)
        config["num_warmup_steps"] = args.warmup
        config["vocab_size"] = record["vocab_size"]
        config["max_seq_length"] = args.seq
        config_path = work / "config.json"
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

        # 3. the pre-training command: training for what is left of this call's budget plus
        # --next_minutes that a next call on this machine trains (this call pauses after the
        # checkpoint that lands last before its end; the next one resumes towards the same last step)
        left = args.budget_minutes - (time.time() - started) / 60.0 - args.reserve_minutes
        if left <= 0:
            die(f"the data took the whole --budget_minutes {args.budget_minutes:g}; give it more")
        save_every = args.save_every or max(1, round(128_000 / args.batch))
        flags = ["--config", str(config_path), "--data_dir", str(data / "shards"), "--vocab_file", str(vocab),
                 "--output_dir", str(work / "pretrain"), "--batch_size", str(args.batch),
                 "--train_minutes", f"{left + args.next_minutes:.3f}", "--snapshot_dir", str(work / "snapshots"),
                 "--snapshot_minutes", str(args.snapshot_minutes), "--snapshot_dtype", "fp16",
                 "--log_every", str(args.log_every), "--save_every", str(save_every if args.next_minutes else 0),
                 "--keep_checkpoints", "2", "--verbose", "0", *args.pretrain_flags.split()]
        if continuing:
            flags += ["--init", str(model_dir)]
        extra = {"device": gpu_name(), "continued_from": str(model_dir) if continuing else None,
                 "budget_minutes": args.budget_minutes, "next_minutes": args.next_minutes,
                 "xla_flags": args.xla_flags, "pretrain_flags": args.pretrain_flags,
                 "date": datetime.date.today().isoformat(), "batch_size": args.batch, "seq": args.seq}
        say(f"pre-training for {left:.2f} minutes on {extra['device']}"
            + (f", planned with {args.next_minutes:g} more in the next call" if args.next_minutes else ""))
        state = {"flags": flags, "extra": extra, "xla_flags": args.xla_flags, "finished": False, "calls": []}
    write_json(state_path, state)

    env = dict(os.environ)
    xla_flags = state.get("xla_flags") or ""  # what the run began with: a resumed run compiles alike
    if xla_flags:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + xla_flags).strip()
    cache = Path(args.xla_cache) if args.xla_cache else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
        env["TF_XLA_FLAGS"] = (env.get("TF_XLA_FLAGS", "") + f" --tf_xla_persistent_cache_directory={cache}").strip()
        say(f"compilation cache: {cache} ({sum(1 for _ in cache.glob('*'))} entries before this call)")
    extra["xla_flags"] = env.get("XLA_FLAGS", "")
    command = [sys.executable, "-m", "electra_tf.pretrain", *flags]
    say(" ".join(command[1:]))
    snapshots, checkpoints = work / "snapshots", work / "pretrain" / "checkpoints"
    packed, slot = None, "a"
    # This call ends by `deadline`: pre-training that would run past it is stopped right after the
    # checkpoint that lands last before it (the next call resumes from there).
    deadline = started + args.budget_minutes * 60.0 - args.pack_seconds
    seen, stopped = {}, None
    save_every = int(flags[flags.index("--save_every") + 1]) or 10**9
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

        def should_stop(now: float):
            newest = newest_checkpoint(checkpoints)
            fresh = newest is not None and newest[0] not in seen
            if fresh:
                seen[newest[0]] = now
            budget = work / "pretrain" / "time_budget.json"
            decided = json.loads(budget.read_text()) if budget.is_file() else {}
            return stop_reason(now, deadline, started + args.budget_minutes * 60.0, newest and newest[0], fresh,
                               decided, save_every)

        while process.poll() is None:
            time.sleep(0.5)
            pump()
            pack_newest()
            why = should_stop(time.time())
            if why and process.poll() is None:
                stopped = why
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        pump()
        pack_newest()
    newest = newest_checkpoint(checkpoints)
    state["calls"].append({"date": datetime.datetime.now().isoformat(timespec="seconds"),
                           "minutes": round((time.time() - started) / 60.0, 2),
                           "checkpoint_step": newest[0] if newest else None, "stopped": stopped})
    if stopped:
        write_json(state_path, state)
        if cache:
            return_cache(cache, out, args.out_part_mib)
        where = f"its checkpoint at step {newest[0]}" if newest else "no checkpoint (nothing to resume)"
        say(f"paused ({stopped}) after {(time.time() - started) / 60:.2f} minutes with {where}; newest snapshot "
            f"{packed} in {out}. The same `run` in the next call on this machine resumes it")
        return
    if process.returncode:
        write_json(state_path, state)
        die(f"pre-training failed (exit {process.returncode}); the log is {out / LOG_FILE}")
    state["finished"], state["step"] = True, newest[0] if newest else None
    write_json(state_path, state)
    if cache:
        return_cache(cache, out, args.out_part_mib)
    say(f"done in {(time.time() - started) / 60:.2f} minutes; newest snapshot {packed} in {out}")


def write_json(path: Path, value) -> None:
    path.with_suffix(".tmp").write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    os.replace(path.with_suffix(".tmp"), path)


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

Fine-tuning takes its defaults from `finetune_recipe.json` here where there is one (the recipe line
of `finetune` names it and says why; a flag overrides each setting): the recipe measured best for
these weights in docs/domain_study.md ("The kept ELECTRA-Small"). It names the pre-training step it
was measured at, and is set aside, with a note, once a later run has trained the weights further.

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
    p = verbs.add_parser("stage", help="CPU: vocabulary and shards, TensorFlow, packed into .gpu_stage/ call folders")
    p.add_argument("--part_mib", type=float, default=None,
                   help=f"MiB per call folder (default: {CALL_MIB} MiB less the tracked files and 2 MiB of room)")
    p.add_argument("--corpus", nargs="+", default=None, help="text files (default: the IMDB text in ../shared)")
    p.add_argument("--model_dir", default=str(DEFAULT_MODEL_DIR),
                   help="when it holds weights, the shards are built with its vocabulary (run continues from it)")
    p.add_argument("--vocab_size", type=int, default=8000)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--processes", type=int, default=2, help="processes building the shards")
    p.add_argument("--no_tf", action="store_true", help="stage the data only")
    verbs.add_parser("receive", help="GPU: keep the parts carried in this call")
    p = verbs.add_parser("run", help="GPU: pre-training on the carried shards, snapshots into --out")
    p.add_argument("--out", default=None, help="folder whose files come back (default $OUT)")
    p.add_argument("--work", default=None, help="scratch folder (default $ELECTRA_GPU_DIR/run)")
    p.add_argument("--data", default=None, help="what `receive` unpacked (default $ELECTRA_GPU_DIR/data)")
    p.add_argument("--corpus", default=None, help="instead: comma-separated text files, vocabulary and shards "
                                                  "built here (.gz too)")
    p.add_argument("--model_dir", default=str(DEFAULT_MODEL_DIR), help="continue from it when it holds weights")
    p.add_argument("--config", default="small", help="a shipped config's name or a JSON file")
    p.add_argument("--budget_minutes", type=float, default=7.0, help="the whole command's wall clock")
    p.add_argument("--next_minutes", type=float, default=0.0,
                   help="minutes a next call on this machine will train: the run is planned for both (one "
                        "learning-rate decay), this call pauses after its last checkpoint, the next resumes")
    p.add_argument("--fresh", action="store_true", help="start a new run even if a paused one is in --work")
    p.add_argument("--reserve_minutes", type=float, default=0.6,
                   help="kept for start-up before training and the last snapshot")
    p.add_argument("--pack_seconds", type=float, default=10.0,
                   help="kept at the end of the call for the last snapshot and the returned files")
    p.add_argument("--save_every", type=int, default=None,
                   help="checkpoint interval in steps with --next_minutes (default 128,000 / --batch: ~35 s "
                        "at the H100's rate)")
    p.add_argument("--xla_cache", default=str(Path(os.environ.get("ELECTRA_GPU_DIR", "/tmp/electra_gpu"))
                                              / "xla_cache"),
                   help="TensorFlow's persistent XLA cache folder, kept between calls ('' for none)")
    p.add_argument("--vocab_size", type=int, default=8000, help="with --corpus")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--warmup", type=int, default=RECIPE["num_warmup_steps"])
    p.add_argument("--processes", type=int, default=8, help="with --corpus")
    p.add_argument("--log_every", type=int, default=500)
    p.add_argument("--snapshot_minutes", type=float, default=2.0)
    p.add_argument("--out_part_mib", type=float, default=15.0, help="at most 16 MiB come back per file")
    p.add_argument("--pretrain_flags", default="--mixed_precision bf16 --jit_compile")
    p.add_argument("--xla_flags", default="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false",
                   help="added to XLA_FLAGS: GEMM autotuning and Triton GEMMs off cut the first step's compile")
    for verb, text in (("profile", "the first step cut into its parts (tracing, XLA compile, data, sampling)"),
                       ("bench", "first-execution seconds and examples/s by batch size, within a budget")):
        p = verbs.add_parser(verb, help=text)
        p.add_argument("--data", default=None, help="staged data (default $ELECTRA_GPU_DIR/data, else "
                                                    ".gpu_stage/data)")
        p.add_argument("--config", default="small")
        p.add_argument("--precision", default="bf16", choices=["none", "bf16", "fp16"])
        p.add_argument("--no_jit", action="store_true", help="without XLA")
        p.add_argument("--xla_flags", default="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false"
                       if verb == "bench" else "", help="added to XLA_FLAGS (read once, when TensorFlow starts)")
        p.add_argument("--xla_cache", default="", help="TensorFlow's persistent XLA cache folder ('' for none)")
        p.add_argument("--json", default=None, help="also write the numbers to this file")
        if verb == "profile":
            p.add_argument("--batch", type=int, default=128)
        else:
            p.add_argument("--batches", default="128,256,512,1024")
            p.add_argument("--steps_per_execution", type=int, default=8)
            p.add_argument("--measure_seconds", type=float, default=15.0, help="timed after the first execution")
            p.add_argument("--budget_minutes", type=float, default=3.5, help="variants that do not fit are skipped")
    p = verbs.add_parser("unpack", help="CPU: the returned parts into --model_dir, with its history row")
    p.add_argument("--files", required=True, help="the folder the device call's files came back to")
    p.add_argument("--model_dir", default=str(DEFAULT_MODEL_DIR))
    p.add_argument("--heldout_source", default=str(HELDOUT_SOURCE), help="the held-out text's TSV (its last rows)")
    p.add_argument("--heldout_rows", type=int, default=HELDOUT_ROWS)
    p.add_argument("--no_heldout", action="store_true", help="skip the held-out AUC")
    return parser.parse_args(argv)


def timing(args) -> None:
    """`profile` and `bench` (scripts/gpu/step_timing.py) on the staged data."""
    if args.xla_flags:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + args.xla_flags).strip()
    if args.xla_cache:
        os.environ["TF_XLA_FLAGS"] = (os.environ.get("TF_XLA_FLAGS", "")
                                      + f" --tf_xla_persistent_cache_directory={args.xla_cache}").strip()
    candidates = [Path(args.data)] if args.data else [device_dir() / "data", STAGE / "data"]
    data = next((d for d in candidates if (d / DATA_RECORD).is_file()), None)
    if data is None:
        die(f"no staged data in {' or '.join(map(str, candidates))}; run `stage` (and `receive` on the GPU "
            f"machine), or pass --data")
    from scripts.gpu import step_timing  # the checkout's root is on the path: the editable install here, PYTHONPATH there

    record = json.loads((data / DATA_RECORD).read_text())
    config = step_timing.load_config(args.config, data / "vocab.txt", record["seq"], RECIPE,
                                     RECIPE["num_warmup_steps"])
    say(f"{args.verb} on {gpu_name()}: config {args.config}, {record['vocab_size']:,}-piece vocabulary, seq "
        f"{record['seq']}, {args.precision}, XLA {'off' if args.no_jit else 'on'}; XLA_FLAGS="
        f"{os.environ.get('XLA_FLAGS', '')!r} TF_XLA_FLAGS={os.environ.get('TF_XLA_FLAGS', '')!r}")
    if args.verb == "profile":
        result = step_timing.breakdown(data / "shards", data / "vocab.txt", config, args.batch, args.precision,
                                       jit=not args.no_jit, log=say)
    else:
        try:
            batches = [int(b) for b in args.batches.split(",")]
        except ValueError:
            die(f"--batches {args.batches!r}: pass whole numbers separated by commas, e.g. 128,256")
        result = step_timing.bench(data / "shards", data / "vocab.txt", config, batches, args.precision,
                                   not args.no_jit, args.steps_per_execution, args.measure_seconds,
                                   args.budget_minutes * 60.0, log=say)
    if args.json:
        write_json(Path(args.json), result)


def main(argv=None) -> int:
    args = parse(argv)
    {"stage": stage, "receive": receive, "run": run, "unpack": unpack, "profile": timing,
     "bench": timing}[args.verb](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
