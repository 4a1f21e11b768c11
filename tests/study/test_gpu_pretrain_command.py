"""scripts/gpu/pretrain_small_imdb.py end to end on the CPU, made small: stage (vocabulary and shards
built here, packed in call-sized pieces), receive, run, unpack; then a run that continues from the
kept weights over two calls on the same machine (paused after a checkpoint, resumed by the next
call, the compiled step taken from the persistent XLA cache), as the next lent GPU does."""

import gzip
import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from helpers import error_lines

pytestmark = pytest.mark.large  # runs the GPU script's verbs on the CPU: not in the fast tier

SCRIPT = "scripts/gpu/pretrain_small_imdb.py"
SMALL = ["--config", "tiny", "--pretrain_flags", "", "--xla_flags", "", "--batch", "16", "--warmup", "10",
         "--log_every", "10", "--snapshot_minutes", "0.1", "--reserve_minutes", "0.3", "--pack_seconds", "0",
         "--out_part_mib", "0.25"]


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


# The script's modules, each after those it imports: running the script finds them beside it (its
# folder first on sys.path); here each is loaded from its file and registered under its own name.
SCRIPT_MODULES = ("imdb_common", "step_timing", "imdb_stage", "imdb_receive", "imdb_run", "imdb_timing",
                  "imdb_unpack", "pretrain_small_imdb")


