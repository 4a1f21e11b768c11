"""`python -m electra_tf.finetune`: fine-tune the ELECTRA discriminator on one task.

Example (SST-2, three seeds, reference hyper-parameters for the model size):

  python -m electra_tf.finetune --task sst2 --init runs/pretrain_small \\
      --data_dir ../shared/data/glue/SST-2 --output_dir runs/sst2 --seed 1,2,3

Writes <output_dir>/results.json (per-seed metrics and their median) and
<output_dir>/seed_<n>/ (dev predictions, learning-rate multipliers), and
prints a table. Bad inputs stop with one line naming the culprit and exit 2;
Ctrl-C exits 130.
Each seed checkpoints every --save_every steps: re-running the same command
after a crash skips finished seeds and resumes the unfinished one.
"""

from __future__ import annotations

from absl import flags

from electra_tf.cli import parse_flags, report_error, report_interrupted, run_absl
from electra_tf.config import ConfigError
from electra_tf.data.table_files import TextFileError
from electra_tf.data.vocab import VocabError
from electra_tf.finetune.readers import glue_data, squad_data, tagging_data
from electra_tf.finetune import own_data_flags
from electra_tf.finetune.own_data_flags import define_own_data_flags, own_data_settings, resolve_task
from electra_tf.finetune.finetune_job import run_task
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.training.distribution import StrategyError
from electra_tf.training.layerwise_lr import LayerwiseLRError
from electra_tf.training import shared_flags
from electra_tf.training.shared_flags import define_shared_flags

RENAMED = {"seeds": "seed", "max_steps": "train_steps"}  # old spelling -> new (refused by electra_tf/cli.py)


