"""The domain study's baselines, probes and outputs (results.md, gain_vs_flops.png).

Run by scripts/domain_study.py; the rungs and tasks are scripts.study_lib.domain_ladder's."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Callable, Dict, List

from scripts.study_lib import domain_ladder as ladder
from scripts.study_lib.cells import load_cells

TASK_LABELS = {"imdb500": "IMDB 500", "imdb2000": "IMDB 2,000", "sst2_2000": "SST-2 2,000",
               "imdb500_256": "IMDB 500, 256 tokens", "imdb2000_256": "IMDB 2,000, 256 tokens"}


def _rows(path: Path) -> tuple:
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        s, l = header.index("sentence"), header.index("label")
        for line in f:
            parts = line.rstrip("\n").split("\t")
            texts.append(parts[s])
            labels.append(int(parts[l]))
    return texts, labels


def task_rows(data: Dict[str, Path], task: str) -> tuple:
    """(train texts, train labels, dev texts, dev labels) exactly as fine-tuning reads them."""
    tr_t, tr_l = _rows(data[task] / "train.tsv")
    dv_t, dv_l = _rows(data[task] / "dev.tsv")
    if task == "sst2_2000":
        tr_t, tr_l = tr_t[:2000], tr_l[:2000]
    return tr_t, tr_l, dv_t, dv_l


def baselines(work: Path, data: Dict[str, Path], tasks: Dict[str, int], cells: Dict[str, dict],
              add_cell: Callable) -> None:
    """TF-IDF + logistic regression on the same rows and tokens (and on whole texts)."""
    from scripts.study_lib.baselines import tfidf_logistic_regression, truncate_to_tokens

    for task, seq in tasks.items():
        for tokens in (seq, 256, None):
            key = f"tfidf:{task}:{tokens or 'all'}"
            if key in cells or (tokens == 256 and task.startswith("sst2")):
                continue
            tr_t, tr_l, dv_t, dv_l = task_rows(data, task)
            if tokens:
                tr_t = truncate_to_tokens(tr_t, str(data["vocab"]), tokens - 2)
                dv_t = truncate_to_tokens(dv_t, str(data["vocab"]), tokens - 2)
            res = tfidf_logistic_regression(tr_t, tr_l, dv_t, dv_l)
            cell = {"key": key, "task": task, "tokens": tokens or "all", "accuracy": round(100 * res["best"], 2),
                    "by_l2": res["by_l2"]}
            add_cell(work, cell)
            cells[key] = cell


def probe(work: Path, rung, data: Dict[str, Path], tasks: Dict[str, int], cells: Dict[str, dict],
          add_cell: Callable, pretrained_dir=None, vocab=None, random_name=None) -> None:
    """Linear probes of the pre-trained and the random encoder on the IMDB 2,000 and SST-2 rows.

    pretrained_dir, vocab, random_name: a kept model's folder, vocabulary and random-init name
    (default: the rung's run, the study's vocabulary, random_<size>)."""
    from scripts.study_lib.baselines import encoder_features, linear_probe
    from electra_tf.config import ElectraConfig

    config = ElectraConfig.from_json(str(work / "rungs" / rung.name / "config.json"))
    for task in ("imdb2000", "sst2_2000"):
        trained = Path(pretrained_dir) if rung.model_dir else work / "rungs" / rung.name / "run" / "pretrained"
        for name, model_dir in ((rung.name, trained), (random_name or f"random_{rung.size}", None)):
            key = f"probe:{name}:{task}"
            if key in cells:
                continue
            tr_t, tr_l, dv_t, dv_l = task_rows(data, task)
            kwargs = dict(config=config, vocab_file=str(vocab or data["vocab"]))
            md = str(model_dir) if model_dir else None
            f_tr = encoder_features(md, tr_t, tasks[task], **kwargs)
            f_dv = encoder_features(md, dv_t, tasks[task], **kwargs)
            cell = {"key": key, "init": name, "task": task}
            for feat in f_tr:
                cell[feat] = round(100 * linear_probe(f_tr[feat], tr_l, f_dv[feat], dv_l)["best"], 2)
            add_cell(work, cell)
            cells[key] = cell


def _spread(seeds: List[float]) -> str:
    return f"{min(seeds):.1f}-{max(seeds):.1f}"


def write(work: Path, rungs) -> None:
    """results.md (every finished cell) and gain_vs_flops.png."""
    cells = load_cells(work)
    lines = ["| rung | size | seq | steps | train FLOPs | pre-train s | recipe | task | pre-trained (seeds) | "
             "random (seeds) | gain | TF-IDF same tokens | probe pre-trained / random (emb, last mean) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    points: Dict[tuple, List[tuple]] = {}
    for rung in rungs:
        pre = cells.get(f"pretrain:{rung.name}")
        if pre is None:
            continue
        for key, cell in sorted(cells.items()):
            if not key.startswith(f"ft:{rung.name}:"):
                continue
            task, recipe = cell["task"], cell["recipe"]
            suffix = key[len(f"ft:{rung.name}:{task}:{recipe}"):]  # ":seeds1" for a cell of other seeds
            random_key = f"ft:{pre.get('random_init', f'random_{rung.size}')}:{task}:{recipe}"
            rnd = cells.get(random_key + suffix) or cells.get(random_key)
            tfidf = cells.get(f"tfidf:{ladder.task_data(task)}:{ladder.task_seq(task)}", {}).get("accuracy", "")
            pp = cells.get(f"probe:{rung.name}:{task}")
            pr = cells.get(f"probe:{pre.get('random_init', f'random_{rung.size}')}:{task}")
            probe_txt = (f"{pp['embeddings_mean']:.1f}, {pp['last_mean']:.1f} / "
                         f"{pr['embeddings_mean']:.1f}, {pr['last_mean']:.1f}") if pp and pr else ""
            random_txt = (f"{rnd['median']:.2f} ({'/'.join(f'{a:.2f}' for a in rnd['seeds'])})" if rnd else "–")
            gain_txt = f"{cell['median'] - rnd['median']:+.2f}" if rnd else "–"
            lines.append(
                f"| {rung.name} | {rung.size} | {rung.seq} | {pre['steps']:,} | {pre['flops']:.2e} | "
                f"{pre['seconds']:.0f} | {recipe} | {TASK_LABELS[task]} | {cell['median']:.2f} "
                f"({'/'.join(f'{a:.2f}' for a in cell['seeds'])}) | {random_txt} | {gain_txt} | {tfidf} | {probe_txt} |")
            if rnd is None:
                continue
            gain = cell["median"] - rnd["median"]
            if recipe not in ("r1", "paper"):
                continue  # the fine-tuning levers are a table, not the curve
            # One line per setting: a rung pre-trained at another length is its own series.
            setting = " ".join(list(rung.overrides) + ([f"seq {rung.seq}"] if rung.seq != 128 else []))
            points.setdefault((rung.size, task, recipe, setting), []).append((pre["flops"], gain))
    tfidf_lines = ["| task | TF-IDF + LR, same tokens | 256 tokens | whole texts |", "|---|---|---|---|"]
    for task, seq in ladder.TASKS.items():
        vals = [cells.get(f"tfidf:{task}:{t}", {}).get("accuracy", "") for t in (seq, 256, "all")]
        tfidf_lines.append(f"| {TASK_LABELS[task]} | {vals[0]} | {vals[1]} | {vals[2]} |")
    (work / "results.md").write_text("\n".join(lines + [""] + tfidf_lines) + "\n", encoding="utf-8")
    _plot(work / "gain_vs_flops.png", points)


def _plot(path: Path, points: Dict[tuple, List[tuple]]) -> None:
    if not points:
        return
    import matplotlib  # the `study` extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({k[1] for k in points})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for (size, t, recipe, overrides), pts in sorted(points.items()):
            if t != task:
                continue
            pts = sorted(pts)
            label = f"{size} {overrides or 'electra'} ({recipe})"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("pre-training FLOPs")
        ax.set_ylabel("gain over random init (points, median of 3)")
        ax.set_title(TASK_LABELS[task])
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