def load_script(repo_root, name="pretrain_small_imdb"):
    for module_name in SCRIPT_MODULES:
        if module_name not in sys.modules:
            path = repo_root / "scripts" / "gpu" / f"{module_name}.py"
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
    return sys.modules[name]


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
    out, model = root / "out", root / "model"
    staged = script(repo_root, env, "stage", "--no_tf", "--part_mib", "0.1", "--corpus", str(corpus),
                    "--model_dir", str(model), "--vocab_size", "400")
    received = script(repo_root, env, "receive")
    first = script(repo_root, env, "run", "--out", str(out), "--model_dir", str(model), "--budget_minutes", "0.7",
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


def test_stage_builds_the_data_here_and_cuts_it_into_call_sized_pieces_that_receive_joins(gpu_run):
    stage, device = gpu_run["root"] / "stage", gpu_run["root"] / "device"
    assert "vocabulary: " not in gpu_run["staged"].stdout  # a new model: its vocabulary is learned here
    record = json.loads((stage / "data" / "data.json").read_text())
    assert record["vocab_size"] == 400 and record["seq"] == 128 and record["examples"] > 100
    folders = sorted(p for p in stage.iterdir() if p.name.startswith("data_"))
    assert len(folders) >= 2 and json.loads((stage / "calls.json").read_text()) == [[f.name] for f in folders]
    for folder in folders:
        piece, = folder.glob("data.tar.xz.*")
        assert piece.stat().st_size <= int(0.1 * 2**20)
    assert not (device / "data_parts" / "data.tar.xz").exists()  # joined, checked, unpacked, removed
    # What the GPU machine trains on is what was built here, byte for byte.
    built = sorted(p.relative_to(stage / "data") for p in (stage / "data").rglob("*") if p.is_file())
    assert built == sorted(p.relative_to(device / "data") for p in (device / "data").rglob("*")
                           if p.is_file() and p.name != ".archive_sha256")
    for name in built:
        assert digest(stage / "data" / name) == digest(device / "data" / name)
    assert "build_vocab" not in gpu_run["first"].stdout and "build_pretraining_data" not in gpu_run["first"].stdout


def test_the_data_goes_into_the_room_the_last_tensorflow_part_leaves(repo_root):
    plan = load_script(repo_root, "imdb_stage").plan_calls
    mib = 2**20
    assert plan([("tf_part_00", 30 * mib), ("tf_part_01", 12 * mib)], 40 * mib, 30 * mib) == [
        (["tf_part_00"], 0), (["tf_part_01", "data_00"], 18 * mib), (["data_01"], 22 * mib)]
    assert plan([], 5, 2) == [(["data_00"], 2), (["data_01"], 2), (["data_02"], 1)]


def test_a_damaged_data_piece_is_refused_by_receive(gpu_run, repo_root, tmp_path):
    stage = tmp_path / "stage"
    for folder in (gpu_run["root"] / "stage").glob("data_*"):
        (stage / folder.name).mkdir(parents=True)
        for item in folder.iterdir():
            (stage / folder.name / item.name).write_bytes(item.read_bytes())
    piece = sorted(stage.glob("data_01/data.tar.xz.*"))[0]
    data = bytearray(piece.read_bytes())
    data[10] ^= 0xFF
    piece.write_bytes(bytes(data))
    env = dict(gpu_run["env"], ELECTRA_GPU_STAGE=str(stage), ELECTRA_GPU_DIR=str(tmp_path / "device"))
    proc = script(repo_root, env, "receive", check=False)
    assert proc.returncode == 2
    assert error_lines(proc.stderr) == [f"error: {piece} is damaged (sha256 differs from data_parts.json); "
                                        f"carry it again"]
    assert not (tmp_path / "device" / "data").exists()


def test_run_returns_the_newest_snapshot_in_small_parts_and_its_log(gpu_run):
    files, manifest, out = gpu_run["files"], gpu_run["manifest"], gpu_run["out"]
    assert sum(1 for p in out.rglob("*") if p.is_file()) <= 8  # what a device call may return
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


def cache_entries(gpu_run):
    return sorted(p.name for p in (gpu_run["root"] / "device" / "xla_cache").iterdir())


def test_a_run_over_two_calls_pauses_after_a_checkpoint_and_resumes_with_the_cached_compile(gpu_run, repo_root):
    """The next GPU's calls: a run continued from the kept weights, planned for this call and the
    next (--next_minutes), paused by this call's end right after a checkpoint; the next call's same
    command resumes it on the same machine towards the same last step, where the rate reaches 0,
    and finds its compiled step in the persistent XLA cache."""
    env, model = gpu_run["env"], gpu_run["model"]
    work, out1, out2 = gpu_run["root"] / "device" / "run", gpu_run["root"] / "out2", gpu_run["root"] / "out3"
    flags = [*SMALL, "--pretrain_flags=--jit_compile", "--save_every", "10", "--pack_seconds", "3"]
    before = set(cache_entries(gpu_run))
    first = script(repo_root, env, "run", "--out", str(out1), "--model_dir", str(model), "--budget_minutes", "0.75",
                   "--next_minutes", "0.3", *flags)
    assert f"continuing from {model}" in first.stdout and "--init: discriminator loaded" in first.stdout
    assert "planned with 0.3 more in the next call" in first.stdout and "paused (" in first.stdout
    end = json.loads((work / "pretrain" / "time_budget.json").read_text())["end_step"]
    state = json.loads((work / "call_state.json").read_text())
    paused_at = state["calls"][0]["checkpoint_step"]
    assert state["finished"] is False and 10 <= paused_at < end and paused_at % 10 == 0
    compiled = set(cache_entries(gpu_run)) - before
    assert compiled  # the train step's executable, written by the first call
    assert sum(1 for p in out1.rglob("*") if p.is_file()) <= 8

    # Its budget is ample (the call ends when the run does): on a loaded 2-core machine start-up
    # alone has taken half a minute.
    second = script(repo_root, env, "run", "--out", str(out2), "--model_dir", str(model), "--budget_minutes", "2.5",
                    *flags)
    assert f"from its checkpoint at step {paused_at}" in second.stdout
    assert f"resuming from {work}/pretrain/checkpoints/ckpt-{paused_at:08d}.weights.h5 at step {paused_at}" \
        in second.stdout
    assert f"step {end}/{end} " in second.stdout and " lr=0 " in second.stdout  # the decay ends at 0 there
    assert "paused (" not in second.stdout and json.loads((work / "call_state.json").read_text())["finished"]
    assert set(cache_entries(gpu_run)) == before | compiled  # nothing compiled again: all from the cache

    script(repo_root, env, "unpack", "--files", str(out2), "--model_dir", str(model), "--no_heldout")
    first_row, latest = json.loads((model / "history.json").read_text())
    assert first_row == gpu_run["first_history"][0]
    assert latest["steps"] == end and latest["cumulative_steps"] == first_row["steps"] + end
    assert latest["cumulative_flops"] == pytest.approx(first_row["flops"] + latest["flops"])
    # Unpacking a from-scratch run onto a model that already has a history is refused.
    proc = script(repo_root, env, "unpack", "--files", str(gpu_run["out"]), "--model_dir", str(model), "--no_heldout",
                  check=False)
    assert proc.returncode == 2 and "already holds a model" in error_lines(proc.stderr)[0]


def test_a_call_stops_after_the_checkpoint_that_lands_last_and_never_during_the_final_save(repo_root):
    """stop_reason on hand-made times: 100 s to the deadline, 10 more to the budget's end, 2 steps a
    second, a checkpoint every 20 steps (10 s)."""
    stop = load_script(repo_root, "imdb_run").stop_reason
    decided = {"end_step": 1000, "steps_per_second": 2.0}
    args = dict(deadline=100.0, hard_end=110.0, decided=decided, save_every=20)
    assert stop(now=0.0, newest_step=None, fresh=False, **{**args, "decided": {}}) is None  # nothing measured
    assert stop(now=50.0, newest_step=400, fresh=True, **args) is None  # the next checkpoint lands at 60 s
    # 50 + 10 + 5 s of margin passes 100 s: stop right after this checkpoint
    assert stop(now=86.0, newest_step=600, fresh=True, **args).startswith("the next checkpoint would land after")
    assert stop(now=86.0, newest_step=600, fresh=False, **args) is None  # only right after a checkpoint
    assert stop(now=10.0, newest_step=820, fresh=True, **args) is None  # ends by itself at 100 s
    assert stop(now=100.0, newest_step=600, fresh=False, **args) == "this call's time is up"
    # its last step's checkpoint is written: the final save runs on past the deadline, up to the budget's end
    assert stop(now=105.0, newest_step=1000, fresh=False, **args) is None
    assert stop(now=110.0, newest_step=1000, fresh=False, **args) == "this call's time is up"


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


def test_profile_and_bench_time_the_step_run_trains(gpu_run, repo_root, tmp_path, capsys):
    """The prepared GPU checks, made small: the first step cut into its parts, then first-execution
    seconds and examples/s by batch size through model.fit with steps_per_execution."""
    module, data = load_script(repo_root), gpu_run["root"] / "stage" / "data"
    config = json.loads((repo_root / "configs" / "tiny.json").read_text())
    config.update(num_hidden_layers=1, hidden_size=32, embedding_size=16, intermediate_size=64, num_attention_heads=1)
    (tmp_path / "mini.json").write_text(json.dumps(config))
    common = ["--data", str(data), "--config", str(tmp_path / "mini.json"), "--precision", "none", "--xla_flags", ""]
    module.main(["profile", *common, "--batch", "8", "--json", str(tmp_path / "profile.json")])
    parts = json.loads((tmp_path / "profile.json").read_text())
    assert parts["batch"] == 8 and parts["vocab_size"] == 400 and parts["jit_compile"] and parts["precision"] == "none"
    assert parts["first_batch_shuffle_buffer"] == 10000 and parts["graph_ops"] > 1000
    assert parts["trace_s"] > 0 and parts["steady_step_s"] > 0
    assert parts["xla_compile_s"] > parts["lowering_to_hlo_s"] > 0
    assert parts["first_step_s"] == pytest.approx(parts["first_batch_s"] + parts["trace_s"] + parts["first_call_s"])
    assert parts["first_call_s"] == pytest.approx(parts["xla_compile_s"] + parts["steady_step_s"])

    # Without XLA here (the step's compile is timed above): the loop and the arithmetic are the same.
    module.main(["bench", *common, "--no_jit", "--batches", "8,16", "--steps_per_execution", "4",
                 "--measure_seconds", "1", "--budget_minutes", "3", "--json", str(tmp_path / "bench.json")])
    rows = json.loads((tmp_path / "bench.json").read_text())
    assert [(r["batch"], r["steps_per_execution"]) for r in rows] == [(8, 4), (16, 4)]
    for row in rows:
        assert row["first_execution_s"] > 0 and row["seconds_measured"] >= 1 and row["examples_per_s"] > 0
        assert row["steps_measured"] >= 4 and row["steps_measured"] % 4 == 0  # whole executions only
        assert row["examples_per_s"] == pytest.approx(row["steps_measured"] * row["batch"] / row["seconds_measured"],
                                                      rel=0.02)
    printed = capsys.readouterr().out
    assert "batch 16 x steps_per_execution 4: first execution " in printed and " examples/s " in printed
    # A variant the budget has no room for is skipped, and says so.
    module.main(["bench", *common, "--batches", "8", "--measure_seconds", "5", "--budget_minutes", "0.01",
                 "--json", str(tmp_path / "skipped.json")])
    (row,) = json.loads((tmp_path / "skipped.json").read_text())
    assert row["skipped"] and row["why"].endswith("the previous variant took 0s")


def test_the_train_step_is_traced_from_a_round_counter_whatever_came_before():
    """What lets a resumed run find its compiled step in the persistent XLA cache: the uid that
    names the next traced function is the same round number after any earlier use of the counter."""
    from tensorflow.python.framework import ops

    from electra_tf.pretrain.pretrain_job import align_function_names

    starts = []
    for used_before in (0, 263):  # e.g. restoring a checkpoint uses 263, loading --init weights 86
        for _ in range(used_before):
            ops.uid()
        target = align_function_names(block=1 << 20)
        starts.append(ops.uid())
        assert starts[-1] == target and target % (1 << 20) == 0
    assert starts[1] == starts[0] + (1 << 20)  # the next round number: the same offset from it
