"""The pre-training job behind `python -m electra_tf.pretrain` (see docs/pretraining.md):
`run_pretraining(PretrainOptions(...))` returns the run's summary dict; `PretrainJob` holds the
job's numbered steps as methods.

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
from electra_tf.data.vocab import load_vocab, special_token_ids
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
    return PretrainJob(opts, log or (lambda message: print(message, flush=True))).run()


class PretrainJob:
    """One pre-training run, its numbered steps as methods (as Model Garden's Task has `build_model`,
    `build_inputs`, ...); each step keeps what the later ones read as attributes."""

    def __init__(self, opts: PretrainOptions, log: Callable[[str], None]):
        self.opts, self.log = opts, log
        self.started = time.time()

    def run(self) -> dict:
        self.check_options()
        self.build_strategy()
        self.prepare_run_directory()
        self.policy = PRECISION_POLICIES[self.opts.mixed_precision]
        # Same seed, same initial weights (and dropout streams) on every run and worker.
        keras.utils.set_random_seed(self.plan.config.seed)
        with precision_policy(self.policy):
            self.build_model()
            self.restore()
            self.build_inputs()
            self.build_trainer()
            self.train()
            return self.finish()

    # ---- 1. cheap checks, nothing written yet ---------------------------------
    def check_options(self) -> None:
        self.plan = validate_options(self.opts, self.log)

    # ---- 2. strategy and precision (before any other TF op) -------------------
    def build_strategy(self) -> None:
        opts, plan = self.opts, self.plan
        if opts.num_cpu_devices:
            distribution.split_cpu(opts.num_cpu_devices)
        self.strategy, strategy_name, self.strategy_text = distribution.create_strategy(
            plan.strategy_name, opts.tpu, opts.collective_timeout_s)
        plan.strategy_name = strategy_name
        self.chief = distribution.is_chief(self.strategy)
        self.worker = distribution.worker_label(self.strategy)
        self.replicas = self.strategy.num_replicas_in_sync
        # The batch goes down from here: global -> per replica (the data) -> micro-batches (the train step).
        self.batch = split_job_batch(plan, opts, self.replicas, self.strategy_text)

    # ---- 3. the run directory ---------------------------------------------------
    def prepare_run_directory(self) -> None:
        opts, plan, model_dir = self.opts, self.plan, self.plan.model_dir
        self.settings = settings = {
            "config": plan.config.to_dict() if not plan.embedded else None,  # filled in below for the default
            "train_steps": plan.train_steps, "batch_size": plan.batch_size,
            "grad_accum_steps": opts.grad_accum_steps, "mixed_precision": opts.mixed_precision,
            "seed": plan.config.seed,
            "init_from": plan.init_from,
        }
        self.run_path = os.path.join(model_dir, RUN_FILE)
        previous = read_json(self.run_path) if tf.io.gfile.exists(self.run_path) else None

        if plan.embedded:
            if self.chief and not plan.remote:
                os.makedirs(model_dir, exist_ok=True)
            plan.data_dir, plan.eval_dir, plan.vocab_file = prepare_embedded_default(model_dir, plan.config, self.log)
            vocab_size = len(load_vocab(plan.vocab_file))  # the model takes the learned vocabulary's size
            plan.config = plan.config.with_normalization(embedded_normalization(plan.data_dir), vocab_size=vocab_size)
            settings["config"] = plan.config.to_dict()
        settings["inputs"] = _input_fingerprints(plan)
        _check_resume(previous, settings, model_dir, self.run_path)

        self.special = special_token_ids(plan.vocab_file)
        self.excluded, self.skipped = check_shards(plan, opts, self.batch, self.log)

    # ---- 4. model, optimizer, restore -----------------------------------------
    def build_model(self) -> None:
        opts, plan = self.opts, self.plan
        with self.strategy.scope():
            self.model = model = ElectraPretrainer(plan.config, self.special, grad_accum_steps=opts.grad_accum_steps)
            optimizer = create_optimizer(plan.config, train_steps=plan.train_steps, model=model,
                                         adjustable_train_steps=opts.train_minutes is not None)
            if opts.mixed_precision == "fp16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            model.compile(optimizer=optimizer, jit_compile=bool(opts.jit_compile),
                          steps_per_execution=plan.steps_per_execution)
            optimizer.build(model.trainable_variables)
        self.optimizer = optimizer

    def restore(self) -> None:
        """The latest checkpoint of this run, else --continue_from's or --init's weights; then run.json."""
        opts, plan, model, train_steps = self.opts, self.plan, self.model, self.plan.train_steps
        self.checkpoints = checkpoints = CheckpointManager(os.path.join(plan.model_dir, CHECKPOINT_DIR),
                                                           opts.keep_checkpoints)
        try:
            self.resumed = checkpoints.restore_latest(model, clean=self.chief)
        except CheckpointError as e:
            fail(str(e))
        self.start_step = 0
        init_status = None
        if self.resumed is not None:
            self.start_step, path = self.resumed
            self.log(f"resuming from {path} at step {self.start_step} (learning rate "
                     f"{current_learning_rate(self.optimizer):.3g})")
        elif plan.continue_from:  # a new run: start from another run's newest checkpoint
            path = plan.continue_from
            try:
                self.start_step = checkpoints.restore(model, path)
            except CheckpointError as e:
                fail(f"--continue_from: {e}")
            if self.start_step >= train_steps:
                fail(f"--continue_from {opts.continue_from} is at step {self.start_step}; pass --train_steps "
                     f"(or --override num_train_steps=) above it, the step this run ends at")
            self.log(f"continuing from {path} at step {self.start_step} (learning rate "
                     f"{current_learning_rate(self.optimizer):.3g}), training on {plan.data_dir}")
        elif plan.init_from:  # a new run: the networks start from a model directory's weights
            init_status = load_initial_weights(model, plan.init_from, self.log)
        if self.chief:
            # Written once the checkpoint restored: a foreign or broken checkpoint
            # stops the run above without touching the directory.
            self._write_run_file(init_status)
        if self.start_step > train_steps:
            fail(f"{plan.model_dir} is already at step {self.start_step}, past --train_steps={train_steps}")

    def _write_run_file(self, init_status) -> None:
        plan = self.plan
        tf.io.gfile.makedirs(plan.model_dir)
        write_json_atomic(self.run_path, {
            "settings": self.settings,
            "flags": dataclasses.asdict(self.opts),
            "data_dir": plan.data_dir, "eval_data_dir": plan.eval_dir, "vocab_file": plan.vocab_file,
            "strategy": self.strategy_text, "init_from_parts": init_status,
        }, sort_keys=True)

    # ---- 5. data ----------------------------------------------------------
    def build_inputs(self) -> None:
        data_seed = self.plan.config.seed + self.start_step  # a resumed run does not replay the first batches
        self.inputs = make_inputs(self.plan, self.opts, self.strategy, self.batch, self.worker, self.excluded,
                                  data_seed, self.log)

    def _evaluate(self):
        inputs = self.inputs
        return self.model.evaluate(inputs.eval, steps=inputs.eval_steps, verbose=0, return_dict=True)

    # ---- 6. fit: the one training loop --------------------------------------
    def build_trainer(self) -> None:
        """The trainer, with the --train_minutes budget and the --snapshot_dir callback it needs."""
        opts, plan, log = self.opts, self.plan, self.log
        has_eval = bool(plan.eval_dir)
        self.trainer = trainer = Trainer(
            self.checkpoints, train_steps=plan.train_steps, global_batch_size=self.batch.global_batch,
            save_every=plan.save_every, log_every=plan.log_every,
            eval_every=plan.eval_every if has_eval else None,
            evaluate=self._evaluate if self.inputs.eval is not None else None,
            tensorboard_dir=os.path.join(plan.model_dir, TENSORBOARD_DIR), chief=self.chief, log=log,
            checks=[DiscriminatorCollapseDetector()], verbose=keras_verbose(opts.verbose),
            shown_eval_metrics=("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc"),
            restart_hint="lower the learning rate (--learning_rate) or check the data, and start again "
                         "in a new --output_dir",
            describe_data_loss=lambda e, kept: data_loss_message(
                e, [plan.data_dir] + ([plan.eval_dir] if has_eval else []), self.excluded, kept),
            multi_worker=plan.strategy_name == "multi_worker", worker=self.worker, fail=fail)
        time_budget = _time_budget(opts, plan, self.optimizer, trainer, self.resumed is not None, self.chief, log)
        trainer.time_budget = time_budget
        self.snapshots = None
        if self.chief and opts.snapshot_dir:
            self.snapshots = _snapshots(opts, plan, self.model, trainer, time_budget, plan.batch_size, log)
            trainer.extra_callbacks.append(self.snapshots)

    def train(self) -> None:
        opts, plan = self.opts, self.plan
        self.log(f"[{self.worker}] pre-training {plan.config.model_size} config ({self.model.count_params():,} "
                 f"parameters) on {self.strategy_text}: steps {self.start_step}->{plan.train_steps}, global batch "
                 f"{plan.batch_size}{f' ({opts.grad_accum_steps} micro-batches)' if opts.grad_accum_steps > 1 else ''}"
                 f", precision {self.policy}, jit_compile={bool(opts.jit_compile)}, "
                 f"steps_per_execution={plan.steps_per_execution}")
        if opts.jit_compile:
            align_function_names()
        self.final_step, self.fit_seconds = self.trainer.fit(self.model, self.inputs.train, self.start_step)
        plan.train_steps = self.trainer.callback.train_steps  # a --train_minutes run ends where it decided
        if self.snapshots is not None:
            self.snapshots.write(self.final_step)

    # ---- 7. the model directory --------------------------------------------
    def finish(self) -> dict:
        plan, callback = self.plan, self.trainer.callback
        summary = build_summary(plan, final_step=self.final_step, start_step=self.start_step,
                                checkpoints=self.checkpoints, strategy_text=self.strategy_text,
                                replicas=self.replicas, policy=self.policy, fit_seconds=self.fit_seconds,
                                callback=callback, skipped=self.skipped)
        if self.chief:
            write_final_model(plan, self.model, summary, self.checkpoints, callback, self.run_path, self.started,
                              self.fit_seconds, self.log)
        else:
            summary["total_seconds"] = round(time.time() - self.started, 2)
            self.log(f"[{self.worker}] done at step {self.final_step}; the chief writes the model")
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
