"""Corpus text -> sharded TFRecords of ELECTRA pre-training examples.

    python -m electra_tf.data.build_pretraining_data \\
        --corpus 'corpus/*.txt' --vocab_file vocab.txt --output_dir shards/ \\
        --max_seq_length 128 --num_shards 64 --num_processes 8

Input: text with one sentence/paragraph per line and a blank line between
documents (files, directories or globs), or a tfds dataset. The corpus is cut
into byte-balanced shard ranges at document boundaries; each shard is built by a
worker process with an RNG seeded from (--seed, shard index), written under a
temporary name and renamed when complete. manifest.json is written last.
Re-running the same command after an interruption builds only missing shards.
Same seed + inputs + --num_shards give byte-identical shards for any
--num_processes.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from electra_tf.data import fs
from electra_tf.data import manifest as mf
from electra_tf.data.corpus import check_text_file, expand_corpus, file_size
from electra_tf.data.errors import DataError
from electra_tf.data.planning import plan_files
from electra_tf.data.shard_writer import ShardTask, build_shard, build_shards, init_worker
from electra_tf.data.tokenizer import build_tokenizer_models, check_vocab, file_sha256, resolve_strip_accents
from electra_tf.data.vocab import VocabError, load_vocab, special_token_ids


def default_max_line_bytes(max_seq_length: int) -> int:
    """Longest line kept whole: far more text than one example can hold."""
    return max(1 << 16, 200 * max_seq_length)


class Progress:
    """Shared counters plus a thread that prints tokens/s and an ETA to stderr."""

    def __init__(self, ctx, total_bytes: int, total_shards: int, enabled: bool,
                 stream=None, interval: float = 1.0):
        # "next_shard" is the work queue itself: every process claims the next unbuilt shard from it.
        self.counters = {name: ctx.Value("q", 0) for name in ("bytes", "tokens", "shards", "next_shard")}
        self.total_bytes = max(1, total_bytes)
        self.total_shards = total_shards
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.interval = interval if self.tty else max(interval, 10.0)
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self._thread.join()
            self._print(final=True)

    def line(self) -> str:
        elapsed = max(1e-6, time.time() - self.started)
        done_bytes = self.counters["bytes"].value
        tokens = self.counters["tokens"].value
        frac = min(1.0, done_bytes / self.total_bytes)
        eta = (elapsed / frac - elapsed) if frac > 0 else float("nan")
        eta_s = f"{eta:5.0f}s" if eta == eta else "    ?"
        width = 24
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        return (f"[{bar}] {100 * frac:5.1f}% shards {self.counters['shards'].value}/{self.total_shards} "
                f"{tokens:,} tokens {tokens / elapsed / 1000:7.1f}k tokens/s ETA {eta_s}")

    def _print(self, final=False):
        end = "\n" if (final or not self.tty) else ""
        prefix = "\r" if self.tty else ""
        print(prefix + self.line(), end=end, file=self.stream, flush=True)

    def _run(self):
        while not self._stop.wait(self.interval):
            self._print()


def _remove_temp_files(output_dir: str) -> None:
    for path in fs.glob(mf.join(output_dir, f".{mf.SHARD_PREFIX}-*.tmp-*")):
        fs.remove(path)


def _prepare_output_dir(output_dir: str) -> None:
    """Creates output_dir and proves it is writable before any work starts."""
    try:
        if "://" in output_dir:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            errors = (tf.errors.OpError, OSError)
            tf.io.gfile.makedirs(output_dir)
            probe = mf.join(output_dir, ".write_test")
            with tf.io.gfile.GFile(probe, "w") as f:
                f.write("ok")
            tf.io.gfile.remove(probe)
        else:
            errors = (OSError,)
            os.makedirs(output_dir, exist_ok=True)
            probe = mf.join(output_dir, ".write_test")
            with open(probe, "w", encoding="utf-8") as f:
                f.write("ok")
            os.remove(probe)
    except errors as e:  # pylint: disable=catching-non-exception
        reason = getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)
        raise DataError(
            f"cannot write to --output_dir {output_dir!r} ({str(reason).splitlines()[0]}); "
            f"choose a writable directory"
        ) from None


def _damaged_shards(manifest: Dict[str, Any], output_dir: str) -> Dict[int, str]:
    """{index: why} of the manifest's shards that are missing, of another size or another sha256."""
    damaged = {}
    for i, shard in enumerate(manifest["shards"]):
        path = mf.join(output_dir, shard["file"])
        if not fs.exists(path):
            damaged[i] = "missing"
        elif fs.size(path) != shard["size"]:
            damaged[i] = f"{fs.size(path)} bytes, manifest says {shard['size']}"
        elif file_sha256(path) != shard["sha256"]:
            damaged[i] = "sha256 differs from the manifest"
    return damaged