def define_flags(fv=None) -> None:
    """Defines this tool's absl flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    define_shared_flags(fv)  # --strategy, --mixed_precision, --jit_compile, --save_every, ...
    flags.adopt_module_key_flags(shared_flags, flag_values=fv)
    define_own_data_flags(fv)  # --train_file, ...
    flags.adopt_module_key_flags(own_data_flags, flag_values=fv)  # in --help
    D = Settings.defaults()  # the flags' defaults are the settings model's: written once
    string, integer, real, boolean, enum = (flags.DEFINE_string, flags.DEFINE_integer, flags.DEFINE_float,
                                            flags.DEFINE_bool, flags.DEFINE_enum)
    string("task", None, "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, squad (1.1), squad2, or a tagging "
           "task (tagging, ner, chunk, pos); not needed with --train_file.", flag_values=fv)
    string("init", None, "'random', a pre-training run directory (or converted checkpoint directory), a "
           ".weights.h5 file or a TF checkpoint prefix.", flag_values=fv)
    string("data_dir", None, "GLUE task directory (train.tsv, dev.tsv), GLUE root, SQuAD directory "
           "(train-v1.1.json, dev-v1.1.json / -v2.0) or CoNLL directory (train.txt, dev.txt). GLUE only: leave "
           "empty to read tfds glue/<task>.", flag_values=fv)
    string("output_dir", None, "Where results.json and per-seed outputs go.", flag_values=fv)
    string("config", None, "Model config: a name (tiny, small, ...; python -m electra_tf --help lists them) or a "
           "JSON file (default: <init>/config.json).", flag_values=fv)
    string("vocab_file", None, "WordPiece vocabulary (default: <init>/vocab.txt).", flag_values=fv)
    flags.DEFINE_list("seed", ["1"], "Comma-separated seeds, one model each; the median over the seeds is "
                      "reported.", flag_values=fv)
    real("learning_rate", None, "Peak lr (default: 3e-4 small, 1e-4 base, 5e-5 large and imported encoders, "
         "1e-3 tiny/cpu_demo/mini).", flag_values=fv)
    real("layerwise_lr_decay", None, "Layer-wise lr decay d (default 0.8 base, 0.9 large; 1 = off, the default "
         "of small, imported encoders and the CPU sizes).", flag_values=fv)
    boolean("reference_lr_power", D.reference_lr_power, "Reproduce the reference's extra factor d on every encoder layer "
            "(google-research/electra issue #51).", flag_values=fv)
    real("epochs", None, "Training epochs (default 3; 10 for RTE/STS-B; 2 for SQuAD).", flag_values=fv)
    integer("batch_size", D.batch_size, "Global training batch: examples per optimizer step over all replicas "
            "(--strategy mirrored splits each batch across the devices; default 32, 16 for imported encoders).",
            flag_values=fv)
    integer("eval_batch_size", D.eval_batch_size, "Global evaluation batch size.", flag_values=fv)
    integer("max_seq_length", None, "Sequence length (default 128 GLUE, 512 SQuAD, 256 tagging).", flag_values=fv)
    real("warmup_proportion", D.warmup_proportion, "Fraction of train steps with linear lr warmup.", flag_values=fv)
    real("weight_decay", D.weight_decay, "Decoupled weight decay (not on biases/LayerNorm).", flag_values=fv)
    real("clip_norm", D.clip_norm, "Global gradient-norm clipping (0 = off).", flag_values=fv)
    integer("max_train_examples", None, "Use only the first N training examples (quick runs).", flag_values=fv)
    integer("max_eval_examples", None, "Use only the first N dev examples.", flag_values=fv)
    integer("train_steps", None, "At most this many optimizer steps (default: the steps of --epochs; quick "
            "runs).", flag_values=fv)
    integer("min_train_steps", None, "Train at least this many optimizer steps when the default epochs give "
            "fewer (a small file); an explicit --epochs is taken as it is, 0 turns the floor off (default: "
            "160 for the paper's sizes small, base, large; 0 for the others).", flag_values=fv)
    integer("eval_every", None, "The task's dev metrics every N optimizer steps during training (default: at the "
            "end only).", flag_values=fv)
    boolean("two_layer_head", D.two_layer_head, "Hugging Face two-layer classification head.", flag_values=fv)
    enum("pooling", None, ["cls", "mean"], "Classifier head input: the [CLS] vector or the mean over the tokens "
         "(default: the encoder's own where its config records one, as an imported sentence-transformers model's "
         "does; else cls for base, large and imported encoders, mean for small and the CPU sizes tiny, cpu_demo "
         "and mini).", flag_values=fv)
    integer("reinit_top_layers", D.reinit_top_layers, "Re-initialise the top N Transformer blocks after loading --init (keeps the "
            "embeddings and lower blocks; helps small-data tasks). Default: the model folder's finetune_recipe.json "
            "where it sets one (it may also set the learning rate, layer-wise decay, pooling, batch and step floor; "
            "a flag overrides each), else 0.", flag_values=fv)
    boolean("double_unordered", D.double_unordered, "MRPC/STS-B: also train on swapped sentence pairs (reference).",
            flag_values=fv)
    enum("tagging_scheme", D.tagging_scheme, ["BIO", "BIOES"], "Span scheme for tagging tasks.", flag_values=fv)
    integer("doc_stride", D.doc_stride, "SQuAD: distance between document windows.", flag_values=fv)
    integer("max_query_length", D.max_query_length, "SQuAD: question pieces kept.", flag_values=fv)
    integer("n_best_size", D.n_best_size, "SQuAD: beam width and n-best answers kept.", flag_values=fv)
    integer("max_answer_length", D.max_answer_length, "SQuAD: longest answer in word pieces.", flag_values=fv)
    string("tfds_data_dir", None, "tfds data directory (GLUE without --data_dir).", flag_values=fv)
    boolean("overwrite", D.overwrite, "Start over in an --output_dir that holds a run with "
            "other settings or input files whose content changed (removes its settings.json, results.json and "
            "seed_<n>/ folders first); without it such a re-run is refused, and an unchanged one resumes.",
            flag_values=fv)
    boolean("do_lower_case", None, "Lower-case and strip accents (uncased vocabularies); default: the model's "
            "config.json (as pre-trained), --[no]do_lower_case overrides it.", flag_values=fv)


def settings_from_flags(values) -> Settings:
    """The `Settings` of the parsed flags (--seed -> seeds, --train_steps -> max_steps).

    Raises:
      FinetuneError: a missing required flag, bad seeds, or own-data flags
        without --train_file.
    """
    task = resolve_task(values.task, values)  # --train_file: the own-data task
    missing = [f"--{n}" for n in ("task", "init", "output_dir") if (task if n == "task" else values[n].value) is None]
    if missing:
        raise FinetuneError(f"{', '.join(missing)} required (see --help)")
    try:
        seeds = [int(x) for x in values.seed]
    except ValueError:
        raise FinetuneError(f"--seed {','.join(values.seed)!r} must be comma-separated integers, e.g. 1,2,3") from None
    same = ("init", "data_dir", "output_dir", "vocab_file", "config", "learning_rate", "layerwise_lr_decay",
            "reference_lr_power", "epochs", "batch_size", "eval_batch_size", "max_seq_length", "warmup_proportion",
            "weight_decay", "clip_norm", "max_train_examples", "max_eval_examples", "two_layer_head", "pooling",
            "reinit_top_layers", "double_unordered", "tagging_scheme", "doc_stride", "max_query_length",
            "n_best_size", "max_answer_length", "strategy", "num_cpu_devices", "mixed_precision", "jit_compile",
            "tfds_data_dir", "do_lower_case", "eval_every", "overwrite", "min_train_steps")
    settings = Settings(
        task=task.lower(), seeds=seeds, max_steps=values.train_steps,
        **{n: values[n].value for n in same},
        # Unset: Settings' defaults (named in the shared flags' help).
        **{n: values[n].value for n in ("save_every", "log_every") if values[n].value is not None},
        **own_data_settings(values))
    # Task name aliases (sst-2, sts-b) are accepted for GLUE.
    try:
        settings.task = glue_data.get_spec(settings.task).name
    except glue_data.GlueDataError:
        pass
    return settings


def run(values) -> int:
    """Fine-tuning, from the parsed flags; returns the exit code."""
    try:
        settings = settings_from_flags(values)
    except FinetuneError as e:
        return report_error(str(e))
    expected = (FinetuneError, TextFileError, glue_data.GlueDataError, squad_data.SquadDataError, tagging_data.TaggingDataError,
                LayerwiseLRError, ConfigError, VocabError, StrategyError)
    try:
        run_task(settings)
    except expected as e:
        return report_error(str(e))
    except KeyboardInterrupt:
        return report_interrupted("re-run the same command to resume from the last checkpoint")
    return 0


def main(argv=None) -> int:
    """`python -m electra_tf.finetune` in-process: argv holds the flags only; returns the exit code."""
    return run(parse_flags(define_flags, argv, prog="electra_tf.finetune", renamed=RENAMED))


if __name__ == "__main__":
    run_absl(run, define_flags, renamed=RENAMED)
