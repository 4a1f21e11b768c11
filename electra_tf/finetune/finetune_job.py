"""The fine-tuning driver behind `python -m electra_tf.finetune`.

One call of `run_task` trains and evaluates one task for several seeds and
writes `results.json` (per-seed metrics, their median and the settings).
Everything that differs between tasks (data, head, loss, evaluation, export)
is asked of the task's `FinetuneTask` object (`task_registry.get_task`); the
training itself is the one loop of every job (`electra_tf.training.trainer`):
NaN stop, progress lines, TensorBoard (`seed_<n>/tensorboard/`), evaluation
every --eval_every steps with the task's own metrics, checkpoints.

Resume: each seed checkpoints every `save_every` steps to
`<output_dir>/seed_<n>/checkpoints/` (model, optimizer step and slots, dropout
seed states) and writes `seed_<n>/result.json` when it is done. Re-running the
same command skips finished seeds and resumes an unfinished one at its last
checkpoint, on the same batches an uninterrupted run would see next, so it
ends with the same result. `<output_dir>/settings.json` guards against
resuming with other settings.

Text normalisation: the model's own record, config.json's `text_normalization`
(written by pre-training from its data manifest, or by convert;
`electra_tf.data.normalization`); an explicit --do_lower_case overrides its
casing. The resolved casing is what settings.json and results.json record, and
the saved classifier records the whole normalisation, so export serves the
model with the text normalisation it was fine-tuned with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import keras

from electra_tf.config import ElectraConfig
from electra_tf.fileio import write_json_atomic
from electra_tf.data.fingerprints import changed_inputs, fingerprints
from electra_tf.data.normalization import VOCAB_RECORD_SUFFIX, TextNormalization, find_vocab_record
from electra_tf.training import size_defaults
from electra_tf.finetune.tasks.base_task import FinetuneTask, TaskData
from electra_tf.models.model_folder import ModelDirError, ModelRecipe, find_init_files, read_model_recipe
from electra_tf.models.saving import load_encoder_weights
from electra_tf.models.classifier_model import build_and_call
from electra_tf.models.encoder_reinit import reinit_top_layers
from electra_tf.finetune.tasks.task_registry import get_task
from electra_tf.finetune.settings import (FinetuneError, Settings, check_intervals, check_mixed_precision,
                                          check_numbers, check_reinit)
from electra_tf.finetune.readers.tokenization import FinetuneTokenizer
from electra_tf.finetune.training_setup import check_strategy, distribution_strategy, make_dataset, train_steps
from electra_tf.models import build_encoder
from electra_tf.paths import output_dir_problem
from electra_tf.training.callbacks import current_learning_rate
from electra_tf.training.checkpoints import CheckpointError, CheckpointManager
from electra_tf.training.finetune_optimizer import make_optimizer
from electra_tf.training.shared_flags import PRECISION_POLICIES
from electra_tf.training.trainer import TENSORBOARD_DIR, Trainer, precision_policy, settings_conflicts

log = logging.getLogger("electra_tf.finetune")

SETTINGS_FILE = "settings.json"  # in output_dir: what a re-run must match to resume
RESULT_FILE = "result.json"  # in seed_<n>/: written when the seed is done
CHECKPOINT_DIR = "checkpoints"  # in seed_<n>/: removed when the seed is done
# Settings that may differ between a run and its resumption.
_RESUMABLE_CHANGES = ("seeds", "log_every", "eval_every", "overwrite")
# The recipe's settings that, left unset, come from the model size's defaults and the task
# (FinetuneTask.reference_hparams), in the order the opening lines show them.
RECIPE_DEFAULTS = ("learning_rate", "epochs", "batch_size", "layerwise_lr_decay", "pooling", "max_seq_length")
INPUTS_KEY = "inputs"  # in settings.json: the content fingerprints of the files the run read


def run_seed(s: Settings, task: FinetuneTask, seed: int, cfg: ElectraConfig, tokenizer,
             weights: Optional[str], data: TaskData, seed_dir: str,
             on_ready: Optional[Callable[[], None]] = None) -> Dict:
    """Fine-tunes and evaluates once.

    Args:
      s: settings (resolved).
      task: the task object for `s.task`.
      seed: random seed for initialisation, dropout and shuffling.
      cfg: ElectraConfig.
      tokenizer: FinetuneTokenizer.
      weights: pre-trained weights path or None.
      data: the task's prepared data.
      seed_dir: directory for this seed's predictions.
      on_ready: called once the model and its --init weights loaded, before
        anything is written (run_task writes settings.json there).
    """
    keras.utils.set_random_seed(seed)
    with distribution_strategy(s.strategy).scope():
        encoder = build_encoder(cfg)
        model = task.build_model(encoder, cfg, s, data)
        build_and_call(model, s.max_seq_length)
        if weights:
            with _init_errors():
                load_encoder_weights(encoder, weights)
        reinit_top_layers(encoder, cfg, s.reinit_top_layers)  # after loading, for both inits alike
        total, _ = train_steps(data.num_train, s, s.epochs)
        opt, mult = make_optimizer(model, encoder, s, s.learning_rate, s.layerwise_lr_decay, total)
        model.compile(optimizer=opt, loss=task.loss(), jit_compile=s.jit_compile)
        # Written only now: a bad --init fails above and leaves no directory behind.
        if on_ready is not None:
            on_ready()
        os.makedirs(seed_dir, exist_ok=True)
        checkpoints = CheckpointManager(os.path.join(seed_dir, CHECKPOINT_DIR), keep=1)
        try:
            resumed = checkpoints.restore_latest(model)
        except CheckpointError as e:
            raise FinetuneError(str(e)) from None
        start_step = 0
        if resumed is not None:
            start_step = resumed[0]
            print(f"resuming seed {seed} from {resumed[1]} at step {start_step} "
                  f"(learning rate {current_learning_rate(opt):.6g})", flush=True)
    # One pass, reshuffled each time round; a resumed seed skips the batches it trained on,
    # so it sees the batches an uninterrupted run would.
    ds = make_dataset(data.train_x, data.train_y, s.batch_size, shuffle_seed=seed,
                      trim_multiple=task.trim_multiple(s)).repeat().skip(start_step)
    trainer = Trainer(checkpoints, train_steps=total, global_batch_size=s.batch_size, save_every=s.save_every,
                      log_every=max(1, s.log_every), eval_every=s.eval_every,
                      evaluate=_periodic_evaluation(task, model, s, data) if s.eval_every else None,
                      tensorboard_dir=os.path.join(seed_dir, TENSORBOARD_DIR), shown_metrics=("loss",),
                      announce_last_checkpoint=False,
                      restart_hint="lower --learning_rate or check the data, and start again in a new --output_dir",
                      fail=_fail)
    t0 = time.time()
    trainer.fit(model, ds, start_step)
    train_time = time.time() - t0
    final_loss = trainer.callback.last_train.get("loss")
    result = {"seed": seed, "train_steps": total, "train_examples": data.num_train,
              "train_seconds": round(train_time, 1), "final_train_loss": final_loss}
    result.update(task.evaluate(model, s, data, seed_dir))
    saved = task.save_for_export(seed_dir, model, cfg, tokenizer, s)
    write_json_atomic(os.path.join(seed_dir, "lr_multipliers.json"), mult, indent=1)
    if saved:
        print(f"seed {seed}: model saved in {saved} (python -m electra_tf.predict and export take this "
              f"directory)", flush=True)
    if start_step:
        result["resumed_from_step"] = start_step
    return result


def _fail(message: str):
    raise FinetuneError(message)


def _periodic_evaluation(task: FinetuneTask, model, s: Settings, data: TaskData) -> Callable[[], Dict]:
    """The task's own dev metrics, for evaluation during training (--eval_every): the files
    its `evaluate` writes go to a scratch directory, and a test file's metrics are left out
    (choosing a step on them would overfit the test set)."""

    def evaluate() -> Dict:
        with tempfile.TemporaryDirectory() as scratch:
            metrics = task.evaluate(model, s, data, scratch)
        return {k: v for k, v in metrics.items() if not k.startswith("test_") and isinstance(v, (int, float))}

    return evaluate


def _write_settings(path: str, fixed: Dict) -> None:
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_json_atomic(path, fixed)


def _median(results: List[Dict]) -> Dict[str, float]:
    keys = [k for k, v in results[0].items() if isinstance(v, (int, float)) and k != "seed"]
    return {k: float(statistics.median(r[k] for r in results)) for k in keys}


def format_table(task: str, results: List[Dict], median: Dict[str, float],
                 metric_keys: Sequence[str], scale: float = 100.0) -> str:
    """A plain-text table: one row per seed and a median row.

    Args:
      task: task name (title).
      results: per-seed result dicts.
      median: median of each metric.
      metric_keys: columns to show.
      scale: factor applied to the values (100: fractions shown as percent).
    """
    head = ["seed"] + list(metric_keys)
    rows = [[str(r["seed"])] + [f"{scale * r[k]:.2f}" for k in metric_keys] for r in results]
    rows.append(["median"] + [f"{scale * median[k]:.2f}" for k in metric_keys])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths))

    out = [f"{task}: dev results (percent)", line(head), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


@contextlib.contextmanager
def _init_errors():
    """A model folder's problem (models/model_folder.py, models/saving.py) is --init's: one FinetuneError
    line, which the CLI reports."""
    try:
        yield
    except ModelDirError as e:
        raise FinetuneError(str(e)) from None


def resolve_init(s: Settings, task: FinetuneTask
                 ) -> Tuple[Optional[str], str, str, ElectraConfig, FinetuneTokenizer, Optional[ModelRecipe]]:
    """Finds the --init files, fills the defaults into `s` (the model folder's recipe, then the
    size's) and checks they fit.

    Returns:
      (weights or None, config path, vocab path, config, tokenizer, the model folder's recipe or None).
    """
    with _init_errors():
        weights, config_path, vocab_path = find_init_files(s.init, s.config, s.vocab_file)
    cfg = ElectraConfig.from_json(config_path)
    if s.init == "random":
        # A random encoder is built for the vocabulary it is given, as pre-training does.
        cfg = cfg.for_vocab(vocab_path)
    ref = task.reference_hparams(cfg.model_size, cfg.pooling)
    # The model folder's own recipe (finetune_recipe.json) comes before the size's; a flag before both.
    with _init_errors():
        recipe, note = read_model_recipe(os.path.dirname(weights) if weights else None)
    if note:
        print(f"note: {note}", flush=True)
    for key, value in (recipe.settings.items() if recipe else ()):
        # A floor raises the default epochs only, the folder's as the size's: --epochs is taken as it is.
        if getattr(s, key) is None and not (key == "min_train_steps" and s.epochs is not None):
            setattr(s, key, value)
    if s.reinit_top_layers is None:
        s.reinit_top_layers = 0
    if s.min_train_steps is None:
        # The size's floor raises the default epochs only: an explicit --epochs is taken as it is.
        s.min_train_steps = 0 if s.epochs is not None else ref["min_train_steps"]
    for key in RECIPE_DEFAULTS:
        if getattr(s, key) is None:
            setattr(s, key, ref[key])
    if s.max_seq_length > cfg.max_position_embeddings:
        raise FinetuneError(f"--max_seq_length {s.max_seq_length} exceeds the model's "
                            f"max_position_embeddings {cfg.max_position_embeddings}; lower it")
    # The text normalisation the model was pre-trained with (config.json records it); --do_lower_case
    # overrides its casing (accents stripped exactly when lower-casing, as BERT does).
    normalization = cfg.normalization
    # build_vocab's record beside --vocab_file (a model folder's config.json is the model's own).
    found = find_vocab_record(vocab_path)
    recorded, where = found if found is not None and found[1].endswith(VOCAB_RECORD_SUFFIX) else (None, None)
    if recorded is not None and recorded != normalization and s.init != "random":
        raise FinetuneError(f"--vocab_file {vocab_path} was built with text normalisation ({recorded.describe()}; "
                            f"{where}) but the model {config_path} was trained with "
                            f"({normalization.describe()}); pass the vocabulary the model was pre-trained with")
    if s.init == "random" and recorded is not None and cfg.text_normalization is None:
        normalization = recorded  # a random encoder for a vocabulary: the text it was learned from
    if s.do_lower_case is None:
        s.do_lower_case = normalization.lower_case
    elif s.do_lower_case != normalization.lower_case:
        normalization = TextNormalization.create(s.do_lower_case, None, normalization.mode)
    tokenizer = FinetuneTokenizer(vocab_path, normalization=normalization)
    if tokenizer.vocab_size != cfg.vocab_size:
        raise FinetuneError(f"vocab file {vocab_path} has {tokenizer.vocab_size} tokens but the config says "
                            f"vocab_size={cfg.vocab_size}; pass the pre-training vocabulary")
    return weights, config_path, vocab_path, cfg, tokenizer, recipe


def recipe_lines(s: Settings, given: Sequence[str], cfg: ElectraConfig, task: FinetuneTask,
                 num_train: int, recipe: Optional[ModelRecipe] = None) -> List[str]:
    """The run's opening lines on its recipe: each setting's value and where it came from.

    Args:
      s: resolved settings.
      given: the recipe settings the caller set (flags); the others are defaults.
      cfg: the encoder's config (its model_size picked the defaults, its pooling the read-out).
      task: the task (its epochs and sequence length are the task's defaults).
      num_train: training examples (for the step counts).
      recipe: the model folder's own recipe, where it set the defaults.
    """
    size = size_defaults.source_of(cfg.model_size)
    task_default = f"default for {task.name}"
    origin = {"learning_rate": size, "batch_size": size, "layerwise_lr_decay": size,
              "epochs": f"{cfg.model_size} default for {task.name}" if size_defaults.for_size(cfg.model_size).cpu_epochs
              else task_default,
              "pooling": "the encoder's own: its config.json records pooling" if cfg.pooling else size,
              "max_seq_length": task_default, "min_train_steps": size}
    for key in (recipe.settings if recipe else ()):
        origin[key] = f"the model's {os.path.basename(recipe.path)}"
    total, per_epoch = train_steps(num_train, s, s.epochs)
    planned = max(1, int(round(per_epoch * s.epochs)))
    steps = f"{planned} steps, {per_epoch} an epoch"
    floor = s.min_train_steps or 0
    if floor > planned:
        why = ("flag" if "min_train_steps" in given else origin["min_train_steps"] if recipe and "min_train_steps"
               in recipe.settings else f"{size}: a file this small would train too few steps")
        steps += f"; raised to {floor} steps by --min_train_steps={floor} [{why}]"
    if total < max(planned, floor):
        steps += f"; --train_steps stops at {total}"
    shown = {"learning_rate": f"{s.learning_rate:g}", "epochs": f"{s.epochs:g} ({steps})",
             "batch_size": str(s.batch_size), "layerwise_lr_decay": f"{s.layerwise_lr_decay:g}"
             + (" (none)" if s.layerwise_lr_decay == 1 else ""),
             "pooling": {"cls": "cls (the [CLS] vector)", "mean": "mean (of the token vectors)"}[s.pooling],
             "max_seq_length": str(s.max_seq_length)}
    keys = [k for k in RECIPE_DEFAULTS if k != "pooling" or task.pools]
    lines = [f"recipe (model_size {cfg.model_size!r}; a flag overrides each):"]
    for key in keys:
        lines.append(f"  --{key}={shown[key]}  [{'flag' if key in given else origin[key]}]")
    if s.reinit_top_layers or "reinit_top_layers" in given:
        lines.append(f"  --reinit_top_layers={s.reinit_top_layers} (the top blocks re-drawn after loading)  ["
                     + ("flag" if "reinit_top_layers" in given else origin.get("reinit_top_layers", "default")) + "]")
    if recipe and any(k not in given for k in recipe.settings):
        lines.append(f"  the model's own recipe ({recipe.path}): {recipe.why}")
    d = Settings.defaults()
    warmup = max(0, int(round(total * s.warmup_proportion)))
    lines.append(f"  --warmup_proportion={s.warmup_proportion:g} ({warmup} steps), --weight_decay={s.weight_decay:g}, "
                 f"--clip_norm={s.clip_norm:g}  [" + ", ".join(
                     "flag" if getattr(s, k) != getattr(d, k) else "default"
                     for k in ("warmup_proportion", "weight_decay", "clip_norm")) + "]")
    return lines


def input_files(s: Settings, task: FinetuneTask, weights: Optional[str], config_path: str,
                vocab_path: str) -> Dict[str, Optional[str]]:
    """The files a run reads, by the flag that names them (their content must not change under a
    resumption); under --data_dir only the files the task reads."""
    return {"--train_file": s.train_file, "--validation_file": s.validation_file, "--test_file": s.test_file,
            **(task.data_files(s) if s.data_dir else {}), "--init": weights, "--config": config_path,
            "--vocab_file": vocab_path}


def _resumable_settings(s: Settings, inputs: Dict) -> Tuple[Dict, str]:
    """The settings a resumption must match (with the inputs' content fingerprints), and
    settings.json's path; refuses an --output_dir that holds a run with other settings or
    inputs, unless --overwrite starts it over."""
    fixed = {k: v for k, v in dataclasses.asdict(s).items() if k not in _RESUMABLE_CHANGES}
    settings_path = os.path.join(s.output_dir, SETTINGS_FILE)
    if os.path.isfile(settings_path) and not s.overwrite:
        with open(settings_path, encoding="utf-8") as f:
            before = json.load(f)
        recorded = before.pop(INPUTS_KEY, None)
        for key in ("min_train_steps", "reinit_top_layers"):  # unset or unrecorded (before the floor existed): 0
            if before.get(key) is None:
                before[key] = 0
        changed = settings_conflicts(before, fixed)
        if changed:
            raise FinetuneError(f"--output_dir {s.output_dir} holds a fine-tuning run with other settings "
                                f"({', '.join(changed)} differ from {settings_path}); re-run with the same "
                                f"flags to resume it, or pass a new --output_dir (or --overwrite "
                                f"to start over there)")
        # A run from before inputs were recorded cannot be checked; it resumes as it did then.
        altered = [] if recorded is None else changed_inputs(recorded, inputs)
        if altered:
            # A file inside --data_dir is recorded as "--data_dir:<name>" and named "--data_dir file <path>".
            named = ", ".join(f"{name.split(':')[0]}{' file' if ':' in name else ''} "
                              f"{(inputs.get(name) or recorded.get(name))['path']}" for name in altered)
            raise FinetuneError(f"{named} changed since the run in --output_dir {s.output_dir} began (the content "
                                f"differs from what {settings_path} records); pass a new --output_dir, or "
                                f"--overwrite to start over there")
    fixed[INPUTS_KEY] = inputs
    return fixed, settings_path


def _start_over(output_dir: str) -> None:
    """--overwrite: removes what an earlier fine-tuning run wrote in `output_dir`
    (settings, results, seed folders), nothing else."""
    if not os.path.isdir(output_dir):
        return
    for name in os.listdir(output_dir):
        path = os.path.join(output_dir, name)
        if name in (SETTINGS_FILE, "results.json"):
            os.remove(path)
        elif name.startswith("seed_") and name[len("seed_"):].lstrip("-").isdigit() and os.path.isdir(path):
            shutil.rmtree(path)


def run_task(s: Settings) -> Dict:
    """Resolves defaults, prepares data once, runs every seed, writes results.json.

    Bad settings are refused (one `FinetuneError` line) before any data are read
    or anything is written.

    Args:
      s: settings from the CLI.

    Returns:
      the results dictionary written to `<output_dir>/results.json`.
    """
    task = get_task(s.task)
    check_strategy(s)  # first: --num_cpu_devices must split the CPU before TensorFlow starts
    check_mixed_precision(s)
    check_numbers(s)
    problem = output_dir_problem(s.output_dir)
    if problem:
        raise FinetuneError(f"cannot write to --output_dir '{s.output_dir}' ({problem}); choose a writable directory")
    given = [k for k in RECIPE_DEFAULTS + ("min_train_steps", "reinit_top_layers") if getattr(s, k) is not None]
    weights, config_path, vocab_path, cfg, tokenizer, recipe = resolve_init(s, task)
    check_intervals(s)
    check_reinit(s, cfg.num_hidden_layers)
    fixed, settings_path = _resumable_settings(s, fingerprints(input_files(s, task, weights, config_path, vocab_path)))
    with precision_policy(PRECISION_POLICIES[s.mixed_precision]):
        return _run_seeds(s, task, weights, config_path, vocab_path, cfg, tokenizer, fixed, settings_path, given,
                          recipe)


def _run_seeds(s: Settings, task: FinetuneTask, weights, config_path, vocab_path, cfg, tokenizer, fixed,
               settings_path, given: Sequence[str] = (), recipe: Optional[ModelRecipe] = None) -> Dict:
    """The second half of `run_task`: data once, then every seed, under the run's dtype policy."""
    data = task.prepare_data(s, tokenizer)
    for line in task.summary_lines(data, cfg.max_position_embeddings):
        print(line, flush=True)
    for line in recipe_lines(s, given, cfg, task, data.num_train, recipe):
        print(line, flush=True)
    if s.overwrite:
        _start_over(s.output_dir)
    results = []
    for seed in s.seeds:
        # DEBUG, not INFO: absl prints INFO records of Python loggers on stderr.
        log.debug("task %s seed %d", s.task, seed)
        seed_dir = os.path.join(s.output_dir, f"seed_{seed}")
        done_path = os.path.join(seed_dir, RESULT_FILE)
        if os.path.isfile(done_path):
            with open(done_path, encoding="utf-8") as f:
                results.append(json.load(f))
            print(f"seed {seed}: already done ({done_path})", flush=True)
        else:
            results.append(run_seed(s, task, seed, cfg, tokenizer, weights, data, seed_dir,
                                    on_ready=lambda: _write_settings(settings_path, fixed)))
            write_json_atomic(done_path, results[-1])
        # The seed's outputs are complete: its checkpoints are no longer needed.
        shutil.rmtree(os.path.join(seed_dir, CHECKPOINT_DIR), ignore_errors=True)
    median = _median(results)
    keys = task.metric_keys(results[0])
    settings = dataclasses.asdict(s)
    settings["seeds"] = list(s.seeds)
    out = {"task": s.task, "init": s.init, "weights": weights, "config": config_path, "vocab_file": vocab_path,
           "model_size": cfg.model_size, "settings": settings, "metrics": keys,
           "seeds": results, "median": median}
    described = task.describe_data(data)
    if described is not None:
        out["data"] = described
    write_json_atomic(os.path.join(s.output_dir, "results.json"), out)
    table = task.format_results(results, median, data)
    print(table if table is not None else format_table(s.task, results, median, keys, task.table_scale), flush=True)
    return out
