"""tf.data input pipeline over pre-training shards.

    ds = pretraining_dataset("shards/", config)          # training: endless, shuffled
    batch = next(iter(ds))                                # {input_ids, input_mask, segment_ids}

Batches are int32 with the static shape [batch_size, max_seq_length], as TPUs
and XLA need. Training drops the last partial batch of each pass; a single
ordered pass (training=False, for evaluation) keeps every example and fills its
last batch with padding rows (every id and mask 0), which weigh nothing in the
pre-trainer's losses and metrics. Shards are checked against their
manifest.json and the model config before anything is read; shards another
builder wrote (no manifest.json) are checked on their first record instead.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from electra_tf import fileio
from electra_tf.data import manifest as mf
from electra_tf.data.data_errors import DataError

DEFAULT_SHUFFLE_BUFFER = 10000


class CorruptShardError(DataError):
    """A shard that is missing, truncated or corrupted; `path` names it."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path

DEFAULT_CYCLE_LENGTH = 8

# Shard names in a directory without manifest.json, tried in turn: ours (which is also the name
# google-research/electra's build_pretraining_dataset.py gives its shards), then any TFRecord name.
FOREIGN_SHARD_GLOBS = (mf.SHARD_GLOB, "*.tfrecord*")


def _dirname(path: str) -> str:
    return posixpath.dirname(path) if "://" in path else os.path.dirname(path)


def resolve_shards(data: Union[str, Sequence[str]]) -> Tuple[List[str], Dict[str, Dict[str, Any]]]:
    """Expands a shard directory, glob, file or list of them.

    Args:
      data: a directory written by build_pretraining_data (its manifest lists
        the shards), a directory of shards another builder wrote (no manifest:
        its `pretrain_data.tfrecord-*-of-*` files, else its `*.tfrecord*`
        files), or shard files / globs (manifests next to them are used when
        present).

    Returns:
      (sorted shard paths, {directory: manifest} for directories that have one).

    Raises:
      DataError: nothing matches, a directory holds an unfinished build of
        ours, or a directory has neither a manifest nor TFRecord files.
    """
    items = [data] if isinstance(data, str) else list(data)
    if not items:
        raise DataError("no pre-training data given; pass a shard directory or shard files")
    files: List[str] = []
    manifests: Dict[str, Dict[str, Any]] = {}
    for item in items:
        if tf.io.gfile.isdir(item):
            manifest = mf.load_manifest(item)
            if manifest is None:
                files.extend(_unlisted_shards(item))
                continue
            manifests[item.rstrip("/")] = manifest
            files.extend(mf.shard_files(manifest, item))
            continue
        matched = sorted(tf.io.gfile.glob(item))
        if not matched:
            raise DataError(f"pre-training data {item!r} matches no file; check the path or glob")
        for path in matched:
            directory = _dirname(path)
            if directory not in manifests:
                manifest = mf.load_manifest(directory) if directory else None
                if manifest is not None:
                    manifests[directory] = manifest
            files.append(path)
    return sorted(dict.fromkeys(files)), manifests


def _unlisted_shards(directory: str) -> List[str]:
    """The shard files of a directory without manifest.json (written by another builder)."""
    work = fileio.join(directory, mf.WORK_DIR)
    if tf.io.gfile.isdir(work):
        # Our builder keeps its plan in WORK_DIR until it writes manifest.json, then removes it.
        raise DataError(f"{directory} has no {mf.MANIFEST_NAME} and holds {mf.WORK_DIR}/: its build did not "
                        f"finish; re-run python -m electra_tf.data.build_pretraining_data with the same flags "
                        f"to finish it")
    for pattern in FOREIGN_SHARD_GLOBS:
        found = sorted(p for p in tf.io.gfile.glob(fileio.join(directory, pattern)) if not tf.io.gfile.isdir(p))
        if found:
            return found
    raise DataError(f"{directory} has no {mf.MANIFEST_NAME} and no TFRecord shards ({mf.SHARD_GLOB} or "
                    f"*.tfrecord*); build shards with python -m electra_tf.data.build_pretraining_data")


