"""What every verb of pretrain_small_imdb.py shares: the folders, the files' names, the recipe, and
the small helpers (messages, checksums, JSON, running a package module). Standard library only:
`receive` and `run` import it before TensorFlow is set up."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAGE = Path(os.environ.get("ELECTRA_GPU_STAGE", REPO / ".gpu_stage"))  # tests stage elsewhere
SHARED = REPO.parent / "shared" / "data"
DEFAULT_MODEL_DIR = REPO / "models" / "electra-small-imdb"
MANIFEST = "snapshot_parts.json"  # in --out: which parts make the newest snapshot
DATA_RECORD = "data.json"  # in the staged data folder: what the shards were built from
DATA_PARTS = "data_parts.json"  # in each data_NN folder: the archive's and its pieces' sha256

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


def write_json(path: Path, value) -> None:
    path.with_suffix(".tmp").write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    os.replace(path.with_suffix(".tmp"), path)


def python_module(module: str, *flags: str, log=None) -> None:
    command = [sys.executable, "-m", module, *flags]
    say(" ".join(command[1:]))
    result = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT if log else None)
    if result.returncode:
        die(f"{module} failed (exit {result.returncode}); its output is above")


def model_dir_has_weights(model_dir: Path) -> bool:
    return all((model_dir / n).is_file() for n in ("config.json", "vocab.txt", "discriminator.weights.h5"))


def gpu_name() -> str:
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30).stdout.strip().splitlines()
        return names[0] if names else "no GPU"
    except (OSError, subprocess.SubprocessError):
        return "no GPU"
