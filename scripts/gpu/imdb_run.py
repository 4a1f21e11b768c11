"""`run` (GPU): ELECTRA-Small on the carried shards for a wall-clock budget (bf16, XLA, temperature 2),
the compiled step kept in TensorFlow's persistent XLA cache in $ELECTRA_GPU_DIR; every
--snapshot_minutes the weights so far (float16) go to --out in parts of at most --out_part_mib, so
a call cut off at its limit still returns the latest. When --model_dir already holds weights, the
run continues from them (--init: fresh optimizer, warm-up again, decay to 0 at this run's last
step). --next_minutes plans the run for this call and a next one on the same machine: this call
pauses right after its last checkpoint, the next call's `run` resumes it.

Standard library only (pre-training runs in a `python -m electra_tf.pretrain` process): it runs
before TensorFlow is set up.
"""

from __future__ import annotations

import datetime
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

from imdb_common import (DATA_RECORD, DEFAULT_MODEL_DIR, MANIFEST, RECIPE, REPO, device_dir, die, gpu_name,
                         model_dir_has_weights, say, sha256, write_json)
from imdb_stage import build_data

LOG_FILE = "pretrain.log"
RUN_STATE = "call_state.json"  # in run's work folder: the pre-training command and the calls so far
MAX_RETURNED_FILES = 8  # what one device call returns from $OUT


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
    state = paused_run(args, work) or new_run(args, work, Path(args.model_dir), started)
    write_json(work / RUN_STATE, state)
    env, cache = call_environment(args, state)
    call = PretrainCall(args, state, work, out, started)
    call.finish(call.train(env), cache)


def paused_run(args, work: Path):
    """The state of the run a previous call on this machine paused in `work`, which this call
    resumes; None: this call starts a new run."""
    state_path = work / RUN_STATE
    state = json.loads(state_path.read_text()) if state_path.is_file() and not args.fresh else None
    checkpoint = newest_checkpoint(work / "pretrain" / "checkpoints") if state else None
    if state and state.get("finished"):
        say(f"the run in {work} finished at step {state.get('step')} (its call returned it); starting a new one")
    if state and checkpoint and not state.get("finished"):
        # 1'. a previous call on this machine paused the run: the same pre-training command resumes it
        say(f"resuming the run in {work} from its checkpoint at step {checkpoint[0]} (paused by the previous "
            f"call); its last step and learning-rate decay stay as that call decided")
        return state
    return None


def new_run(args, work: Path, model_dir: Path, started: float) -> dict:
    """A new run in an emptied `work`: its data, config and pre-training command; returns its state."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    continuing = model_dir_has_weights(model_dir)
    data, record = run_data(args, work, model_dir, continuing)
    config_path = write_config(args, work, record)

    # 3. the pre-training command: training for what is left of this call's budget plus
    # --next_minutes that a next call on this machine trains (this call pauses after the
    # checkpoint that lands last before its end; the next one resumes towards the same last step)
    left = args.budget_minutes - (time.time() - started) / 60.0 - args.reserve_minutes
    if left <= 0:
        die(f"the data took the whole --budget_minutes {args.budget_minutes:g}; give it more")
    save_every = args.save_every or max(1, round(128_000 / args.batch))
    flags = ["--config", str(config_path), "--data_dir", str(data / "shards"), "--vocab_file", str(data / "vocab.txt"),
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
    return {"flags": flags, "extra": extra, "xla_flags": args.xla_flags, "finished": False, "calls": []}


def run_data(args, work: Path, model_dir: Path, continuing: bool):
    """1. vocabulary and shards: carried (built by `stage` on the CPU), or built here from --corpus;
    returns (their folder, its data.json record)."""
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
    if continuing and sha256(model_dir / "vocab.txt") != record["vocab_sha256"]:
        die(f"the shards in {data} were built with another vocabulary than {model_dir}/vocab.txt; "
            f"stage again (stage builds them with the model's vocabulary)")
    if record["seq"] != args.seq:
        die(f"the shards in {data} hold {record['seq']} tokens an example, not --seq {args.seq}; "
            f"stage again with --seq {args.seq}")
    if continuing:
        say(f"continuing from {model_dir} (its vocabulary and weights; fresh optimizer and warm-up)")
    return data, record


def write_config(args, work: Path, record: dict) -> Path:
    """2. the config: the shipped one plus the recipe (a continued model keeps its own shape)."""
    config = json.loads((REPO / "configs" / f"{args.config}.json").read_text()) if "/" not in args.config \
        else json.loads(Path(args.config).read_text())
    config.update(RECIPE)
    config["num_warmup_steps"] = args.warmup
    config["vocab_size"] = record["vocab_size"]
    config["max_seq_length"] = args.seq
    config_path = work / "config.json"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return config_path


def call_environment(args, state: dict):
    """(the pre-training process's environment, the persistent XLA cache folder or None)."""
    env = dict(os.environ)
    xla_flags = state.get("xla_flags") or ""  # what the run began with: a resumed run compiles alike
    if xla_flags:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + xla_flags).strip()
    cache = Path(args.xla_cache) if args.xla_cache else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
        env["TF_XLA_FLAGS"] = (env.get("TF_XLA_FLAGS", "") + f" --tf_xla_persistent_cache_directory={cache}").strip()
        say(f"compilation cache: {cache} ({sum(1 for _ in cache.glob('*'))} entries before this call)")
    state["extra"]["xla_flags"] = env.get("XLA_FLAGS", "")
    return env, cache


