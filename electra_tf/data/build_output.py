"""The output directory of a data build: prepared, resumed or refused, repaired, finished.

A build writes shards under temporary names, per-shard stats and its plan
under WORK_DIR, and manifest.json last. These helpers decide what an existing
directory means for a new run (resume, repair, nothing to do, or refuse a
foreign build) and write the manifest once every shard is there.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from electra_tf import fileio
from electra_tf.data import manifest as mf
from electra_tf.data.data_errors import DataError
from electra_tf.data.normalization import from_record
from electra_tf.data.tokenizer import file_sha256
from electra_tf.data.vocab import SpecialTokenIds


def remove_temp_files(output_dir: str) -> None:
    """Removes shards left half-written (under their temporary names) by a killed build."""
    for path in fileio.glob(fileio.join(output_dir, f".{mf.SHARD_PREFIX}-*.tmp-*")):
        fileio.remove(path)


def prepare_output_dir(output_dir: str) -> None:
    """Creates output_dir and proves it is writable before any work starts."""
    try:
        if "://" in output_dir:
            # Lazy: TensorFlow (seconds to import) only for remote (gs://) output directories.
            import tensorflow as tf  # pylint: disable=import-outside-toplevel

            errors = (tf.errors.OpError, OSError)
            tf.io.gfile.makedirs(output_dir)
            probe = fileio.join(output_dir, ".write_test")
            with tf.io.gfile.GFile(probe, "w") as f:
                f.write("ok")
            tf.io.gfile.remove(probe)
        else:
            errors = (OSError,)
            os.makedirs(output_dir, exist_ok=True)
            probe = fileio.join(output_dir, ".write_test")
            with open(probe, "w", encoding="utf-8") as f:
                f.write("ok")
            os.remove(probe)
    except errors as e:  # pylint: disable=catching-non-exception
        reason = getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)
        raise DataError(
            f"cannot write to --output_dir {output_dir!r} ({str(reason).splitlines()[0]}); "
            f"choose a writable directory"
        ) from None


def damaged_shards(manifest: Dict[str, Any], output_dir: str) -> Dict[int, str]:
    """{index: why} of the manifest's shards that are missing, of another size or another sha256."""
    damaged = {}
    for i, shard in enumerate(manifest["shards"]):
        path = fileio.join(output_dir, shard["file"])
        if not fileio.exists(path):
            damaged[i] = "missing"
        elif fileio.size(path) != shard["size"]:
            damaged[i] = f"{fileio.size(path)} bytes, manifest says {shard['size']}"
        elif file_sha256(path) != shard["sha256"]:
            damaged[i] = "sha256 differs from the manifest"
    return damaged


def resume_or_refuse(output_dir: str, settings: Dict[str, Any], overwrite: bool,
                     log: Callable[[str], None]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[int, str]]]:
    """What output_dir holds for a build with `settings`: (finished manifest, shards to repair).

    (None, None): nothing finished there (a new build, or an unfinished one of
    the same settings to resume). (manifest, {index: why}): a finished build of
    the same settings whose listed shards are missing or damaged. (manifest,
    {}): a finished, intact build (logged: nothing to do). overwrite=True
    first deletes any build there.

    Raises:
      DataError: output_dir holds a build (finished, unfinished or unknown) of other settings.
    """
    work_dir = fileio.join(output_dir, mf.WORK_DIR)
    if overwrite:
        for path in fileio.glob(fileio.join(output_dir, mf.SHARD_GLOB)):
            fileio.remove(path)
        if fileio.exists(fileio.join(output_dir, mf.MANIFEST_NAME)):
            fileio.remove(fileio.join(output_dir, mf.MANIFEST_NAME))
        fileio.rmtree(work_dir)
    existing = mf.load_manifest(output_dir)
    repair = None  # {index: why}: the finished build's missing or damaged shards, rebuilt in place
    if existing is not None:
        if existing.get("settings") == settings:
            repair = damaged_shards(existing, output_dir)
            if not repair:
                log(f"{output_dir}: already complete ({existing['num_examples']} examples); nothing to do")
                return existing, repair
            log(f"repairing: {len(repair)} of {settings['num_shards']} shard(s) missing or damaged ("
                + "; ".join(f"{existing['shards'][i]['file']}: {why}" for i, why in repair.items())
                + "), rebuilding them")
        else:
            raise DataError(
                f"--output_dir {output_dir!r} already holds a finished build with other settings "
                f"({mf.describe_difference(existing.get('settings', {}), settings)}); "
                f"choose a new --output_dir or pass --overwrite"
            )
    previous = mf.read_json_object(fileio.join(work_dir, "plan.json"))
    if previous is not None and previous.get("settings") != settings:
        raise DataError(
            f"--output_dir {output_dir!r} holds an unfinished build with other settings "
            f"({mf.describe_difference(previous.get('settings', {}), settings)}); "
            f"re-run with the same settings to resume, or pass --overwrite"
        )
    if previous is None and repair is None and fileio.glob(fileio.join(output_dir, mf.SHARD_GLOB)):
        raise DataError(
            f"--output_dir {output_dir!r} already holds {mf.SHARD_PREFIX} files from an unknown build; "
            f"choose a new --output_dir or pass --overwrite"
        )
    return existing, repair