def _feature_values(example, name: str):
    feature = example.features.feature.get(name)
    if feature is None or feature.WhichOneof("kind") != "int64_list":
        return None
    return list(feature.int64_list.value)


def check_unlisted_shards(files: Sequence[str], config) -> None:
    """Checks shards no manifest describes (another builder's) on their first record.

    The reader needs tf.train.Examples with int64 features `input_ids`,
    `input_mask` and `segment_ids` of config.max_seq_length values each; the
    first record found (files in order, empty files skipped) must have them, and
    its ids must fit config.vocab_size. Later records are not read here: a
    record of another length fails when it is read.

    Raises:
      DataError: a file is not a TFRecord file, or its records lack the layout.
    """
    need = (f"the reader needs tf.train.Examples with int64 features {', '.join(mf.FEATURES)} of "
            f"max_seq_length ids each")
    for path in files:
        try:
            record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.OpError as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise CorruptShardError(f"shard {path} has no manifest.json and is not a readable TFRecord file "
                                    f"({first}); {need}", path) from None
        if record is None:
            continue  # an empty shard: look at the next one
        try:
            example = tf.train.Example.FromString(record.numpy())
        except Exception:  # protobuf's DecodeError
            raise DataError(f"shard {path}: its first record is not a tf.train.Example; {need}") from None
        values = {name: _feature_values(example, name) for name in mf.FEATURES}
        missing = [name for name, v in values.items() if v is None]
        if missing:
            held = ", ".join(sorted(example.features.feature)) or "none"
            raise DataError(f"shard {path}: its records have no int64 feature {', '.join(missing)} (features: "
                            f"{held}); {need}")
        lengths = {len(v) for v in values.values()}
        if lengths != {config.max_seq_length}:
            found = len(values["input_ids"])
            raise DataError(f"shard {path} holds {found} input_ids per example but the config has "
                            f"max_seq_length={config.max_seq_length}; set max_seq_length={found} or rebuild "
                            f"the shards with --max_seq_length {config.max_seq_length}"
                            if len(lengths) == 1 else
                            f"shard {path}: the features of its first record have different lengths "
                            f"({', '.join(f'{n} {len(v)}' for n, v in values.items())}); {need}")
        top = max(values["input_ids"])
        if top >= config.vocab_size:
            raise DataError(f"shard {path} holds token id {top} but the config has vocab_size="
                            f"{config.vocab_size}; set vocab_size to the size of the vocabulary the shards "
                            f"were built with")
        return


def check_manifest(manifest: Dict[str, Any], directory: str, config) -> None:
    """Refuses shards the model cannot consume.

    Args:
      manifest: a loaded manifest.json.
      directory: where it lives (for the message).
      config: ElectraConfig (max_seq_length, vocab_size are checked).

    Raises:
      DataError: sequence length differs, or token ids may exceed the vocab.
    """
    where = fileio.join(directory, mf.MANIFEST_NAME)
    if manifest["max_seq_length"] != config.max_seq_length:
        raise DataError(
            f"shards in {directory} have max_seq_length={manifest['max_seq_length']} ({where}) but the "
            f"config has max_seq_length={config.max_seq_length}; rebuild the shards with "
            f"--max_seq_length {config.max_seq_length} or set max_seq_length={manifest['max_seq_length']}"
        )
    if manifest["vocab_size"] > config.vocab_size:
        raise DataError(
            f"shards in {directory} use a {manifest['vocab_size']}-token vocab ({where}) but the config "
            f"has vocab_size={config.vocab_size}, so ids would be out of range; set "
            f"vocab_size={manifest['vocab_size']} or rebuild the shards with a smaller vocab"
        )


