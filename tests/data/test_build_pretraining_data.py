"""Corpus -> shards: layout, reference rules on real text, determinism, resume, tfds."""

import hashlib
import json
import os
import random
from pathlib import Path

import pytest

from data_helpers import corpus_slice, read_examples, word_vocab
from helpers import write_vocab
from electra_tf.data import build_pretraining_data as bpd
from electra_tf.data.examples import ExampleBuilder
from electra_tf.data.manifest import MANIFEST_NAME, WORK_DIR, shard_name
from electra_tf.data.shard_writer import shard_seed

SEQ = 64


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Brown (sentence/line) + WikiText (paragraph/line) slices, a vocab, one build."""
    root = tmp_path_factory.mktemp("build")
    brown = corpus_slice("brown.txt", 12, root / "brown12.txt")
    wiki = corpus_slice("wikitext2.valid.txt", 3, root / "wiki3.txt")
    texts = [brown.read_text(), wiki.read_text()]
    vocab_file = write_vocab(root / "vocab.txt", word_vocab(texts, 1500))
    out = root / "shards"
    logs = []
    manifest = bpd.build_pretraining_data(
        str(out), str(vocab_file), [str(brown), str(wiki)], max_seq_length=SEQ, num_shards=3,
        num_processes=1, seed=7, progress=False, log=logs.append)
    return dict(root=root, brown=brown, wiki=wiki, vocab=vocab_file, out=out,
                manifest=manifest, logs=logs)


def shard_paths(out, n):
    return [out / shard_name(i, n) for i in range(n)]


def digests(out, n):
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in shard_paths(out, n)]


def test_layout_and_manifest(env):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    out, manifest = env["out"], env["manifest"]
    tok = WordPieceTokenizer(str(env["vocab"]))
    cls, sep = tok.special.cls, tok.special.sep
    examples = read_examples(shard_paths(out, 3))
    assert len(examples) == manifest["num_examples"] > 100
    assert sorted(os.listdir(out)) == [MANIFEST_NAME] + [shard_name(i, 3) for i in range(3)]
    assert json.loads((out / MANIFEST_NAME).read_text()) == manifest
    tokens = 0
    two_segment = 0
    for ex in examples:
        ids, mask, segs = ex["input_ids"], ex["input_mask"], ex["segment_ids"]
        assert len(ids) == len(mask) == len(segs) == SEQ
        n = sum(mask)
        assert mask == [1] * n + [0] * (SEQ - n)
        assert ids[n:] == [0] * (SEQ - n) and segs[n:] == [0] * (SEQ - n)
        assert ids[0] == cls and ids[n - 1] == sep
        seps = [i for i in range(n) if ids[i] == sep]
        assert len(seps) in (1, 2)
        if len(seps) == 2:
            two_segment += 1
            a_end = seps[0]
            assert segs[:a_end + 1] == [0] * (a_end + 1)
            assert segs[a_end + 1:n] == [1] * (n - a_end - 1)
        else:
            assert segs[:n] == [0] * n
        assert all(0 <= i < len(tok.vocab) for i in ids)
        tokens += n
    assert tokens == manifest["num_tokens"]
    # Long WikiText paragraphs fill A alone (B trimmed away), so many are single.
    assert 0.3 < two_segment / len(examples) < 0.97
    assert manifest["max_seq_length"] == SEQ and manifest["vocab_size"] == 1500
    assert manifest["vocab_sha256"] == hashlib.sha256(env["vocab"].read_bytes()).hexdigest()
    assert manifest["do_lower_case"] is True and manifest["strip_accents"] is True
    assert [s["examples"] for s in manifest["shards"]] == [
        len(read_examples([p])) for p in shard_paths(out, 3)]
    assert manifest["features"]["input_ids"] == {"dtype": "int64", "shape": [SEQ]}
    assert any(line.startswith(f"wrote {len(examples):,} examples") for line in env["logs"])


def _replay_shard(tok, lines, seed, index, num_shards):
    """Independent replay of the reference loop over one shard's lines."""
    b = ExampleBuilder(SEQ, tok.special.cls, tok.special.sep,
                       random.Random(shard_seed(seed, index, num_shards)))
    out = []
    for line in lines:
        line = line.strip()
        ex = b.add_sentence(tok.tokenize(line)) if line else b.end_document()
        if ex:
            out.append(ex)
    ex = b.end_document()
    if ex:
        out.append(ex)
    return out


