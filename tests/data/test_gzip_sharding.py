"""One large .gz corpus file spreads over every shard: cut at document starts found in
one reading, balanced, deterministic for any process count, resumable, and the
same shards as its uncompressed text."""

import gzip
import hashlib
import random

import pytest

from data_helpers import read_examples, word_vocab
from helpers import write_vocab
from electra_tf.data import build_pretraining_data as bpd
from electra_tf.data.gzip_index import index_gzip
from electra_tf.data.manifest import MANIFEST_NAME, shard_name

SHARDS = 4
SEQ = 32


@pytest.fixture(scope="module")
def gz(tmp_path_factory):
    """400 reviews of 1-6 paragraphs (blank line between reviews), gzip'd, and a vocab."""
    root = tmp_path_factory.mktemp("gz")
    rng = random.Random(11)
    words = "a the movie film was is good bad great plot actor acting scene music story ending".split()
    docs = []
    for _ in range(400):
        docs.append("\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(3, 120))) + "."
            for _ in range(rng.randint(1, 6))))
    text = "\n\n".join(docs) + "\n"
    plain = root / "reviews.txt"
    plain.write_text(text, encoding="utf-8")
    packed = root / "reviews.txt.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    vocab = write_vocab(root / "vocab.txt", word_vocab([" ".join(words) + " ."], 100))
    kw = dict(max_seq_length=SEQ, num_shards=SHARDS, seed=3, progress=False, log=lambda _: None)
    manifest = bpd.build_pretraining_data(str(root / "p1"), str(vocab), [str(packed)], num_processes=1, **kw)
    return dict(root=root, docs=docs, plain=plain, packed=packed, vocab=vocab, kw=kw, manifest=manifest)


def digests(out):
    return [hashlib.sha256((out / shard_name(i, SHARDS)).read_bytes()).hexdigest() for i in range(SHARDS)]


def test_one_gz_file_fills_every_shard_evenly_and_writes_every_token_once(gz):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    manifest = gz["manifest"]
    counts = [s["examples"] for s in manifest["shards"]]
    mean = sum(counts) / SHARDS
    assert min(counts) > 0 and manifest["empty_shards"] == 0
    assert max(abs(c - mean) for c in counts) <= 0.1 * mean, counts
    assert manifest["fraction_written"] == 1.0
    assert manifest["settings"]["gzip_cut_at_documents"] is True
    # Shard after shard, the examples hold the corpus's tokens once, in order.
    tok = WordPieceTokenizer(str(gz["vocab"]))
    specials = (tok.special.cls, tok.special.sep, tok.special.pad)
    written = [t for ex in read_examples([gz["root"] / "p1" / shard_name(i, SHARDS) for i in range(SHARDS)])
               for t in ex["input_ids"] if t not in specials]
    assert written == [t for doc in gz["docs"] for line in doc.split("\n") for t in tok.tokenize(line)]


def test_gz_shards_equal_the_plain_text_shards_for_any_process_count(gz, tmp_path):
    plain = bpd.build_pretraining_data(str(tmp_path / "plain"), str(gz["vocab"]), [str(gz["plain"])],
                                       num_processes=1, **gz["kw"])
    assert [s["sha256"] for s in plain["shards"]] == [s["sha256"] for s in gz["manifest"]["shards"]]
    bpd.build_pretraining_data(str(tmp_path / "p2"), str(gz["vocab"]), [str(gz["packed"])],
                               num_processes=2, **gz["kw"])
    assert digests(tmp_path / "p2") == digests(gz["root"] / "p1")


def test_interrupted_gz_build_resumes_to_the_same_shards(gz, tmp_path, monkeypatch):
    out = tmp_path / "resume"
    args = (str(out), str(gz["vocab"]), [str(gz["packed"])])
    real = bpd.build_shard

    def killed_at_shard_2(task):
        if task.index == 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(bpd, "build_shard", killed_at_shard_2)
    with pytest.raises(KeyboardInterrupt):
        bpd.build_pretraining_data(*args, **gz["kw"])
    assert not (out / MANIFEST_NAME).exists()
    built = []
    monkeypatch.setattr(bpd, "build_shard", lambda task: built.append(task.index) or real(task))
    manifest = bpd.build_pretraining_data(*args, **gz["kw"])
    assert built == [2, 3]
    assert digests(out) == digests(gz["root"] / "p1")
    assert manifest["build_id"] == gz["manifest"]["build_id"]


def test_index_finds_every_document_start_and_stays_bounded(gz, monkeypatch):
    from electra_tf.data import corpus

    text = gz["plain"].read_bytes()
    index = index_gzip(str(gz["packed"]), blanks_separate_docs=True)
    assert index.size == len(text)
    assert len(index.cuts) == len(gz["docs"]) - 1
    assert all(text[c - 2:c] == b"\n\n" for c in index.cuts)
    # Pieces that split blank lines find the same starts; a bound thins them evenly.
    monkeypatch.setattr(corpus, "READ_CHUNK_BYTES", 1001)
    assert index_gzip(str(gz["packed"]), blanks_separate_docs=True) == index
    few = index_gzip(str(gz["packed"]), blanks_separate_docs=True, max_points=20)
    assert 20 <= len(few.cuts) <= 40 and set(few.cuts) <= set(index.cuts)
    lines = index_gzip(str(gz["packed"]), blanks_separate_docs=False)
    assert lines.cuts == [i + 1 for i, b in enumerate(text[:-1]) if b == ord("\n")]


def test_a_damaged_gz_file_is_refused_before_any_shard(gz, tmp_path):
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(gz["packed"].read_bytes()[:-2000])  # the head reads fine, the end is missing
    out = tmp_path / "out"
    with pytest.raises(bpd.DataError, match=f"corpus file '{broken}' is not valid gzip .*; re-compress it"):
        bpd.build_pretraining_data(str(out), str(gz["vocab"]), [str(broken)], **gz["kw"])
    assert not out.exists()