def _check_repair(manifest: Dict[str, Any], rebuilt: Dict[int, Dict[str, Any]], output_dir: str,
                  log: Callable[[str], None]) -> Dict[str, Any]:
    """The rebuilt shards must be the ones the manifest describes (the build is deterministic)."""
    for i, stats in sorted(rebuilt.items()):
        want = manifest["shards"][i]
        if (stats["size"], stats["sha256"]) != (want["size"], want["sha256"]):
            raise DataError(
                f"rebuilt shard {mf.join(output_dir, want['file'])} differs from its manifest.json (the corpus "
                f"files changed since the build?); rebuild everything with --overwrite"
            )
    log(f"repaired {len(rebuilt)} shard(s) of {output_dir}; the build is complete again "
        f"({manifest['num_examples']} examples)")
    return manifest


def _tfds_plan(name: str, split: str, text_key: str, data_dir: Optional[str],
               num_shards: int) -> tuple:
    """(per-shard split strings or None if empty, total records, identity) for tfds."""
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel

    try:
        builder = tfds.builder(name, data_dir=data_dir)
        info = builder.info
        num = info.splits[split].num_examples
    except Exception as e:  # tfds raises many types for "not found"  # pylint: disable=broad-except
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(
            f"tfds dataset {name!r} split {split!r} is not available ({first}); "
            f"prepare it first (tfds build) or pass --tfds_data_dir where it was built"
        ) from None
    keys = list(info.features.keys()) if hasattr(info.features, "keys") else []
    if text_key not in keys:
        raise DataError(
            f"tfds dataset {name!r} has no feature {text_key!r}; pass --tfds_text_key, one of {keys}"
        )
    if num == 0:
        raise DataError(f"tfds dataset {name!r} split {split!r} is empty; choose another split")
    splits = []
    for i in range(num_shards):
        a, b = i * num // num_shards, (i + 1) * num // num_shards
        splits.append(f"{split}[{a}:{b}]" if b > a else None)
    identity = {"name": name, "split": split, "text_key": text_key,
                "version": str(info.version), "num_examples": int(num)}
    return splits, int(num), identity


