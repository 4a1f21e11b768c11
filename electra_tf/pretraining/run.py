"""The pre-training job behind `python -m electra_tf.pretrain` (see docs/pretraining.md).

    from electra_tf.pretraining.run import PretrainOptions, run_pretraining
    summary = run_pretraining(PretrainOptions(model_dir="runs/default"))  # embedded default

Order of work: cheap checks (config, flags, data manifests, model_dir) before
anything is written; then the strategy; then data, model, restore of the
latest checkpoint; `model.fit`; the final model directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import time
from typing import Callable, List, Optional

from electra_tf.config import ConfigError, ElectraConfig
from electra_tf.data import manifest as mf
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.build_vocab import build_vocab
from electra_tf.data.fs import write_json_atomic, write_text_atomic
from electra_tf.data.reader import CorruptShardError, find_corrupt_shards, pretraining_dataset
from electra_tf.data.vocab import load_vocab, special_token_ids
from electra_tf.errors import ElectraError, error_line
from electra_tf.models.saving import save_pretrained
from electra_tf.paths import is_remote, output_dir_problem
from electra_tf.pretraining import distribution
from electra_tf.pretraining.callbacks import (CheckpointError, CheckpointManager, PretrainingCallback,
                                              StopOnNonFiniteLoss, current_learning_rate)
from electra_tf.pretraining.optimization import create_optimizer
from electra_tf.pretraining.pretrainer import ElectraPretrainer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE_CORPUS = os.path.join(REPO_ROOT, "data", "sample_corpus.txt")
DEFAULT_CONFIG = os.path.join(REPO_ROOT, "configs", "tiny.json")
DEFAULT_MODEL_DIR = os.path.join("runs", "default")

# The embedded default: tiny config, a few hundred CPU steps (~2 min on 2 cores).
DEMO_TRAIN_STEPS = 300
DEMO_BATCH_SIZE = 32
DEMO_VOCAB_SIZE = 2000
DEMO_VOCAB_MIN_COUNT = 2  # a 13k-word corpus: words seen twice become whole pieces
DEMO_EVAL_DOCS = 4  # the last documents of the sample corpus are held out

# Files inside <model_dir>.
RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
FINAL_DIR = "pretrained"

# Settings that must not change when a run is resumed.
RESUME_KEYS = ("config", "train_steps", "batch_size", "grad_accum_steps", "mixed_precision", "seed")


class PretrainError(ElectraError, ValueError):
    """Bad flags or inputs; the message names the culprit and the fix."""


@dataclasses.dataclass
class PretrainOptions:
    config: Optional[str] = None  # default: configs/tiny.json (embedded default) / required otherwise
    data_dir: Optional[str] = None  # None: the embedded default (sample corpus)
    model_dir: Optional[str] = None
    vocab_file: Optional[str] = None
    eval_data_dir: Optional[str] = None
    strategy: str = "auto"
    tpu: Optional[str] = None
    num_cpu_devices: int = 0
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_execution: int = 1
    train_steps: Optional[int] = None
    batch_size: Optional[int] = None
    grad_accum_steps: int = 1
    eval_every: Optional[int] = None
    eval_steps: Optional[int] = None
    save_every: Optional[int] = None
    keep_checkpoints: int = 3
    log_every: Optional[int] = None
    overrides: List[str] = dataclasses.field(default_factory=list)
    seed: Optional[int] = None
    deterministic_data: bool = False
    collective_timeout_s: float = 0.0
    skip_corrupt_shards: bool = False  # verify every shard first; train without the corrupt ones
    verbose: str = "auto"  # auto | 0 | 1 | 2 (Keras progress bar)


def _fail(message: str):
    raise PretrainError(message)


def _positive(name: str, value, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(f"--{name}={value!r} must be a positive integer")


def _resolve_config_path(path: Optional[str]) -> str:
    if path is None:
        return DEFAULT_CONFIG
    if os.path.isfile(path) or is_remote(path):
        return path
    in_repo = os.path.join(REPO_ROOT, path)
    if os.path.isfile(in_repo):
        return in_repo
    _fail(f"--config {path!r} does not exist; pass a JSON file such as configs/small.json")


def _sha256(path: str) -> str:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: str):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with tf.io.gfile.GFile(path, "r") as f:
        return json.loads(f.read())


def _write_json(path: str, value) -> None:
    write_json_atomic(path, value, sort_keys=True)


def _split_sample_corpus(work_dir: str):
    """data/sample_corpus.txt -> (train.txt, eval.txt) in work_dir, last docs held out."""
    if not os.path.isfile(SAMPLE_CORPUS):
        _fail(f"the embedded default needs {SAMPLE_CORPUS}, which is missing (is this a clone of the "
              f"repository, installed with pip install -e .?); otherwise pass --data_dir and --vocab_file")
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        docs = [d.strip("\n") for d in f.read().split("\n\n") if d.strip()]
    train_txt = os.path.join(work_dir, "train.txt")
    eval_txt = os.path.join(work_dir, "eval.txt")
    for path, part in ((train_txt, docs[:-DEMO_EVAL_DOCS]), (eval_txt, docs[-DEMO_EVAL_DOCS:])):
        if not os.path.isfile(path):
            write_text_atomic(path, "\n\n".join(part) + "\n")
    return train_txt, eval_txt, len(docs)


def prepare_embedded_default(model_dir: str, config: ElectraConfig, log: Callable[[str], None]):
    """Builds vocab.txt and train/eval shards from the sample corpus (once) inside model_dir."""

    corpus_dir = os.path.join(model_dir, "corpus")
    os.makedirs(corpus_dir, exist_ok=True)
    train_txt, eval_txt, num_docs = _split_sample_corpus(corpus_dir)
    vocab_file = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab_file):
        log(f"embedded default: learning a WordPiece vocab from {SAMPLE_CORPUS} "
            f"({num_docs - DEMO_EVAL_DOCS} of {num_docs} documents; the last {DEMO_EVAL_DOCS} are held out)")
        build_vocab([train_txt], DEMO_VOCAB_SIZE, vocab_file, sample_lines=0,
                    min_count=DEMO_VOCAB_MIN_COUNT, learner="bert_vocab", log=log)
    data_dir = os.path.join(model_dir, "data", "train")
    eval_dir = os.path.join(model_dir, "data", "eval")
    for directory, text, shards in ((data_dir, train_txt, 2), (eval_dir, eval_txt, 1)):
        if not os.path.isfile(os.path.join(directory, "manifest.json")):
            build_pretraining_data(directory, vocab_file, [text], max_seq_length=config.max_seq_length,
                                   num_shards=shards, num_processes=1, seed=config.seed,
                                   progress=False, log=log)
    return data_dir, eval_dir, vocab_file


def _manifest_of(data_dir: str, flag: str):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not tf.io.gfile.isdir(data_dir):
        _fail(f"--{flag} {data_dir!r} is not a directory; pass the --output_dir of "
              f"python -m electra_tf.data.build_pretraining_data")
    manifest = mf.load_manifest(data_dir)
    if manifest is None:
        _fail(f"--{flag} {data_dir!r} has no manifest.json (an unfinished or foreign build); re-run "
              f"python -m electra_tf.data.build_pretraining_data with the same flags to finish it")
    return manifest


def _run_vocab_size(model_dir: str) -> Optional[int]:
    """The config vocab_size of the run already in model_dir (None: no run there)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = os.path.join(model_dir, RUN_FILE)
    try:
        if not tf.io.gfile.exists(path):
            return None
        return ((_read_json(path).get("settings") or {}).get("config") or {}).get("vocab_size")
    except (ValueError, AttributeError, tf.errors.OpError):
        return None  # an unreadable run.json is reported where it is read


