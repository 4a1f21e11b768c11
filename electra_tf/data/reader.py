"""tf.data input pipeline over pre-training shards.

    ds = pretraining_dataset("shards/", config)          # training: endless, shuffled
    batch = next(iter(ds))                                # {input_ids, input_mask, segment_ids}

Batches are int32 with the static shape [batch_size, max_seq_length]
(drop_remainder=True), as TPUs and XLA need. Shards are checked against their
manifest.json and the model config before anything is read.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from electra_tf.data import manifest as mf
from electra_tf.data.data_errors import DataError

DEFAULT_SHUFFLE_BUFFER = 10000


class CorruptShardError(DataError):
    """A shard that is missing, truncated or corrupted; `path` names it."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path

DEFAULT_CYCLE_LENGTH = 8


def _dirname(path: str) -> str:
    return posixpath.dirname(path) if "://" in path else os.path.dirname(path)


def resolve_shards(data: Union[str, Sequence[str]]) -> Tuple[List[str], Dict[str, Dict[str, Any]]]:
    """Expands a shard directory, glob, file or list of them.

    Args:
      data: a directory written by build_pretraining_data (its manifest lists
        the shards), or shard files / globs (manifests next to them are used
        when present).

    Returns:
      (sorted shard paths, {directory: manifest} for directories that have one).

    Raises:
      DataError: nothing matches, or a directory has no manifest.
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
                found = tf.io.gfile.glob(mf.join(item, mf.SHARD_GLOB))
                hint = ("its build did not finish; re-run build_pretraining_data with the same flags to finish it"
                        if found else "build shards with python -m electra_tf.data.build_pretraining_data")
                raise DataError(f"{item} has no {mf.MANIFEST_NAME}: {hint}")
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


def check_manifest(manifest: Dict[str, Any], directory: str, config) -> None:
    """Refuses shards the model cannot consume.

    Args:
      manifest: a loaded manifest.json.
      directory: where it lives (for the message).
      config: ElectraConfig (max_seq_length, vocab_size are checked).

    Raises:
      DataError: sequence length differs, or token ids may exceed the vocab.
    """
    where = mf.join(directory, mf.MANIFEST_NAME)
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
            expected[mf.join(directory, shard["file"])] = shard["size"]
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
    expected = {mf.join(d, s["file"]): s for d, m in manifests.items() for s in m["shards"]}
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
) -> tf.data.Dataset:
    """Batches of pre-training examples from shards.

    Args:
      data: shard directory (with manifest.json), shard files or globs.
      config: ElectraConfig; max_seq_length and vocab_size are checked against
        the manifests.
      batch_size: global batch size (default config.train_batch_size). With an
        input_context, each pipeline yields its per-replica share.
      training: shuffle files and examples and repeat forever; otherwise one
        ordered pass.
      deterministic: fixed element order (for tests); with a seed, training
        order is reproducible too.
      input_context: from tf.distribute; each input pipeline reads a disjoint
        subset of the shard files.
      seed: shuffle seed (default config.seed).
      shuffle_buffer: examples held in the shuffle buffer.
      cycle_length: shard files read in parallel.
      exclude: shard paths to leave out (e.g. those `find_corrupt_shards` found).

    Returns:
      tf.data.Dataset of {"input_ids", "input_mask", "segment_ids"}: int32
      [batch, max_seq_length].

    Raises:
      DataError: missing/mismatched shards, or fewer examples than one batch.
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
    seq_len = config.max_seq_length
    batch_size = int(batch_size or config.train_batch_size)
    seed = config.seed if seed is None else seed

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

    known = {mf.join(d, s["file"]): s["examples"] for d, m in manifests.items() for s in m["shards"]}
    if all(f in known for f in files):
        available = sum(known[f] for f in files)
        if available < batch_size:
            raise DataError(
                f"the shards hold {available} example(s), fewer than one batch of {batch_size}; "
                f"use a smaller batch size or more text"
            )

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
    ds = ds.batch(batch_size, drop_remainder=True)
    features = {name: tf.io.FixedLenFeature([seq_len], tf.int64) for name in mf.FEATURES}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, features)
        return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}

    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=bool(deterministic))
    return ds.prefetch(tf.data.AUTOTUNE).with_options(options)
