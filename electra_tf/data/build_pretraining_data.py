"""Corpus text -> sharded TFRecords of ELECTRA pre-training examples.

    python -m electra_tf.data.build_pretraining_data \\
        --corpus 'corpus/*.txt' --vocab_file vocab.txt --output_dir shards/ \\
        --max_seq_length 128 --num_shards 64 --num_processes 8

The text normalisation (casing, accents, mode) is the one build_vocab recorded
beside the vocabulary (`vocab.txt.normalization.json`; a model folder's
vocab.txt: its config.json's) unless flags ask otherwise; flags that
contradict that record are refused. It is recorded in
manifest.json (`text_normalization`), from which pre-training copies it into
the model's config.json.

Input: text with one sentence/paragraph per line and a blank line between
documents (files, directories or globs), or a tfds dataset. The corpus is cut
into byte-balanced shard ranges at document boundaries; each shard is built by a
worker process with an RNG seeded from (--seed, shard index), written under a
temporary name and renamed when complete. manifest.json is written last.
Re-running the same command after an interruption builds only missing shards.
Same seed + inputs + --num_shards give byte-identical shards for any
--num_processes.

This module is the command line and the pipeline: ShardBuild, whose methods
are its steps (check, plan, build, finish), over ShardBuildOptions, the
arguments checked once.
The shard plan is planning.py's, one shard's work shard_writer.py's, the
output directory's states (resume, repair, manifest) build_output.py's and
the progress line build_progress.py's.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags

from electra_tf.cli import exit_with_error, parse_flags, report_interrupted, run_absl
from electra_tf import fileio
from electra_tf.data import manifest as mf
from electra_tf.data.build_output import (check_repair, finish_build, prepare_output_dir, remove_temp_files,
                                          resume_or_refuse)
from electra_tf.data.build_progress import Progress
from electra_tf.data.corpus import is_gzip, text_corpus_files
from electra_tf.data.data_errors import DataError
from electra_tf.data.planning import plan_files, plan_tfds
from electra_tf.data.shard_writer import ShardTask, build_shard, build_shards, init_worker
from electra_tf.data.normalization import DEFAULT_MODE, MODES, TextNormalization, find_vocab_record
from electra_tf.data.tokenizer import build_tokenizer_models, check_vocab, file_sha256
from electra_tf.data.vocab import SpecialTokenIds, VocabError, load_vocab, special_token_ids


# The longest example a model can embed: the position table of the default config,
# the largest of every shipped one (finetune and export refuse longer sequences too).
# A literal because data sits below config in the import layers; a test keeps them equal.
MAX_SEQ_LENGTH = 512


def default_max_line_bytes(max_seq_length: int) -> int:
    """Longest line kept whole: far more text than one example can hold."""
    return max(1 << 16, 200 * max_seq_length)


def _corpus_files(corpus: Sequence[str]) -> Tuple[List[str], List[int]]:
    """The corpus files (absolute local paths, or URLs) and their sizes.

    Raises:
      DataError: a missing, binary or non-UTF-8 file, or no non-blank line in any.
    """
    files = text_corpus_files(corpus, lambda files: (
        f"corpus is empty: {len(files)} file(s) ({files[0]}{', ...' if len(files) > 1 else ''}) "
        f"hold no non-blank line; pass files with one sentence or paragraph per line"))
    files = [p if "://" in p else os.path.abspath(p) for p in files]
    return files, [fileio.size(p) for p in files]


def build_pretraining_data(
    output_dir: str,
    vocab_file: str,
    corpus: Optional[Sequence[str]] = None,
    *,
    max_seq_length: int = 128,
    num_shards: int = 1,
    num_processes: int = 1,
    lower_case: Optional[bool] = None,
    strip_accents: Optional[bool] = None,
    mode: Optional[str] = None,
    blanks_separate_docs: bool = True,
    seed: int = 0,
    max_line_bytes: Optional[int] = None,
    truncate_long_lines: bool = False,
    tfds_name: Optional[str] = None,
    tfds_split: str = "train",
    tfds_text_key: str = "text",
    tfds_data_dir: Optional[str] = None,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    _doc_search_bytes: Optional[int] = None,
) -> Dict[str, Any]:
    """Builds (or finishes) a directory of pre-training shards.

    Args:
      output_dir: where shards and manifest.json go (local or gs://).
      vocab_file: WordPiece vocab.txt holding [PAD] [UNK] [CLS] [SEP] [MASK].
      corpus: text files, directories or globs (or None with tfds_name).
      max_seq_length: tokens per example, [CLS]/[SEP] included.
      num_shards: output files; the unit of parallel work and of resumption.
      num_processes: worker processes (spawned; TF is not fork-safe).
      lower_case: lower-case text before WordPiece; None: as the vocabulary's
        record (`<vocab_file>.normalization.json`) says, else True.
      strip_accents: strip accents; None: as recorded, else follows
        lower_case (BERT behaviour).
      mode: the text normalisation's mode ("bert", "nfkc_casefold"); None: as
        recorded, else "bert".
      blanks_separate_docs: a blank line ends a document (else blank lines are
        skipped and only file ends / tfds records end documents).
      seed: seeds every random choice (per shard).
      max_line_bytes: lines longer than this are cut (counted and reported);
        default max(64 KiB, 200 * max_seq_length).
      truncate_long_lines: the reference's rule: text that does not fit in an
        example is dropped. By default it is split (at sentence ends where
        possible) and carried into the next examples, so no token is lost.
      tfds_name: read text from this tfds dataset instead of files.
      tfds_split: its split.
      tfds_text_key: the feature holding the text.
      tfds_data_dir: where the tfds dataset was prepared.
      overwrite: delete an existing build in output_dir first.
      progress: print a progress line (tokens/s) to stderr.
      log: receives one-line status and warning messages.

    Returns:
      The manifest dict (also written to output_dir/manifest.json).

    Raises:
      DataError, VocabError: bad input; nothing half-written is left behind.
    """
    started = time.time()
    options = ShardBuildOptions(
        output_dir=output_dir, vocab_file=vocab_file, corpus=corpus, max_seq_length=max_seq_length,
        num_shards=num_shards, num_processes=num_processes, lower_case=lower_case,
        strip_accents=strip_accents, mode=mode, blanks_separate_docs=blanks_separate_docs, seed=seed,
        max_line_bytes=max_line_bytes, truncate_long_lines=truncate_long_lines, tfds_name=tfds_name,
        tfds_split=tfds_split, tfds_text_key=tfds_text_key, tfds_data_dir=tfds_data_dir,
        overwrite=overwrite, progress=progress, doc_search_bytes=_doc_search_bytes)
    return ShardBuild(options, log, started).run()


@dataclasses.dataclass
class ShardBuildOptions:
    """build_pretraining_data's arguments (documented there), checked once, when made.

    max_line_bytes is filled in with its default; doc_search_bytes (None: the
    planner's own) is how far plan_files looks for a document end, a test hook.
    """

    output_dir: str
    vocab_file: str
    corpus: Optional[Sequence[str]]
    max_seq_length: int
    num_shards: int
    num_processes: int
    lower_case: Optional[bool]
    strip_accents: Optional[bool]
    mode: Optional[str]
    blanks_separate_docs: bool
    seed: int
    max_line_bytes: Optional[int]
    truncate_long_lines: bool
    tfds_name: Optional[str]
    tfds_split: str
    tfds_text_key: str
    tfds_data_dir: Optional[str]
    overwrite: bool
    progress: bool
    doc_search_bytes: Optional[int] = None

    def __post_init__(self) -> None:
        """Raises DataError for a count, a length or a source the build cannot take."""
        for name in ("num_shards", "num_processes"):
            if getattr(self, name) < 1:
                raise DataError(f"--{name}={getattr(self, name)} must be >= 1")
        if self.max_seq_length < 5:
            raise DataError(f"--max_seq_length={self.max_seq_length} is too short; use at least 5")
        if self.max_seq_length > MAX_SEQ_LENGTH:
            raise DataError(f"--max_seq_length {self.max_seq_length} exceeds max_position_embeddings "
                            f"{MAX_SEQ_LENGTH}, the most positions of any shipped model config "
                            f"(configs/*.json); lower it")
        if (self.tfds_name is None) == (not self.corpus):
            raise DataError("pass exactly one source: --corpus files, or --tfds_name")
        self.max_line_bytes = self.max_line_bytes or default_max_line_bytes(self.max_seq_length)


class ShardBuild:
    """One run of build_pretraining_data; run() calls its steps in order.

    The steps: check the inputs (before TensorFlow is imported), prepare the
    output directory, settle the settings (what must match to resume), plan one
    ShardTask a shard, find the shards still to build, build them, finish (the
    manifest) or check a repair. Each step keeps what later ones need on self.
    """

    def __init__(self, options: ShardBuildOptions, log: Callable[[str], None], started: float):
        self.options = options
        self.log = log
        self.started = started  # time.time() when the build was asked for (its build_seconds)
        self.work_dir = fileio.join(options.output_dir, mf.WORK_DIR)
        # What the steps find, for the later ones: the vocabulary and its special ids, the
        # normalisation and the corpus files (check_inputs), whether this run made the output
        # directory (prepare_output), a tfds source's split of each shard (settings).
        self.vocab: List[str] = []
        self.special: Optional[SpecialTokenIds] = None
        self.normalization: Optional[TextNormalization] = None
        self.files: List[str] = []
        self.sizes: List[int] = []
        self.created = False
        self.tfds_splits: List[Any] = []

    def run(self) -> Dict[str, Any]:
        """Builds, resumes or repairs the shards; returns the manifest dict."""
        o = self.options
        self.check_inputs()
        self.prepare_output()
        settings = self.settings()
        build_id = mf.fingerprint(settings)
        existing, repair = resume_or_refuse(o.output_dir, settings, o.overwrite, self.log)
        if existing is not None and not repair:
            return existing  # already complete (logged)
        tasks, forced_splits = self.plan_tasks()
        fileio.makedirs(self.work_dir)
        if repair is None:
            fileio.write_json_atomic(fileio.join(self.work_dir, "plan.json"),
                                     {"build_id": build_id, "settings": settings}, sort_keys=True)
        remove_temp_files(o.output_dir)
        todo, done = self.shards_to_build(tasks, repair)
        self.build(todo, done)
        if repair is not None:
            fileio.rmtree(self.work_dir)
            return check_repair(existing, done, o.output_dir, self.log)
        return finish_build(o.output_dir, settings, build_id, done, [t.index for t in todo], o.vocab_file,
                            self.special, forced_splits, self.started, self.log)

    def check_inputs(self) -> None:
        """The cheap checks (no TensorFlow import yet): the vocabulary, the normalisation, the corpus files."""
        o = self.options
        self.vocab = load_vocab(o.vocab_file)
        check_vocab(self.vocab, o.vocab_file)
        self.special = special_token_ids(self.vocab)
        self.normalization = _normalization(o.vocab_file, o.lower_case, o.strip_accents, o.mode)
        if o.tfds_name is None:
            self.files, self.sizes = _corpus_files(o.corpus)

    def prepare_output(self) -> None:
        """Creates the output directory (noting whether this run made it) and proves it writable."""
        self.created = not fileio.exists(self.options.output_dir)
        prepare_output_dir(self.options.output_dir)

    def _abandon(self, error: DataError) -> DataError:
        """`error`, after removing the output directory if this run made it."""
        # A source refused while planning (a damaged .gz file, a missing tfds split):
        # a directory made by this run holds nothing yet and goes too.
        if self.created:
            fileio.rmtree(self.options.output_dir)
        return error

    def settings(self) -> Dict[str, Any]:
        """What must match to resume a build (manifest.json's `settings`; its fingerprint is the build_id).

        A tfds source is planned here: its identity is part of the settings.
        """
        o, normalization = self.options, self.normalization
        vocab_sha = file_sha256(o.vocab_file)
        if o.tfds_name is not None:
            try:
                self.tfds_splits, _, identity = plan_tfds(
                    o.tfds_name, o.tfds_split, o.tfds_text_key, o.tfds_data_dir, o.num_shards)
            except DataError as e:
                raise self._abandon(e) from None
            source: Dict[str, Any] = {"tfds": identity}
        else:
            source = {"files": [[p, s] for p, s in zip(self.files, self.sizes)]}
        settings = {
            "max_seq_length": o.max_seq_length, "vocab_size": len(self.vocab), "vocab_sha256": vocab_sha,
            "do_lower_case": bool(normalization.lower_case), "strip_accents": normalization.strip_accents,
            "blanks_separate_docs": bool(o.blanks_separate_docs), "seed": int(o.seed),
            "num_shards": o.num_shards, "max_line_bytes": o.max_line_bytes, "source": source,
        }
        if normalization.is_bert:
            # Builds of the nfkc_casefold mode keep the settings (the identity) they had before this field.
            settings["text_normalization"] = normalization.to_json()
        if not o.truncate_long_lines:
            # Recorded only for the carry rule: a build made before it truncated, and keeps
            # its identity under --truncate_long_lines (never mistaken for a carried build).
            settings["carry_long_lines"] = True
        if any(is_gzip(p) for p in self.files) and o.num_shards > 1:
            # Builds that gave each .gz file whole to one shard have another plan: never mixed.
            settings["gzip_cut_at_documents"] = True
        return settings

    def plan_tasks(self) -> Tuple[List[ShardTask], int]:
        """One ShardTask a shard, and how many shard cuts fell inside a document."""
        o, normalization = self.options, self.normalization
        common = dict(num_shards=o.num_shards, output_dir=o.output_dir, vocab_file=o.vocab_file,
                      lower_case=bool(normalization.lower_case), strip_accents=normalization.strip_accents,
                      normalization=normalization, max_seq_length=o.max_seq_length,
                      seed=int(o.seed), blanks_separate_docs=bool(o.blanks_separate_docs),
                      max_line_bytes=o.max_line_bytes, carry=not o.truncate_long_lines)
        if o.tfds_name is not None:
            tfds_spec = {"name": o.tfds_name, "text_key": o.tfds_text_key, "data_dir": o.tfds_data_dir}
            return [ShardTask(index=i, tfds=None if split is None else dict(tfds_spec, split=split), **common)
                    for i, split in enumerate(self.tfds_splits)], 0
        kwargs = {} if o.doc_search_bytes is None else {"search_bytes": o.doc_search_bytes}
        try:
            plan = plan_files(self.files, self.sizes, o.num_shards, o.blanks_separate_docs, **kwargs)
        except DataError as e:
            raise self._abandon(e) from None
        return [ShardTask(index=i, segments=[(s.path, s.start, s.end) for s in segs], **common)
                for i, segs in enumerate(plan.shards)], plan.forced_splits

    def shards_to_build(self, tasks: List[ShardTask], repair: Optional[Dict[int, str]]
                        ) -> Tuple[List[ShardTask], Dict[int, Dict[str, Any]]]:
        """The tasks this run builds, and {index: stats} of the shards an earlier run finished.

        A repair rebuilds the damaged shards; otherwise a shard whose final file and
        stats are both there is done.
        """
        o = self.options
        done: Dict[int, Dict[str, Any]] = {}
        if repair is not None:
            return [t for t in tasks if t.index in repair], done
        for task in tasks:
            final = fileio.join(o.output_dir, mf.shard_name(task.index, o.num_shards))
            stats = mf.read_json_object(fileio.join(self.work_dir, f"shard-{task.index:05d}.json"))
            if fileio.exists(final) and stats is not None:
                done[task.index] = stats
        todo = [t for t in tasks if t.index not in done]
        if done:
            self.log(f"resuming: {len(done)} of {o.num_shards} shards already complete, building {len(todo)}")
        return todo, done

    def build(self, todo: List[ShardTask], done: Dict[int, Dict[str, Any]]) -> None:
        """Builds the `todo` shards, adding their stats to `done`; removes temp files on failure."""
        todo_bytes = sum(e - s for t in todo for _, s, e in t.segments)  # 0 for tfds (no segments)
        ctx = multiprocessing.get_context("spawn")
        processes = min(self.options.num_processes, max(1, len(todo)))
        meter = Progress(ctx, todo_bytes, len(todo), enabled=self.options.progress)
        try:
            with meter:
                if processes == 1:
                    init_worker(meter.counters, single_thread=False)
                    for stats in build_shards(todo, build=build_shard):
                        done[stats["index"]] = stats
                else:
                    self._build_in_pool(ctx, processes, meter, todo, done)
        except BaseException:
            remove_temp_files(self.options.output_dir)
            raise
        finally:
            init_worker({}, single_thread=False)

    def _build_in_pool(self, ctx, processes: int, meter: Progress, todo: List[ShardTask],
                       done: Dict[int, Dict[str, Any]]) -> None:
        """build() with `processes` processes, this one included."""
        # All processes, this one included, claim shards from one shared counter, so
        # none waits for work while another has some queued. The pool starts first:
        # its workers import TensorFlow while this process does the same and builds
        # the tokenizer's tables once for all of them (seconds each otherwise).
        with ctx.Pool(processes - 1, initializer=init_worker, initargs=(meter.counters, True)) as pool:
            init_worker(meter.counters, single_thread=True)
            models = build_tokenizer_models(self.vocab, normalization=self.normalization)
            todo = [dataclasses.replace(t, tokenizer_models=models) for t in todo]
            workers = [pool.apply_async(build_shards, (todo,)) for _ in range(processes - 1)]
            for stats in build_shards(todo, build=build_shard, stop=lambda: any(
                    w.ready() and not w.successful() for w in workers)):
                done[stats["index"]] = stats
            for worker in workers:
                for stats in worker.get():  # re-raises a worker's error here
                    done[stats["index"]] = stats


def _normalization(vocab_file: str, lower_case: Optional[bool], strip_accents: Optional[bool],
                   mode: Optional[str]) -> TextNormalization:
    """The build's text normalisation: the flags given, the rest from the vocabulary's record.

    Raises:
      DataError: an unknown mode, or flags that contradict the vocabulary's record.
    """
    if mode is not None and mode not in MODES:
        raise DataError(f"--normalization={mode!r} is unknown; use one of {', '.join(MODES)}")
    found = find_vocab_record(vocab_file)
    recorded, where = found if found is not None else (None, None)
    if recorded is None:
        return TextNormalization.create(True if lower_case is None else lower_case, strip_accents,
                                        mode or DEFAULT_MODE)
    lower = recorded.lower_case if lower_case is None else bool(lower_case)
    if strip_accents is None:
        strip_accents = recorded.strip_accents if lower == recorded.lower_case else None
    wanted = TextNormalization.create(lower, strip_accents, mode or recorded.mode)
    if wanted != recorded:
        raise DataError(f"--vocab_file {vocab_file} was built with text normalisation ({recorded.describe()}; "
                        f"{where}) but the flags ask for ({wanted.describe()}); drop "
                        f"those flags (or pass {recorded.flags()}), or rebuild the vocabulary with them")
    return wanted


# --- command line ---------------------------------------------------------------------
RENAMED = {"lower_case": "do_lower_case"}  # old spelling -> new (refused by electra_tf/cli.py)


def define_flags(flag_values=None) -> None:
    """Defines this CLI's absl flags (kept out of import time: the library imports us)."""
    fv = flags.FLAGS if flag_values is None else flag_values
    flags.DEFINE_list("corpus", None, "Text files, directories or globs.", flag_values=fv)
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt.", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Directory for the shards and manifest.json.", flag_values=fv)
    flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.", flag_values=fv)
    flags.DEFINE_integer("num_shards", 16, "Number of output shards.", flag_values=fv)
    flags.DEFINE_integer("num_processes", 1, "Worker processes.", flag_values=fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (--nodo_lower_case for cased); default: as "
                      "the vocabulary's record (vocab.txt.normalization.json) says, else true.", flag_values=fv)
    flags.DEFINE_enum("strip_accents", "auto", ["auto", "true", "false"],
                      "Strip accents; auto: as the vocabulary's record says, else as --do_lower_case.",
                      flag_values=fv)
    flags.DEFINE_enum("normalization", None, list(MODES),
                      "Text normalisation rules, bert or nfkc_casefold (electra_tf/data/normalization.py); default: "
                      "the vocabulary's record, else bert.", flag_values=fv)
    flags.DEFINE_bool("blanks_separate_docs", True, "A blank line ends a document.", flag_values=fv)
    flags.DEFINE_integer("seed", 0, "Random seed.", flag_values=fv)
    flags.DEFINE_integer("max_line_bytes", None, "Cut longer lines (default max(64KiB, 200*seq)).",
                         flag_values=fv)
    flags.DEFINE_bool("truncate_long_lines", False,
                      "The reference's rule: drop the text that does not fit in an example "
                      "(default: split long lines and carry the rest into the next examples).",
                      flag_values=fv)
    flags.DEFINE_string("tfds_name", None, "tfds dataset to read instead of --corpus.", flag_values=fv)
    flags.DEFINE_string("tfds_split", "train", "tfds split.", flag_values=fv)
    flags.DEFINE_string("tfds_text_key", "text", "tfds feature holding the text.", flag_values=fv)
    flags.DEFINE_string("tfds_data_dir", None, "tfds data_dir.", flag_values=fv)
    flags.DEFINE_bool("overwrite", False, "Delete an existing build in --output_dir first.", flag_values=fv)
    flags.DEFINE_bool("progress", True, "Print a progress line with tokens/s.", flag_values=fv)


def run(fv) -> int:
    """The build, from the parsed flags `fv`; returns the exit code."""
    for name in ("vocab_file", "output_dir"):
        if not fv[name].value:
            exit_with_error(f"--{name} is required")
    strip = {"auto": None, "true": True, "false": False}[fv.strip_accents]
    try:
        build_pretraining_data(
            fv.output_dir, fv.vocab_file, fv.corpus, max_seq_length=fv.max_seq_length,
            num_shards=fv.num_shards, num_processes=fv.num_processes,
            lower_case=fv.do_lower_case if fv["do_lower_case"].present else None,
            strip_accents=strip, mode=fv.normalization, blanks_separate_docs=fv.blanks_separate_docs, seed=fv.seed,
            max_line_bytes=fv.max_line_bytes, truncate_long_lines=fv.truncate_long_lines,
            tfds_name=fv.tfds_name, tfds_split=fv.tfds_split,
            tfds_text_key=fv.tfds_text_key, tfds_data_dir=fv.tfds_data_dir, overwrite=fv.overwrite,
            progress=fv.progress,
        )
    except (DataError, VocabError) as e:
        exit_with_error(str(e))
    except KeyboardInterrupt:
        return report_interrupted("completed shards are kept; re-run the same command to finish the rest")
    return 0


def main(argv=None) -> int:
    """`python -m electra_tf.data.build_pretraining_data` in-process: argv holds the flags only."""
    return run(parse_flags(define_flags, argv, prog="electra_tf.data.build_pretraining_data", renamed=RENAMED))


if __name__ == "__main__":
    run_absl(run, define_flags, renamed=RENAMED)