def _summary_line(values: dict, keys=("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc",
                                      "disc_accuracy")) -> str:
    return ", ".join(f"{k}={values[k]:.4f}" for k in keys if k in values)


def run_pretraining(opts: PretrainOptions, log: Callable[[str], None] = None) -> dict:
    """Runs (or resumes) one pre-training job; returns a summary dict.

    Raises:
      PretrainError / ConfigError / DataError / VocabError / StrategyError on bad
      input, before anything is written.
    """
    log = log or (lambda message: print(message, flush=True))
    started = time.time()
    embedded = opts.data_dir is None

    # ---- 1. cheap checks, nothing written yet ---------------------------------
    if opts.config is None and not embedded:
        _fail("--config is required with --data_dir (e.g. --config configs/small.json)")
    config_path = _resolve_config_path(opts.config)
    config = ElectraConfig.from_json(config_path)
    if opts.seed is not None:
        config = config.replace(seed=opts.seed)
    config = config.with_overrides(opts.overrides)
    for name in ("train_steps", "batch_size", "eval_every", "eval_steps", "save_every", "log_every"):
        _positive(name, getattr(opts, name))
    _positive("grad_accum_steps", opts.grad_accum_steps, allow_none=False)
    _positive("steps_per_execution", opts.steps_per_execution, allow_none=False)
    _positive("keep_checkpoints", opts.keep_checkpoints, allow_none=False)
    if opts.mixed_precision not in ("none", "bf16", "fp16"):
        _fail(f"--mixed_precision={opts.mixed_precision!r} is unknown; choose none, bf16 or fp16")
    if embedded and (opts.eval_data_dir or opts.vocab_file):
        _fail("--eval_data_dir/--vocab_file need --data_dir (without --data_dir the embedded default "
              "builds its own data from data/sample_corpus.txt)")

    strategy_name = distribution.resolve_name(opts.strategy, opts.tpu)
    if embedded and strategy_name in ("multi_worker", "tpu"):
        _fail(f"the embedded default runs on one machine; --strategy={strategy_name} needs --data_dir "
              f"(shards on a path every worker can read, e.g. gs://)")
    if opts.jit_compile and strategy_name == "mirrored" and not _has_gpu():
        _fail("--jit_compile with --strategy=mirrored over CPU devices fails in XLA (variables on another "
              "device); drop --jit_compile, or use --strategy=cpu to test XLA on CPU")

    train_steps = opts.train_steps or (DEMO_TRAIN_STEPS if embedded else config.num_train_steps)
    batch_size = opts.batch_size or (DEMO_BATCH_SIZE if embedded else config.train_batch_size)
    save_every = opts.save_every or min(train_steps, 100 if embedded else 1000)
    log_every = opts.log_every or min(save_every, 50 if embedded else 100)
    spe = opts.steps_per_execution
    for name, value in (("train_steps", train_steps), ("save_every", save_every)):
        if value % spe:
            _fail(f"--{name}={value} is not a multiple of --steps_per_execution={spe}; "
                  f"checkpoints and the last step fall on execution boundaries, so make it one")
    model_dir = opts.model_dir or (DEFAULT_MODEL_DIR if embedded else None)
    if not model_dir:
        _fail("--model_dir is required with --data_dir (where checkpoints and the model go)")
    remote = is_remote(model_dir)
    if not remote:
        problem = output_dir_problem(model_dir)
        if problem:
            _fail(f"cannot write to --model_dir '{model_dir}' ({problem}); choose a writable directory")

    # Data flags (checked before the strategy: no op runs here).
    vocab_file = opts.vocab_file
    eval_dir = opts.eval_data_dir
    data_dir = opts.data_dir
    if not embedded:
        manifest = _manifest_of(data_dir, "data_dir")
        if eval_dir:
            _manifest_of(eval_dir, "eval_data_dir")
        if not vocab_file:
            _fail("--vocab_file is required with --data_dir (the vocab.txt the shards were built with)")
        lower = manifest.get("do_lower_case")
        if lower is not None and bool(lower) != config.do_lower_case:
            # The shards were tokenized with this casing: the model (config.json of the
            # final directory, which fine-tuning and export read) must record it.
            log(f"do_lower_case set to {bool(lower)} from {data_dir}/manifest.json "
                f"(config said {config.do_lower_case})")
            config = config.replace(do_lower_case=bool(lower))
        vocab_size = len(load_vocab(vocab_file)) if not is_remote(vocab_file) else None
        want = manifest.get("vocab_sha256")
        if want and _sha256(vocab_file) != want:
            _fail(f"--vocab_file {vocab_file} is not the vocabulary the shards in {data_dir} were built "
                  f"with (sha256 differs from their manifest.json); pass that vocab.txt")
        overridden = any(o.split("=", 1)[0].strip() == "vocab_size" for o in opts.overrides)
        if (vocab_size and vocab_size != config.vocab_size and not overridden
                and _run_vocab_size(model_dir) != config.vocab_size):
            # The model's vocabulary is the one the shards were built with (a run
            # started with the config's vocab_size keeps it, so it resumes).
            log(f"vocab_size set to {vocab_size} from {vocab_file} (config said {config.vocab_size})")
            config = config.replace(vocab_size=vocab_size)  # counted above; no second read
        if vocab_size and vocab_size > config.vocab_size:
            _fail(f"--vocab_file has {vocab_size} tokens but the config has vocab_size={config.vocab_size}; "
                  f"add --override vocab_size={vocab_size}")
    eval_every = opts.eval_every or save_every
    if (eval_dir or embedded) and eval_every % spe:
        _fail(f"--eval_every={eval_every} is not a multiple of --steps_per_execution={spe}")

    # ---- 2. strategy and precision (before any other TF op) -------------------
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if opts.num_cpu_devices:
        distribution.split_cpu(opts.num_cpu_devices)
    strategy, strategy_name, strategy_text = distribution.create_strategy(
        strategy_name, opts.tpu, opts.collective_timeout_s)
    chief = distribution.is_chief(strategy)
    worker = distribution.worker_label(strategy)
    replicas = strategy.num_replicas_in_sync
    if batch_size % replicas:
        _fail(f"--batch_size={batch_size} (global) is not divisible by the {replicas} replicas of "
              f"{strategy_text}; use a multiple of {replicas}")
    per_replica = batch_size // replicas
    if per_replica % opts.grad_accum_steps:
        _fail(f"the per-replica batch {per_replica} is not divisible by --grad_accum_steps="
              f"{opts.grad_accum_steps}; use a --batch_size that is a multiple of "
              f"{replicas * opts.grad_accum_steps}")

    # ---- 3. the run directory ---------------------------------------------------
    settings = {
        "config": config.to_dict() if not embedded else None,  # filled in below for the default
        "train_steps": train_steps, "batch_size": batch_size,
        "grad_accum_steps": opts.grad_accum_steps, "mixed_precision": opts.mixed_precision,
        "seed": config.seed,
    }
    run_path = os.path.join(model_dir, RUN_FILE)
    previous = _read_json(run_path) if tf.io.gfile.exists(run_path) else None

    if embedded:
        if chief and not remote:
            os.makedirs(model_dir, exist_ok=True)
        data_dir, eval_dir, vocab_file = prepare_embedded_default(model_dir, config, log)
        config = config.for_vocab(vocab_file)
        settings["config"] = config.to_dict()

    if previous is not None:
        changed = [k for k in RESUME_KEYS if previous.get("settings", {}).get(k) != settings[k]]
        if changed:
            _fail(f"{model_dir} holds a run with other settings ({', '.join(changed)} differ from "
                  f"{run_path}); re-run with the same flags to resume it, or pass a new --model_dir")

    special = special_token_ids(vocab_file)
    skipped = []  # (path, reason) of corrupt training shards left out (--skip_corrupt_shards)
    if opts.skip_corrupt_shards:
        skipped = find_corrupt_shards(data_dir)
        if skipped:
            log(f"warning: skipping {len(skipped)} corrupt shard(s) of {data_dir}: "
                + "; ".join(f"{os.path.basename(p)} ({why})" for p, why in skipped))
    excluded = [p for p, _ in skipped]
    # Validate the shards against the config now (raises DataError before any write).
    try:
        pretraining_dataset(data_dir, config, per_replica, training=True, exclude=excluded)
    except CorruptShardError as e:
        _fail(f"{e}; or pass --skip_corrupt_shards to train without it")
    if eval_dir:
        pretraining_dataset(eval_dir, config, per_replica, training=False)


    # ---- 4. model, optimizer, restore -----------------------------------------
    policy = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}[opts.mixed_precision]
    keras.mixed_precision.set_global_policy(policy)
    # Same seed, same initial weights (and dropout streams) on every run and worker.
    keras.utils.set_random_seed(config.seed)
    try:
        with strategy.scope():
            model = ElectraPretrainer(config, special, grad_accum_steps=opts.grad_accum_steps)
            optimizer = create_optimizer(config, train_steps=train_steps)
            if opts.mixed_precision == "fp16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            model.compile(optimizer=optimizer, jit_compile=bool(opts.jit_compile),
                          steps_per_execution=spe)
            optimizer.build(model.trainable_variables)
        checkpoints = CheckpointManager(os.path.join(model_dir, CHECKPOINT_DIR), opts.keep_checkpoints)
        try:
            resumed = checkpoints.restore_latest(model, clean=chief)
        except CheckpointError as e:
            _fail(str(e))
        start_step = 0
        if resumed is not None:
            start_step, path = resumed
            log(f"resuming from {path} at step {start_step} (learning rate "
                f"{current_learning_rate(optimizer):.3g})")
        if chief:
            # Written once the checkpoint restored: a foreign or broken checkpoint
            # stops the run above without touching the directory.
            tf.io.gfile.makedirs(model_dir)
            _write_json(run_path, {
                "settings": settings,
                "flags": dataclasses.asdict(opts),
                "data_dir": data_dir, "eval_data_dir": eval_dir, "vocab_file": vocab_file,
                "strategy": strategy_text,
            })
        if start_step > train_steps:
            _fail(f"{model_dir} is already at step {start_step}, past --train_steps={train_steps}")

        # ---- 5. data ----------------------------------------------------------
        data_seed = config.seed + start_step  # a resumed run does not replay the first batches

        def train_fn(context=None):
            if context is not None and context.num_input_pipelines > 1:
                log(f"[{worker}] input pipeline {context.input_pipeline_id + 1}/"
                    f"{context.num_input_pipelines} reads its own subset of the shards")
            if opts.deterministic_data:
                # Shards in order, no shuffle: the same batches whatever the strategy
                # and however often Keras re-creates the iterator (a seeded shuffle
                # with reshuffle_each_iteration reorders on every new iterator).
                return pretraining_dataset(data_dir, config, batch_size, training=False,
                                           deterministic=True, input_context=context,
                                           exclude=excluded).repeat()
            return pretraining_dataset(data_dir, config, batch_size, training=True,
                                       input_context=context, seed=data_seed, exclude=excluded)

        def distribute(fn):
            if replicas == 1 and strategy_name == "cpu":
                return fn(None)
            return strategy.distribute_datasets_from_function(fn)

        train_data = distribute(train_fn)
        evaluate = None
        if eval_dir:
            eval_manifest = _read_json(os.path.join(eval_dir, "manifest.json"))
            eval_steps = opts.eval_steps or max(1, min(100, eval_manifest["num_examples"] // batch_size))

            def eval_fn(context=None):
                # Repeated and cut to a fixed number of batches: every worker runs the
                # same number of steps (a finite uneven split would hang collectives).
                return pretraining_dataset(eval_dir, config, batch_size, training=False,
                                           deterministic=True, input_context=context).repeat()

            eval_data = distribute(eval_fn)

            def evaluate():
                return model.evaluate(eval_data, steps=eval_steps, verbose=0, return_dict=True)

        # ---- 6. fit -------------------------------------------------------------
        train_writer = eval_writer = None
        if chief:
            tb_dir = os.path.join(model_dir, TENSORBOARD_DIR)
            train_writer = tf.summary.create_file_writer(os.path.join(tb_dir, "train"))
            eval_writer = tf.summary.create_file_writer(os.path.join(tb_dir, "eval")) if eval_dir else None
        callback = PretrainingCallback(
            checkpoints, train_steps, batch_size, save_every=save_every,
            eval_every=eval_every if eval_dir else save_every, log_every=log_every,
            evaluate=evaluate, train_writer=train_writer, eval_writer=eval_writer, chief=chief,
            print_fn=log)
        # Keras epochs divide both intervals, so resumes start on an epoch boundary.
        epoch_steps = math.gcd(save_every, eval_every) if eval_dir else save_every
        verbose = opts.verbose
        if verbose == "auto":
            verbose = 1 if sys.stdout.isatty() else 0
        verbose = int(verbose)
        nan_guard = StopOnNonFiniteLoss()
        callbacks = [nan_guard, callback]
        full_epochs = train_steps // epoch_steps
        log(f"[{worker}] pre-training {config.model_size} config ({model.count_params():,} parameters) "
            f"on {strategy_text}: steps {start_step}->{train_steps}, global batch {batch_size}"
            f"{f' ({opts.grad_accum_steps} micro-batches)' if opts.grad_accum_steps > 1 else ''}, "
            f"precision {policy}, jit_compile={bool(opts.jit_compile)}, steps_per_execution={spe}")
        fit_started = time.time()
        start_epoch = start_step // epoch_steps
        try:
            if start_step < full_epochs * epoch_steps:
                model.fit(train_data, epochs=full_epochs, initial_epoch=start_epoch,
                          steps_per_epoch=epoch_steps, callbacks=callbacks, verbose=verbose, shuffle=False)
            done = int(optimizer.iterations.numpy())
            # The tail (train_steps not a multiple of the epoch), and steps that fp16
            # loss scaling skipped (non-finite gradients do not advance the counter).
            for _ in range(100):
                if done >= train_steps or model.stop_training:
                    break
                model.fit(train_data, epochs=1, steps_per_epoch=train_steps - done,
                          callbacks=callbacks, verbose=verbose, shuffle=False)
                done = int(optimizer.iterations.numpy())
        except CheckpointError as e:
            _fail(str(e))
        except tf.errors.DataLossError as e:
            _fail(_data_loss_message(e, [data_dir] + ([eval_dir] if eval_dir else []), excluded,
                                     checkpoints))
        except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
                tf.errors.CancelledError, tf.errors.InternalError) as e:
            if strategy_name != "multi_worker":
                raise
            # A peer died (preemption, OOM kill): the coordination service's heartbeat
            # (or --collective_timeout_s) fails the collective here instead of hanging.
            _fail(f"[{worker}] lost contact with another worker ({_peer_failure(e)}); restart every "
                  f"worker with the same command to resume from the last checkpoint"
                  f"{_latest_text(checkpoints)}")
        if nan_guard.bad_step is not None:
            _fail(f"the training loss became {nan_guard.bad_value} at step {nan_guard.bad_step}; "
                  f"training stopped and nothing was saved after it"
                  f"{_latest_text(checkpoints, ' (the last good checkpoint, kept: {})')}; lower the "
                  f"learning rate (--override learning_rate=...) or check the data, and start again "
                  f"in a new --model_dir")
        fit_seconds = time.time() - fit_started
        final_step = int(optimizer.iterations.numpy())
        if final_step != train_steps:
            _fail(f"training stopped at step {final_step} of {train_steps} (a NaN loss? see the log); "
                  f"the last checkpoint is in {checkpoints.directory}")

        # ---- 7. the model directory --------------------------------------------
        final_dir = os.path.join(model_dir, FINAL_DIR)
        summary = {
            "model_dir": model_dir, "final_model_dir": final_dir, "step": final_step,
            "train_steps": train_steps, "resumed_from_step": start_step,
            "checkpoints": checkpoints.directory,
            "tensorboard": os.path.join(model_dir, TENSORBOARD_DIR),
            "data_dir": data_dir, "eval_data_dir": eval_dir, "vocab_file": vocab_file,
            "strategy": strategy_text, "replicas": replicas, "precision": policy,
            "fit_seconds": round(fit_seconds, 2), "total_seconds": None,
            "examples_per_second": round(callback.steady_examples_per_second, 2),
            "train_metrics": callback.last_train, "eval_metrics": callback.last_eval,
            "skipped_corrupt_shards": [p for p, _ in skipped],
        }
        if chief:
            keras.mixed_precision.set_global_policy("float32")
            try:
                if remote:
                    save_pretrained_remote(final_dir, model, vocab_file, save_pretrained)
                else:
                    save_pretrained(final_dir, model, vocab_file)
            except (OSError, RuntimeError, tf.errors.OpError) as e:
                _fail(f"cannot write the final model to {final_dir} ({error_line(e)}); training is "
                      f"done and saved{_latest_text(checkpoints, ' in {}')}: free disk space or make "
                      f"{model_dir} writable, then re-run the same command to write the model")
            summary["total_seconds"] = round(time.time() - started, 2)
            _write_json(os.path.join(model_dir, SUMMARY_FILE), summary)
            log(f"done: step {final_step}/{train_steps} in {fit_seconds:.1f}s of training "
                f"({summary['examples_per_second']:.1f} examples/s after the first step), "
                f"{summary['total_seconds']:.1f}s in all")
            if callback.last_train:
                log(f"  final train metrics (last {log_every}-step window): {_summary_line(callback.last_train)}")
            if callback.last_eval:
                log(f"  held-out eval ({eval_dir}): {_summary_line(callback.last_eval)}")
            log(f"  model (fine-tune with --init):  {final_dir}/  "
                f"(config.json, vocab.txt, discriminator/generator .weights.h5)")
            log(f"  checkpoints (resume: re-run the same command): {checkpoints.directory}/")
            log(f"  TensorBoard:  tensorboard --logdir {os.path.join(model_dir, TENSORBOARD_DIR)}")
            if embedded:
                log(f"  data built from {SAMPLE_CORPUS}: vocab {vocab_file}, shards {data_dir}, eval {eval_dir}")
            log(f"  run settings: {run_path}; summary: {os.path.join(model_dir, SUMMARY_FILE)}")
        else:
            summary["total_seconds"] = round(time.time() - started, 2)
            log(f"[{worker}] done at step {final_step}; the chief writes the model")
        return summary
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _peer_failure(error: BaseException) -> str:
    """Which peer failed and how, from a collective / coordination-service error."""
    import re  # pylint: disable=import-outside-toplevel

    text = str(getattr(error, "message", None) or error)
    match = re.search(r"stopped sending heartbeats\):\s*(/job:\S+)", text)
    if match:
        return f"{match.group(1)} stopped sending heartbeats"
    match = re.search(r"remote target (/job:\S+) while calling", text)
    if match:
        return f"{match.group(1)} closed the connection"
    if "coordination service" in text:
        return "the coordination service on the chief is unreachable"
    if "deadline" in text.lower() or "timed out" in text.lower():
        return "a collective op timed out (--collective_timeout_s)"
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.startswith("Graph execution error")]
    return (lines or [type(error).__name__])[0][:300]


