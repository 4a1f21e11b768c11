"""The options of a pre-training job and their checks (step 1 of `run_pretraining`).

`validate_options` resolves every default and checks the flags, the config, the
data manifests and the model directory before anything is written or any
TensorFlow op runs; a bad input raises `PretrainError` naming the culprit and
the fix. The result is a `RunPlan` that the later steps fill in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Callable, List, Optional

import tensorflow as tf

from electra_tf import fileio
from electra_tf.config import ElectraConfig
from electra_tf.data import manifest as mf
from electra_tf.data.data_errors import DataError
from electra_tf.data.normalization import TextNormalization, from_record
from electra_tf.data.vocab import load_vocab
from electra_tf.errors import ElectraError
from electra_tf.models.model_folder import CONFIG_FILE, DISCRIMINATOR_FILE, VOCAB_FILE, resolve_model_dir
from electra_tf.pretrain.snapshots import SNAPSHOT_DTYPES
from electra_tf.paths import CONFIG_DIR, SAMPLE_CORPUS, is_remote, output_dir_problem, resolve_config
from electra_tf.training import distribution
from electra_tf.training.checkpoints import CheckpointManager
from electra_tf.training.shared_flags import DEFAULT_LOG_EVERY, DEFAULT_SAVE_EVERY, PRECISION_POLICIES

# configs/ and data/ at the top of a checkout, or inside an installed wheel (electra_tf/paths.py).
DEFAULT_CONFIG = os.path.join(CONFIG_DIR, "tiny.json")
DEFAULT_MODEL_DIR = os.path.join("runs", "default")

# The embedded default: configs/tiny.json (its 300 steps at batch 32: ~2 min on 2 CPU cores) on data
# built from the sample corpus with this vocabulary.
DEMO_VOCAB_SIZE = 2000
DEMO_VOCAB_MIN_COUNT = 2  # a 17k-word corpus: words seen twice become whole pieces
DEMO_EVAL_DOCS = 4  # the last documents of the sample corpus are held out

# Files inside <model_dir>.
RUN_FILE = "run.json"
TIME_BUDGET_FILE = "time_budget.json"  # the last step a --train_minutes run decided on
SUMMARY_FILE = "summary.json"
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"

# Settings that must not change when a run is resumed.
RESUME_KEYS = ("config", "train_steps", "batch_size", "grad_accum_steps", "mixed_precision", "seed", "init_from")


class PretrainError(ElectraError, ValueError):
    """Bad flags or inputs; the message names the culprit and the fix."""


@dataclasses.dataclass
class PretrainOptions:
    config: Optional[str] = None  # default: configs/tiny.json (embedded default) / required otherwise
    data_dir: Optional[str] = None  # None: the embedded default (sample corpus)
    model_dir: Optional[str] = None  # the flag --output_dir: the run directory the job writes
    vocab_file: Optional[str] = None
    eval_data_dir: Optional[str] = None
    strategy: str = "auto"
    tpu: Optional[str] = None
    num_cpu_devices: int = 0
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_execution: int = 1
    train_steps: Optional[int] = None
    batch_size: Optional[int] = None  # global: examples per optimizer step over all replicas
    learning_rate: Optional[float] = None  # sets the config's learning_rate (None: the config's)
    warmup_proportion: Optional[float] = None  # num_warmup_steps = round(this * train_steps) (None: the config's)
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
    # Another run directory: a new run starts from its newest checkpoint (weights,
    # optimizer state, step) and goes on to train_steps, e.g. on other text.
    continue_from: Optional[str] = None
    # The flag --init. A model directory (converted with `convert`, or the pretrained/ of an earlier run):
    # a new run whose discriminator starts from its weights, with its shape and vocabulary; the parts it
    # lacks (a converted BERT has no generator and no replaced-token head) start fresh.
    init_from: Optional[str] = None
    # Wall-clock minutes for training (compile included): the run's last step is decided from the
    # step rate measured after the first step, and the learning rate decays to 0 there;
    # train_steps stays the most it may reach.
    train_minutes: Optional[float] = None
    # Every snapshot_minutes and at the end, a model directory of the weights so far under
    # snapshot_dir (electra_tf/pretrain/snapshots.py), stored as snapshot_dtype.
    snapshot_dir: Optional[str] = None
    snapshot_minutes: float = 10.0
    snapshot_dtype: str = "fp32"


@dataclasses.dataclass
class RunPlan:
    """The resolved settings of one job; the embedded default fills in its data paths later."""
    embedded: bool  # no --data_dir: data built from the sample corpus
    config: ElectraConfig
    strategy_name: str
    train_steps: int
    batch_size: int  # global
    save_every: int
    log_every: int
    eval_every: int
    steps_per_execution: int
    model_dir: str
    remote: bool  # model_dir is gs:// (or another non-local path)
    data_dir: Optional[str]
    eval_dir: Optional[str]
    vocab_file: Optional[str]
    continue_from: Optional[str] = None  # the checkpoint --continue_from starts a new run from
    init_from: Optional[str] = None  # the model directory --init starts a new run from


def fail(message: str):
    raise PretrainError(message)


def _positive(name: str, value, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        fail(f"--{name}={value!r} must be a positive integer")


def _resolve_config_path(path: Optional[str]) -> str:
    """--config: a file, or a shipped config's name (small, configs/small.json from any folder)."""
    if path is None:
        return DEFAULT_CONFIG
    try:
        return resolve_config(path)
    except ValueError as e:
        fail(str(e))


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest_of(data_dir: str, flag: str):
    if not tf.io.gfile.isdir(data_dir):
        fail(f"--{flag} {data_dir!r} is not a directory; pass the --output_dir of "
             f"python -m electra_tf.data.build_pretraining_data")
    manifest = mf.load_manifest(data_dir)
    if manifest is None and tf.io.gfile.isdir(fileio.join(data_dir, mf.WORK_DIR)):
        # The builder keeps its plan in WORK_DIR until it writes manifest.json.
        fail(f"--{flag} {data_dir!r} has no manifest.json (an unfinished build); re-run "
             f"python -m electra_tf.data.build_pretraining_data with the same flags to finish it")
    if manifest is None:
        fail(f"--{flag} {data_dir!r} has no manifest.json, which pretrain needs (it gives the shards' vocabulary, "
             f"casing and sizes): shards another builder wrote have none; build shards from your text with "
             f"python -m electra_tf.data.build_pretraining_data, or train on these with "
             f"electra_tf.data.reader.pretraining_dataset in your own model.fit")
    return manifest


