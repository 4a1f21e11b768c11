"""scripts/gpu/pretrain_small_imdb.py end to end on the CPU, made small: stage, receive, run, unpack,
then a second run that continues from the kept weights (what the next lent GPU does)."""

import gzip
import hashlib
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from helpers import error_lines

SCRIPT = "scripts/gpu/pretrain_small_imdb.py"
SMALL = ["--config", "tiny", "--pretrain_flags", "", "--xla_flags", "", "--vocab_size", "400", "--processes", "2",
         "--batch", "16", "--warmup", "10", "--log_every", "10", "--snapshot_minutes", "0.1",
         "--reserve_minutes", "0.2", "--out_part_mib", "0.25"]


def script(repo_root, env, *args, check=True):
    proc = subprocess.run([sys.executable, SCRIPT, *args], cwd=repo_root, env=env, capture_output=True, text=True,
                          timeout=900)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def datasets(path):
    """{name: array} of every dataset in a .weights.h5 file."""
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: found.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None)
    return found


def stored_dtypes(path):
    found = set()
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: found.add(item.dtype) if isinstance(item, h5py.Dataset) else None)
    return found


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory, repo_root, shared_data):
    root = tmp_path_factory.mktemp("gpu_command")
    with gzip.open(shared_data / "corpus" / "imdb.train.txt.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(1500)]
    corpus = root / "reviews.txt.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.writelines(lines)
    env = dict(os.environ, ELECTRA_GPU_STAGE=str(root / "stage"), ELECTRA_GPU_DIR=str(root / "device"),
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("OUT", None)
    staged = script(repo_root, env, "stage", "--no_tf", "--part_mib", "0.1", "--corpus", str(corpus))
    received = script(repo_root, env, "receive")
    out, model = root / "out", root / "model"
    first = script(repo_root, env, "run", "--out", str(out), "--model_dir", str(model), "--budget_minutes", "1.1",
                   *SMALL)
    files = sorted(os.listdir(out))
    manifest = json.loads((out / "snapshot_parts.json").read_text())
    unpacked = script(repo_root, env, "unpack", "--files", str(out), "--model_dir", str(model), "--heldout_rows", "100")
    first_history = json.loads((model / "history.json").read_text())
    fp32_final = root / "device" / "run" / "pretrain" / "pretrained"
    first_weights = {n: datasets(fp32_final / n) for n in ("discriminator.weights.h5", "generator_head.weights.h5")}
    return dict(root=root, env=env, corpus=corpus, staged=staged, received=received, first=first, files=files,
                manifest=manifest, unpacked=unpacked, first_history=first_history, out=out, model=model,
                fp32_final=fp32_final, first_weights=first_weights)


def test_stage_cuts_the_corpus_into_call_sized_parts_and_receive_joins_them(gpu_run):
    stage = gpu_run["root"] / "stage"
    folders = sorted(p for p in stage.iterdir() if p.name.startswith("corpus_"))
    assert len(folders) >= 2
    for folder in folders:
        assert sum(p.stat().st_size for p in folder.iterdir()) <= int(0.1 * 2**20) + 200  # a part, plus its checksum line
    corpus_dir = gpu_run["root"] / "device" / "corpus"
    assert sorted(p.name for p in corpus_dir.iterdir()) == ["reviews.txt.gz", "reviews.txt.gz.sha256"]
    assert digest(corpus_dir / "reviews.txt.gz") == digest(gpu_run["corpus"])


def test_run_returns_the_newest_snapshot_in_small_parts_and_its_log(gpu_run):
    files, manifest, out = gpu_run["files"], gpu_run["manifest"], gpu_run["out"]
    assert len(files) <= 8  # what a device call may return
    assert "pretrain.log" in files and "snapshot_parts.json" in files
    assert len(manifest["parts"]) >= 2
    for part in manifest["parts"]:
        assert (out / part["name"]).stat().st_size <= 0.25 * 2**20
        assert digest(out / part["name"]) == part["sha256"]
    log = (out / "pretrain.log").read_text()
    assert "--train_minutes" in log and "where the learning rate reaches 0" in log or "time is up" in log
    assert manifest["device"] == "no GPU" and manifest["continued_from"] is None


def test_unpack_keeps_float16_weights_of_the_last_step_with_a_history_row(gpu_run):
    model, (row,) = gpu_run["model"], gpu_run["first_history"]
    summary = json.loads((gpu_run["root"] / "device" / "run" / "pretrain" / "summary.json").read_text())
    assert row["steps"] == row["cumulative_steps"] == summary["step"] >= 1
    assert row["tokens"] == summary["step"] * 16 * 128 and row["flops"] > 0
    assert 0.0 <= row["heldout_disc_auc"] <= 1.0 and row["heldout"]["mlm_loss"] > 0
    assert stored_dtypes(model / "discriminator.weights.h5") == {np.dtype("float16")}
    # The kept weights are the run's own final weights, rounded to float16.
    for name, final in gpu_run["first_weights"].items():
        kept = datasets(model / name)
        assert sorted(kept) == sorted(final) and len(kept) > 2
        for key, value in final.items():
            np.testing.assert_array_equal(kept[key], value.astype(np.float16))
    readme = (model / "README.md").read_text()
    assert f"| {row['steps']:,} | {row['cumulative_steps']:,} |" in readme


def test_a_second_run_continues_from_the_kept_weights_and_adds_up(gpu_run, repo_root):
    env, out, model = gpu_run["env"], gpu_run["root"] / "out2", gpu_run["model"]
    second = script(repo_root, env, "run", "--out", str(out), "--model_dir", str(model), "--budget_minutes", "0.9",
                    *SMALL)
    assert f"continuing from {model}" in second.stdout
    assert "--init: discriminator loaded" in second.stdout and "--init: generator loaded" in second.stdout
    script(repo_root, env, "unpack", "--files", str(out), "--model_dir", str(model), "--no_heldout")
    first, latest = json.loads((model / "history.json").read_text())
    assert first == gpu_run["first_history"][0]
    assert latest["cumulative_steps"] == first["steps"] + latest["steps"]
    assert latest["cumulative_flops"] == pytest.approx(first["flops"] + latest["flops"])
    # Unpacking a from-scratch run onto a model that already has a history is refused.
    proc = script(repo_root, env, "unpack", "--files", str(gpu_run["out"]), "--model_dir", str(model), "--no_heldout",
                  check=False)
    assert proc.returncode == 2 and "already holds a model" in error_lines(proc.stderr)[0]


def test_a_damaged_part_is_refused_and_leaves_the_model_as_it_was(gpu_run, repo_root, tmp_path):
    broken = tmp_path / "files"
    broken.mkdir()
    for name in gpu_run["files"]:
        (broken / name).write_bytes((gpu_run["out"] / name).read_bytes())
    part = broken / gpu_run["manifest"]["parts"][0]["name"]
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    target = tmp_path / "model"
    proc = script(repo_root, gpu_run["env"], "unpack", "--files", str(broken), "--model_dir", str(target),
                  "--no_heldout", check=False)
    assert proc.returncode == 2
    assert error_lines(proc.stderr) == [f"error: {part} does not match its checksum in snapshot_parts.json; "
                                        f"fetch the call's files again"]
    assert not target.exists() or not any(target.iterdir())