def test_single_shard_equals_line_by_line_replay(env, tmp_path):
    """--truncate_long_lines is the reference's loop, example for example."""
    from electra_tf.data.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer(str(env["vocab"]))
    manifest = bpd.build_pretraining_data(str(tmp_path), str(env["vocab"]), [str(env["brown"])],
                                          max_seq_length=SEQ, num_shards=1, seed=3, progress=False,
                                          truncate_long_lines=True, log=lambda _: None)
    assert "carry_long_lines" not in manifest["settings"]
    expected = _replay_shard(tok, env["brown"].read_text().split("\n"), 3, 0, 1)
    got = read_examples([tmp_path / shard_name(0, 1)])
    assert len(got) == len(expected)
    for g, (ids, segs) in zip(got, expected):
        assert g["input_ids"][:len(ids)] == ids and g["segment_ids"][:len(segs)] == segs
    # The very first example starts with the first Brown sentence.
    first_line = env["brown"].read_text().split("\n")[0]
    assert got[0]["input_ids"][1:6] == tok.tokenize(first_line)[:5]


def test_documents_never_share_an_example(env, tmp_path):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    corpus = tmp_path / "docs.txt"
    docs = []
    for d, word in enumerate(["alpha", "beta", "gamma", "delta"] * 3):
        docs.append("\n".join(f"{word} " * (3 + (d * 7 + i) % 11) for i in range(9)))
    corpus.write_text("\n\n".join(docs) + "\n")
    vocab = write_vocab(tmp_path / "v.txt", word_vocab(["alpha beta gamma delta"], 100))
    tok = WordPieceTokenizer(str(vocab))
    ids = {w: tok.tokenize(w)[0] for w in ("alpha", "beta", "gamma", "delta")}
    bpd.build_pretraining_data(str(tmp_path / "o"), str(vocab), [str(corpus)], max_seq_length=32,
                               num_shards=1, progress=False, log=lambda _: None)
    for ex in read_examples([tmp_path / "o" / shard_name(0, 1)]):
        present = {w for w, i in ids.items() if i in ex["input_ids"]}
        assert len(present) == 1
    # Without blank-line documents, examples do run across them.
    bpd.build_pretraining_data(str(tmp_path / "o2"), str(vocab), [str(corpus)], max_seq_length=32,
                               num_shards=1, blanks_separate_docs=False, progress=False,
                               log=lambda _: None)
    mixed = [ex for ex in read_examples([tmp_path / "o2" / shard_name(0, 1)])
             if len({w for w, i in ids.items() if i in ex["input_ids"]}) > 1]
    assert mixed


def test_same_seed_same_bytes_for_any_process_count(env, tmp_path):
    args = (str(env["vocab"]), [str(env["brown"]), str(env["wiki"])])
    kw = dict(max_seq_length=SEQ, num_shards=3, progress=False, log=lambda _: None)
    bpd.build_pretraining_data(str(tmp_path / "p2"), *args, num_processes=2, seed=7, **kw)
    assert digests(tmp_path / "p2", 3) == digests(env["out"], 3)
    bpd.build_pretraining_data(str(tmp_path / "s8"), *args, num_processes=1, seed=8, **kw)
    assert digests(tmp_path / "s8", 3) != digests(env["out"], 3)