def build_pretraining_data(
    output_dir: str,
    vocab_file: str,
    corpus: Optional[Sequence[str]] = None,
    *,
    max_seq_length: int = 128,
    num_shards: int = 1,
    num_processes: int = 1,
    lower_case: bool = True,
    strip_accents: Optional[bool] = None,
    blanks_separate_docs: bool = True,
    seed: int = 0,
    max_line_bytes: Optional[int] = None,
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
      lower_case: lower-case text before WordPiece.
      strip_accents: strip accents; None follows lower_case (BERT behaviour).
      blanks_separate_docs: a blank line ends a document (else blank lines are
        skipped and only file ends / tfds records end documents).
      seed: seeds every random choice (per shard).
      max_line_bytes: lines longer than this are cut (counted and reported);
        default max(64 KiB, 200 * max_seq_length).
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
    if num_shards < 1:
        raise DataError(f"--num_shards={num_shards} must be >= 1")
    if num_processes < 1:
        raise DataError(f"--num_processes={num_processes} must be >= 1")
    if max_seq_length < 5:
        raise DataError(f"--max_seq_length={max_seq_length} is too short; use at least 5")
    if (tfds_name is None) == (not corpus):
        raise DataError("pass exactly one source: --corpus files, or --tfds_name")
    max_line_bytes = max_line_bytes or default_max_line_bytes(max_seq_length)

    # --- cheap checks first (no TensorFlow import yet) ---------------------------
    vocab = load_vocab(vocab_file)
    check_vocab(vocab, vocab_file)
    special = special_token_ids(vocab)
    strip = resolve_strip_accents(lower_case, strip_accents)
    files: List[str] = []
    sizes: List[int] = []
    if tfds_name is None:
        files = expand_corpus(corpus)
        has_text = False
        for path in files:
            has_text = check_text_file(path) or has_text
        if not has_text:
            raise DataError(
                f"corpus is empty: {len(files)} file(s) ({files[0]}{', ...' if len(files) > 1 else ''}) "
                f"hold no non-blank line; pass files with one sentence or paragraph per line"
            )
        files = [p if "://" in p else os.path.abspath(p) for p in files]
        sizes = [file_size(p) for p in files]

    _prepare_output_dir(output_dir)
    vocab_sha = file_sha256(vocab_file)
    tfds_spec = None
    if tfds_name is not None:
        tfds_splits, _, identity = _tfds_plan(
            tfds_name, tfds_split, tfds_text_key, tfds_data_dir, num_shards)
        source = {"tfds": identity}
        tfds_spec = {"name": tfds_name, "text_key": tfds_text_key,
                     "data_dir": tfds_data_dir}
    else:
        source = {"files": [[p, s] for p, s in zip(files, sizes)]}
    settings = {
        "max_seq_length": max_seq_length, "vocab_size": len(vocab), "vocab_sha256": vocab_sha,
        "do_lower_case": bool(lower_case), "strip_accents": strip,
        "blanks_separate_docs": bool(blanks_separate_docs), "seed": int(seed),
        "num_shards": num_shards, "max_line_bytes": max_line_bytes, "source": source,
    }
    build_id = mf.fingerprint(settings)

    # --- resume / refuse a foreign build ------------------------------------------
    gfile = fs
    work_dir = mf.join(output_dir, mf.WORK_DIR)
    plan_path = mf.join(work_dir, "plan.json")
    if overwrite:
        for path in gfile.glob(mf.join(output_dir, mf.SHARD_GLOB)):
            gfile.remove(path)
        if gfile.exists(mf.join(output_dir, mf.MANIFEST_NAME)):
            gfile.remove(mf.join(output_dir, mf.MANIFEST_NAME))
        fs.rmtree(work_dir)
    existing = mf.load_manifest(output_dir)
    repair = None  # {index: why}: the finished build's missing or damaged shards, rebuilt in place
    if existing is not None:
        if existing.get("settings") == settings:
            repair = _damaged_shards(existing, output_dir)
            if not repair:
                log(f"{output_dir}: already complete ({existing['num_examples']} examples); nothing to do")
                return existing
            log(f"repairing: {len(repair)} of {num_shards} shard(s) missing or damaged ("
                + "; ".join(f"{existing['shards'][i]['file']}: {why}" for i, why in repair.items())
                + "), rebuilding them")
        else:
            raise DataError(
                f"--output_dir {output_dir!r} already holds a finished build with other settings "
                f"({mf.describe_difference(existing.get('settings', {}), settings)}); "
                f"choose a new --output_dir or pass --overwrite"
            )
    previous = mf.read_json(plan_path)
    if previous is not None and previous.get("settings") != settings:
        raise DataError(
            f"--output_dir {output_dir!r} holds an unfinished build with other settings "
            f"({mf.describe_difference(previous.get('settings', {}), settings)}); "
            f"re-run with the same settings to resume, or pass --overwrite"
        )
    if previous is None and repair is None and gfile.glob(mf.join(output_dir, mf.SHARD_GLOB)):
        raise DataError(
            f"--output_dir {output_dir!r} already holds {mf.SHARD_PREFIX} files from an unknown build; "
            f"choose a new --output_dir or pass --overwrite"
        )

    # --- plan ------------------------------------------------------------------------
    forced_splits = 0
    tasks: List[ShardTask] = []
    common = dict(num_shards=num_shards, output_dir=output_dir, vocab_file=vocab_file,
                  lower_case=bool(lower_case), strip_accents=strip, max_seq_length=max_seq_length,
                  seed=int(seed), blanks_separate_docs=bool(blanks_separate_docs),
                  max_line_bytes=max_line_bytes)
    if tfds_spec is not None:
        for i, split in enumerate(tfds_splits):
            spec = None if split is None else dict(tfds_spec, split=split)
            tasks.append(ShardTask(index=i, tfds=spec, **common))
        total_bytes = 0
    else:
        kwargs = {} if _doc_search_bytes is None else {"search_bytes": _doc_search_bytes}
        plan = plan_files(files, sizes, num_shards, blanks_separate_docs, **kwargs)
        forced_splits = plan.forced_splits
        for i, segs in enumerate(plan.shards):
            tasks.append(ShardTask(index=i, segments=[(s.path, s.start, s.end) for s in segs],
                                   **common))
        total_bytes = sum(sizes)
    fs.makedirs(work_dir)
    if repair is None:
        mf.write_json_atomic(plan_path, {"build_id": build_id, "settings": settings})
    _remove_temp_files(output_dir)

    done: Dict[int, Dict[str, Any]] = {}
    if repair is not None:
        todo = [t for t in tasks if t.index in repair]
    else:
        for task in tasks:
            final = mf.join(output_dir, mf.shard_name(task.index, num_shards))
            stats = mf.read_json(mf.join(work_dir, f"shard-{task.index:05d}.json"))
            if gfile.exists(final) and stats is not None:
                done[task.index] = stats
        todo = [t for t in tasks if t.index not in done]
        if done:
            log(f"resuming: {len(done)} of {num_shards} shards already complete, building {len(todo)}")
    if tfds_spec is None:
        todo_bytes = sum(e - s for t in todo for _, s, e in t.segments)
    else:
        todo_bytes = 0

    # --- build -----------------------------------------------------------------------
    ctx = multiprocessing.get_context("spawn")
    processes = min(num_processes, max(1, len(todo)))
    meter = Progress(ctx, todo_bytes, len(todo), enabled=progress)
    try:
        with meter:
            if processes == 1:
                init_worker(meter.counters, single_thread=False)
                for stats in build_shards(todo, build=build_shard):
                    done[stats["index"]] = stats
            else:
                # All processes, this one included, claim shards from one shared counter, so
                # none waits for work while another has some queued. The pool starts first:
                # its workers import TensorFlow while this process does the same and builds
                # the tokenizer's tables once for all of them (seconds each otherwise).
                with ctx.Pool(processes - 1, initializer=init_worker,
                              initargs=(meter.counters, True)) as pool:
                    init_worker(meter.counters, single_thread=True)
                    models = build_tokenizer_models(vocab, lower_case, strip)
                    todo = [dataclasses.replace(t, tokenizer_models=models) for t in todo]
                    workers = [pool.apply_async(build_shards, (todo,)) for _ in range(processes - 1)]
                    for stats in build_shards(todo, build=build_shard, stop=lambda: any(
                            w.ready() and not w.successful() for w in workers)):
                        done[stats["index"]] = stats
                    for worker in workers:
                        for stats in worker.get():  # re-raises a worker's error here
                            done[stats["index"]] = stats
    except BaseException:
        _remove_temp_files(output_dir)
        raise
    finally:
        init_worker({}, single_thread=False)

    if repair is not None:
        fs.rmtree(work_dir)
        return _check_repair(existing, done, output_dir, log)

    shards = [done[i] for i in range(num_shards)]
    num_examples = sum(s["examples"] for s in shards)
    if num_examples == 0:
        for i in range(num_shards):
            path = mf.join(output_dir, mf.shard_name(i, num_shards))
            if gfile.exists(path):
                gfile.remove(path)
        gfile.rmtree(work_dir)
        raise DataError(
            "corpus produced no examples (no line yields a WordPiece token); "
            "check the corpus encoding and the vocabulary"
        )

    invalid: Dict[str, int] = {}
    cut: Dict[str, int] = {}
    for s in shards:
        for key, val in s["invalid_bytes"].items():
            invalid[key] = invalid.get(key, 0) + val
        for key, val in s["long_lines_cut"].items():
            cut[key] = cut.get(key, 0) + val
    elapsed = time.time() - started
    built_tokens = sum(done[t.index]["corpus_tokens"] for t in todo)
    manifest = {
        "format": mf.MANIFEST_FORMAT,
        "build_id": build_id,
        "num_examples": num_examples,
        "num_tokens": sum(s["tokens"] for s in shards),
        "num_corpus_tokens": sum(s["corpus_tokens"] for s in shards),
        "num_lines": sum(s["lines"] for s in shards),
        "max_seq_length": max_seq_length,
        "vocab_size": len(vocab),
        "vocab_sha256": vocab_sha,
        "vocab_file": os.path.abspath(vocab_file) if "://" not in vocab_file else vocab_file,
        "do_lower_case": bool(lower_case),
        "strip_accents": strip,
        "special_token_ids": {"pad": special.pad, "unk": special.unk, "cls": special.cls,
                              "sep": special.sep, "mask": special.mask},
        "features": {name: {"dtype": "int64", "shape": [max_seq_length]} for name in mf.FEATURES},
        "num_shards": num_shards,
        "shards": [{k: s[k] for k in ("file", "examples", "tokens", "corpus_tokens", "size", "sha256")}
                   for s in shards],
        "empty_shards": sum(1 for s in shards if s["examples"] == 0),
        "forced_document_splits": forced_splits,
        "invalid_utf8_bytes_replaced": invalid,
        "long_lines_cut": cut,
        "settings": settings,
        "build_seconds": round(elapsed, 2),
    }
    mf.write_json_atomic(mf.join(output_dir, mf.MANIFEST_NAME), manifest)
    gfile.rmtree(work_dir)

    log(f"wrote {num_examples:,} examples ({manifest['num_tokens']:,} tokens) in {num_shards} shard(s) "
        f"to {output_dir} in {elapsed:.1f}s ({built_tokens / max(elapsed, 1e-6) / 1000:.1f}k corpus tokens/s)")
    for source_name, n in sorted(invalid.items()):
        log(f"warning: {source_name}: {n} invalid UTF-8 byte(s) replaced with U+FFFD "
            f"(convert the file to UTF-8 to keep those characters)")
    for source_name, n in sorted(cut.items()):
        log(f"warning: {source_name}: {n} line(s) longer than {max_line_bytes} bytes cut to that length "
            f"(split such lines into sentences, or raise --max_line_bytes to keep more of them)")
    if manifest["empty_shards"]:
        log(f"warning: {manifest['empty_shards']} of {num_shards} shards are empty; "
            f"the corpus is small for --num_shards={num_shards}")
    if forced_splits:
        log(f"note: {forced_splits} shard boundaries fell inside a document longer than the search window")
    return manifest


# --- command line ---------------------------------------------------------------------
def define_flags(flag_values=None) -> None:
    """Defines this CLI's absl flags (kept out of import time: the library imports us)."""
    from absl import flags  # pylint: disable=import-outside-toplevel

    fv = flag_values or flags.FLAGS
    flags.DEFINE_list("corpus", None, "Text files, directories or globs.", flag_values=fv)
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt.", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Directory for the shards and manifest.json.", flag_values=fv)
    flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.", flag_values=fv)
    flags.DEFINE_integer("num_shards", 16, "Number of output shards.", flag_values=fv)
    flags.DEFINE_integer("num_processes", 1, "Worker processes.", flag_values=fv)
    flags.DEFINE_bool("lower_case", True, "Lower-case the text (--no_lower_case for cased).", flag_values=fv)
    flags.DEFINE_enum("strip_accents", "auto", ["auto", "true", "false"],
                      "Strip accents; auto follows --lower_case.", flag_values=fv)
    flags.DEFINE_bool("blanks_separate_docs", True, "A blank line ends a document.", flag_values=fv)
    flags.DEFINE_integer("seed", 0, "Random seed.", flag_values=fv)
    flags.DEFINE_integer("max_line_bytes", None, "Cut longer lines (default max(64KiB, 200*seq)).",
                         flag_values=fv)
    flags.DEFINE_string("tfds_name", None, "tfds dataset to read instead of --corpus.", flag_values=fv)
    flags.DEFINE_string("tfds_split", "train", "tfds split.", flag_values=fv)
    flags.DEFINE_string("tfds_text_key", "text", "tfds feature holding the text.", flag_values=fv)
    flags.DEFINE_string("tfds_data_dir", None, "tfds data_dir.", flag_values=fv)
    flags.DEFINE_bool("overwrite", False, "Delete an existing build in --output_dir first.", flag_values=fv)
    flags.DEFINE_bool("progress", True, "Print a progress line with tokens/s.", flag_values=fv)


