"""ELECTRA vs MLM-style objectives at equal pre-training compute (the paper's Table 5 question).

For each FLOPs budget and each objective, pre-trains a model on one shared
vocabulary and one set of shards for the number of steps that spends the
budget (`electra_tf.flops`), fine-tunes it on SST-2 for several seeds and
takes the median dev accuracy; a randomly initialised model is the budget-0
row. Writes `results.json`, `results.md` and `sst2_vs_flops.png` to the
work directory. Method and measured results: docs/efficiency_study.md.

    # the default (2-core CPU, ~70 min on an idle machine)
    python scripts/efficiency_study.py --work_dir runs/efficiency_study
    # GPU-sized: a bigger model, longer sequences, more budgets and data
    python scripts/efficiency_study.py --work_dir runs/study_small --config configs/small.json \
        --seq_length 128 --batch_size 128 --budget_steps 2000,8000,32000 \
        --ft_train_examples 0 --ft_epochs 3 --ft_seq_length 128

Everything is cached in the work directory: the vocabulary and shards are
built once; each (objective, budget) pre-training run resumes from its last
checkpoint and is skipped once finished; each fine-tuning seed is skipped
once its result exists. Re-running the same command after an interruption
continues the study; changing a flag that defines the study (model, data,
pre-training or fine-tuning recipe; not the budgets, objectives or seeds) is
refused with a message (use a new --work_dir).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from scripts.study_lib import StudyError
from scripts.study_lib.efficiency_data import prepare_data
from scripts.study_lib.efficiency_report import write_markdown, write_plot

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"

OBJECTIVES = ("electra", "mlm", "electra_15", "replace_mlm", "all_tokens_mlm", "two_stage")
# An entry `<objective>_gdes` in --objectives is that objective with
# embedding_sharing=gdes (DeBERTa-v3's gradient-disentangled embedding sharing),
# e.g. electra_gdes next to electra.
GDES_SUFFIX = "_gdes"
RESULTS_JSON, RESULTS_MD, PLOT_PNG = "results.json", "results.md", "sst2_vs_flops.png"
# Flags whose change makes the cached data / runs of a work directory invalid.
STUDY_KEYS = ("config", "corpus", "corpus_max_lines", "vocab_size", "seq_length", "batch_size",
              "learning_rate", "warmup_fraction", "two_stage_fraction", "convention", "seed",
              "glue_dir", "ft_train_examples", "ft_eval_examples", "ft_epochs", "ft_seq_length",
              "ft_batch_size", "ft_learning_rate", "ft_layerwise_lr_decay")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--work_dir", default="runs/efficiency_study", help="cache and outputs")
    p.add_argument("--corpus", default=str(SHARED / "corpus" / "*.txt"),
                   help="comma-separated text files or globs for the vocabulary and the shards")
    p.add_argument("--corpus_max_lines", type=int, default=0,
                   help="use only the first N lines of each corpus file (0: all; for quick runs)")
    p.add_argument("--glue_dir", default=str(SHARED / "glue" / "SST-2"),
                   help="SST-2 directory (train.tsv, dev.tsv)")
    p.add_argument("--config", default="configs/tiny.json", help="model config; the study sets "
                   "objective, vocab_size, max_seq_length, learning rate and warmup")
    p.add_argument("--objectives", default=",".join(OBJECTIVES),
                   help=f"comma-separated, from {', '.join(OBJECTIVES)}, adversarial, electric; "
                        f"<objective>{GDES_SUFFIX} (e.g. electra{GDES_SUFFIX}) trains that objective "
                        f"with embedding_sharing=gdes")
    p.add_argument("--budget_steps", default="400,800,1600",
                   help="budgets, each as the train FLOPs of this many electra steps of the config")
    p.add_argument("--budgets", default="",
                   help="budgets as train FLOPs (e.g. 2e14,8e14); overrides --budget_steps")
    # "executed" (3 x forward, lookups as gathers) is the arithmetic actually
    # done; the paper's "reference" count charges every embedding lookup as a
    # one-hot matmul (2*E*V per token), two thirds of a tiny model's count.
    p.add_argument("--convention", default="executed", choices=("reference", "executed"),
                   help="FLOPs counting (electra_tf/flops.py)")
    p.add_argument("--vocab_size", type=int, default=8000, help="WordPiece vocabulary to learn")
    p.add_argument("--seq_length", type=int, default=64, help="pre-training sequence length")
    p.add_argument("--batch_size", type=int, default=32, help="pre-training batch size")
    p.add_argument("--learning_rate", type=float, default=5e-4, help="pre-training peak lr")
    p.add_argument("--warmup_fraction", type=float, default=0.1,
                   help="pre-training warmup as a fraction of each run's steps")
    p.add_argument("--two_stage_fraction", type=float, default=0.5,
                   help="two_stage: fraction of its steps trained as mlm before the switch")
    p.add_argument("--seed", type=int, default=0, help="pre-training seed")
    p.add_argument("--seeds", default="1,2,3", help="fine-tuning seeds (the median is reported)")
    p.add_argument("--ft_train_examples", type=int, default=8000,
                   help="SST-2 training examples used (0: all 67k)")
    p.add_argument("--ft_eval_examples", type=int, default=0, help="dev examples used (0: all 872)")
    p.add_argument("--ft_epochs", type=float, default=1.0)
    p.add_argument("--ft_seq_length", type=int, default=64)
    p.add_argument("--ft_batch_size", type=int, default=32)
    # 3e-4 left the tiny model at chance from random init (51% dev, 1 epoch of
    # 8k); 1e-3 reached 72%.
    p.add_argument("--ft_learning_rate", type=float, default=1e-3)
    p.add_argument("--ft_layerwise_lr_decay", type=float, default=0.8)
    p.add_argument("--no_random_baseline", action="store_true", help="skip the budget-0 row")
    p.add_argument("--report_only", action="store_true",
                   help="train nothing: write the outputs from the finished runs of the work directory "
                        "(cells of unfinished runs show '–'); for studies run as several invocations")
    p.add_argument("--time_steps", type=int, default=0,
                   help="only measure: time N pre-training steps of each objective on the study's "
                        "model (synthetic batches, after 3 warm-up steps), write step_times.json, "
                        "exit")
    return p.parse_args(argv)


def _floats(text: str, flag: str) -> List[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise StudyError(f"--{flag}={text!r} must be comma-separated numbers, e.g. 400,800") from None
    if not values or any(v <= 0 for v in values):
        raise StudyError(f"--{flag}={text!r} needs at least one positive value")
    return values


def _write_json(path: Path, value) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _log(message: str) -> None:
    print(f"[study {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ----------------------------------------------------------------------- plan
def study_config(args, vocab_size: int):
    """The model config every run shares (objective and step counts set per run)."""
    from electra_tf.config import ElectraConfig

    path = args.config if os.path.isfile(args.config) else str(REPO / args.config)
    if not os.path.isfile(path):
        raise StudyError(f"--config {args.config!r} does not exist; pass e.g. configs/tiny.json")
    base = ElectraConfig.from_json(path)
    return base.replace(
        vocab_size=vocab_size, max_seq_length=args.seq_length,
        max_position_embeddings=max(base.max_position_embeddings, args.seq_length,
                                    args.ft_seq_length),
        learning_rate=args.learning_rate, train_batch_size=args.batch_size, seed=args.seed)


def study_entry(name: str):
    """(objective, config changes) of an --objectives entry; `<objective>_gdes` adds GDES.

    Args:
        name: an objective (config `objective`) or `<objective>_gdes`.
    """
    from electra_tf.config import OBJECTIVES as KNOWN

    if name not in KNOWN and name.endswith(GDES_SUFFIX) and name[:-len(GDES_SUFFIX)] in KNOWN:
        return name[:-len(GDES_SUFFIX)], {"embedding_sharing": "gdes"}
    return name, {}


def plan_run(config, objective: str, budget: float, args) -> Dict:
    """Steps (and two_stage's switch) that spend `budget` train FLOPs with `objective`.

    Returns a dict: objective, steps, two_stage_mlm_steps, planned_flops (the
    budget) and flops (what the whole run actually costs, <= budget).
    """
    from electra_tf.flops import total_train_flops, train_flops_per_step

    base, changes = study_entry(objective)

    def per_step(cfg, step=None):
        return train_flops_per_step(cfg, args.batch_size, convention=args.convention,
                                    step=step)["total"]

    k = 0
    if base == "two_stage":
        f = args.two_stage_fraction
        # Phase costs: step 0 is an MLM step, step 1 an ELECTRA step when k = 1.
        phases = config.replace(objective=base, two_stage_mlm_steps=1, **changes)
        steps = int(budget // (f * per_step(phases, 0) + (1 - f) * per_step(phases, 1)))
        k = max(1, int(round(f * steps)))
        cfg = config.replace(objective=base, two_stage_mlm_steps=k, **changes)
        while steps > 1 and total_train_flops(cfg, args.batch_size, steps,
                                              convention=args.convention) > budget:
            steps -= 1
    else:
        cfg = config.replace(objective=base, **changes)
        steps = int(budget // per_step(cfg))
    if steps < 2:
        raise StudyError(f"budget {budget:.3g} FLOPs buys {steps} step(s) of {objective}; raise "
                         f"--budget_steps/--budgets or shrink the config")
    warmup = max(1, int(round(args.warmup_fraction * steps)))
    cfg = cfg.replace(num_train_steps=steps, num_warmup_steps=warmup)
    return {"objective": objective, "steps": steps, "two_stage_mlm_steps": k,
            "warmup_steps": warmup, "planned_flops": budget,
            "flops": total_train_flops(cfg, args.batch_size, steps, convention=args.convention),
            "config": cfg}


# ------------------------------------------------------------------------ runs
def _reset_keras():
    import keras

    keras.backend.clear_session()
    keras.mixed_precision.set_global_policy("float32")


def pretrain(plan: Dict, data: Dict, run_dir: Path, args) -> Dict:
    """Pre-trains one (objective, budget) run; returns its summary (cached when done)."""
    from electra_tf.pretrain.options import PretrainOptions
    from electra_tf.pretrain.pretrain_job import run_pretraining

    summary_path = run_dir / "summary.json"
    if summary_path.is_file() and (run_dir / "pretrained" / "discriminator.weights.h5").is_file():
        return json.loads(summary_path.read_text(encoding="utf-8"))
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir.parent / f"{run_dir.name}.config.json"
    plan["config"].to_json(str(config_path))
    steps = plan["steps"]
    _log(f"pre-training {plan['objective']}: {steps} steps ({plan['flops']:.3g} FLOPs) in {run_dir}")
    _reset_keras()
    save_every = max(1, min(steps, 250))
    summary = run_pretraining(PretrainOptions(
        config=str(config_path), data_dir=data["data_dir"], vocab_file=data["vocab_file"],
        model_dir=str(run_dir), train_steps=steps, batch_size=args.batch_size,
        save_every=save_every, log_every=min(save_every, 100), keep_checkpoints=1, verbose="0"),
        log=lambda m: _log("  " + m))
    return summary


def finetune(init: str, out_dir: Path, data: Dict, args, config_path: Optional[str] = None) -> Dict:
    """SST-2 for every seed (each cached by the fine-tuning driver); returns its results.json."""
    from electra_tf.finetune.settings import Settings
    from electra_tf.finetune.finetune_job import run_task

    results = out_dir / "results.json"
    seeds = [int(s) for s in args.seeds.split(",")]
    if results.is_file():
        done = json.loads(results.read_text(encoding="utf-8"))
        if [int(s) for s in done["settings"]["seeds"]] == seeds:
            return done
    _log(f"fine-tuning SST-2 from {init} (seeds {args.seeds}) in {out_dir}")
    _reset_keras()
    return run_task(Settings(
        task="sst2", init=init, data_dir=args.glue_dir, output_dir=str(out_dir),
        config=config_path, vocab_file=data["vocab_file"] if config_path else None, seeds=seeds,
        learning_rate=args.ft_learning_rate, layerwise_lr_decay=args.ft_layerwise_lr_decay,
        epochs=args.ft_epochs, batch_size=args.ft_batch_size, max_seq_length=args.ft_seq_length,
        max_train_examples=args.ft_train_examples or None,
        max_eval_examples=args.ft_eval_examples or None))


def _finished(work: Path, tag: str, pretrained: bool = True) -> bool:
    """Whether run `tag` has its pre-trained model (if any) and its fine-tuning results."""
    done = (work / "finetune" / tag / "results.json").is_file()
    if pretrained:
        run = work / "pretrain" / tag
        done = done and (run / "summary.json").is_file() and (
            run / "pretrained" / "discriminator.weights.h5").is_file()
    return done


def _accuracies(results: Dict) -> List[float]:
    return [100.0 * float(seed["accuracy"]) for seed in results["seeds"]]


# ------------------------------------------------------------------------ main
def run_study(args) -> Dict:
    """Runs (or continues) the study; returns the results dict written to results.json."""
    from electra_tf.config import OBJECTIVES as KNOWN

    started = time.time()
    work = Path(args.work_dir)
    objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    unknown = [o for o in objectives if study_entry(o)[0] not in KNOWN]
    if unknown or not objectives:
        raise StudyError(f"--objectives {args.objectives!r}: unknown {', '.join(unknown) or '(none)'}; "
                         f"choose from {', '.join(KNOWN)}, or <objective>{GDES_SUFFIX}")
    if not 0 < args.two_stage_fraction < 1:
        raise StudyError(f"--two_stage_fraction={args.two_stage_fraction} must be in (0, 1)")
    if not 0 <= args.warmup_fraction < 1:
        raise StudyError(f"--warmup_fraction={args.warmup_fraction} must be in [0, 1)")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise StudyError(f"--seeds={args.seeds!r} must be comma-separated integers") from None
    for name in ("train.tsv", "dev.tsv"):
        if not (Path(args.glue_dir) / name).is_file():
            raise StudyError(f"--glue_dir {args.glue_dir} has no {name}; pass the GLUE SST-2 directory")
    work.mkdir(parents=True, exist_ok=True)
    study_path = work / "study.json"
    defining = {k: getattr(args, k) for k in STUDY_KEYS}
    if study_path.is_file():
        before = json.loads(study_path.read_text(encoding="utf-8"))
        changed = sorted(k for k in STUDY_KEYS if before.get(k) != defining[k])
        if changed:
            raise StudyError(f"{work} holds a study with other {', '.join(changed)} (see {study_path}); "
                             f"re-run with the same flags to continue it, or pass a new --work_dir")
    _write_json(study_path, defining)

    from electra_tf.data.vocab import load_vocab
    from electra_tf.flops import train_flops_per_step

    data = prepare_data(args, work, _log)
    config = study_config(args, len(load_vocab(data["vocab_file"])))
    electra_step = train_flops_per_step(config.replace(objective="electra"), args.batch_size,
                                        convention=args.convention)["total"]
    if args.budgets:
        budgets = _floats(args.budgets, "budgets")
    else:
        budgets = [s * electra_step for s in _floats(args.budget_steps, "budget_steps")]
    plans = [plan_run(config, o, b, args) for b in budgets for o in objectives]  # fail early
    _log(f"{len(plans)} pre-training runs: budgets {', '.join(f'{b:.3g}' for b in budgets)} FLOPs; "
         f"electra step = {electra_step:.3g} FLOPs")

    rows = []
    if not args.no_random_baseline and not (args.report_only
                                            and not _finished(work, "random_init", pretrained=False)):
        config_path = work / "random_init.config.json"
        config.to_json(str(config_path))
        res = finetune("random", work / "finetune" / "random_init", data, args, str(config_path))
        accs = _accuracies(res)
        rows.append({"objective": "random_init", "planned_flops": 0.0, "flops": 0.0, "steps": 0,
                     "pretrain_seconds": 0.0, "accuracies": accs, "median": statistics.median(accs)})
    for plan in plans:
        tag = f"{plan['objective']}-{plan['planned_flops']:.3e}"
        if args.report_only and not _finished(work, tag):
            _log(f"{tag}: not finished, left out of the report")
            continue
        summary = pretrain(plan, data, work / "pretrain" / tag, args)
        res = finetune(summary["final_model_dir"], work / "finetune" / tag, data, args)
        accs = _accuracies(res)
        rows.append({"objective": plan["objective"], "planned_flops": plan["planned_flops"],
                     "flops": plan["flops"], "steps": plan["steps"],
                     "two_stage_mlm_steps": plan["two_stage_mlm_steps"],
                     "pretrain_seconds": float(summary.get("fit_seconds") or 0.0),
                     "final_train_metrics": summary.get("train_metrics"),
                     "accuracies": accs, "median": statistics.median(accs)})
        _log(f"{tag}: SST-2 median {rows[-1]['median']:.2f} ({', '.join(f'{a:.2f}' for a in accs)})")

    meta = {"objectives": objectives, "seeds": seeds, "convention": args.convention,
            "model": f"{config.model_size} (H {config.hidden_size}, {config.num_hidden_layers} layers, "
                     f"seq {args.seq_length}, batch {args.batch_size})"}
    result = {"command": "python scripts/efficiency_study.py " + " ".join(sys.argv[1:]),
              "settings": vars(args), "budgets": budgets, "electra_step_flops": electra_step,
              "model_config": config.to_dict(), "rows": rows, "meta": meta,
              "seconds": round(time.time() - started, 1)}
    _write_json(work / RESULTS_JSON, result)
    write_markdown(work / RESULTS_MD, rows, budgets, meta)
    write_plot(work / PLOT_PNG, rows, meta)
    _log(f"done in {result['seconds']:.0f} s: {work / RESULTS_JSON}, {work / RESULTS_MD}, "
         f"{work / PLOT_PNG}")
    return result


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    from electra_tf.config import ConfigError
    from electra_tf.data.data_errors import DataError
    from electra_tf.finetune.settings import FinetuneError
    from electra_tf.pretrain.options import PretrainError

    try:
        if args.time_steps:
            from scripts.study_lib.efficiency_timing import time_steps  # imports TensorFlow; only this mode needs it

            time_steps(args, study_config(args, args.vocab_size), study_entry, _reset_keras,
                       _write_json, _log)
            return 0
        run_study(args)
    except (StudyError, ConfigError, DataError, FinetuneError, PretrainError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