def test_resume_builds_only_missing_shards(env, tmp_path, monkeypatch):
    out = tmp_path / "resume"
    args = (str(out), str(env["vocab"]), [str(env["brown"]), str(env["wiki"])])
    kw = dict(max_seq_length=SEQ, num_shards=3, seed=7, progress=False)
    real = bpd.build_shard
    built = []

    def crash_on_shard_2(task):
        built.append(task.index)
        if task.index == 2:
            raise KeyboardInterrupt  # the build is killed while writing shard 2
        return real(task)

    monkeypatch.setattr(bpd, "build_shard", crash_on_shard_2)
    with pytest.raises(KeyboardInterrupt):
        bpd.build_pretraining_data(*args, log=lambda _: None, **kw)
    assert not (out / MANIFEST_NAME).exists()
    assert (out / shard_name(0, 3)).exists() and not (out / shard_name(2, 3)).exists()
    mtime = (out / shard_name(0, 3)).stat().st_mtime_ns
    # A worker killed -9 leaves its temp file behind: the resume removes it.
    stale = out / f".{shard_name(2, 3)}.tmp-99999"
    stale.write_bytes(b"partial")

    built.clear()
    monkeypatch.setattr(bpd, "build_shard", lambda task: built.append(task.index) or real(task))
    logs = []
    manifest = bpd.build_pretraining_data(*args, log=logs.append, **kw)
    assert built == [2]
    assert "resuming: 2 of 3 shards already complete, building 1" in logs
    assert not stale.exists() and not (out / WORK_DIR).exists()
    assert (out / shard_name(0, 3)).stat().st_mtime_ns == mtime
    assert digests(out, 3) == digests(env["out"], 3)
    assert manifest["num_examples"] == env["manifest"]["num_examples"]
    # Running again is a no-op.
    built.clear()
    logs.clear()
    bpd.build_pretraining_data(*args, log=logs.append, **kw)
    assert built == [] and "already complete" in logs[0]