def check_repair(manifest: Dict[str, Any], rebuilt: Dict[int, Dict[str, Any]], output_dir: str,
                 log: Callable[[str], None]) -> Dict[str, Any]:
    """The rebuilt shards must be the ones the manifest describes (the build is deterministic)."""
    for i, stats in sorted(rebuilt.items()):
        want = manifest["shards"][i]
        if (stats["size"], stats["sha256"]) != (want["size"], want["sha256"]):
            raise DataError(
                f"rebuilt shard {fileio.join(output_dir, want['file'])} differs from its manifest.json (the corpus "
                f"files changed since the build?); rebuild everything with --overwrite"
            )
    log(f"repaired {len(rebuilt)} shard(s) of {output_dir}; the build is complete again "
        f"({manifest['num_examples']} examples)")
    return manifest


def _sum_by_source(shards: Sequence[Dict[str, Any]], key: str) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for s in shards:
        for source, val in s[key].items():
            total[source] = total.get(source, 0) + val
    return total


def finish_build(output_dir: str, settings: Dict[str, Any], build_id: str,
                 done: Dict[int, Dict[str, Any]], built: List[int], vocab_file: str,
                 special: SpecialTokenIds, forced_splits: int, started: float,
                 log: Callable[[str], None]) -> Dict[str, Any]:
    """Writes manifest.json from every shard's stats, removes WORK_DIR and logs the summary.

    Args:
      output_dir: the build's directory.
      settings: the build's settings (what must match to resume).
      build_id: their fingerprint.
      done: {index: build_shard stats} of every shard.
      built: the indices built by this run (for its tokens/s).
      vocab_file: the vocab.txt the shards were built with.
      special: its special-token ids.
      forced_splits: shard cuts placed inside a document.
      started: time.time() at the start of the build.
      log: receives one-line status and warning messages.

    Returns:
      The manifest dict.

    Raises:
      DataError: no shard holds an example (the shards are removed).
    """
    num_shards = settings["num_shards"]
    work_dir = fileio.join(output_dir, mf.WORK_DIR)
    shards = [done[i] for i in range(num_shards)]
    if sum(s["examples"] for s in shards) == 0:
        _remove_empty_build(output_dir, num_shards)
    elapsed = time.time() - started
    built_tokens = sum(done[i]["corpus_tokens"] for i in built)
    manifest = _manifest(shards, settings, build_id, vocab_file, special, forced_splits, elapsed)
    fileio.write_json_atomic(fileio.join(output_dir, mf.MANIFEST_NAME), manifest, sort_keys=True)
    fileio.rmtree(work_dir)
    _log_summary(manifest, output_dir, elapsed, built_tokens, log)
    return manifest


def _remove_empty_build(output_dir: str, num_shards: int) -> None:
    """Removes the shards and WORK_DIR of a build that made no example, and says why.

    Raises:
      DataError: always.
    """
    for i in range(num_shards):
        path = fileio.join(output_dir, mf.shard_name(i, num_shards))
        if fileio.exists(path):
            fileio.remove(path)
    fileio.rmtree(fileio.join(output_dir, mf.WORK_DIR))
    raise DataError(
        "corpus produced no examples (no line yields a WordPiece token); "
        "check the corpus encoding and the vocabulary"
    )