class PretrainCall:
    """This call's `python -m electra_tf.pretrain` process: its output copied to the log, its newest
    snapshot packed into --out, stopped right after the checkpoint that lands last before the call
    must end (the next call resumes from there); then the call recorded in the run's state."""

    def __init__(self, args, state: dict, work: Path, out: Path, started: float):
        self.args, self.state, self.work, self.out, self.started = args, state, work, out, started
        self.extra = state["extra"]
        self.snapshots, self.checkpoints = work / "snapshots", work / "pretrain" / "checkpoints"
        self.packed, self.slot = None, "a"
        # This call ends by `deadline`: pre-training that would run past it is stopped right after the
        # checkpoint that lands last before it (the next call resumes from there).
        self.deadline = started + args.budget_minutes * 60.0 - args.pack_seconds
        self.seen, self.stopped = {}, None
        flags = state["flags"]
        self.save_every = int(flags[flags.index("--save_every") + 1]) or 10**9

    def train(self, env: dict) -> int:
        """Runs pre-training until it ends or this call must stop it; returns its exit code."""
        command = [sys.executable, "-m", "electra_tf.pretrain", *self.state["flags"]]
        say(" ".join(command[1:]))
        with open(self.out / LOG_FILE, "ab") as log:
            process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            os.set_blocking(process.stdout.fileno(), False)
            while process.poll() is None:
                time.sleep(0.5)
                self.pump(process, log)
                self.pack_newest()
                why = self.should_stop(time.time())
                if why and process.poll() is None:
                    self.stopped = why
                    process.terminate()
                    try:
                        process.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
            self.pump(process, log)
            self.pack_newest()
        return process.returncode

    @staticmethod
    def pump(process, log) -> None:
        chunk = process.stdout.read()
        if chunk:
            log.write(chunk)
            log.flush()
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()

    def pack_newest(self) -> None:
        latest = self.snapshots / "latest"
        if not latest.is_file():
            return
        name = latest.read_text().strip()
        if name == self.packed or not (self.snapshots / name / "snapshot.json").is_file():
            return
        self.extra["minutes_since_start"] = round((time.time() - self.started) / 60.0, 2)
        pack_snapshot(self.snapshots / name, self.out, self.args.out_part_mib, self.slot, self.extra)
        say(f"packed {name} into {self.out} (slot {self.slot})")
        self.packed, self.slot = name, "b" if self.slot == "a" else "a"

    def should_stop(self, now: float):
        newest = newest_checkpoint(self.checkpoints)
        fresh = newest is not None and newest[0] not in self.seen
        if fresh:
            self.seen[newest[0]] = now
        budget = self.work / "pretrain" / "time_budget.json"
        decided = json.loads(budget.read_text()) if budget.is_file() else {}
        return stop_reason(now, self.deadline, self.started + self.args.budget_minutes * 60.0, newest and newest[0],
                           fresh, decided, self.save_every)

    def finish(self, returncode: int, cache) -> None:
        """Records this call in the run's state; returns the compilation cache where it fits."""
        args, state, out, state_path = self.args, self.state, self.out, self.work / RUN_STATE
        newest = newest_checkpoint(self.checkpoints)
        state["calls"].append({"date": datetime.datetime.now().isoformat(timespec="seconds"),
                               "minutes": round((time.time() - self.started) / 60.0, 2),
                               "checkpoint_step": newest[0] if newest else None, "stopped": self.stopped})
        if self.stopped:
            write_json(state_path, state)
            if cache:
                return_cache(cache, out, args.out_part_mib)
            where = f"its checkpoint at step {newest[0]}" if newest else "no checkpoint (nothing to resume)"
            say(f"paused ({self.stopped}) after {(time.time() - self.started) / 60:.2f} minutes with {where}; newest "
                f"snapshot {self.packed} in {out}. The same `run` in the next call on this machine resumes it")
            return
        if returncode:
            write_json(state_path, state)
            die(f"pre-training failed (exit {returncode}); the log is {out / LOG_FILE}")
        state["finished"], state["step"] = True, newest[0] if newest else None
        write_json(state_path, state)
        if cache:
            return_cache(cache, out, args.out_part_mib)
        say(f"done in {(time.time() - self.started) / 60:.2f} minutes; newest snapshot {self.packed} in {out}")


def add_arguments(verbs) -> None:
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
