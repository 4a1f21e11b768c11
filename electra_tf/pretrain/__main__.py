"""Pre-train ELECTRA with model.fit, on CPU, GPUs, several workers or a TPU.

    # the embedded default: sample corpus -> vocab + shards -> tiny model, ~2 min on CPU
    python -m electra_tf.pretrain

    # your data (shards from python -m electra_tf.data.build_pretraining_data)
    python -m electra_tf.pretrain --config configs/small.json --data_dir shards/ \\
        --vocab_file vocab.txt --output_dir runs/small [--strategy auto] [--mixed_precision bf16]

Re-running the same command after a crash or preemption resumes from the last
checkpoint. See docs/pretraining.md for every flag and the output layout.
"""

from __future__ import annotations

import dataclasses
import sys

from absl import flags

from electra_tf.cli import exit_with_error, parse_flags, report_error, report_interrupted, run_absl
from electra_tf.config import ConfigError
from electra_tf.data.data_errors import DataError
from electra_tf.data.vocab import VocabError
from electra_tf.models.model_folder import ModelDirError
from electra_tf.paths import config_names
# The module, not its function: tests replace `run.run_pretraining` (monkeypatch).
from electra_tf.pretrain import pretrain_job as run
from electra_tf.training.distribution import StrategyError
from electra_tf.training import shared_flags
from electra_tf.training.shared_flags import define_shared_flags
from electra_tf.pretrain.options import PretrainError, PretrainOptions
from electra_tf.pretrain.snapshots import SNAPSHOT_DTYPES

# Old spelling -> new (refused by electra_tf/cli.py): one name per idea across the tools.
RENAMED = {"model_dir": "output_dir", "init_from": "init"}
# Config fields an --override may not set: a flag does.
OVERRIDE_FLAGS = {"learning_rate": "learning_rate", "num_warmup_steps": "warmup_proportion"}
# PretrainOptions field -> flag, where they differ (run.json keeps the field names).
OPTION_FLAGS = {"model_dir": "output_dir", "init_from": "init", "overrides": "override"}


