"""The data of a pre-training job: the embedded default's corpus, shard checks, the datasets.

    prepare_embedded_default(model_dir, config, log)  # sample corpus -> vocab.txt + shards
    batch = split_job_batch(plan, opts, replicas, strategy_text)  # global -> replicas -> micro-batches
    excluded, skipped = check_shards(plan, opts, batch, log)  # before anything is written
    inputs = make_inputs(plan, opts, ...)                 # (distributed) train / eval datasets
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, List, Optional

from electra_tf.config import ElectraConfig
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data import manifest as mf
from electra_tf.data.build_vocab import build_vocab
from electra_tf.data.normalization import TextNormalization, from_record
from electra_tf.fileio import read_json, write_text_atomic
from electra_tf.data.reader import CorruptShardError, find_corrupt_shards, pretraining_dataset
from electra_tf.errors import error_line
from electra_tf.models.model_folder import VOCAB_FILE
from electra_tf.training.distribution import BatchSplit, StrategyError, split_batch
from electra_tf.pretrain.options import (DEMO_EVAL_DOCS, DEMO_VOCAB_MIN_COUNT, DEMO_VOCAB_SIZE, SAMPLE_CORPUS,
                                         PretrainOptions, RunPlan, fail)


def _split_sample_corpus(work_dir: str):
    """data/sample_corpus.txt -> (train.txt, eval.txt) in work_dir, last docs held out."""
    if not os.path.isfile(SAMPLE_CORPUS):
        fail(f"the embedded default needs {SAMPLE_CORPUS}, which is missing (a checkout and an installed "
             f"wheel both have it: reinstall electra_tf); otherwise pass --data_dir and --vocab_file")
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
    vocab_file = os.path.join(model_dir, VOCAB_FILE)
    # The config's normalisation if it names one, else the default mode with the config's casing;
    # pretrain_job records it in the model's config (embedded_normalization).
    normalization = (config.normalization if config.text_normalization is not None
                     else TextNormalization.create(config.do_lower_case))
    if not os.path.isfile(vocab_file):
        log(f"embedded default: learning a WordPiece vocab from {SAMPLE_CORPUS} "
            f"({num_docs - DEMO_EVAL_DOCS} of {num_docs} documents; the last {DEMO_EVAL_DOCS} are held out)")
        # The config's casing (--override do_lower_case=false acts): vocabulary and shards follow it.
        # The model takes the vocabulary's size whatever it is, so the learner's "set vocab_size" note
        # (the corpus holds fewer pieces than asked) is advice this job follows itself: not shown.
        build_vocab([train_txt], DEMO_VOCAB_SIZE, vocab_file, lower_case=normalization.lower_case,
                    strip_accents=normalization.strip_accents, mode=normalization.mode, sample_lines=0,
                    min_count=DEMO_VOCAB_MIN_COUNT, learner="bert_vocab",
                    log=lambda message: None if message.startswith("note:") else log(message))
    data_dir = os.path.join(model_dir, "data", "train")
    eval_dir = os.path.join(model_dir, "data", "eval")
    for directory, text, shards in ((data_dir, train_txt, 2), (eval_dir, eval_txt, 1)):
        if not os.path.isfile(os.path.join(directory, "manifest.json")):
            build_pretraining_data(directory, vocab_file, [text], max_seq_length=config.max_seq_length,
                                   lower_case=normalization.lower_case, strip_accents=normalization.strip_accents,
                                   mode=normalization.mode,
                                   num_shards=shards, num_processes=1, seed=config.seed,
                                   progress=False, log=log)
    return data_dir, eval_dir, vocab_file


def embedded_normalization(data_dir: str) -> TextNormalization:
    """The text normalisation the embedded default's shards were made with (their manifest's)."""
    return from_record(mf.load_manifest(data_dir) or {}, os.path.join(data_dir, mf.MANIFEST_NAME))


def split_job_batch(plan: RunPlan, opts: PretrainOptions, replicas: int, strategy_text: str) -> BatchSplit:
    """The job's `BatchSplit`: the global --batch_size over `replicas` and --grad_accum_steps, and
    the config's eval_batch_size when there is held-out data; an uneven split fails in one line,
    before anything is written."""
    # The embedded default always has held-out shards (built later, in prepare_embedded_default).
    eval_global = plan.config.eval_batch_size if plan.eval_dir or plan.embedded else None
    try:
        return split_batch(plan.batch_size, replicas, opts.grad_accum_steps, strategy_text, eval_global)
    except StrategyError as e:
        fail(str(e))


def check_shards(plan: RunPlan, opts: PretrainOptions, batch: BatchSplit, log: Callable[[str], None]):
    """Validates the shards against the config (raises DataError before any write).

    `batch`: the job's `BatchSplit`; every shard set must hold one replica's batch.

    Returns (excluded paths, skipped [(path, reason)]): the corrupt training shards
    left out with --skip_corrupt_shards.
    """
    skipped = []
    if opts.skip_corrupt_shards:
        skipped = find_corrupt_shards(plan.data_dir)
        if skipped:
            log(f"warning: skipping {len(skipped)} corrupt shard(s) of {plan.data_dir}: "
                + "; ".join(f"{os.path.basename(p)} ({why})" for p, why in skipped))
    excluded = [p for p, _ in skipped]
    try:
        pretraining_dataset(plan.data_dir, plan.config, batch.per_replica, training=True, exclude=excluded)
    except CorruptShardError as e:
        fail(f"{e}; or pass --skip_corrupt_shards to train without it")
    if plan.eval_dir:
        pretraining_dataset(plan.eval_dir, plan.config, batch.eval_per_replica or batch.per_replica, training=False)
    return excluded, skipped


@dataclasses.dataclass
class Inputs:
    train: object  # a tf.data.Dataset, or a distributed dataset
    eval: Optional[object] = None  # None: no --eval_data_dir
    eval_steps: Optional[int] = None  # batches per evaluation


def make_inputs(plan: RunPlan, opts: PretrainOptions, strategy, batch: BatchSplit, worker: str,
                excluded: List[str], data_seed: int, log: Callable[[str], None]) -> Inputs:
    """The training dataset (and the held-out one), distributed by `strategy` when it has
    more than one replica or is not the plain CPU one.

    The reader is given the global batches of `batch`: with an input context, each
    pipeline yields its replica's share (tf.distribute's rule), `batch.per_replica`.
    """
    config, data_dir, eval_dir = plan.config, plan.data_dir, plan.eval_dir
    batch_size, eval_batch_size, replicas = batch.global_batch, batch.eval_global, batch.replicas

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
                                       exclude=excluded, drop_remainder=True).repeat()
        return pretraining_dataset(data_dir, config, batch_size, training=True,
                                   input_context=context, seed=data_seed, exclude=excluded)

    def distribute(fn):
        if replicas == 1 and plan.strategy_name == "cpu":
            return fn(None)
        return strategy.distribute_datasets_from_function(fn)

    inputs = Inputs(train=distribute(train_fn))
    if eval_dir:
        eval_manifest = read_json(os.path.join(eval_dir, "manifest.json"))
        # Every held-out example (at most 100 batches): the reader fills the last batch with
        # padding rows, which weigh nothing.
        whole_pass = -(-eval_manifest["num_examples"] // eval_batch_size)  # ceil
        inputs.eval_steps = opts.eval_steps or max(1, min(100, whole_pass))

        def eval_fn(context=None):
            # Repeated and cut to a fixed number of batches: every worker runs the
            # same number of steps (a finite uneven split would hang collectives).
            return pretraining_dataset(eval_dir, config, eval_batch_size, training=False,
                                       deterministic=True, input_context=context).repeat()

        inputs.eval = distribute(eval_fn)
    return inputs


def data_loss_message(error, data_dirs, excluded, saved: str) -> str:
    """A DataLossError from tf.data names no file: find the corrupt shard and name it.

    `saved`: what to say about the checkpoints (e.g. "; checkpoints up to <path> are intact").
    """
    bad = [(p, why) for d in data_dirs for p, why in find_corrupt_shards(d) if p not in excluded]
    if not bad:
        return (f"reading the pre-training data failed ({error_line(error)}){saved}; check the "
                f"shards in {', '.join(data_dirs)} with electra_tf.data.reader.find_corrupt_shards")
    path, why = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"shard {path} is corrupted ({why}){more}{saved}; rebuild it with "
            f"python -m electra_tf.data.build_pretraining_data, or pass --skip_corrupt_shards "
            f"to train without it")
