"""tf.data reader: shapes, determinism, sharding per worker, manifest checks."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from data_helpers import corpus_slice, read_examples, word_vocab
from helpers import write_vocab
from electra_tf.config import ElectraConfig
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.data_errors import DataError
from electra_tf.data.manifest import MANIFEST_NAME, shard_name
from electra_tf.data.reader import find_corrupt_shards, pretraining_dataset

SEQ = 32
SHARDS = 4


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("reader")
    brown = corpus_slice("brown.txt", 6, root / "brown6.txt")
    vocab = write_vocab(root / "vocab.txt", word_vocab([brown.read_text()], 600))
    out = root / "shards"
    manifest = build_pretraining_data(str(out), str(vocab), [str(brown)], max_seq_length=SEQ,
                                      num_shards=SHARDS, progress=False, log=lambda _: None)
    return out, manifest


def cfg(**kw):
    return ElectraConfig(**{"vocab_size": 600, "max_seq_length": SEQ, **kw})


def batches(ds, n):
    return [{k: v.numpy() for k, v in b.items()} for b in ds.take(n)]


def test_batches_are_static_int32_and_match_the_shards(built):
    out, manifest = built
    ds = pretraining_dataset(str(out), cfg(), 16, training=False, deterministic=True)
    for spec in ds.element_spec.values():
        assert spec.shape.as_list() == [16, SEQ] and spec.dtype == tf.int32
    got = batches(ds, 10_000)
    assert len(got) == manifest["num_examples"] // 16
    files = [out / shard_name(i, SHARDS) for i in range(SHARDS)]
    expected = {tuple(e["input_ids"]) for e in read_examples(files)}
    seen = {tuple(row) for b in got for row in b["input_ids"].tolist()}
    assert seen <= expected and len(seen) == len(got) * 16


def test_training_is_seeded_shuffled_and_repeats(built):
    out, manifest = built
    steps = manifest["num_examples"] // 8 + 5  # more than one epoch
    a = batches(pretraining_dataset(str(out), cfg(), 8, deterministic=True, seed=1), steps)
    b = batches(pretraining_dataset(str(out), cfg(), 8, deterministic=True, seed=1), steps)
    c = batches(pretraining_dataset(str(out), cfg(), 8, deterministic=True, seed=2), steps)
    assert len(a) == steps
    assert all(np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b))
    assert not all(np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c))
    plain = batches(pretraining_dataset(str(out), cfg(), 8, training=False, deterministic=True), 3)
    assert not np.array_equal(plain[0]["input_ids"], a[0]["input_ids"])


def test_input_context_gives_disjoint_files_and_per_replica_batches(built):
    out, _ = built
    rows = []
    for k in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=k,
                                         num_replicas_in_sync=4)
        ds = pretraining_dataset(str(out), cfg(), 16, training=False, deterministic=True,
                                 input_context=ctx)
        assert ds.element_spec["input_ids"].shape.as_list() == [4, SEQ]
        rows.append({tuple(r) for b in batches(ds, 10_000) for r in b["input_ids"].tolist()})
    assert rows[0] and rows[1] and not rows[0] & rows[1]
    ctx = tf.distribute.InputContext(num_input_pipelines=8, input_pipeline_id=0)
    with pytest.raises(DataError, match="4 shard file\\(s\\) cannot feed 8 input pipelines .*; "
                                        "rebuild with --num_shards >= 8"):
        pretraining_dataset(str(out), cfg(), 16, input_context=ctx)


def test_refuses_shards_that_disagree_with_the_config(built):
    out, _ = built
    with pytest.raises(DataError, match=f"max_seq_length=32 .*{MANIFEST_NAME}.* config has "
                                        "max_seq_length=64; rebuild the shards with --max_seq_length 64"):
        pretraining_dataset(str(out), cfg(max_seq_length=64))
    with pytest.raises(DataError, match="600-token vocab .* vocab_size=500, so ids would be out of range"):
        pretraining_dataset(str(out), cfg(vocab_size=500))
    pretraining_dataset(str(out), cfg(vocab_size=30522))  # a larger embedding table is fine
    with pytest.raises(DataError, match="fewer than one batch of 100000"):
        pretraining_dataset(str(out), cfg(), 100_000)


def test_truncated_and_corrupted_shards(built, tmp_path):
    out, _ = built
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    victim = copy / shard_name(1, SHARDS)
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=f"shard {victim} is {len(data) // 2} bytes but its manifest "
                                        f"says {len(data)}: it is truncated"):
        pretraining_dataset(str(copy), cfg())
    victim.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])  # same size
    # The reader checks sizes only; find_corrupt_shards re-hashes and finds the same-size damage.
    assert find_corrupt_shards(str(copy)) == [(str(victim), "sha256 differs from the manifest")]
    assert find_corrupt_shards(str(out)) == []


def test_missing_manifest_and_unmatched_paths(built, tmp_path):
    out, _ = built
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(out / shard_name(0, SHARDS), partial)
    with pytest.raises(DataError, match="has no manifest.json: its build did not finish"):
        pretraining_dataset(str(partial), cfg())
    with pytest.raises(DataError, match="matches no file"):
        pretraining_dataset(str(tmp_path / "nothing-*"), cfg())
    # Explicit shard files without a manifest (e.g. reference-built) are read as-is.
    ds = pretraining_dataset([str(partial / shard_name(0, SHARDS))], cfg(), 4, training=False)
    assert next(iter(ds))["input_ids"].shape == (4, SEQ)


def test_reads_through_a_tf_filesystem_url(built):
    """ram:// stands in for gs://: every read goes through tf.io.gfile."""
    out, manifest = built
    for path in [out / MANIFEST_NAME] + [out / shard_name(i, SHARDS) for i in range(SHARDS)]:
        tf.io.gfile.copy(str(path), f"ram://electra_shards/{path.name}", overwrite=True)
    ds = pretraining_dataset("ram://electra_shards", cfg(), 8, training=False, deterministic=True)
    assert len(batches(ds, 10_000)) == manifest["num_examples"] // 8