def _latest_text(checkpoints, form: str = " ({})") -> str:
    latest = checkpoints.latest()
    return form.format(latest[1]) if latest else ""


def _data_loss_message(error, data_dirs, excluded, checkpoints) -> str:
    """A DataLossError from tf.data names no file: find the corrupt shard and name it."""

    bad = [(p, why) for d in data_dirs for p, why in find_corrupt_shards(d) if p not in excluded]
    saved = _latest_text(checkpoints, "; checkpoints up to {} are intact")
    if not bad:
        return (f"reading the pre-training data failed ({error_line(error)}){saved}; check the "
                f"shards in {', '.join(data_dirs)} with electra_tf.data.reader.find_corrupt_shards")
    path, why = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"shard {path} is corrupted ({why}){more}{saved}; rebuild it with "
            f"python -m electra_tf.data.build_pretraining_data, or pass --skip_corrupt_shards "
            f"to train without it")


def save_pretrained_remote(final_dir, model, vocab_file, save_pretrained):
    """save_pretrained to a local temp dir, then copy every file to a gs:// (or other) path."""
    import tempfile  # pylint: disable=import-outside-toplevel

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    scratch = tempfile.mkdtemp(prefix="electra_final_")
    local_vocab = None
    try:
        if vocab_file and is_remote(vocab_file):
            local_vocab = os.path.join(scratch, "vocab_src.txt")
            tf.io.gfile.copy(vocab_file, local_vocab, overwrite=True)
        save_pretrained(os.path.join(scratch, "out"), model, local_vocab or vocab_file)
        tf.io.gfile.makedirs(final_dir)
        for name in os.listdir(os.path.join(scratch, "out")):
            tf.io.gfile.copy(os.path.join(scratch, "out", name), os.path.join(final_dir, name), overwrite=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _has_gpu() -> bool:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return bool(tf.config.list_physical_devices("GPU"))
