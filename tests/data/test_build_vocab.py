"""WordPiece vocabulary learning on a Brown slice, and the reservoir sample."""

import pytest

from data_helpers import corpus_slice
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.build_vocab import _fit_size, build_vocab, sample_corpus_lines
from electra_tf.data.vocab import load_vocab, special_token_ids
from electra_tf.data.errors import DataError

SIZE = 500


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    brown = corpus_slice("brown.txt", 8, root / "brown8.txt")
    out = root / "vocab.txt"
    logs = []
    tokens = build_vocab([str(brown)], SIZE, str(out), sample_lines=600, seed=1, log=logs.append)
    return root, brown, out, tokens, logs


def test_learned_vocab_layout(learned):
    _, _, out, tokens, logs = learned
    assert load_vocab(str(out)) == tokens
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert special_token_ids(tokens).pad == 0
    assert 300 < len(tokens) <= SIZE
    assert len(set(tokens)) == len(tokens)
    assert {"the", "of", "and", "##s"} <= set(tokens)
    assert all(t == t.lower() for t in tokens[5:])  # lower-cased by default
    assert logs[0].startswith(f"wrote {out}: {len(tokens)} tokens (asked {SIZE}) learned from 600 lines")
    assert not (out.parent / "vocab.txt.tmp").exists()


def test_learned_vocab_feeds_the_builder_with_few_unknowns(learned):
    root, brown, out, tokens, _ = learned
    manifest = build_pretraining_data(str(root / "shards"), str(out), [str(brown)], max_seq_length=64,
                                      num_shards=1, progress=False, log=lambda _: None)
    assert manifest["vocab_size"] == len(tokens)
    import tensorflow as tf

    unk = 0
    for raw in tf.data.TFRecordDataset(str(root / "shards" / manifest["shards"][0]["file"])):
        ids = tf.train.Example.FromString(raw.numpy()).features.feature["input_ids"].int64_list.value
        unk += list(ids).count(1)
    assert unk / manifest["num_tokens"] < 0.01  # every character is in the vocab


def test_cased_vocab_keeps_capitals(learned, tmp_path):
    _, brown, _, _, _ = learned
    tokens = build_vocab([str(brown)], 300, str(tmp_path / "cased.txt"), lower_case=False,
                         sample_lines=300, log=lambda _: None)
    assert any(t[:1].isupper() for t in tokens[5:])


def test_reservoir_sample_is_seeded_and_ordered(learned):
    _, brown, _, _, _ = learned
    lines = [l.strip() for l in brown.read_text().split("\n") if l.strip()]
    a = sample_corpus_lines([str(brown)], 100, seed=3)
    assert a == sample_corpus_lines([str(brown)], 100, seed=3)
    assert a != sample_corpus_lines([str(brown)], 100, seed=4)
    assert len(a) == 100 and set(a) <= set(lines)
    positions = [lines.index(x) for x in a]
    assert positions == sorted(positions)
    assert sample_corpus_lines([str(brown)], 0) == lines


def test_fit_size_drops_rare_pieces_not_characters():
    reserved = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = reserved + ["a", "b", "ab", "ba", "abab", "##a", "##b"]
    assert _fit_size(vocab, 10, reserved) == reserved + ["a", "b", "ab", "##a", "##b"]
    assert _fit_size(vocab, 50, reserved) == vocab


def test_write_failure_is_one_line_and_leaves_no_temp_file(tmp_path, monkeypatch):
    import os

    import tensorflow as tf

    from electra_tf.data.errors import DataError

    brown = corpus_slice("brown.txt", 2, tmp_path / "brown2.txt")

    def full_disk(*_, **__):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tf.io.gfile, "rename", full_disk)
    out = tmp_path / "vocab.txt"
    with pytest.raises(DataError, match=f"cannot write --output '{out}' \\(.*No space left on device\\); "
                                        f"free disk space or choose another path"):
        build_vocab([str(brown)], 200, str(out), sample_lines=200, log=lambda _: None)
    assert sorted(os.listdir(tmp_path)) == ["brown2.txt"]


def test_min_count_lets_a_small_corpus_reach_the_vocab_size(tmp_path, repo_root):
    # The sample corpus (13k words): the learner's default threshold (10 occurrences)
    # stops far below the asked size and spells most words letter by letter.
    corpus = [str(repo_root / "data" / "sample_corpus.txt")]
    default = build_vocab(corpus, 2000, str(tmp_path / "v10.txt"), sample_lines=0, log=lambda _: None)
    small = build_vocab(corpus, 2000, str(tmp_path / "v2.txt"), sample_lines=0, min_count=2,
                        log=lambda _: None)
    assert len(default) < 1000 and len(small) > 1500
    # "bread" occurs 7 times: a whole piece only with min_count 2.
    assert "bread" in small and "bread" not in default
    with pytest.raises(DataError, match="min_count"):
        build_vocab(corpus, 2000, str(tmp_path / "v0.txt"), min_count=0, log=lambda _: None)
