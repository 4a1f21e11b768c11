"""In-domain pre-training study: does ELECTRA pre-training on review text beat random init?

    python scripts/domain_study.py                      # every rung, in order; re-run to resume
    python scripts/domain_study.py --rungs cpu_demo_electra_5k,cpu_demo_mlm_eq5k
    python scripts/domain_study.py --report_only        # table + plot from what has finished
    python scripts/domain_study.py --rungs small_electra_gpu_20k --recipes r1,paper \
        --pretrain_flags "--mixed_precision bf16 --jit_compile" --parallel 10    # one GPU
    python scripts/domain_study.py --rungs small_electra_gpu_kept   # the model scripts/gpu/ keeps

Pre-trains on the IMDB text of ../shared/data (the 50,000 unlabelled reviews and the text of
the 20,000 labelled training reviews; never the dev reviews) at a ladder of model sizes and
budgets ("rungs"), and for every rung fine-tunes the pre-trained encoder and a randomly
initialised one with the same recipe on IMDB with 500 and 2,000 labelled reviews (scored on
the first 2,000 reviews of imdb/dev.tsv.gz) and SST-2 with 2,000 rows (scored on its dev set),
seeds 1-3. Beside them: a linear probe of the frozen encoder and TF-IDF + logistic regression
on the same rows and tokens (scripts/study_lib/baselines.py).

Every step is a CLI call (`python -m electra_tf.pretrain`, `python -m electra_tf.finetune`)
whose run directory resumes, and every finished cell is one line of `cells.jsonl` in the work
directory, so an interrupted study picks up where it stopped. `results.md` and
`gain_vs_flops.png` are written from `cells.jsonl` after every cell.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

from scripts.study_lib import domain_report as report
from scripts.study_lib import domain_ladder as ladder
from scripts.study_lib.cells import add_cell, load_cells

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
CORPUS = [SHARED / "corpus" / "imdb.unsup.txt.gz", SHARED / "corpus" / "imdb.train.txt.gz"]
SEEDS = "1,2,3"
EVAL_ROWS = 2000
VOCAB_SIZE = 8000
LOCK = threading.Lock()  # cells.jsonl and the report, when fine-tuning runs in parallel


def log(msg: str) -> None:
    print(f"[domain_study {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: List[str], log_file: Path) -> float:
    """Runs a CLI to completion, its output appended to log_file; returns seconds."""
    started = time.time()
    with open(log_file, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    if rc != 0:
        raise SystemExit(f"domain_study: command failed (exit {rc}), see {log_file}: {' '.join(cmd)}")
    return time.time() - started


# --- data -----------------------------------------------------------------------------------
def _read_tsv_gz(path: Path, limit: int) -> List[tuple]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col_s, col_l = header.index("sentence"), header.index("label")
        for line in f:
            parts = line.rstrip("\n").split("\t")
            rows.append((parts[col_s], int(parts[col_l])))
            if len(rows) == limit:
                break
    return rows


def _write_glue(dir_: Path, train: List[tuple], dev: List[tuple]) -> None:
    dir_.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        tmp = dir_ / (name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for text, label in rows:
                f.write(f"{text}\t{label}\n")
        os.replace(tmp, dir_ / name)


def prepare(work: Path, seqs=(64, 128)) -> Dict[str, Path]:
    """Vocabulary (8,000 pieces on the corpus), shards at the rungs' lengths, labelled sets."""
    py = sys.executable
    vocab = work / "vocab.txt"
    if not vocab.is_file():
        run([py, "-m", "electra_tf.data.build_vocab", "--corpus", ",".join(map(str, CORPUS)),
             "--vocab_size", str(VOCAB_SIZE), "--output_file", str(vocab)], work / "prepare.log")
    for seq in seqs:
        out = work / f"shards{seq}"
        if not (out / "manifest.json").is_file():
            run([py, "-m", "electra_tf.data.build_pretraining_data", "--corpus", ",".join(map(str, CORPUS)),
                 "--vocab_file", str(vocab), "--output_dir", str(out), "--max_seq_length", str(seq),
                 "--num_shards", "8", "--num_processes", str(min(8, os.cpu_count() or 2)), "--progress=false"], work / "prepare.log")
    dev = _read_tsv_gz(SHARED / "imdb" / "dev.tsv.gz", EVAL_ROWS)
    for n in (500, 2000):
        d = work / f"imdb{n}"
        if not (d / "dev.tsv").is_file():
            _write_glue(d, _read_tsv_gz(SHARED / "imdb" / "train.tsv.gz", n), dev)
    return {"vocab": vocab, "imdb500": work / "imdb500", "imdb2000": work / "imdb2000",
            "sst2_2000": SHARED / "glue" / "SST-2"}