def test_rerun_repairs_missing_truncated_and_corrupted_shards(env, tmp_path, repo_root):
    """The same command over a finished build with damaged shards rebuilds just those, in place."""
    import shutil

    from electra_tf.data.data_errors import DataError
    from electra_tf.data.reader import pretraining_dataset
    from electra_tf.config import ElectraConfig

    out = tmp_path / "shards"
    shutil.copytree(env["out"], out)
    args = (str(out), str(env["vocab"]), [str(env["brown"]), str(env["wiki"])])
    kw = dict(max_seq_length=SEQ, num_shards=3, seed=7, progress=False)
    paths = shard_paths(out, 3)
    cfg = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json")).replace(
        max_seq_length=SEQ, vocab_size=2000)
    paths[1].write_bytes(paths[1].read_bytes()[:1000])            # truncated (a partial copy)
    with pytest.raises(DataError, match=f"shard {paths[1]} is 1000 bytes but its manifest says "
                                        f"[0-9]+: it is truncated or corrupted; re-run the same python -m "
                                        f"electra_tf.data.build_pretraining_data command to rebuild it"):
        pretraining_dataset(str(out), cfg)
    paths[0].unlink()                                             # missing
    with pytest.raises(DataError, match=f"shard {paths[0]} listed in its manifest is missing; re-run the "
                                        f"same python -m electra_tf.data.build_pretraining_data command"):
        pretraining_dataset(str(out), cfg)
    data = bytearray(paths[2].read_bytes())
    data[len(data) // 2] ^= 0xFF                                  # corrupted, same size
    paths[2].write_bytes(bytes(data))

    logs = []
    manifest = bpd.build_pretraining_data(*args, log=logs.append, **kw)
    assert logs[0] == (f"repairing: 3 of 3 shard(s) missing or damaged ({shard_name(0, 3)}: missing; "
                       f"{shard_name(1, 3)}: 1000 bytes, manifest says {env['manifest']['shards'][1]['size']}; "
                       f"{shard_name(2, 3)}: sha256 differs from the manifest), rebuilding them")
    assert logs[-1].startswith(f"repaired 3 shard(s) of {out}; the build is complete again")
    assert digests(out, 3) == digests(env["out"], 3)
    assert manifest == env["manifest"] == json.loads((out / MANIFEST_NAME).read_text())
    assert sorted(os.listdir(out)) == [MANIFEST_NAME] + [shard_name(i, 3) for i in range(3)]
    logs.clear()
    bpd.build_pretraining_data(*args, log=logs.append, **kw)
    assert len(logs) == 1 and "already complete" in logs[0]

    # A corpus edited since the build (same size) cannot give the manifest's shard back.
    corpus = tmp_path / "brown.txt"
    shutil.copy(env["brown"], corpus)
    built = tmp_path / "built"
    bpd.build_pretraining_data(str(built), str(env["vocab"]), [str(corpus)], max_seq_length=SEQ,
                               num_shards=1, progress=False, log=lambda _: None)
    corpus.write_text(corpus.read_text().replace(" the ", " xyz ", 5))  # same size, other tokens
    (built / shard_name(0, 1)).unlink()
    with pytest.raises(DataError, match=f"rebuilt shard {built / shard_name(0, 1)} differs from its manifest.json "
                                        f"\\(the corpus files changed since the build\\?\\); rebuild everything "
                                        f"with --overwrite"):
        bpd.build_pretraining_data(str(built), str(env["vocab"]), [str(corpus)], max_seq_length=SEQ,
                                   num_shards=1, progress=False, log=lambda _: None)
    assert not (built / WORK_DIR).exists()


def test_bert_layout_vocab_is_accepted(env, tmp_path):
    """The BERT uncased layout: [PAD]=0, [unused*], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103."""
    base = word_vocab([env["brown"].read_text()], 700)[5:]
    bert = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + base
    vocab = write_vocab(tmp_path / "bert_vocab.txt", bert)
    manifest = bpd.build_pretraining_data(str(tmp_path / "o"), str(vocab), [str(env["brown"])],
                                          max_seq_length=SEQ, num_shards=1, progress=False,
                                          log=lambda _: None)
    assert manifest["special_token_ids"] == {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}
    for ex in read_examples([tmp_path / "o" / shard_name(0, 1)])[:50]:
        n = sum(ex["input_mask"])
        assert ex["input_ids"][0] == 101 and ex["input_ids"][n - 1] == 102
        assert not any(1 <= i < 100 for i in ex["input_ids"])  # no [unused] ids


def test_tfds_source_matches_file_source(env, tmp_path):
    import tensorflow_datasets as tfds

    articles = [a for a in env["wiki"].read_text().split("\n\n") if a.strip()]

    class WikiSliceText(tfds.core.GeneratorBasedBuilder):
        """Local WikiText slice: one record per article (no download)."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"text": tfds.features.Text(), "title": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i, article in enumerate(articles):
                yield i, {"text": article, "title": f"article {i}"}

    data_dir = tmp_path / "tfds"
    WikiSliceText(data_dir=str(data_dir)).download_and_prepare()
    out = tmp_path / "from_tfds"
    manifest = bpd.build_pretraining_data(
        str(out), str(env["vocab"]), tfds_name="wiki_slice_text", tfds_split="train",
        tfds_text_key="text", tfds_data_dir=str(data_dir), max_seq_length=SEQ, num_shards=1,
        seed=5, progress=False, log=lambda _: None)
    assert manifest["settings"]["source"]["tfds"]["num_examples"] == len(articles)
    bpd.build_pretraining_data(str(tmp_path / "from_file"), str(env["vocab"]), [str(env["wiki"])],
                               max_seq_length=SEQ, num_shards=1, seed=5, progress=False,
                               log=lambda _: None)
    # One record = one document, exactly like blank-line-separated articles.
    assert digests(out, 1) == digests(tmp_path / "from_file", 1)
    with pytest.raises(bpd.DataError, match="no feature 'body'; pass --tfds_text_key"):
        bpd.build_pretraining_data(str(tmp_path / "x"), str(env["vocab"]),
                                   tfds_name="wiki_slice_text", tfds_text_key="body",
                                   tfds_data_dir=str(data_dir), progress=False)


def test_non_utf8_and_one_megabyte_line_are_reported(env, tmp_path):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    brown_lines = env["brown"].read_text().split("\n")
    long_line = " ".join(brown_lines[i % 50] for i in range(12000))[:1_000_000]
    corpus = tmp_path / "odd.txt"
    corpus.write_bytes(long_line.encode() + b"\n" + b"caf\xe9 and \xff\xfe bytes\n"
                       + "\n".join(brown_lines[:200]).encode() + b"\n")
    logs = []
    manifest = bpd.build_pretraining_data(str(tmp_path / "o"), str(env["vocab"]), [str(corpus)],
                                          max_seq_length=SEQ, num_shards=2, progress=False,
                                          truncate_long_lines=True, log=logs.append)
    assert manifest["invalid_utf8_bytes_replaced"] == {str(corpus): 3}
    assert manifest["long_lines_cut"] == {str(corpus): 1}
    assert (f"warning: {corpus}: 3 invalid UTF-8 byte(s) replaced with U+FFFD "
            f"(convert the file to UTF-8 to keep those characters)") in logs
    assert any("1 line(s) longer than 65536 bytes cut" in line for line in logs)
    tok = WordPieceTokenizer(str(env["vocab"]))
    first = read_examples([tmp_path / "o" / shard_name(0, 2)])[0]
    # The reference's rule: the long line fills the first example by itself (A gets it,
    # trimmed to SEQ-2) and the rest of its 64 KiB is dropped.
    assert first["input_ids"][1:SEQ - 1] == tok.tokenize(long_line[:5000])[:SEQ - 2]
    assert manifest["fraction_written"] < 0.2


def test_example_serializer_writes_the_protobuf_bytes():
    import tensorflow as tf

    from electra_tf.data.examples import pad_example
    from electra_tf.data.shard_writer import ExampleSerializer

    vocab_size = 20_000  # ids of 1, 2 and 3 varint bytes
    rng = random.Random(0)
    for length in (5, 64, 130):
        serialize = ExampleSerializer(vocab_size, length)
        for _ in range(20):
            n = rng.randint(3, length)
            ids = [rng.choice([0, 1, 127, 128, 16383, 16384, vocab_size - 1, rng.randrange(vocab_size)])
                   for _ in range(n)]
            cut = rng.randint(1, n)
            padded = pad_example((ids, [0] * cut + [1] * (n - cut)), length, 0)

            def feature(values):
                return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

            proto = tf.train.Example(features=tf.train.Features(feature={
                name: feature(values) for name, values in zip(("input_ids", "input_mask", "segment_ids"), padded)}))
            assert serialize(*padded) == proto.SerializeToString(deterministic=True)


def test_gzip_corpus_gives_the_plain_corpus_shards(env, tmp_path):
    import gzip

    packed = []
    for name in ("brown", "wiki"):
        path = tmp_path / f"{name}.txt.gz"
        path.write_bytes(gzip.compress(env[name].read_bytes()))
        packed.append(str(path))
    kw = dict(max_seq_length=SEQ, num_shards=1, seed=7, progress=False, log=lambda _: None)
    plain = bpd.build_pretraining_data(str(tmp_path / "plain"), str(env["vocab"]),
                                       [str(env["brown"]), str(env["wiki"])], **kw)
    gz = bpd.build_pretraining_data(str(tmp_path / "gz"), str(env["vocab"]), packed, **kw)
    assert gz["shards"][0]["sha256"] == plain["shards"][0]["sha256"]
    assert gz["num_corpus_tokens"] == plain["num_corpus_tokens"] > 10_000


def test_progress_line_reports_shards_tokens_per_second_and_eta():
    import io
    import multiprocessing

    meter = bpd.Progress(multiprocessing.get_context("spawn"), total_bytes=1000, total_shards=4,
                         enabled=False, stream=io.StringIO())
    meter.started -= 10  # ten seconds into the build
    for name, value in (("bytes", 250), ("tokens", 50_000), ("shards", 1)):
        meter.counters[name].value = value  # what the workers add as they go
    line = meter.line()
    assert " 25.0% shards 1/4 50,000 tokens " in line
    assert line.endswith("5.0k tokens/s ETA    30s")