def _data_normalization(manifest: dict, data_dir: str, flag: str) -> TextNormalization:
    try:
        return from_record(manifest, f"--{flag} {data_dir}/manifest.json")
    except DataError as e:
        raise PretrainError(str(e)) from None


def _run_vocab_size(model_dir: str) -> Optional[int]:
    """The config vocab_size of the run already in model_dir (None: no run there)."""
    path = os.path.join(model_dir, RUN_FILE)
    try:
        if not tf.io.gfile.exists(path):
            return None
        return ((fileio.read_json(path).get("settings") or {}).get("config") or {}).get("vocab_size")
    except (ValueError, AttributeError, OSError, tf.errors.OpError):
        return None  # an unreadable run.json is reported where it is read


def _check_data_flags(opts: PretrainOptions, config: ElectraConfig, model_dir: str,
                      log: Callable[[str], None], settled: dict) -> ElectraConfig:
    """--data_dir / --eval_data_dir / --vocab_file against their manifests; returns the config
    with the shards' casing and vocabulary size, and the `settled` fields."""
    data_dir, vocab_file = opts.data_dir, opts.vocab_file
    manifest = _manifest_of(data_dir, "data_dir")
    eval_manifest = _manifest_of(opts.eval_data_dir, "eval_data_dir") if opts.eval_data_dir else None
    if not vocab_file:
        fail("--vocab_file is required with --data_dir (the vocab.txt the shards were built with)")
    # The shards' text normalisation: the model (config.json of the final directory, which fine-tuning,
    # export and convert read) records it; a model that already has one (--init, a config naming one)
    # must have the same.
    data_norm = _data_normalization(manifest, data_dir, "data_dir")
    if opts.eval_data_dir:
        eval_norm = _data_normalization(eval_manifest, opts.eval_data_dir, "eval_data_dir")
        if eval_norm != data_norm:
            fail(f"--eval_data_dir {opts.eval_data_dir} was tokenized with text normalisation ({eval_norm.describe()}) "
                 f"but --data_dir {data_dir} with ({data_norm.describe()}); rebuild one of them with the other's "
                 f"flags ({data_norm.flags()})")
    changes = dict(settled)  # applied at the end: the checks in between read none of these fields
    if opts.init_from is not None or config.text_normalization is not None:
        where = f"--init {opts.init_from}" if opts.init_from is not None else "the config"
        if config.normalization != data_norm:
            fail(f"--data_dir {data_dir} was tokenized with text normalisation ({data_norm.describe()}) but "
                 f"{where} has ({config.normalization.describe()}); rebuild the vocabulary and shards with "
                 f"{config.normalization.flags()} (build_vocab, build_pretraining_data)")
    else:
        if data_norm.lower_case != config.do_lower_case:
            log(f"do_lower_case set to {data_norm.lower_case} from {data_dir}/manifest.json "
                f"(config said {config.do_lower_case})")
        changes.update(do_lower_case=data_norm.lower_case, text_normalization=data_norm.to_json())
    vocab_size = len(load_vocab(vocab_file)) if not is_remote(vocab_file) else None
    want = manifest.get("vocab_sha256")
    if want and _sha256(vocab_file) != want:
        fail(f"--vocab_file {vocab_file} is not the vocabulary the shards in {data_dir} were built "
             f"with (sha256 differs from their manifest.json); pass that vocab.txt")
    overridden = any(o.split("=", 1)[0].strip() == "vocab_size" for o in opts.overrides)
    if (vocab_size and vocab_size != config.vocab_size and not overridden
            and _run_vocab_size(model_dir) != config.vocab_size):
        # The model's vocabulary is the one the shards were built with (a run
        # started with the config's vocab_size keeps it, so it resumes).
        log(f"vocab_size set to {vocab_size} from {vocab_file} (config said {config.vocab_size})")
        changes["vocab_size"] = vocab_size  # counted above; no second read
    if changes:
        config = config.replace(**changes)
    if vocab_size and vocab_size > config.vocab_size:
        fail(f"--vocab_file has {vocab_size} tokens but the config has vocab_size={config.vocab_size}; "
             f"add --override vocab_size={vocab_size}")
    return config


