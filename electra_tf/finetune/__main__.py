"""`python -m electra_tf.finetune`: fine-tune the ELECTRA discriminator on one task.

Example (SST-2, three seeds, reference hyper-parameters for the model size):

  python -m electra_tf.finetune --task sst2 --init runs/pretrain_small \\
      --data_dir ../shared/data/glue/SST-2 --output_dir runs/sst2 --seeds 1,2,3

Writes <output_dir>/results.json (per-seed metrics and their median) and
<output_dir>/seed_<n>/ (dev predictions, learning-rate multipliers), and
prints a table. Bad inputs stop with one line naming the culprit and exit 2;
Ctrl-C exits 130.
Each seed checkpoints every --save_every steps: re-running the same command
after a crash skips finished seeds and resumes the unfinished one.
"""

from __future__ import annotations

from absl import flags

from electra_tf.cli import report_error, report_interrupted, run_absl
from electra_tf.config import ConfigError
from electra_tf.data.vocab import VocabError
from electra_tf.finetune.readers import glue_data, squad_data, tagging_data
from electra_tf.finetune.modeling.layerwise_lr import LayerwiseLRError
from electra_tf.finetune import own_data_flags
from electra_tf.finetune.own_data_flags import own_data_settings, resolve_task
from electra_tf.finetune.finetune_job import run_task
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.training.distribution import StrategyError
from electra_tf.training import shared_flags
from electra_tf.training.shared_flags import define_shared_flags

FLAGS = flags.FLAGS
define_shared_flags(FLAGS)  # --strategy, --mixed_precision, --jit_compile, --save_every, ...
flags.adopt_module_key_flags(shared_flags, flag_values=FLAGS)
flags.adopt_module_key_flags(own_data_flags, flag_values=FLAGS)  # --train_file, ... in --help

flags.DEFINE_string("task", None, "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, "
                    "squad (1.1), squad2, or a tagging task (tagging, ner, chunk, pos); not needed with --train_file.")
flags.DEFINE_string("init", None, "'random', a pre-training run directory (or converted checkpoint "
                    "directory), a .weights.h5 file or a TF checkpoint prefix.")
flags.DEFINE_string("data_dir", None, "GLUE task directory (train.tsv, dev.tsv), GLUE root, SQuAD "
                    "directory (train-v1.1.json, dev-v1.1.json / -v2.0) or CoNLL directory "
                    "(train.txt, dev.txt). GLUE only: leave empty to read tfds glue/<task>.")
flags.DEFINE_string("output_dir", None, "Where results.json and per-seed outputs go.")
flags.DEFINE_string("config", None, "Model config JSON (default: <init>/config.json).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (default: <init>/vocab.txt).")
flags.DEFINE_list("seeds", ["1"], "Comma-separated seeds; the median over seeds is reported.")
flags.DEFINE_float("learning_rate", None, "Peak lr (default: 1e-4 small/base, 5e-5 large).")
flags.DEFINE_float("layerwise_lr_decay", None, "Layer-wise lr decay d (default 0.8, 0.9 large; 1 = off).")
flags.DEFINE_bool("reference_lr_power", False, "Reproduce the reference's extra factor d on every "
                  "encoder layer (google-research/electra issue #51).")
flags.DEFINE_float("epochs", None, "Training epochs (default 3; 10 for RTE/STS-B; 2 for SQuAD).")
flags.DEFINE_integer("batch_size", 32, "Training batch size.")
flags.DEFINE_integer("eval_batch_size", 64, "Evaluation batch size.")
flags.DEFINE_integer("max_seq_length", None, "Sequence length (default 128 GLUE, 512 SQuAD, 256 tagging).")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps with linear lr warmup.")
flags.DEFINE_float("weight_decay", 0.01, "Decoupled weight decay (not on biases/LayerNorm).")
flags.DEFINE_float("clip_norm", 1.0, "Global gradient-norm clipping (0 = off).")
flags.DEFINE_integer("max_train_examples", None, "Use only the first N training examples (quick runs).")
flags.DEFINE_integer("max_eval_examples", None, "Use only the first N dev examples.")
flags.DEFINE_integer("max_steps", None, "Stop training after N steps (quick runs).")
flags.DEFINE_bool("two_layer_head", False, "Hugging Face two-layer classification head.")
flags.DEFINE_enum("pooling", None, ["cls", "mean"], "Classifier head input: the [CLS] vector "
                  "or the mean over the tokens (default: cls for the paper's sizes, mean for the CPU sizes "
                  "tiny, cpu_demo and mini).")
