"""tf.data reader: shapes, determinism, sharding per worker, manifest checks."""

import collections
import math
import shutil

import numpy as np
import pytest
import tensorflow as tf

from data_helpers import corpus_slice, read_examples, word_vocab
from helpers import write_vocab
from electra_tf.config import ElectraConfig
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.data_errors import DataError
from electra_tf.data.manifest import MANIFEST_NAME, WORK_DIR, shard_name
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
    ds = pretraining_dataset(str(out), cfg(), 16, training=False, deterministic=True, drop_remainder=True)
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
    (partial / WORK_DIR).mkdir()  # what an interrupted build of ours leaves
    with pytest.raises(DataError, match=f"^{partial} has no manifest.json and holds .build/: its build did "
                                        "not finish; re-run python -m electra_tf.data.build_pretraining_data "
                                        "with the same flags to finish it$"):
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
    assert len(_batch_rows(batches(ds, 10_000))[0]) == manifest["num_examples"]


def _rows(examples):
    return collections.Counter(tuple(map(tuple, (e["input_ids"], e["input_mask"], e["segment_ids"])))
                               for e in examples)


def _batch_rows(got):
    """The real rows of the batches (padding rows, whose mask is all 0, left out) and the padding count."""
    real, padding = [], 0
    for b in got:
        for ids, mask, seg in zip(b["input_ids"].tolist(), b["input_mask"].tolist(), b["segment_ids"].tolist()):
            if any(mask):
                real.append({"input_ids": ids, "input_mask": mask, "segment_ids": seg})
            else:
                assert not any(ids) and not any(seg)
                padding += 1
    return real, padding


def test_evaluation_pass_sees_every_example(built):
    """training=False: every example written, once; the last batch is padded to keep shapes static."""
    out, manifest = built
    written = read_examples([out / shard_name(i, SHARDS) for i in range(SHARDS)])
    n = manifest["num_examples"]
    assert len(written) == n and n % 16  # the last batch is a partial one
    ds = pretraining_dataset(str(out), cfg(), 16, training=False, deterministic=True)
    for spec in ds.element_spec.values():
        assert spec.shape.as_list() == [16, SEQ] and spec.dtype == tf.int32
    got = batches(ds, 10_000)
    real, padding = _batch_rows(got)
    assert len(got) == math.ceil(n / 16) and len(real) == n and padding == len(got) * 16 - n
    assert _rows(real) == _rows(written)
    # Each input pipeline pads its own last batch; together they still see every example once.
    seen = []
    for k in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=k, num_replicas_in_sync=2)
        seen += _batch_rows(batches(pretraining_dataset(str(out), cfg(), 16, training=False,
                                                         deterministic=True, input_context=ctx), 10_000))[0]
    assert _rows(seen) == _rows(written)
    # Fewer examples than one batch: one padded batch (training still refuses them).
    one = batches(pretraining_dataset(str(out), cfg(), n + 5, training=False), 10)
    assert len(one) == 1 and _rows(_batch_rows(one)[0]) == _rows(written)
    # drop_remainder=True keeps the old single pass of whole batches only.
    whole = batches(pretraining_dataset(str(out), cfg(), 16, training=False, drop_remainder=True), 10_000)
    assert len(whole) == n // 16 and _batch_rows(whole)[1] == 0


@pytest.mark.large
def test_padding_rows_weigh_nothing_in_evaluation(built):
    """The pre-trainer's evaluation of the padded last batch equals that of its real rows alone."""
    from electra_tf.data.vocab import load_vocab, special_token_ids
    from electra_tf.pretrain import ElectraPretrainer

    out, manifest = built
    config = cfg(embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, generator_hidden_size=0.5, max_position_embeddings=SEQ,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = ElectraPretrainer(config, special_token_ids(load_vocab(str(out.parent / "vocab.txt"))))
    model.compile(optimizer="sgd")
    last = batches(pretraining_dataset(str(out), config, 16, training=False, deterministic=True), 10_000)[-1]
    real = int(last["input_mask"].any(axis=1).sum())
    assert 0 < real < 16
    trimmed = {k: v[:real] for k, v in last.items()}

    def evaluate(batch):
        data = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()})
        return model.evaluate(data, verbose=0, return_dict=True)

    padded, alone = evaluate(last), evaluate(trimmed)
    assert set(padded) == set(alone) and "disc_auc" in padded
    for name in padded:
        np.testing.assert_allclose(padded[name], alone[name], rtol=1e-5, atol=1e-6, err_msg=name)