def _continue_from_checkpoint(run_dir: str, model_dir: str, embedded: bool) -> str:
    """The newest checkpoint of run `run_dir`, which --continue_from starts from."""
    if embedded:
        fail("--continue_from needs --data_dir (the text to go on pre-training on)")
    if os.path.normpath(run_dir) == os.path.normpath(model_dir):
        fail(f"--continue_from is --output_dir ({run_dir}); to resume a run re-run it without "
             f"--continue_from, to go on from it pass a new --output_dir")
    latest = CheckpointManager(os.path.join(run_dir, CHECKPOINT_DIR)).latest()
    if latest is None:
        fail(f"--continue_from {run_dir} holds no checkpoint ({run_dir}/{CHECKPOINT_DIR}/ckpt-*.weights.h5); "
             f"pass the --output_dir of a pre-training run")
    return latest[1]


# The fields of a model directory's config that --init takes over: the discriminator's shape, its
# tokenizer, and what fine-tuning knows the encoder by (its size name, which picks the fine-tuning
# defaults, and its own read-out). Everything else (objective, generator width, optimisation,
# masking) is the job's.
INIT_SHAPE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size",
                     "layer_norm_eps", "do_lower_case", "text_normalization", "model_size", "pooling")


def _init_from_model(opts: PretrainOptions, config: ElectraConfig, embedded: bool,
                     log: Callable[[str], None], settled: dict):
    """--init: (model directory, config with its shape and the `settled` fields, its vocab.txt); fails on a
    bad directory."""
    if embedded:
        fail("--init needs --data_dir and --config (the text to go on pre-training on, and the job's "
             "settings); build shards with that model's vocab.txt: build_pretraining_data --vocab_file "
             f"{os.path.join(opts.init_from, VOCAB_FILE)}")
    if opts.continue_from:
        fail("--init and --continue_from both say where a new run starts; pass one of them")
    init_dir = resolve_model_dir(opts.init_from, "--init", log)
    for name in (CONFIG_FILE, DISCRIMINATOR_FILE, VOCAB_FILE):
        if not os.path.isfile(os.path.join(init_dir, name)):
            fail(f"--init {opts.init_from} has no {name}; pass a model directory written by "
                 f"python -m electra_tf.convert or by pre-training (its pretrained/ folder)")
    if config.embedding_sharing == "gdes":
        fail("--init starts the token table from the model directory's; embedding_sharing=gdes splits it "
             "in two; use --override embedding_sharing=shared (or none)")
    source = ElectraConfig.from_json(os.path.join(init_dir, CONFIG_FILE))
    config = config.replace(**settled, **{k: getattr(source, k) for k in INIT_SHAPE_FIELDS})
    if config.max_seq_length > source.max_position_embeddings:
        fail(f"max_seq_length={config.max_seq_length} exceeds the {source.max_position_embeddings} positions of "
             f"--init {opts.init_from}; use --override max_seq_length=<at most that>")
    vocab = os.path.join(init_dir, VOCAB_FILE)
    if opts.vocab_file and not is_remote(opts.vocab_file) and _sha256(opts.vocab_file) != _sha256(vocab):
        fail(f"--vocab_file {opts.vocab_file} is not the vocabulary of --init {opts.init_from}; build the "
             f"shards with {vocab} (build_pretraining_data --vocab_file) and pass it, or drop --vocab_file")
    return init_dir, config, vocab


