"""Builds one shard: read its corpus range, tokenize, make examples, write.

This is the unit of work of build_pretraining_data, run in worker processes.
Everything a shard's bytes depend on (its corpus range, the settings, and an RNG
seeded from (seed, shard index)) is fixed by the plan, so the result does not
depend on how many processes run or in which order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import time
from itertools import islice
from typing import Any, Callable, Dict, Iterator, List, Optional

from electra_tf.data.corpus import ReadStats, decode_counting, iter_lines
from electra_tf.data.examples import ExampleBuilder, pad_example
from electra_tf.data.manifest import WORK_DIR, shard_name
from electra_tf.data.tokenizer import WordPieceTokenizer, file_sha256
from electra_tf.fileio import join, write_json_atomic

LINES_PER_BATCH = 2048
_DOC_END = None  # marker in the line stream: end of a file range / tfds record


@dataclasses.dataclass
class ShardTask:
    """Everything a worker needs to build shard `index` (picklable)."""

    index: int
    num_shards: int
    output_dir: str
    vocab_file: str
    lower_case: bool
    strip_accents: bool
    max_seq_length: int
    seed: int
    blanks_separate_docs: bool
    max_line_bytes: int
    carry: bool = True  # split long lines into the next examples (False: the reference's truncation)
    segments: List[tuple] = dataclasses.field(default_factory=list)  # (path, start, end)
    tfds: Optional[Dict[str, Any]] = None  # name, split, text_key, data_dir
    tokenizer_models: Optional[tuple] = None  # tokenizer.build_tokenizer_models, built once for all workers
    # The text normalisation (normalization.TextNormalization); None: the bert mode with the casing above.
    normalization: Optional[Any] = None


def _varint(value: int) -> bytes:
    """Protocol-buffer base-128 varint of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited protocol-buffer field: tag byte, length, payload."""
    return bytes([tag]) + _varint(len(payload)) + payload


class ExampleSerializer:
    """Serialises one example's three int64 features as a tf.train.Example, without protobuf objects.

    Building three Int64List/Feature/Example messages per example took more
    time than tokenizing its text. The bytes are those of
    `Example.SerializeToString(deterministic=True)` (map keys in sorted order,
    packed varints; tests check it): Example.features(1) holds one map entry
    per feature, key(1) and Feature(2), whose int64_list(3) holds the packed
    values(1).

    Args:
      vocab_size: ids are below it (their varints are precomputed).
      length: values per feature (max_seq_length).
    """

    def __init__(self, vocab_size: int, length: int):
        # Varints of every id, and of every length a field of an example can have.
        self._varints = [_varint(i) for i in range(max(vocab_size, 16 * length + 64))]
        # input_mask and segment_ids hold `length` 0/1 values, one varint byte each: their
        # entries are a fixed prefix and the values' bytes.
        self._mask_prefix = self._entry(b"input_mask", b"\0" * length)[:-length]
        self._segment_prefix = self._entry(b"segment_ids", b"\0" * length)[:-length]

    @staticmethod
    def _entry(key: bytes, packed: bytes) -> bytes:
        return _field(0x0A, _field(0x0A, key) + _field(0x12, _field(0x1A, _field(0x0A, packed))))

    def __call__(self, input_ids: List[int], input_mask: List[int], segment_ids: List[int]) -> bytes:
        v = self._varints
        packed = b"".join(map(v.__getitem__, input_ids))
        values = b"\x0a" + v[len(packed)] + packed  # Int64List.value
        feature = b"\x1a" + v[len(values)] + values  # Feature.int64_list
        body = b"\x0a\x09input_ids\x12" + v[len(feature)] + feature  # map entry: key, value
        features = (b"\x0a" + v[len(body)] + body  # sorted keys: input_ids < input_mask < segment_ids
                    + self._mask_prefix + bytes(input_mask) + self._segment_prefix + bytes(segment_ids))
        return b"\x0a" + v[len(features)] + features


def _sentence_end_ids(vocab: List[str]) -> List[int]:
    """Ids of the tokens that end a sentence, where the vocabulary has them."""
    index = {token: i for i, token in enumerate(vocab)}
    return [index[t] for t in (".", "!", "?") if t in index]


def shard_seed(seed: int, index: int, num_shards: int) -> int:
    """Independent, reproducible RNG seed for one shard."""
    digest = hashlib.sha256(f"electra_tf/{seed}/{index}/{num_shards}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


# Per-process state: the tokenizer (building it costs ~0.5 s) and progress counters.
_TOKENIZERS: Dict[tuple, Any] = {}
_COUNTERS: Dict[str, Any] = {}


def init_worker(counters: Dict[str, Any], single_thread: bool) -> None:
    """Pool initializer: shared progress counters; one TF thread per process."""
    _COUNTERS.clear()
    _COUNTERS.update(counters)
    if single_thread:
        # Lazy: build_pretraining_data imports this module before its cheap checks (TF: seconds).
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        try:
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:
            pass  # the main process's TF runtime may already be running


def _bump(name: str, amount: int) -> None:
    counter = _COUNTERS.get(name)
    if counter is not None:
        with counter.get_lock():
            counter.value += amount


def _claim(counter) -> int:
    """Takes the next index from a shared counter (a multiprocessing Value)."""
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    return index


def build_shards(tasks: List[ShardTask], stop: Optional[Callable[[], bool]] = None,
                 build: Optional[Callable[[ShardTask], Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    """Builds the tasks that this process claims, one at a time, until none is left.

    Every process runs this over the same list; a shared counter (set by
    init_worker) hands each task to exactly one of them. Which process builds
    a shard does not change its bytes.

    Args:
      tasks: all shards still to build.
      stop: checked before each claim; True ends this process's share early
        (another process failed and the build is being abandoned).
      build: builds one shard (default build_shard).

    Returns:
      The stats of the shards this process built (build_shard's dicts).
    """
    results = []
    counter = _COUNTERS.get("next_shard")
    alone = iter(range(len(tasks)))  # no shared counter: this process builds them all, in order
    while stop is None or not stop():
        index = _claim(counter) if counter is not None else next(alone, len(tasks))
        if index >= len(tasks):
            break
        results.append((build or build_shard)(tasks[index]))
        _bump("shards", 1)
    return results


def _tokenizer(task: ShardTask):
    key = (task.vocab_file, task.lower_case, task.strip_accents, task.normalization)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = WordPieceTokenizer(task.vocab_file, task.lower_case, task.strip_accents,
                                              models=task.tokenizer_models, normalization=task.normalization)
    return _TOKENIZERS[key]


def _file_lines(task: ShardTask, stats: ReadStats) -> Iterator[Optional[str]]:
    for path, start, end in task.segments:
        yield from iter_lines(path, start, end, stats, task.max_line_bytes,
                              progress=lambda n: _bump("bytes", n))
        yield _DOC_END  # the reference ends a document at every file end


def _tfds_lines(task: ShardTask, stats: ReadStats) -> Iterator[Optional[str]]:
    # Lazy: tensorflow_datasets (and TF) take seconds to import; only tfds sources need it.
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel

    spec = task.tfds
    ds = tfds.load(spec["name"], split=spec["split"], data_dir=spec.get("data_dir"),
                   shuffle_files=False, download=False)
    source = f"tfds:{spec['name']}/{spec['split']}"
    for record in tfds.as_numpy(ds):
        raw = record[spec["text_key"]]
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        stats.bytes_read += len(raw)
        _bump("bytes", len(raw))
        text, bad = decode_counting(raw)
        if bad:
            stats.invalid_bytes[source] = stats.invalid_bytes.get(source, 0) + bad
        for line in text.split("\n"):
            if len(line) > task.max_line_bytes:
                line = line[: task.max_line_bytes]
                stats.long_lines_cut[source] = stats.long_lines_cut.get(source, 0) + 1
            yield line
        yield _DOC_END  # one record is one document


def build_shard(task: ShardTask) -> Dict[str, Any]:
    """Writes shard `task.index` atomically and returns its stats.

    The shard is written under a hidden temporary name, its stats go to
    WORK_DIR/shard-NNNNN.json, and only then is it renamed to its final name,
    so a final-named shard is always complete.

    Args:
      task: the shard's corpus range and settings.

    Returns:
      dict with file, examples, tokens, corpus_tokens, written_corpus_tokens
      (those in an example), lines, bytes (uncompressed), sha256, size,
      invalid_bytes, long_lines_cut, seconds.
    """
    # Lazy: build_pretraining_data imports this module before its cheap checks (TF: seconds).
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    started = time.time()
    name = shard_name(task.index, task.num_shards)
    tmp_path = join(task.output_dir, f".{name}.tmp-{os.getpid()}")
    read_stats = ReadStats()
    lines = _tfds_lines(task, read_stats) if task.tfds else _file_lines(task, read_stats)
    counts = _write_examples(task, lines, tmp_path)
    stats = dict(
        file=name, index=task.index, size=int(tf.io.gfile.stat(tmp_path).length),
        sha256=file_sha256(tmp_path), bytes=read_stats.bytes_read,
        invalid_bytes=read_stats.invalid_bytes, long_lines_cut=read_stats.long_lines_cut,
        seconds=round(time.time() - started, 3), **counts,
    )
    write_json_atomic(join(join(task.output_dir, WORK_DIR), f"shard-{task.index:05d}.json"), stats, sort_keys=True)
    tf.io.gfile.rename(tmp_path, join(task.output_dir, name), overwrite=True)
    return stats


def _write_examples(task: ShardTask, lines: Iterator[Optional[str]], tmp_path: str) -> Dict[str, int]:
    """Writes the examples of `lines` to the TFRecord file `tmp_path` and counts what went in.

    Returns:
      {examples, tokens, corpus_tokens, written_corpus_tokens, lines}. On an
      error (or an interrupt) tmp_path is removed.
    """
    # Lazy: build_pretraining_data imports this module before its cheap checks (TF: seconds).
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tok = _tokenizer(task)
    special = tok.special
    length = task.max_seq_length
    builder = ExampleBuilder(length, special.cls, special.sep,
                             random.Random(shard_seed(task.seed, task.index, task.num_shards)),
                             carry=task.carry, sentence_end_ids=_sentence_end_ids(tok.vocab))
    counts = {"examples": 0, "tokens": 0, "corpus_tokens": 0, "written_corpus_tokens": 0, "lines": 0}
    serialize = ExampleSerializer(tok.vocab_size, length)
    writer = tf.io.TFRecordWriter(tmp_path)
    try:
        for example in _examples(task, lines, tok, builder, counts):
            writer.write(serialize(*pad_example(example, length, special.pad)))
            counts["examples"] += 1
            counts["tokens"] += len(example[0])
            # Corpus tokens kept: all but [CLS] and one [SEP] per segment.
            counts["written_corpus_tokens"] += len(example[0]) - (3 if example[1][-1] else 2)
        writer.close()
    except BaseException:
        writer.close()
        if tf.io.gfile.exists(tmp_path):
            tf.io.gfile.remove(tmp_path)
        raise
    return counts


def _examples(task: ShardTask, lines: Iterator[Optional[str]], tok, builder: ExampleBuilder,
              counts: Dict[str, int]) -> Iterator[tuple]:
    """The examples `builder` makes of `lines` (tokenized a batch at a time), in order.

    Adds the lines and corpus tokens read to `counts`. A _DOC_END, and a blank
    line where blanks separate documents, ends a document.
    """
    while True:
        batch = list(islice(lines, LINES_PER_BATCH))
        if not batch:
            break
        stripped = [None if line is None else line.strip() for line in batch]
        texts = [line for line in stripped if line]
        flat, splits = tok.tokenize_batch(texts)
        flat = flat.tolist()
        splits = splits.tolist()
        counts["corpus_tokens"] += len(flat)
        _bump("tokens", len(flat))
        k = 0
        for line in stripped:
            if line:
                yield from builder.add_line(flat[splits[k]:splits[k + 1]])
                k += 1
                counts["lines"] += 1
            elif line is None or task.blanks_separate_docs:
                example = builder.end_document()
                if example is not None:
                    yield example
    example = builder.end_document()
    if example is not None:
        yield example