def _manifest(shards: List[Dict[str, Any]], settings: Dict[str, Any], build_id: str, vocab_file: str,
              special: SpecialTokenIds, forced_splits: int, elapsed: float) -> Dict[str, Any]:
    """manifest.json's content, from every shard's stats (in shard order) and the build's settings."""
    max_seq_length = settings["max_seq_length"]
    return {
        "format": mf.MANIFEST_FORMAT,
        "build_id": build_id,
        "num_examples": sum(s["examples"] for s in shards),
        "num_tokens": sum(s["tokens"] for s in shards),
        "num_corpus_tokens": sum(s["corpus_tokens"] for s in shards),
        # Share of the corpus's WordPiece tokens that made it into an example (None when a
        # resumed build has shards from a version that did not count them).
        "fraction_written": (round(sum(s["written_corpus_tokens"] for s in shards)
                                   / max(1, sum(s["corpus_tokens"] for s in shards)), 4)
                             if all("written_corpus_tokens" in s for s in shards) else None),
        "num_lines": sum(s["lines"] for s in shards),
        "max_seq_length": max_seq_length,
        "vocab_size": settings["vocab_size"],
        "vocab_sha256": settings["vocab_sha256"],
        "vocab_file": os.path.abspath(vocab_file) if "://" not in vocab_file else vocab_file,
        "do_lower_case": settings["do_lower_case"],
        "strip_accents": settings["strip_accents"],
        # What fine-tuning, export and convert apply (electra_tf/data/normalization.py); a build of the
        # nfkc_casefold mode keeps its settings (and so its identity) as before the field existed.
        "text_normalization": from_record(settings, "settings").to_json(),
        "special_token_ids": {"pad": special.pad, "unk": special.unk, "cls": special.cls,
                              "sep": special.sep, "mask": special.mask},
        "features": {name: {"dtype": "int64", "shape": [max_seq_length]} for name in mf.FEATURES},
        "num_shards": settings["num_shards"],
        "shards": [{k: s[k] for k in ("file", "examples", "tokens", "corpus_tokens", "size", "sha256")}
                   for s in shards],
        "empty_shards": sum(1 for s in shards if s["examples"] == 0),
        "forced_document_splits": forced_splits,
        "invalid_utf8_bytes_replaced": _sum_by_source(shards, "invalid_bytes"),
        "long_lines_cut": _sum_by_source(shards, "long_lines_cut"),
        "settings": settings,
        "build_seconds": round(elapsed, 2),
    }


def _log_summary(manifest: Dict[str, Any], output_dir: str, elapsed: float, built_tokens: int,
                 log: Callable[[str], None]) -> None:
    """Logs what a finished build wrote, then a warning for each thing its corpus lost or its plan cut."""
    num_shards = manifest["num_shards"]
    written = manifest["fraction_written"]
    log(f"wrote {manifest['num_examples']:,} examples ({manifest['num_tokens']:,} tokens"
        + ("" if written is None else f", {written:.1%} of the corpus's tokens")
        + f") in {num_shards} shard(s) "
        f"to {output_dir} in {elapsed:.1f}s ({built_tokens / max(elapsed, 1e-6) / 1000:.1f}k corpus tokens/s)")
    for source_name, n in sorted(manifest["invalid_utf8_bytes_replaced"].items()):
        log(f"warning: {source_name}: {n} invalid UTF-8 byte(s) replaced with U+FFFD "
            f"(convert the file to UTF-8 to keep those characters)")
    for source_name, n in sorted(manifest["long_lines_cut"].items()):
        log(f"warning: {source_name}: {n} line(s) longer than {manifest['settings']['max_line_bytes']} bytes "
            f"cut to that length (split such lines into sentences, or raise --max_line_bytes to keep more of them)")
    if manifest["empty_shards"]:
        log(f"warning: {manifest['empty_shards']} of {num_shards} shards are empty; "
            f"the corpus is small for --num_shards={num_shards}")
    if manifest["forced_document_splits"]:
        log(f"note: {manifest['forced_document_splits']} shard boundaries fell inside a document longer than "
            f"the search window")
