"""The pre-training job behind `python -m electra_tf.pretrain` (see docs/pretraining.md):
`run_pretraining(PretrainOptions(...))` returns the run's summary dict.

Order of work: cheap checks (config, flags, data manifests, model_dir) before
anything is written; then the strategy; then data, model, restore of the
latest checkpoint; `model.fit`; the final model directory. The steps live in:

    options.py      PretrainOptions, PretrainError, the checks -> RunPlan (step 1)
    data_setup.py   the embedded default's data, shard checks, the datasets (step 5)
    run_summary.py  the final model directory and summary.json (step 7)

Step 6 is the one training loop (`electra_tf.training.trainer.Trainer`), with
the discriminator collapse detector as this job's check.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable

import keras
import tensorflow as tf

from electra_tf.data.fingerprints import changed_inputs, fingerprints
from electra_tf.fileio import read_json, write_json_atomic
from electra_tf.data.manifest import MANIFEST_NAME
from electra_tf.data.normalization import from_record
from electra_tf.data.vocab import special_token_ids
from electra_tf.pretrain.collapse_detector import DiscriminatorCollapseDetector
from electra_tf.pretrain.data_setup import (check_shards, data_loss_message, embedded_normalization, make_inputs,
                                            prepare_embedded_default, split_job_batch)
from electra_tf.pretrain.init_from import load_initial_weights
from electra_tf.pretrain.pretrain_optimizer import create_optimizer
from electra_tf.models.saving import save_pretrained
from electra_tf.pretrain.options import (CHECKPOINT_DIR, RESUME_KEYS, RUN_FILE, TENSORBOARD_DIR, TIME_BUDGET_FILE,
                                         PretrainError, PretrainOptions, RunPlan, fail,
                                         validate_options)
from electra_tf.pretrain.snapshots import ModelSnapshots
from electra_tf.pretrain.pretrainer import ElectraPretrainer
from electra_tf.pretrain.run_summary import build_summary, write_final_model
from electra_tf.training import distribution
from electra_tf.training.callbacks import current_learning_rate
from electra_tf.training.checkpoints import CheckpointError, CheckpointManager
from electra_tf.training.shared_flags import PRECISION_POLICIES
from electra_tf.training.time_budget import TimeBudget
from electra_tf.training.trainer import Trainer, keras_verbose, precision_policy, settings_conflicts


def _check_resume(previous, settings: dict, model_dir: str, run_path: str) -> None:
    if previous is None:
        return
    before = {k: previous.get("settings", {}).get(k) for k in RESUME_KEYS}
    if isinstance(before.get("config"), dict) and "text_normalization" not in before["config"]:
        # A run begun before config.json recorded the text normalisation: what its data meant then.
        before["config"] = dict(before["config"], text_normalization=from_record(before["config"], run_path).to_json())
    changed = settings_conflicts(before, {k: settings[k] for k in RESUME_KEYS})
    if changed:
        fail(f"{model_dir} holds a run with other settings ({', '.join(changed)} differ from "
             f"{run_path}); re-run with the same flags to resume it, or pass a new --output_dir")
    recorded = previous.get("settings", {}).get("inputs")  # None: a run from before inputs were recorded
    altered = [] if recorded is None else changed_inputs(recorded, settings["inputs"])
    if altered:
        named = ", ".join(f"{name} {(settings['inputs'].get(name) or recorded[name])['path']}" for name in altered)
        fail(f"{named} changed since the run in {model_dir} began (its content differs from what {run_path} "
             f"records: rebuilt shards or another vocabulary); resuming would train on other data than its "
             f"checkpoints did: pass a new --output_dir, or restore the files")


def _input_fingerprints(plan) -> dict:
    """The content of what the run reads, for the resume check: each shard folder by its
    manifest.json (which holds every shard's SHA-256, so it changes whenever a shard does) and the
    vocabulary. The embedded default builds its data inside the run directory: nothing to record."""
    if plan.embedded:
        return {}
    manifest = lambda d: d and tf.io.gfile.join(d, MANIFEST_NAME)  # noqa: E731
    return fingerprints({"--data_dir": manifest(plan.data_dir), "--eval_data_dir": manifest(plan.eval_dir),
                         "--vocab_file": plan.vocab_file})


def run_pretraining(opts: PretrainOptions, log: Callable[[str], None] = None) -> dict:
    """Runs (or resumes) one pre-training job; returns a summary dict.

    Raises:
      PretrainError / ConfigError / DataError / VocabError / StrategyError on bad
      input, before anything is written.
    """
    log = log or (lambda message: print(message, flush=True))
    started = time.time()

    # ---- 1. cheap checks, nothing written yet ---------------------------------
    plan = validate_options(opts, log)
    model_dir, train_steps, batch_size = plan.model_dir, plan.train_steps, plan.batch_size

    # ---- 2. strategy and precision (before any other TF op) -------------------
    if opts.num_cpu_devices:
        distribution.split_cpu(opts.num_cpu_devices)
    strategy, strategy_name, strategy_text = distribution.create_strategy(
        plan.strategy_name, opts.tpu, opts.collective_timeout_s)
    plan.strategy_name = strategy_name
    chief = distribution.is_chief(strategy)
    worker = distribution.worker_label(strategy)
    replicas = strategy.num_replicas_in_sync
    # The batch goes down from here: global -> per replica (the data) -> micro-batches (the train step).
    batch = split_job_batch(plan, opts, replicas, strategy_text)

    # ---- 3. the run directory ---------------------------------------------------
    settings = {
        "config": plan.config.to_dict() if not plan.embedded else None,  # filled in below for the default
        "train_steps": train_steps, "batch_size": batch_size,
        "grad_accum_steps": opts.grad_accum_steps, "mixed_precision": opts.mixed_precision,
        "seed": plan.config.seed,
        "init_from": plan.init_from,
    }
    run_path = os.path.join(model_dir, RUN_FILE)
    previous = read_json(run_path) if tf.io.gfile.exists(run_path) else None

    if plan.embedded:
        if chief and not plan.remote:
            os.makedirs(model_dir, exist_ok=True)
        plan.data_dir, plan.eval_dir, plan.vocab_file = prepare_embedded_default(model_dir, plan.config, log)
        plan.config = plan.config.for_vocab(plan.vocab_file).with_normalization(embedded_normalization(plan.data_dir))
        settings["config"] = plan.config.to_dict()
    settings["inputs"] = _input_fingerprints(plan)
    _check_resume(previous, settings, model_dir, run_path)

    config = plan.config
    special = special_token_ids(plan.vocab_file)
    excluded, skipped = check_shards(plan, opts, batch, log)

    # ---- 4. model, optimizer, restore -----------------------------------------
    policy = PRECISION_POLICIES[opts.mixed_precision]
    # Same seed, same initial weights (and dropout streams) on every run and worker.
    keras.utils.set_random_seed(config.seed)
    with precision_policy(policy):
        with strategy.scope():
            model = ElectraPretrainer(config, special, grad_accum_steps=opts.grad_accum_steps)
            optimizer = create_optimizer(config, train_steps=train_steps, model=model,
                                         adjustable_train_steps=opts.train_minutes is not None)
            if opts.mixed_precision == "fp16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            model.compile(optimizer=optimizer, jit_compile=bool(opts.jit_compile),
                          steps_per_execution=plan.steps_per_execution)
            optimizer.build(model.trainable_variables)
        checkpoints = CheckpointManager(os.path.join(model_dir, CHECKPOINT_DIR), opts.keep_checkpoints)
        try:
            resumed = checkpoints.restore_latest(model, clean=chief)
        except CheckpointError as e:
            fail(str(e))
        start_step = 0
        init_status = None
        if resumed is not None:
            start_step, path = resumed
            log(f"resuming from {path} at step {start_step} (learning rate "
                f"{current_learning_rate(optimizer):.3g})")
        elif plan.continue_from:  # a new run: start from another run's newest checkpoint
            path = plan.continue_from
            try:
                start_step = checkpoints.restore(model, path)
            except CheckpointError as e:
                fail(f"--continue_from: {e}")
            if start_step >= train_steps:
                fail(f"--continue_from {opts.continue_from} is at step {start_step}; pass --train_steps "
                     f"(or --override num_train_steps=) above it, the step this run ends at")
            log(f"continuing from {path} at step {start_step} (learning rate "
                f"{current_learning_rate(optimizer):.3g}), training on {plan.data_dir}")
        elif plan.init_from:  # a new run: the networks start from a model directory's weights
            init_status = load_initial_weights(model, plan.init_from, log)
        if chief:
            # Written once the checkpoint restored: a foreign or broken checkpoint
            # stops the run above without touching the directory.
            tf.io.gfile.makedirs(model_dir)
            write_json_atomic(run_path, {
                "settings": settings,
                "flags": dataclasses.asdict(opts),
                "data_dir": plan.data_dir, "eval_data_dir": plan.eval_dir, "vocab_file": plan.vocab_file,
                "strategy": strategy_text, "init_from_parts": init_status,
            }, sort_keys=True)
        if start_step > train_steps:
            fail(f"{model_dir} is already at step {start_step}, past --train_steps={train_steps}")

        # ---- 5. data ----------------------------------------------------------
        data_seed = config.seed + start_step  # a resumed run does not replay the first batches
        inputs = make_inputs(plan, opts, strategy, batch, worker, excluded, data_seed, log)
        evaluate = None
        if inputs.eval is not None:

            def evaluate():
                return model.evaluate(inputs.eval, steps=inputs.eval_steps, verbose=0, return_dict=True)

        # ---- 6. fit: the one training loop --------------------------------------
        has_eval = bool(plan.eval_dir)
        trainer = Trainer(
            checkpoints, train_steps=train_steps, global_batch_size=batch.global_batch, save_every=plan.save_every,
            log_every=plan.log_every, eval_every=plan.eval_every if has_eval else None, evaluate=evaluate,
            tensorboard_dir=os.path.join(model_dir, TENSORBOARD_DIR), chief=chief, log=log,
            checks=[DiscriminatorCollapseDetector()], verbose=keras_verbose(opts.verbose),
            shown_eval_metrics=("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc"),
            restart_hint="lower the learning rate (--learning_rate) or check the data, and start again "
                         "in a new --output_dir",
            describe_data_loss=lambda e, kept: data_loss_message(
                e, [plan.data_dir] + ([plan.eval_dir] if has_eval else []), excluded, kept),
            multi_worker=strategy_name == "multi_worker", worker=worker, fail=fail)
        time_budget = _time_budget(opts, plan, optimizer, trainer, resumed is not None, chief, log)
        trainer.time_budget = time_budget
        snapshots = None
        if chief and opts.snapshot_dir:
            snapshots = _snapshots(opts, plan, model, trainer, time_budget, batch_size, log)
            trainer.extra_callbacks.append(snapshots)
        log(f"[{worker}] pre-training {config.model_size} config ({model.count_params():,} parameters) "
            f"on {strategy_text}: steps {start_step}->{train_steps}, global batch {batch_size}"
            f"{f' ({opts.grad_accum_steps} micro-batches)' if opts.grad_accum_steps > 1 else ''}, "
            f"precision {policy}, jit_compile={bool(opts.jit_compile)}, "
            f"steps_per_execution={plan.steps_per_execution}")
        if opts.jit_compile:
            align_function_names()
        final_step, fit_seconds = trainer.fit(model, inputs.train, start_step)
        callback = trainer.callback
        plan.train_steps = callback.train_steps  # a --train_minutes run ends where it decided
        if snapshots is not None:
            snapshots.write(final_step)

        # ---- 7. the model directory --------------------------------------------
        summary = build_summary(plan, final_step=final_step, start_step=start_step, checkpoints=checkpoints,
                                strategy_text=strategy_text, replicas=replicas, policy=policy,
                                fit_seconds=fit_seconds, callback=callback, skipped=skipped)
        if chief:
            write_final_model(plan, model, summary, checkpoints, callback, run_path, started, fit_seconds, log)
        else:
            summary["total_seconds"] = round(time.time() - started, 2)
            log(f"[{worker}] done at step {final_step}; the chief writes the model")
        return summary


def align_function_names(block: int = 1 << 20) -> int:
    """Moves TensorFlow's process-wide uid counter to the next multiple of `block`; returns it.

    A traced function is named with that counter (`__inference_one_step_on_data_<uid>`), and
    TensorFlow's persistent XLA cache (`TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR`) keys
    a compiled step by that name. A resumed run restores a checkpoint where the run it resumes
    loaded its --init weights, which uses up another count of uids; starting the train step's
    trace at the same round number gives it the same name, so the resumed run loads the step
    compiled before instead of compiling it again (minutes on a GPU).
    """
    from tensorflow.python.framework import ops

    uid = ops.uid()
    target = (uid // block + 1) * block
    for _ in range(target - uid - 1):
        ops.uid()
    return target


def _schedule(optimizer):
    """The learning-rate schedule object inside `optimizer` (a LossScaleOptimizer's inner one)."""
    return getattr(optimizer, "inner_optimizer", optimizer)._learning_rate


def _time_budget(opts: PretrainOptions, plan: RunPlan, optimizer, trainer: Trainer, resumed: bool, chief: bool,
                 log: Callable[[str], None]):
    """--train_minutes: a `TimeBudget` for a new run; a resumed run keeps the step it decided."""
    if opts.train_minutes is None:
        return None
    path = os.path.join(plan.model_dir, TIME_BUDGET_FILE)
    schedule = _schedule(optimizer)
    if resumed and tf.io.gfile.exists(path):
        end = int(read_json(path)["end_step"])
        trainer.callback.train_steps = end
        schedule.set_train_steps(end)
        log(f"--train_minutes: this run decided on step {end} ({path}); resuming towards it")
        return None
    budget = None

    def on_decided(end: int, steps_per_second):
        trainer.callback.train_steps = end
        schedule.set_train_steps(end)
        if steps_per_second is None:
            log(f"--train_minutes {opts.train_minutes:g}: the time is up at step {end}; training stops there "
                f"(the learning rate has not reached 0)")
        else:
            log(f"--train_minutes {opts.train_minutes:g}: {steps_per_second:.2f} steps/s after the first step "
                f"({budget.compile_seconds:.1f}s with its compile); training to step {end}, where the learning "
                f"rate reaches 0")
        if chief:
            tf.io.gfile.makedirs(plan.model_dir)
            write_json_atomic(path, {"train_minutes": opts.train_minutes, **budget.decision()}, sort_keys=True)

    budget = TimeBudget(opts.train_minutes, plan.train_steps, on_decided, step_multiple=plan.steps_per_execution)
    return budget


def _snapshots(opts: PretrainOptions, plan: RunPlan, model, trainer: Trainer, time_budget, batch_size: int,
               log: Callable[[str], None]) -> ModelSnapshots:
    """--snapshot_dir: the callback writing a model directory every --snapshot_minutes."""
    parts = ("discriminator_head", "generator", "mlm_head", "copy_head")  # every part, each weight once

    def metrics() -> dict:
        callback = trainer.callback
        step = int(model.optimizer.iterations.numpy())
        record = {"examples": step * batch_size, "train_metrics": callback.last_train,
                  "eval_metrics": callback.last_eval, "learning_rate": current_learning_rate(model.optimizer),
                  "examples_per_second": round(callback.steady_examples_per_second, 2),
                  "train_steps": callback.train_steps}
        if time_budget is not None:
            record["time_budget"] = {"train_minutes": opts.train_minutes, **time_budget.decision()}
        return record

    return ModelSnapshots(opts.snapshot_dir, opts.snapshot_minutes,
                          lambda folder: save_pretrained(folder, model, plan.vocab_file, parts=parts),
                          dtype=opts.snapshot_dtype, metrics=metrics, log=log)