def _write_foreign(path, examples, extra=None, seq=SEQ):
    """A TFRecord file as another builder writes it: our three int64 features (plus `extra`)."""
    with tf.io.TFRecordWriter(str(path)) as w:
        for e in examples:
            feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=e[k][:seq])) for k in e}
            for name, value in (extra or {}).items():
                feats[name] = value
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())


def test_reads_shards_another_builder_wrote_without_a_manifest(built, tmp_path):
    out, manifest = built
    written = read_examples([out / shard_name(i, SHARDS) for i in range(SHARDS)])
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    half = len(written) // 2
    # BERT-style builders add features of their own (here next_sentence_labels): they are ignored.
    nsp = {"next_sentence_labels": tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))}
    _write_foreign(foreign / "part-00000.tfrecord", written[:half], nsp)
    _write_foreign(foreign / "part-00001.tfrecord", written[half:], nsp)
    (foreign / "README.txt").write_text("not a shard")
    ds = pretraining_dataset(str(foreign), cfg(), 16, training=False, deterministic=True)
    real, _ = _batch_rows(batches(ds, 10_000))
    assert _rows(real) == _rows(written)
    assert next(iter(pretraining_dataset(str(foreign), cfg(), 8)))["input_ids"].shape == (8, SEQ)
    assert find_corrupt_shards(str(foreign)) == []
    # Our own shard names without manifest.json (e.g. google-research/electra's builder) are read too.
    named = tmp_path / "named"
    shutil.copytree(out, named, ignore=shutil.ignore_patterns(MANIFEST_NAME))
    real, _ = _batch_rows(batches(pretraining_dataset(str(named), cfg(), 16, training=False), 10_000))
    assert _rows(real) == _rows(written)


def test_foreign_shards_that_do_not_fit_are_refused_in_one_line(built, tmp_path):
    out, _ = built
    written = read_examples([out / shard_name(0, SHARDS)])[:4]

    def refused(name, match, config=None, **write):
        d = tmp_path / name
        d.mkdir()
        if write:
            _write_foreign(d / "data.tfrecord", **write)
        with pytest.raises(DataError, match=match) as info:
            pretraining_dataset(str(d), config or cfg(), 2, training=False)
        assert "\n" not in str(info.value)
        return d

    refused("empty", "has no manifest.json and no TFRecord shards \\(pretrain_data.tfrecord-\\*-of-\\* or "
                     "\\*.tfrecord\\*\\); build shards with python -m electra_tf.data.build_pretraining_data$")
    refused("short", "data.tfrecord holds 16 input_ids per example but the config has max_seq_length=32; "
                     "set max_seq_length=16 or rebuild the shards with --max_seq_length 32$",
            examples=written, seq=16)
    refused("vocab", "data.tfrecord holds token id \\d+ but the config has vocab_size=50; set vocab_size",
            cfg(vocab_size=50), examples=written)
    refused("text", "data.tfrecord: its records have no int64 feature input_mask, segment_ids \\(features: "
                    "input_ids, text\\); the reader needs tf.train.Examples with int64 features input_ids, "
                    "input_mask, segment_ids of max_seq_length ids each$",
            examples=[{"input_ids": e["input_ids"]} for e in written],
            extra={"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a review"]))})
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "data.tfrecord").write_bytes(b"this is not a TFRecord file at all" * 10)
    with pytest.raises(DataError, match="shard .*data.tfrecord has no manifest.json and is not a readable "
                                        "TFRecord file \\(.*\\); the reader needs tf.train.Examples"):
        pretraining_dataset(str(garbage), cfg(), 2, training=False)