def _check_sizes(files: Sequence[str], manifests: Dict[str, Dict[str, Any]]) -> None:
    expected = {}
    for directory, manifest in manifests.items():
        for shard in manifest["shards"]:
            expected[fileio.join(directory, shard["file"])] = shard["size"]
    for path in files:
        if path in expected:
            try:
                actual = int(tf.io.gfile.stat(path).length)
            except tf.errors.NotFoundError:
                raise CorruptShardError(f"shard {path} listed in its manifest is missing; re-run the same "
                                        f"python -m electra_tf.data.build_pretraining_data command to "
                                        f"rebuild it", path) from None
            if actual != expected[path]:
                raise CorruptShardError(
                    f"shard {path} is {actual} bytes but its manifest says {expected[path]}: it is "
                    f"truncated or corrupted; re-run the same python -m electra_tf.data.build_pretraining_data "
                    f"command to rebuild it", path
                )


def find_corrupt_shards(data: Union[str, Sequence[str]]) -> List[Tuple[str, str]]:
    """Every shard that is missing, truncated or corrupted (reads all their bytes).

    Shards listed in a manifest are checked against its size and sha256; others
    record by record (the TFRecord CRCs).

    Returns:
      [(shard path, reason)] in shard order; empty when every shard is intact.
    """
    files, manifests = resolve_shards(data)
    expected = {fileio.join(d, s["file"]): s for d, m in manifests.items() for s in m["shards"]}
    bad = []
    for path in files:
        if not tf.io.gfile.exists(path):
            bad.append((path, "missing"))
            continue
        if path not in expected:
            try:
                for _ in tf.data.TFRecordDataset(path):
                    pass
            except tf.errors.DataLossError as e:
                bad.append((path, str(e).strip().splitlines()[0]))
            continue
        size = int(tf.io.gfile.stat(path).length)
        if size != expected[path]["size"]:
            bad.append((path, f"{size} bytes, manifest says {expected[path]['size']}"))
            continue
        digest = hashlib.sha256()
        with tf.io.gfile.GFile(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() != expected[path]["sha256"]:
            bad.append((path, "sha256 differs from the manifest"))
    return bad


def pretraining_dataset(
    data: Union[str, Sequence[str]],
    config,
    batch_size: Optional[int] = None,
    *,
    training: bool = True,
    deterministic: bool = False,
    input_context: Optional[tf.distribute.InputContext] = None,
    seed: Optional[int] = None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    cycle_length: int = DEFAULT_CYCLE_LENGTH,
    exclude: Sequence[str] = (),
    drop_remainder: Optional[bool] = None,
) -> tf.data.Dataset:
    """Batches of pre-training examples from shards.

    Args:
      data: shard directory (with manifest.json), shard files or globs.
      config: ElectraConfig; max_seq_length and vocab_size are checked against
        the manifests.
      batch_size: global batch size (default config.train_batch_size). With an
        input_context, each pipeline yields its per-replica share.
      training: shuffle files and examples and repeat forever; otherwise one
        ordered pass over every example.
      deterministic: fixed element order (for tests); with a seed, training
        order is reproducible too.
      input_context: from tf.distribute; each input pipeline reads a disjoint
        subset of the shard files.
      seed: shuffle seed (default config.seed).
      shuffle_buffer: examples held in the shuffle buffer.
      cycle_length: shard files read in parallel.
      exclude: shard paths to leave out (e.g. those `find_corrupt_shards` found).
      drop_remainder: drop the last partial batch of a pass (default: when
        training). Otherwise that batch is filled up to the batch size with
        padding rows whose ids and masks are all 0: the batch shape stays
        static, and the pre-trainer gives such rows no weight (no real token,
        nothing masked). Count real examples with
        `tf.reduce_any(batch["input_mask"] > 0, axis=1)`.

    Returns:
      tf.data.Dataset of {"input_ids", "input_mask", "segment_ids"}: int32
      [batch, max_seq_length].

    Raises:
      DataError: missing/mismatched shards, or (when dropping the remainder)
        fewer examples than one batch.
    """
    files, known = _readable_shards(data, config, exclude)
    batch_size = int(batch_size or config.train_batch_size)
    seed = config.seed if seed is None else seed
    drop_remainder = bool(training) if drop_remainder is None else bool(drop_remainder)
    files, seed, batch_size = _pipeline_share(files, seed, batch_size, input_context)
    if drop_remainder:
        _check_one_batch(files, known, batch_size)
    return _batches(files, config.max_seq_length, batch_size, training=training, deterministic=deterministic,
                    seed=seed, shuffle_buffer=shuffle_buffer, cycle_length=cycle_length,
                    drop_remainder=drop_remainder)


def _readable_shards(data: Union[str, Sequence[str]], config,
                     exclude: Sequence[str]) -> Tuple[List[str], Dict[str, int]]:
    """pretraining_dataset's shard files, checked, and {path: examples} of those a manifest lists.

    Raises:
      DataError: a manifest or an unlisted shard the config cannot read, a shard
        of the wrong size, or every shard excluded.
    """
    files, manifests = resolve_shards(data)
    for directory, manifest in manifests.items():
        check_manifest(manifest, directory, config)
    if exclude:
        files = [f for f in files if f not in set(exclude)]
        if not files:
            raise DataError(f"every shard of {data} is excluded (corrupt); rebuild them with "
                            f"python -m electra_tf.data.build_pretraining_data")
    _check_sizes(files, manifests)
    known = {fileio.join(d, s["file"]): s["examples"] for d, m in manifests.items() for s in m["shards"]}
    check_unlisted_shards([f for f in files if f not in known], config)
    return files, known


def _pipeline_share(files: List[str], seed: int, batch_size: int,
                    input_context: Optional[tf.distribute.InputContext]) -> Tuple[List[str], int, int]:
    """(files, seed, batch size) of this input pipeline: its own files, shuffle and per-replica batch.

    Raises:
      DataError: fewer files than input pipelines.
    """
    if input_context is not None and input_context.num_input_pipelines > 1:
        n, k = input_context.num_input_pipelines, input_context.input_pipeline_id
        if len(files) < n:
            raise DataError(
                f"{len(files)} shard file(s) cannot feed {n} input pipelines (one file set per worker); "
                f"rebuild with --num_shards >= {n}"
            )
        files = files[k::n]
        seed = seed + k  # different shuffles per worker
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    return files, seed, batch_size


def _check_one_batch(files: Sequence[str], known: Dict[str, int], batch_size: int) -> None:
    """Refuses shards whose manifests count fewer examples than one batch (unlisted shards: not counted)."""
    if all(f in known for f in files):
        available = sum(known[f] for f in files)
        if available < batch_size:
            raise DataError(
                f"the shards hold {available} example(s), fewer than one batch of {batch_size}; "
                f"use a smaller batch size or more text"
            )


def _batches(files: List[str], seq_len: int, batch_size: int, *, training: bool, deterministic: bool,
             seed: int, shuffle_buffer: int, cycle_length: int, drop_remainder: bool) -> tf.data.Dataset:
    """The tf.data pipeline over checked shard files (the arguments as pretraining_dataset's)."""
    options = tf.data.Options()
    options.deterministic = bool(deterministic)
    ds = tf.data.Dataset.from_tensor_slices(files)
    if training:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(cycle_length, len(files)),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=bool(deterministic),
    )
    if training:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    features = {name: tf.io.FixedLenFeature([seq_len], tf.int64) for name in mf.FEATURES}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, features)
        out = {k: tf.cast(v, tf.int32) for k, v in parsed.items()}
        if drop_remainder:
            return out
        # The last batch of the pass: padding rows up to batch_size keep the shape static.
        short = batch_size - tf.shape(serialized)[0]
        return {k: tf.ensure_shape(tf.pad(v, [[0, short], [0, 0]]), [batch_size, seq_len])
                for k, v in out.items()}

    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=bool(deterministic))
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options)
