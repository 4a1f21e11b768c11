"""`stage` (CPU): the vocabulary (a model that continues keeps its own) and the shards built here,
packed as tar.xz; the TensorFlow wheels packed (scripts/gpu/stage_tf.sh); both cut into
.gpu_stage/ folders that fill one call each (the data in the room the last TensorFlow part
leaves), checksummed; the calls printed with what each carries. `run --corpus` builds its data
with `build_data` too."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from imdb_common import (DATA_PARTS, DATA_RECORD, DEFAULT_MODEL_DIR, REPO, SHARED, STAGE, die, model_dir_has_weights,
                         python_module, say, sha256)

DEFAULT_CORPUS = (SHARED / "corpus" / "imdb.unsup.txt.gz", SHARED / "corpus" / "imdb.train.txt.gz")
CALL_MIB = 64  # what one device call may carry, the working tree included


def tracked_mib() -> float:
    """MiB of the files git tracks: they travel with every device call."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    total = sum((REPO / n).stat().st_size for n in names.decode().split("\0") if n and (REPO / n).is_file())
    return total / 2**20


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


def add_arguments(verbs) -> None:
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