def rung_config(work: Path, rung: ladder.Rung) -> Path:
    """configs/<size>.json with the rung's overrides, sized for the study's vocabulary (a kept
    model's own config.json)."""
    from electra_tf.config import ElectraConfig

    if rung.model_dir:
        path = work / "rungs" / rung.name / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        ElectraConfig.from_json(str(REPO / rung.model_dir / "config.json")).to_json(str(path))
        return path

    base = REPO / "configs" / f"{rung.config}.json"
    if not base.is_file():
        base = REPO / "scripts" / "study_configs" / f"{rung.config}.json"
    cfg = ElectraConfig.from_json(str(base))
    cfg = cfg.replace(vocab_size=VOCAB_SIZE, max_seq_length=rung.seq, num_train_steps=rung.steps,
                      num_warmup_steps=rung.warmup if rung.warmup is not None else max(1, rung.steps // 10))
    cfg = cfg.with_overrides(list(rung.overrides))
    path = work / "rungs" / rung.name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg.to_json(str(path))
    return path


def kept_model(work: Path, rung: ladder.Rung, data: Dict[str, Path], cells: Dict[str, dict]) -> dict:
    """The pretrain cell of a rung whose model was pre-trained elsewhere: its history.json's totals."""
    folder = REPO / rung.model_dir
    history_file = folder / "history.json"
    if not history_file.is_file():
        raise SystemExit(f"error: {folder} holds no pre-trained model yet (no history.json); "
                         f"scripts/gpu/README.md says how it is made")
    history = json.loads(history_file.read_text(encoding="utf-8"))
    last, key = history[-1], f"pretrain:{rung.name}"
    if key in cells:
        if cells[key]["steps"] != last["cumulative_steps"]:
            raise SystemExit(f"error: {folder} is now at step {last['cumulative_steps']}, but {work} holds cells of "
                             f"its step {cells[key]['steps']}; pass a new --work_dir")
        return cells[key]
    vocab = folder / "vocab.txt"
    same_vocab = vocab.read_bytes() == Path(data["vocab"]).read_bytes()
    cell = {"key": key, "rung": rung.name, "size": rung.size, "seq": rung.seq, "steps": last["cumulative_steps"],
            "overrides": [], "continue_from": None, "start_steps": 0, "flags": [], "model_dir": rung.model_dir,
            "seconds": round(60 * sum(r.get("minutes_trained") or 0 for r in history), 1),
            "flops": last["cumulative_flops"], "final": f"held-out disc AUC {last.get('heldout_disc_auc')}",
            "vocab": str(vocab),
            # Random init shares the cells of the study's own vocabulary when it is the same file.
            "random_init": f"random_{rung.size}" if same_vocab else f"random_{rung.name}"}
    with LOCK:
        add_cell(work, cell)
        cells[key] = cell
    return cell


def pretrain(work: Path, rung: ladder.Rung, data: Dict[str, Path], cells: Dict[str, dict],
             extra_flags: List[str] = ()) -> dict:
    if rung.model_dir:
        return kept_model(work, rung, data, cells)
    key = f"pretrain:{rung.name}"
    if key in cells:
        return cells[key]
    config = rung_config(work, rung)
    rdir = work / "rungs" / rung.name
    cmd = [sys.executable, "-m", "electra_tf.pretrain", "--config", str(config),
           "--data_dir", str(work / f"shards{rung.seq}"), "--vocab_file", str(data["vocab"]),
           "--output_dir", str(rdir / "run"), "--train_steps", str(rung.steps), "--verbose", "0",
           "--save_every", "1000", *extra_flags]
    start_seconds = start_steps = 0
    if rung.continue_from:
        source = cells[f"pretrain:{rung.continue_from}"]
        start_seconds, start_steps = source["seconds"], source["steps"]
        cmd += ["--continue_from", str(work / "rungs" / rung.continue_from / "run")]
    seconds = start_seconds + run(cmd, rdir / "pretrain.log")
    from electra_tf.config import ElectraConfig
    from electra_tf.flops import total_train_flops

    cfg = ElectraConfig.from_json(str(config))
    cell = {"key": key, "rung": rung.name, "size": rung.size, "seq": rung.seq, "steps": rung.steps,
            "overrides": list(rung.overrides), "continue_from": rung.continue_from, "start_steps": start_steps,
            "flags": list(extra_flags),
            "seconds": round(seconds, 1),
            "flops": total_train_flops(cfg, cfg.train_batch_size, rung.steps, rung.seq),
            "final": _final_metrics(rdir / "pretrain.log")}
    with LOCK:
        add_cell(work, cell)
        cells[key] = cell
    return cell


def _final_metrics(log_file: Path) -> str:
    lines = [l for l in log_file.read_text(encoding="utf-8").splitlines() if "auc" in l.lower()]
    return lines[-1].strip()[:300] if lines else ""


def recipe_flags(recipe: dict) -> List[str]:
    """A recipe's settings as `finetune` flags (batch 32 unless it says; a setting it leaves out is
    `finetune`'s default for the model's size)."""
    flags = [] if not recipe else ["--batch_size", "32"]
    for name, value in recipe.items():
        flags += [f"--{name}", str(value)]
    return flags


def finetune(work: Path, init: str, init_name: str, size_config: Path, task: str, recipe: str,
             data: Dict[str, Path], cells: Dict[str, dict], vocab: Path = None, seeds: str = SEEDS) -> dict:
    # A cell of other seeds than the study's 1-3 is its own cell (the run folder resumes per seed).
    key = f"ft:{init_name}:{task}:{recipe}" + ("" if seeds == SEEDS else f":seeds{seeds}")
    if key in cells:
        return cells[key]
    out = work / "finetune" / init_name / f"{task}_{recipe}"
    cmd = [sys.executable, "-m", "electra_tf.finetune", "--task", "sst2",
           "--data_dir", str(data[ladder.task_data(task)]),
           "--init", init, "--vocab_file", str(vocab or data["vocab"]), "--seed", seeds,
           "--max_seq_length", str(ladder.task_seq(task)),
           *recipe_flags(ladder.RECIPES[recipe]), "--save_every", "0", "--output_dir", str(out)]
    if task == "sst2_2000":
        cmd += ["--max_train_examples", "2000"]
    if init == "random":
        cmd += ["--config", str(size_config)]
    out.mkdir(parents=True, exist_ok=True)
    seconds = run(cmd, out / "finetune.log")
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    accs = [round(100 * s["accuracy"], 2) for s in res["seeds"]]
    cell = {"key": key, "init": init_name, "task": task, "recipe": recipe, "seeds": accs,
            "steps": res["seeds"][0].get("train_steps"),
            "median": round(100 * res["median"]["accuracy"], 2), "seconds": round(seconds, 1)}
    with LOCK:
        add_cell(work, cell)
        cells[key] = cell
    log(f"{init_name} {task} {recipe}: {accs} median {cell['median']}")
    return cell


def run_rung(work: Path, rung: ladder.Rung, recipes: List[str], data: Dict[str, Path], cells: Dict[str, dict],
             extra_flags: List[str], parallel: int, only_tasks: List[str] = (), random_recipes=None,
             seeds: str = SEEDS, probe: bool = True) -> None:
    """Pre-training, then every fine-tuning cell of the rung (random init and pre-trained).

    only_tasks: fine-tune on these labelled sets only (default: every task of the rung).
    random_recipes: the recipes random init is fine-tuned with too (None: all of `recipes`).
    seeds: the fine-tuning seeds (comma-separated).
    probe: end with the linear probes of both encoders.

    With parallel > 1 (one GPU shared by several processes) the random-init cells start at once,
    beside the pre-training, and the pre-trained ones when it has finished."""
    config = work / "rungs" / rung.name / "config.json"
    tasks = [t for t in ladder.rung_tasks(rung) if not only_tasks or t in only_tasks]
    pretrained = str(REPO / rung.model_dir) if rung.model_dir else str(work / "rungs" / rung.name / "run")
    random_name, vocab = f"random_{rung.size}", None
    if rung.model_dir:  # nothing to pre-train: the kept model's own vocabulary and shape
        rung_config(work, rung)
        kept = pretrain(work, rung, data, cells)
        random_name, vocab = kept["random_init"], Path(kept["vocab"])
    random_jobs = [("random", random_name, t, r) for r in recipes for t in tasks
                   if random_recipes is None or r in random_recipes]
    trained_jobs = [(pretrained, rung.name, t, r) for r in recipes for t in tasks]

    def job(spec):
        init, name, task, recipe = spec
        finetune(work, init, name, config, task, recipe, data, cells, vocab, seeds)
        with LOCK:
            report.write(work, ladder.RUNGS)

    if parallel <= 1:
        pretrain(work, rung, data, cells, extra_flags)
        # Pre-trained and random cells alternate (each pre-trained one first).
        pairs = itertools.zip_longest(trained_jobs, random_jobs)
        for spec in [j for pair in pairs for j in pair if j is not None]:
            job(spec)
    else:
        rung_config(work, rung)
        with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
            futures = [pool.submit(job, spec) for spec in random_jobs]
            pretrain(work, rung, data, cells, extra_flags)
            futures += [pool.submit(job, spec) for spec in trained_jobs]
            for f in futures:
                f.result()  # a failed cell stops the study with its command and log
    if probe:
        report.probe(work, rung, data, ladder.TASKS, cells, add_cell, pretrained_dir=pretrained, vocab=vocab,
                     random_name=random_name)
    report.write(work, ladder.RUNGS)


def _names(kind: str, known):
    """An argparse type: a comma-separated list of `known` names (an unknown one is refused
    while the flags are parsed, so a usage line naming one fails `--help`-cheap checks)."""
    def parse(text: str) -> List[str]:
        names = [n for n in text.split(",") if n]
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {kind}: {unknown}; choose from {sorted(known)}")
        return names
    return parse


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work_dir", default=str(REPO / "runs" / "domain_study"))
    p.add_argument("--rungs", default="", type=_names("rung or recipe", [r.name for r in ladder.RUNGS]),
                   help="comma-separated rung names (default: all CPU rungs, in order)")
    p.add_argument("--recipes", default="r1", type=_names("rung or recipe", ladder.RECIPES),
                   help=f"comma-separated fine-tuning recipes of {sorted(ladder.RECIPES)}")
    p.add_argument("--tasks", default="", type=_names("task", list(ladder.TASKS) + list(ladder.LONG_TASKS)),
                   help=f"comma-separated labelled sets to fine-tune on (default: all of the rung's) of "
                        f"{sorted(ladder.TASKS) + sorted(ladder.LONG_TASKS)}")
    p.add_argument("--random_recipes", default=None, type=_names("recipe", ladder.RECIPES),
                   help="the recipes random init is fine-tuned with too (default: every one of --recipes)")
    p.add_argument("--seeds", default=SEEDS, help="fine-tuning seeds, comma-separated (default: 1,2,3)")
    p.add_argument("--no_probe", action="store_true", help="skip the linear probes of the frozen encoders")
    p.add_argument("--pretrain_flags", default="",
                   help='extra pre-training flags, e.g. "--mixed_precision bf16 --jit_compile" on a GPU')
    p.add_argument("--parallel", type=int, default=1,
                   help="fine-tuning processes at a time (one H100: 10; they start beside the pre-training)")
    p.add_argument("--report_only", action="store_true")
    args = p.parse_args(argv)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        report.write(work, ladder.RUNGS)
        return 0
    names, recipes, tasks = args.rungs, args.recipes, args.tasks
    # Without --rungs: the CPU ladder (a GPU rung is asked for by name).
    wanted = [r for r in ladder.RUNGS if (r.name in names if names else "gpu" not in r.name)]
    for rung in wanted:
        if tasks and not set(tasks) & set(ladder.rung_tasks(rung)):
            p.error(f"none of --tasks {tasks} is fine-tuned on rung {rung.name} (its tasks: {ladder.rung_tasks(rung)})")
    if args.parallel > 1:
        # Several processes share one GPU: each takes memory as it needs it, not all of it.
        os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    data = prepare(work, sorted({r.seq for r in wanted if not r.model_dir}))  # a kept model needs no shards
    cells = load_cells(work)
    report.baselines(work, data, ladder.TASKS, cells, add_cell)
    for rung in wanted:
        log(f"rung {rung.name}: " + (f"fine-tuning the model in {rung.model_dir}" if rung.model_dir else
                                     f"pre-training {rung.size} seq {rung.seq} for {rung.steps} steps"))
        run_rung(work, rung, recipes, data, cells, args.pretrain_flags.split(), args.parallel, tasks,
                 random_recipes=args.random_recipes, seeds=args.seeds, probe=not args.no_probe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