def main(argv) -> None:
    from absl import flags  # pylint: disable=import-outside-toplevel

    from electra_tf.cli import exit_with_error, report_interrupted  # pylint: disable=import-outside-toplevel

    del argv
    fv = flags.FLAGS
    for name in ("vocab_file", "output_dir"):
        if not fv[name].value:
            exit_with_error(f"--{name} is required")
    strip = {"auto": None, "true": True, "false": False}[fv.strip_accents]
    try:
        build_pretraining_data(
            fv.output_dir, fv.vocab_file, fv.corpus, max_seq_length=fv.max_seq_length,
            num_shards=fv.num_shards, num_processes=fv.num_processes, lower_case=fv.lower_case,
            strip_accents=strip, blanks_separate_docs=fv.blanks_separate_docs, seed=fv.seed,
            max_line_bytes=fv.max_line_bytes, tfds_name=fv.tfds_name, tfds_split=fv.tfds_split,
            tfds_text_key=fv.tfds_text_key, tfds_data_dir=fv.tfds_data_dir, overwrite=fv.overwrite,
            progress=fv.progress,
        )
    except (DataError, VocabError) as e:
        exit_with_error(str(e))
    except KeyboardInterrupt:
        sys.exit(report_interrupted("completed shards are kept; re-run the same command to finish the rest"))


if __name__ == "__main__":
    from electra_tf.cli import run_absl

    define_flags()
    run_absl(main)