def define_flags(fv=None):
    """Defines this tool's absl flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    d = PretrainOptions()
    define_shared_flags(fv)
    flags.adopt_module_key_flags(shared_flags, flag_values=fv)
    flags.DEFINE_string("config", None, f"Model config: a name ({', '.join(config_names())}) or a JSON file "
                        "(default with no --data_dir: tiny).", flag_values=fv)
    flags.DEFINE_string("data_dir", None, "Shard directory (manifest.json inside); none: the embedded default.", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Run directory: checkpoints, TensorBoard, the final model "
                        "(default runs/default for the embedded default).", flag_values=fv)
    flags.DEFINE_string("vocab_file", None, "vocab.txt the shards were built with (needed with --data_dir).", flag_values=fv)
    flags.DEFINE_string("eval_data_dir", None, "Held-out shard directory for periodic evaluation.", flag_values=fv)
    flags.DEFINE_string("tpu", None, "TPU for --strategy tpu: 'local' (Colab TPU runtime, TPU VM) or a name/grpc address.", flag_values=fv)
    flags.DEFINE_integer("steps_per_execution", d.steps_per_execution, "Train steps per host call (TPU loop overhead).", flag_values=fv)
    flags.DEFINE_integer("train_steps", None, "Optimizer steps (default: config num_train_steps, 300 in configs/tiny.json of the embedded default).", flag_values=fv)
    flags.DEFINE_integer("batch_size", None, "Global batch: examples per optimizer step over all replicas (default: config train_batch_size, 32 in configs/tiny.json of the embedded default).", flag_values=fv)
    flags.DEFINE_float("learning_rate", None, "Peak learning rate (default: the config's learning_rate, 5e-4 unless it sets one).", flag_values=fv)
    flags.DEFINE_float("warmup_proportion", None, "Fraction of --train_steps with linear lr warm-up (default: the config's num_warmup_steps as is).", flag_values=fv)
    flags.DEFINE_integer("grad_accum_steps", d.grad_accum_steps, "Micro-batches per optimizer step (effective batch stays --batch_size).", flag_values=fv)
    flags.DEFINE_integer("eval_every", None, "Evaluate every N steps (default: --save_every).", flag_values=fv)
    flags.DEFINE_integer("eval_steps", None, "Eval batches per evaluation (default: the eval set, at most 100).", flag_values=fv)
    flags.DEFINE_integer("keep_checkpoints", d.keep_checkpoints, "Checkpoints kept (the last K).", flag_values=fv)
    flags.DEFINE_multi_string("override", [], "Config override key=value (repeatable); learning_rate and num_warmup_steps are set by --learning_rate and --warmup_proportion", flag_values=fv)
    flags.DEFINE_integer("seed", None, "Random seed (default: the config's).", flag_values=fv)
    flags.DEFINE_bool("deterministic_data", d.deterministic_data, "Read the shards in order, unshuffled (tests, reproducibility).", flag_values=fv)
    flags.DEFINE_float("collective_timeout_s", d.collective_timeout_s,
                       "multi_worker: fail a collective op after this many seconds (0: no limit).", flag_values=fv)
    flags.DEFINE_bool("skip_corrupt_shards", d.skip_corrupt_shards,
                      "Verify every training shard first (reads all bytes) and train without the missing, "
                      "truncated or corrupted ones, reporting how many (default: stop naming the shard).",
                      flag_values=fv)
    flags.DEFINE_string("continue_from", None, "Start a new run from the newest checkpoint of this run "
                        "directory (weights, optimizer state and step) and go on to --train_steps, e.g. on "
                        "in-domain text; re-running the same command resumes the new run.", flag_values=fv)
    flags.DEFINE_string("init", None, "Start a new run from a model directory's weights (one written by "
                        "python -m electra_tf.convert, e.g. a public BERT encoder, or an earlier run's pretrained/): "
                        "its discriminator, vocabulary and shape; parts it lacks (generator, replaced-token head) "
                        "start fresh. Build the shards with its vocab.txt.", flag_values=fv)
    flags.DEFINE_float("train_minutes", None, "Train for this many wall-clock minutes (the first step's compile "
                       "included) instead of a step count: the last step is sized from the speed measured after "
                       "the first step, and the learning rate decays to 0 there; --train_steps stays the most it "
                       "may reach. A resumed run keeps the step it decided.", flag_values=fv)
    flags.DEFINE_string("snapshot_dir", None, "Every --snapshot_minutes and at the end, write a model directory of "
                        "the weights so far (step_NNNNNNN/, the newest named in 'latest'; the two newest kept), "
                        "for machines that may vanish.", flag_values=fv)
    flags.DEFINE_float("snapshot_minutes", d.snapshot_minutes, "Minutes between --snapshot_dir snapshots.",
                       flag_values=fv)
    flags.DEFINE_enum("snapshot_dtype", d.snapshot_dtype, list(SNAPSHOT_DTYPES),
                      "How --snapshot_dir stores the weights (fp16: half the bytes; tools load them as float32).", flag_values=fv)
    flags.DEFINE_enum("verbose", d.verbose, ["auto", "0", "1", "2"], "Keras progress bar (auto: bar on a terminal).", flag_values=fv)


def options_from_flags(fv=None) -> PretrainOptions:
    """The PretrainOptions of the parsed flags (--output_dir -> model_dir, --init -> init_from).

    Raises:
      SystemExit(2): an --override of a field a flag sets, after one `error:` line.
    """
    fv = flags.FLAGS if fv is None else fv
    overrides = list(fv["override"].value or [])
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key in OVERRIDE_FLAGS:
            what = " (a fraction of --train_steps)" if key == "num_warmup_steps" else ""
            exit_with_error(f"--override {key} is now --{OVERRIDE_FLAGS[key]}{what} (see --help)")
    values = {f.name: fv[OPTION_FLAGS.get(f.name, f.name)].value for f in dataclasses.fields(PretrainOptions)}
    values["overrides"] = overrides
    return PretrainOptions(**values)


def parse_args(argv) -> PretrainOptions:
    """argv (without the program name) -> PretrainOptions, through the real flag definitions."""
    return options_from_flags(parse_flags(define_flags, argv, prog="electra_tf.pretrain", renamed=RENAMED))


def run_cli(opts: PretrainOptions) -> int:
    try:
        run.run_pretraining(opts)
    except (PretrainError, ConfigError, DataError, VocabError, ModelDirError, StrategyError) as e:
        return report_error(str(e))
    except KeyboardInterrupt:
        return report_interrupted("re-run the same command to resume from the last checkpoint")
    return 0


def run_flags(values) -> int:
    """Pre-training, from the parsed flags; returns the exit code."""
    return run_cli(options_from_flags(values))


def main(argv=None) -> int:
    """`python -m electra_tf.pretrain` in-process: argv holds the flags only; returns the exit code."""
    return run_cli(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    run_absl(run_flags, define_flags, renamed=RENAMED)