flags.DEFINE_integer("reinit_top_layers", 0, "Re-initialise the top N Transformer blocks after "
                     "loading --init (keeps the embeddings and lower blocks; helps small-data tasks).")
flags.DEFINE_bool("double_unordered", True, "MRPC/STS-B: also train on swapped sentence pairs (reference).")
flags.DEFINE_enum("tagging_scheme", "BIO", ["BIO", "BIOES"], "Span scheme for tagging tasks.")
flags.DEFINE_integer("doc_stride", 128, "SQuAD: distance between document windows.")
flags.DEFINE_integer("max_query_length", 64, "SQuAD: question pieces kept.")
flags.DEFINE_integer("n_best_size", 20, "SQuAD: beam width and n-best answers kept.")
flags.DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer in word pieces.")
flags.DEFINE_string("tfds_data_dir", None, "tfds data directory (GLUE without --data_dir).")
flags.DEFINE_bool("do_lower_case", None, "Lower-case and strip accents (uncased vocabularies); "
                  "default: the model's config.json (as pre-trained), --[no]do_lower_case overrides it.")


def main(argv):
    if len(argv) > 1:
        return report_error(f"unexpected argument(s) {' '.join(argv[1:])}; every option is a --flag (see --help)")
    try:
        task = resolve_task(FLAGS.task, FLAGS)  # --train_file: the own-data task
    except FinetuneError as e:
        return report_error(str(e))
    missing = [f"--{n}" for n in ("task", "init", "output_dir") if (task if n == "task" else getattr(FLAGS, n)) is None]
    if missing:
        return report_error(f"{', '.join(missing)} required (see --help)")
    try:
        seeds = [int(x) for x in FLAGS.seeds]
    except ValueError:
        return report_error(f"--seeds {','.join(FLAGS.seeds)!r} must be comma-separated integers, e.g. 1,2,3")
    settings = Settings(
        task=task.lower(), init=FLAGS.init, data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir,
        vocab_file=FLAGS.vocab_file, config=FLAGS.config, seeds=seeds,
        learning_rate=FLAGS.learning_rate, layerwise_lr_decay=FLAGS.layerwise_lr_decay,
        reference_lr_power=FLAGS.reference_lr_power, epochs=FLAGS.epochs, batch_size=FLAGS.batch_size,
        eval_batch_size=FLAGS.eval_batch_size, max_seq_length=FLAGS.max_seq_length,
        warmup_proportion=FLAGS.warmup_proportion, weight_decay=FLAGS.weight_decay,
        clip_norm=FLAGS.clip_norm, max_train_examples=FLAGS.max_train_examples,
        max_eval_examples=FLAGS.max_eval_examples, max_steps=FLAGS.max_steps,
        two_layer_head=FLAGS.two_layer_head, pooling=FLAGS.pooling,
        reinit_top_layers=FLAGS.reinit_top_layers, double_unordered=FLAGS.double_unordered,
        tagging_scheme=FLAGS.tagging_scheme, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, strategy=FLAGS.strategy,
        num_cpu_devices=FLAGS.num_cpu_devices, mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile, tfds_data_dir=FLAGS.tfds_data_dir, do_lower_case=FLAGS.do_lower_case,
        # Unset: Settings' defaults (named in the shared flags' help).
        **{n: getattr(FLAGS, n) for n in ("save_every", "log_every") if getattr(FLAGS, n) is not None},
        **own_data_settings(FLAGS))
    # Task name aliases (sst-2, sts-b) are accepted for GLUE.
    try:
        settings.task = glue_data.get_spec(settings.task).name
    except glue_data.GlueDataError:
        pass
    expected = (FinetuneError, glue_data.GlueDataError, squad_data.SquadDataError, tagging_data.TaggingDataError,
                LayerwiseLRError, ConfigError, VocabError, StrategyError)
    try:
        run_task(settings)
    except expected as e:
        return report_error(str(e))
    except KeyboardInterrupt:
        return report_interrupted("re-run the same command to resume from the last checkpoint")
    return 0


if __name__ == "__main__":
    run_absl(main)