def _check_overrides(opts: PretrainOptions, config: ElectraConfig, embedded: bool) -> None:
    """An --override acts or is refused: never recorded in run.json and then overruled by a flag."""
    named = {item.split("=", 1)[0].strip() for item in opts.overrides}
    for flag, field in (("train_steps", "num_train_steps"), ("batch_size", "train_batch_size"), ("seed", "seed"),
                        ("learning_rate", "learning_rate")):
        value = getattr(opts, flag)
        if field in named and value is not None and value != getattr(config, field):
            fail(f"--{flag}={value} and --override {field}={getattr(config, field)} disagree; pass one of them")
    if opts.warmup_proportion is not None and "num_warmup_steps" in named:
        fail("--warmup_proportion and --override num_warmup_steps both set the warm-up; pass one of them")
    if embedded and "vocab_size" in named:
        fail("--override vocab_size cannot act on the embedded default: its model takes the size of the "
             "vocabulary it learns from data/sample_corpus.txt; drop it, or pass --data_dir and --vocab_file")


def _positive_number(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        fail(f"--{name}={value!r} must be a positive number of minutes")


def _check_time_and_snapshots(opts: PretrainOptions, strategy_name: str) -> None:
    if opts.train_minutes is not None:
        _positive_number("train_minutes", opts.train_minutes)
        if strategy_name == "multi_worker":
            fail("--train_minutes cannot size a multi_worker run (each worker would measure its own speed); "
                 "pass --train_steps instead")
    if opts.snapshot_dir is None:
        return
    _positive_number("snapshot_minutes", opts.snapshot_minutes)
    if opts.snapshot_dtype not in SNAPSHOT_DTYPES:
        fail(f"--snapshot_dtype={opts.snapshot_dtype!r} is unknown; choose {' or '.join(SNAPSHOT_DTYPES)}")
    if is_remote(opts.snapshot_dir):
        fail(f"--snapshot_dir {opts.snapshot_dir!r} must be a local folder (a mounted drive will do); "
             f"remote runs keep their checkpoints in --output_dir")
    problem = output_dir_problem(opts.snapshot_dir)
    if problem:
        fail(f"cannot write to --snapshot_dir '{opts.snapshot_dir}' ({problem}); choose a writable folder")


def validate_options(opts: PretrainOptions, log: Callable[[str], None]) -> RunPlan:
    """Step 1 of a job: cheap checks, nothing written yet and no TensorFlow op run
    (except the GPU query that --jit_compile with --strategy=mirrored needs).

    Each group of flags is checked once, in the order below; the config is built from its file,
    then once with the flags that set its fields (seed, learning rate and the overrides together),
    and once more with what --warmup_proportion, --init and the data settle (no check in between
    reads those). Each build is where its faults are reported: a bad file is refused even when an
    override would mend it, and a bad override before any later flag's fault."""
    embedded = opts.data_dir is None
    config = _flag_config(opts, embedded)
    _check_counts(opts, embedded)
    strategy_name = distribution.resolve_name(opts.strategy, opts.tpu)
    if embedded and strategy_name in ("multi_worker", "tpu"):
        fail(f"the embedded default runs on one machine; --strategy={strategy_name} needs --data_dir "
             f"(shards on a path every worker can read, e.g. gs://)")
    distribution.check_jit_compile(strategy_name, opts.jit_compile)
    _check_time_and_snapshots(opts, strategy_name)
    train_steps, batch_size, save_every, log_every, settled = _step_plan(opts, config, embedded)
    model_dir, remote = _output_dir(opts, embedded)

    continue_from = None
    if opts.continue_from is not None:
        continue_from = _continue_from_checkpoint(opts.continue_from, model_dir, embedded)
    init_dir = None
    if opts.init_from is not None:
        init_dir, config, init_vocab = _init_from_model(opts, config, embedded, log, settled)
        opts, settled = dataclasses.replace(opts, vocab_file=opts.vocab_file or init_vocab), {}
    # Data flags (checked before the strategy: no op runs here).
    if not embedded:
        config = _check_data_flags(opts, config, model_dir, log, settled)
    elif settled:
        config = config.replace(**settled)
    eval_every = opts.eval_every or save_every
    if (opts.eval_data_dir or embedded) and eval_every % opts.steps_per_execution:
        fail(f"--eval_every={eval_every} is not a multiple of --steps_per_execution={opts.steps_per_execution}")
    return RunPlan(embedded=embedded, config=config, strategy_name=strategy_name, train_steps=train_steps,
                   batch_size=batch_size, save_every=save_every, log_every=log_every, eval_every=eval_every,
                   steps_per_execution=opts.steps_per_execution, model_dir=model_dir, remote=remote,
                   data_dir=opts.data_dir, eval_dir=opts.eval_data_dir, vocab_file=opts.vocab_file,
                   continue_from=continue_from, init_from=init_dir)


def _flag_config(opts: PretrainOptions, embedded: bool) -> ElectraConfig:
    """--config read, with --seed, --learning_rate and the --override's applied; the overrides checked
    against the flags that set the same fields."""
    if opts.config is None and not embedded:
        fail("--config is required with --data_dir (e.g. --config configs/small.json)")
    config = ElectraConfig.from_json(_resolve_config_path(opts.config))
    flag_fields = {}
    if opts.seed is not None:
        flag_fields["seed"] = opts.seed
    if opts.learning_rate is not None:
        lr = opts.learning_rate
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < float("inf"):
            fail(f"--learning_rate={lr:g} must be a positive number" if isinstance(lr, (int, float))
                 else f"--learning_rate={lr!r} must be a positive number")
        flag_fields["learning_rate"] = float(lr)
    if flag_fields or opts.overrides:
        config = config.with_overrides(opts.overrides, **flag_fields)  # one build for both
    _check_overrides(opts, config, embedded)
    return config


def _check_counts(opts: PretrainOptions, embedded: bool) -> None:
    """The flags that count (steps, batches, checkpoints), the precision, and the data flags the
    embedded default has no use for."""
    for name in ("train_steps", "batch_size", "eval_every", "eval_steps", "log_every"):
        _positive(name, getattr(opts, name))
    if opts.save_every is not None and (isinstance(opts.save_every, bool) or not isinstance(opts.save_every, int)
                                        or opts.save_every < 0):
        fail(f"--save_every={opts.save_every!r} must be a positive integer, or 0 (only at the end)")
    _positive("grad_accum_steps", opts.grad_accum_steps, allow_none=False)
    _positive("steps_per_execution", opts.steps_per_execution, allow_none=False)
    _positive("keep_checkpoints", opts.keep_checkpoints, allow_none=False)
    if opts.mixed_precision not in PRECISION_POLICIES:
        fail(f"--mixed_precision={opts.mixed_precision!r} is unknown; choose none, bf16 or fp16")
    if embedded and (opts.eval_data_dir or opts.vocab_file):
        fail("--eval_data_dir/--vocab_file need --data_dir (without --data_dir the embedded default "
             "builds its own data from data/sample_corpus.txt)")


def _step_plan(opts: PretrainOptions, config: ElectraConfig, embedded: bool):
    """(train_steps, batch_size, save_every, log_every, config fields to set): the flags' values, else the
    config's, the embedded default's included, so --override num_train_steps= and train_batch_size= act
    (a flag that disagrees with an override is refused); --warmup_proportion's num_warmup_steps."""
    train_steps = opts.train_steps or config.num_train_steps
    batch_size = opts.batch_size or config.train_batch_size
    settled = {}
    if opts.warmup_proportion is not None:
        p = opts.warmup_proportion
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            fail(f"--warmup_proportion={p:g} must be a fraction between 0 and 1" if isinstance(p, (int, float))
                 else f"--warmup_proportion={p!r} must be a fraction between 0 and 1")
        settled["num_warmup_steps"] = int(round(p * train_steps))
    if opts.save_every == 0:  # only at the end
        save_every = train_steps
    else:
        save_every = opts.save_every or min(train_steps, 100 if embedded else DEFAULT_SAVE_EVERY)
    log_every = opts.log_every or min(save_every, 50 if embedded else DEFAULT_LOG_EVERY)
    spe = opts.steps_per_execution
    for name, value in (("train_steps", train_steps), ("save_every", save_every)):
        if value % spe:
            fail(f"--{name}={value} is not a multiple of --steps_per_execution={spe}; "
                 f"checkpoints and the last step fall on execution boundaries, so make it one")
    return train_steps, batch_size, save_every, log_every, settled


def _output_dir(opts: PretrainOptions, embedded: bool):
    """(--output_dir, whether it is remote): given (or the embedded default's) and writable."""
    model_dir = opts.model_dir or (DEFAULT_MODEL_DIR if embedded else None)
    if not model_dir:
        fail("--output_dir is required with --data_dir (where checkpoints and the model go)")
    remote = is_remote(model_dir)
    if not remote:
        problem = output_dir_problem(model_dir)
        if problem:
            fail(f"cannot write to --output_dir '{model_dir}' ({problem}); choose a writable directory")
    return model_dir, remote
