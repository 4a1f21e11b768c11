"""Does continuing to pre-train a public encoder on your own text pay off on a CPU?

The study behind docs/adaptation_study.md. A public English encoder (BERT architecture,
`../shared/data/encoders/all-MiniLM-L6-v2`) is imported with `convert --from hf`, then
pre-trained further with `pretrain --init` on IMDB review text:

- domain-adaptive (`electra_domain`): ELECTRA on the IMDB corpus (50,000 unlabelled reviews and
  the 20,000 training reviews' text; never the scored dev reviews);
- task-adaptive (`electra_task`): ELECTRA on the 500 labelled reviews' own text, many epochs
  (Gururangan et al. 2020, "Don't Stop Pretraining");
- the control (`mlm_domain`): masked-LM continued pre-training on the IMDB corpus at the FLOPs of
  `electra_domain`'s 30-minute point.

Each saved checkpoint becomes a model directory and is fine-tuned (seeds 1-3, median) beside the
encoder as it is, random initialisation of the same shape, and TF-IDF + logistic regression on the
same rows. Every step is a CLI call (`convert`, `build_pretraining_data`, `pretrain`, `finetune`);
every result is appended to <work>/cells.jsonl as it comes; re-running the same command skips what
is done and resumes an interrupted pre-training run.

    python scripts/adaptation_study.py                        # everything, in order
    python scripts/adaptation_study.py --stage pretrain --runs electra_task
    python scripts/adaptation_study.py --stage finetune --inits asis,electra_domain@180 --tasks imdb500
    python scripts/adaptation_study.py --stage report         # <work>/results.md
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from scripts.study_lib.cells import add_cell, load_cells

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
CORPUS = [SHARED / "corpus" / "imdb.unsup.txt.gz", SHARED / "corpus" / "imdb.train.txt.gz"]
ENCODER = SHARED / "encoders" / "all-MiniLM-L6-v2"
EVAL_ROWS = 2000  # the first 2,000 rows of imdb/dev.tsv.gz are scored
SEEDS = "1,2,3"

# The pre-training runs: data, objective, steps and checkpoints to fine-tune. configs/continue.json
# holds the recipe (peak lr 5e-4 for the fresh generator and head, 0.1x for the encoder, 10% warm-up,
# the encoder frozen for the warm-up, batch 32, 128 tokens); 180 steps are about 15 minutes of the
# 2-core machine shared by two such jobs.
RUNS = {
    "electra_domain": dict(data="shards_imdb", steps=720, save=180, overrides=()),
    "electra_task": dict(data="shards_task500", steps=360, save=180, overrides=()),
    # Masked LM at the FLOPs of electra_domain's first 180 steps (electra_tf.flops: one MLM step of
    # this encoder is 1/1.51 of an ELECTRA step with its 1/4-wide generator), the same recipe: its
    # fresh masked-LM head at the full rate, the encoder at 0.1x after a frozen warm-up.
    "mlm_domain": dict(data="shards_imdb", steps=272, save=272,
                       overrides=("objective=mlm", "encoder_freeze_steps=27"),
                       flags=("--warmup_proportion", "0.1")),  # 27 of the 272 steps
}
# Labelled sets: name -> (directory under work, rows of imdb/train.tsv.gz or None for SST-2).
TASKS = {"imdb500": 500, "imdb2000": 2000, "sst2_2000": None}
# The fine-tuning recipe for every init: the usual one for a pre-trained BERT-size encoder (Devlin
# et al.; the sentence-transformers model's own pooling), fixed before any scored row was seen.
RECIPE = dict(learning_rate="5e-5", epochs="3", batch_size="16", pooling="mean", warmup_proportion="0.1",
              layerwise_lr_decay="1.0")


def log(msg: str) -> None:
    print(f"[adaptation_study {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: List[str], log_file: Path) -> float:
    """Runs a CLI to completion, its output appended to log_file; returns seconds."""
    started = time.time()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    if rc != 0:
        raise SystemExit(f"adaptation_study: command failed (exit {rc}), see {log_file}: {' '.join(cmd)}")
    return time.time() - started


# --- data -----------------------------------------------------------------------------------
def read_rows(path: Path, limit: int) -> List[tuple]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [(r["sentence"], r["label"]) for _, r in zip(range(limit), csv.DictReader(
            f, delimiter="\t", quoting=csv.QUOTE_NONE))]
    return rows


def write_tsv(path: Path, rows: List[tuple]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        f.writelines(f"{text}\t{label}\n" for text, label in rows)
    os.replace(tmp, path)


def review_text(rows: List[tuple]) -> str:
    """Reviews as pre-training text: a paragraph a line (HTML line breaks split them), a blank line
    between reviews (the layout of the corpus files)."""
    docs = []
    for text, _ in rows:
        paragraphs = [p.strip() for p in re.split(r"(?:<br\s*/?>\s*)+", text) if p.strip()]
        docs.append("\n".join(paragraphs))
    return "\n\n".join(docs) + "\n"


def prepare(work: Path) -> None:
    py = sys.executable
    model = work / "minilm"
    if not (model / "conversion.json").is_file():
        run([py, "-m", "electra_tf.convert", "--from", "hf", "--input", str(ENCODER), "--output_dir", str(model)],
            work / "prepare.log")
    vocab = model / "vocab.txt"
    train = read_rows(SHARED / "imdb" / "train.tsv.gz", 2000)
    dev = read_rows(SHARED / "imdb" / "dev.tsv.gz", EVAL_ROWS)
    for name, n in TASKS.items():
        if n is None:
            continue
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        write_tsv(d / "train.tsv", train[:n])
        write_tsv(d / "dev.tsv", dev)
    task_text = work / "task500.txt"
    if not task_text.is_file():
        task_text.write_text(review_text(train[:500]), encoding="utf-8")
    for out, corpus in (("shards_imdb", ",".join(map(str, CORPUS))), ("shards_task500", str(task_text))):
        if not (work / out / "manifest.json").is_file():
            run([py, "-m", "electra_tf.data.build_pretraining_data", "--corpus", corpus, "--vocab_file", str(vocab),
                 "--output_dir", str(work / out), "--max_seq_length", "128", "--num_shards", "8",
                 "--num_processes", "2", "--progress=false"], work / "prepare.log")


# --- pre-training ------------------------------------------------------------------------------
def pretrain(work: Path, name: str, cells: Dict[str, dict]) -> None:
    key = f"pretrain:{name}"
    if key in cells:
        return
    spec = RUNS[name]
    run_dir = work / "pretrain" / name
    cmd = [sys.executable, "-m", "electra_tf.pretrain", "--config", "configs/continue.json",
           "--init", str(work / "minilm"), "--data_dir", str(work / spec["data"]),
           "--output_dir", str(run_dir), "--train_steps", str(spec["steps"]), "--save_every", str(spec["save"]),
           "--keep_checkpoints", "8", "--log_every", "20", "--verbose", "0"]
    for item in spec["overrides"]:
        cmd += ["--override", item]
    cmd += list(spec.get("flags", ()))
    log(f"pre-training {name}: {spec['steps']} steps")
    seconds = run(cmd, work / "pretrain" / f"{name}.log")
    from electra_tf.config import ElectraConfig
    from electra_tf.flops import total_train_flops

    config = ElectraConfig.from_dict(json.loads((run_dir / "run.json").read_text())["settings"]["config"])
    summary = json.loads((run_dir / "summary.json").read_text())
    cell = {"key": key, "run": name, "steps": spec["steps"], "seconds": round(seconds, 1),
            "flops": total_train_flops(config, config.train_batch_size, spec["steps"], 128),
            "final": {k: v for k, v in summary.items() if isinstance(v, (int, float, str))}}
    add_cell(work, cell)
    cells[key] = cell


def checkpoint_model(work: Path, init: str) -> Path:
    """The model directory of `<run>@<step>`: that checkpoint of the run, written once."""
    name, step = init.split("@")
    out = work / "models" / f"{name}_{step}"
    if (out / "discriminator.weights.h5").is_file():
        return out
    run_dir = work / "pretrain" / name
    ckpt = run_dir / "checkpoints" / f"ckpt-{int(step):08d}.weights.h5"
    if not ckpt.is_file():
        raise SystemExit(f"adaptation_study: {ckpt} does not exist (yet); pre-train {name} first")
    from electra_tf.config import ElectraConfig
    from electra_tf.data.vocab import special_token_ids
    from electra_tf.models.saving import save_pretrained
    from electra_tf.pretrain import create_optimizer
    from electra_tf.pretrain.pretrainer import ElectraPretrainer
    from electra_tf.training.checkpoints import CheckpointManager

    settings = json.loads((run_dir / "run.json").read_text())
    config = ElectraConfig.from_dict(settings["settings"]["config"])
    vocab = str(REPO / settings["vocab_file"])  # run.json holds it as given (relative to the repository)
    model = ElectraPretrainer(config, special_token_ids(vocab))
    model.compile(optimizer=create_optimizer(config, model=model))  # the checkpoint holds its state too
    CheckpointManager.restore(model, str(ckpt))
    save_pretrained(str(out), model, vocab)
    return out


# --- fine-tuning -------------------------------------------------------------------------------
def finetune(work: Path, init: str, task: str, seq: int, cells: Dict[str, dict]) -> dict:
    key = f"ft:{init}:{task}:{seq}"
    if key in cells:
        return cells[key]
    out = work / "finetune" / f"{init.replace('@', '_')}_{task}_{seq}"
    data = SHARED / "glue" / "SST-2" if task == "sst2_2000" else work / task
    cmd = [sys.executable, "-m", "electra_tf.finetune", "--task", "sst2", "--data_dir", str(data),
           "--seed", SEEDS, "--max_seq_length", str(seq), "--save_every", "0", "--output_dir", str(out)]
    for flag, value in RECIPE.items():  # the same for every init, random included
        cmd += [f"--{flag}", value]
    if task == "sst2_2000":
        cmd += ["--max_train_examples", "2000"]
    if init == "random":
        cmd += ["--init", "random", "--config", str(work / "minilm" / "config.json"),
                "--vocab_file", str(work / "minilm" / "vocab.txt")]
    elif init == "asis":
        cmd += ["--init", str(work / "minilm")]
    else:
        cmd += ["--init", str(checkpoint_model(work, init))]
    seconds = None  # results.json without a cell: the run finished but the study was stopped
    if not (out / "results.json").is_file():
        log(f"fine-tuning {init} on {task} at {seq} tokens")
        seconds = run(cmd, out / "finetune.log")
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    accs = [round(100 * s["accuracy"], 2) for s in res["seeds"]]
    cell = {"key": key, "init": init, "task": task, "seq": seq, "seeds": accs,
            "median": round(100 * res["median"]["accuracy"], 2),
            "seconds": None if seconds is None else round(seconds, 1)}
    add_cell(work, cell)
    cells[key] = cell
    log(f"{init} {task} {seq}: {accs} median {cell['median']}")
    return cell


def tfidf(work: Path, task: str, seq: int, cells: Dict[str, dict]) -> dict:
    """TF-IDF + logistic regression on the same rows and the words the first seq-2 pieces cover
    (seq 0: whole reviews)."""
    key = f"tfidf:{task}:{seq}"
    if key in cells:
        return cells[key]
    from scripts.study_lib.baselines import tfidf_logistic_regression, truncate_to_tokens

    train = read_rows(SHARED / "imdb" / "train.tsv.gz", TASKS[task])
    dev = read_rows(SHARED / "imdb" / "dev.tsv.gz", EVAL_ROWS)
    texts_t, texts_d = [t for t, _ in train], [t for t, _ in dev]
    if seq:
        vocab = str(work / "minilm" / "vocab.txt")
        texts_t, texts_d = truncate_to_tokens(texts_t, vocab, seq - 2), truncate_to_tokens(texts_d, vocab, seq - 2)
    result = tfidf_logistic_regression(texts_t, [int(l) for _, l in train], texts_d, [int(l) for _, l in dev])
    cell = {"key": key, "task": task, "seq": seq, "accuracy": round(100 * result["best"], 2)}
    add_cell(work, cell)
    cells[key] = cell
    log(f"tfidf {task} {seq or 'whole'}: {cell['accuracy']}")
    return cell


# --- report ------------------------------------------------------------------------------------
def training_minutes(work: Path, name: str, step: int) -> float:
    """Minutes of training to `step`, from the log's windows (log_every steps at batch 32 and the
    window's examples/s): the machine's time, shared as it was, without start-up and saves."""
    path = work / "pretrain" / f"{name}.log"
    seconds, last = 0.0, 0
    for m in re.finditer(r"^step (\d+)/\d+ .*examples/s=([\d.]+)", path.read_text(encoding="utf-8"), re.M):
        done = int(m.group(1))
        if done <= last:  # a resumed run repeats no window, but be safe
            continue
        seconds += (done - last) * 32 / float(m.group(2))
        last = done
        if done >= step:
            break
    return seconds / 60


def _init_label(work: Path, init: str) -> str:
    name, _, step = init.partition("@")
    if not step:
        return {"asis": "the public encoder as is", "random": "random init, same shape"}[init]
    from electra_tf.config import ElectraConfig
    from electra_tf.flops import total_train_flops

    config = ElectraConfig.from_dict(json.loads((work / "pretrain" / name / "run.json").read_text())
                                     ["settings"]["config"])
    flops = total_train_flops(config, 32, int(step), 128)
    return (f"{name} {step} steps ({training_minutes(work, name, int(step)):.0f} min, "
            f"{flops:.1e} FLOPs)")


def report(work: Path, cells: Dict[str, dict]) -> str:
    ft = [c for c in cells.values() if c["key"].startswith("ft:")]
    lines = ["| encoder | task | tokens | seeds 1 / 2 / 3 | median | vs as is |", "|---|---|---|---|---|---|"]
    base = {(c["task"], c["seq"]): c for c in ft if c["init"] == "asis"}
    order = {"asis": 0, "random": 1}
    for c in sorted(ft, key=lambda c: (c["task"], c["seq"], order.get(c["init"], 2), c["init"].split("@")[0],
                                      int(c["init"].partition("@")[2] or 0))):
        b = base.get((c["task"], c["seq"]))
        gain = "" if b is None or c["init"] == "asis" else f"{c['median'] - b['median']:+.2f}"
        lines.append(f"| {_init_label(work, c['init'])} | {c['task']} | {c['seq']} | "
                     f"{' / '.join(f'{a:.2f}' for a in c['seeds'])} | {c['median']:.2f} | {gain} |")
    for c in sorted((c for c in cells.values() if c["key"].startswith("tfidf:")), key=lambda c: c["key"]):
        b = base.get((c["task"], 128))
        gain = "" if b is None else f"{c['accuracy'] - b['median']:+.2f}"
        lines.append(f"| TF-IDF + logistic regression | {c['task']} | {c['seq'] or 'whole reviews'} | - | "
                     f"{c['accuracy']:.2f} | {gain} |")
    text = "\n".join(lines) + "\n"
    (work / "results.md").write_text(text, encoding="utf-8")
    _plot(work, ft, cells)
    return text


def _plot(work: Path, ft: List[dict], cells: Dict[str, dict]) -> None:
    """Accuracy on IMDB (500 labels, 128 tokens) against minutes of continued pre-training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [c for c in ft if c["task"] == "imdb500" and c["seq"] == 128]
    if not mine:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, style in (("electra_domain", "o-"), ("electra_task", "s-"), ("mlm_domain", "^--")):
        points = sorted((training_minutes(work, name, int(c["init"].split("@")[1])), c["median"],
                         min(c["seeds"]), max(c["seeds"]))
                        for c in mine if c["init"].split("@")[0] == name)
        if points:
            xs, ys, lo, hi = zip(*points)
            ax.errorbar(xs, ys, yerr=[[y - l for y, l in zip(ys, lo)], [h - y for y, h in zip(ys, hi)]],
                        fmt=style, capsize=3, label=name.replace("_", " "))
    for c in mine:
        if c["init"] == "asis":
            ax.axhline(c["median"], color="k", lw=1, label="public encoder as is")
            ax.axhspan(min(c["seeds"]), max(c["seeds"]), color="k", alpha=0.08)
        if c["init"] == "random":
            ax.axhline(c["median"], color="tab:red", lw=1, ls=":", label="random init")
    for key, style, label in (("tfidf:imdb500:128", "-.", "TF-IDF + LR, same tokens"),
                              ("tfidf:imdb500:0", "--", "TF-IDF + LR, whole reviews")):
        if key in cells:
            ax.axhline(cells[key]["accuracy"], color="tab:gray", lw=1, ls=style, label=label)
    ax.set_xlim(left=0)
    ax.set_xlabel("minutes of continued pre-training (2-core CPU, shared)")
    ax.set_ylabel("IMDB dev accuracy, 500 labels (median of 3 seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(work / "adaptation_study.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="runs/adaptation_study", help="work directory (resumable)")
    p.add_argument("--stage", choices=("all", "prepare", "pretrain", "finetune", "tfidf", "report"), default="all")
    p.add_argument("--runs", default=",".join(RUNS), help="pre-training runs (of: " + ", ".join(RUNS) + ")")
    p.add_argument("--inits", default=None,
                   help="inits to fine-tune: asis, random, <run>@<step> (default: asis, random, every checkpoint "
                        "of --runs)")
    p.add_argument("--tasks", default="imdb500", help="labelled sets (of: " + ", ".join(TASKS) + ")")
    p.add_argument("--seq", type=int, default=128, help="fine-tuning sequence length")
    args = p.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    tasks = [t for t in args.tasks.split(",") if t]
    for name in runs:
        if name not in RUNS:
            p.error(f"--runs: unknown run {name!r}; choose from {', '.join(RUNS)}")
    for task in tasks:
        if task not in TASKS:
            p.error(f"--tasks: unknown task {task!r}; choose from {', '.join(TASKS)}")
    inits = args.inits.split(",") if args.inits else ["asis", "random"] + [
        f"{r}@{s}" for r in runs for s in range(RUNS[r]["save"], RUNS[r]["steps"] + 1, RUNS[r]["save"])]
    for init in inits:
        name, at, step = init.partition("@")
        if not (init in ("asis", "random") or (at and name in RUNS and step.isdigit())):
            p.error(f"--inits: {init!r} is not asis, random or <run>@<step> with a run of {', '.join(RUNS)}")
    work = (REPO / args.work) if not os.path.isabs(args.work) else Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cells = load_cells(work)
    if args.stage in ("all", "prepare"):
        prepare(work)
    if args.stage in ("all", "pretrain"):
        for name in runs:
            pretrain(work, name, cells)
    if args.stage in ("all", "finetune"):
        for task in tasks:
            for init in inits:
                finetune(work, init, task, args.seq, cells)
    if args.stage in ("all", "tfidf"):
        for task in tasks:
            if TASKS[task] is not None:
                for seq in (args.seq, 0):
                    tfidf(work, task, seq, cells)
    if args.stage in ("all", "report"):
        print(report(work, cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
