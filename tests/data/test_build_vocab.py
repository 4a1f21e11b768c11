"""WordPiece vocabulary learning on a Brown slice, and the reservoir sample."""

import gzip
import json

import pytest

from data_helpers import corpus_file, corpus_slice
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.build_vocab import _layout, build_vocab, hf_tokenizer, sample_corpus_lines
from electra_tf.data.vocab import load_vocab, special_token_ids
from electra_tf.data.data_errors import DataError

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


def test_layout_adds_missing_continuations_and_drops_the_rarest_pieces():
    # The trainer's own order: specials, characters, the `##` forms it saw, then merges.
    reserved = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    learned = reserved + ["b", "a", ",", "##a", "ab", "ba", "##ab", "abab"]
    # "##b" was never seen continuing a word but is added; "," is punctuation and never
    # continues one. Two learned pieces fit in 12: the two made first.
    assert _layout(learned, 12, reserved) == reserved + [",", "a", "b", "ab", "ba", "##a", "##b"]
    assert _layout(learned, 50, reserved) == reserved + [",", "a", "b", "ab", "ba", "##ab", "abab",
                                                         "##a", "##b"]
    with pytest.raises(DataError, match="--vocab_size=9 cannot hold the 3 distinct characters"):
        _layout(learned, 9, reserved)


def test_write_failure_is_one_line_and_leaves_no_temp_file(tmp_path, monkeypatch):
    import os

    brown = corpus_slice("brown.txt", 2, tmp_path / "brown2.txt")

    def full_disk(*_, **__):
        raise OSError(28, "No space left on device")

    # The vocabulary is written locally without TensorFlow: the disk fills as it is flushed.
    monkeypatch.setattr(os, "fsync", full_disk)
    out = tmp_path / "vocab.txt"
    with pytest.raises(DataError, match=f"cannot write --output_file '{out}' \\(.*No space left on device\\); "
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


def test_bert_vocab_learner_keeps_frequent_words_whole_on_a_small_corpus(tmp_path, repo_root):
    # The embedded default run's learner: top-down, so words seen min_count times stay whole
    # where the tokenizers trainer's merges leave fragments ("bro ##wn").
    corpus = [str(repo_root / "data" / "sample_corpus.txt")]
    merges = build_vocab(corpus, 2000, str(tmp_path / "t.txt"), sample_lines=0, min_count=2,
                         log=lambda _: None)
    whole = build_vocab(corpus, 2000, str(tmp_path / "b.txt"), sample_lines=0, min_count=2,
                        learner="bert_vocab", log=lambda _: None)
    assert 1500 < len(whole) <= 2000 and whole[:5] == merges[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "brown" in whole and "brown" not in merges
    words = [t for t in whole if len(t) > 1 and not t.startswith(("##", "["))]
    assert len(words) > len([t for t in merges if len(t) > 1 and not t.startswith(("##", "["))])
    assert list(load_vocab(str(tmp_path / "b.txt"))) == whole
    with pytest.raises(DataError, match="learner"):
        build_vocab(corpus, 2000, str(tmp_path / "x.txt"), learner="wordpiece", log=lambda _: None)


# Letters, accents, digits, ASCII and Unicode punctuation, CJK, mixed case. (Not compatibility
# characters: full-width forms, ligatures or "ß", which tensorflow-text's NFKC case folding
# maps and BERT's lower-casing keeps; build_vocab.hf_tokenizer says so.)
MIXED = [
    "Café Müller's naïve résumé costs 3.14 € (or 1,000,000 ¥) — “quoted”, isn't it?",
    "東京で日本語を勉強します。北京欢迎你。 São Paulo, Zürich & Ångström: ÀÉÎÕÜ.",
    "Ελληνικά και Русский текст; e-mail someone@example.com #tag $100 50% a_b 2024-01-31",
    "CamelCase WORDS mIxEd 42nd 3rd-party naïveté coöperate déjà vu... ok?!",
]


@pytest.mark.parametrize("lower_case", [True, False])
def test_hugging_face_and_in_graph_tokenizers_agree_on_the_learned_vocab(tmp_path, lower_case):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    text = corpus_file("wikitext2.valid.txt").read_text(encoding="utf-8")[:300_000]
    corpus = tmp_path / "mixed.txt"
    corpus.write_text("\n".join(MIXED * 20) + "\n\n" + text, encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    tokens = build_vocab([str(corpus)], 2500, str(vocab), lower_case=lower_case, sample_lines=0,
                         min_count=2, log=lambda _: None)
    assert len(tokens) == 2500
    hf = hf_tokenizer(str(vocab), lower_case)
    graph = WordPieceTokenizer(str(vocab), lower_case)
    # The learned lines, and words never seen (unknown characters become [UNK] in both).
    samples = MIXED + ["Unseen wörds: Ωmega ŋ القاهرة 漢字"]
    for sample in samples:
        pieces = hf.encode(sample).tokens
        assert pieces == graph.ids_to_tokens(graph.tokenize(sample)), sample
        assert len(pieces) > 5
    first = hf.encode(MIXED[0]).tokens
    if lower_case:
        assert first[:4] == ["cafe", "muller", "'", "s"] and "[UNK]" not in first
    else:
        assert first[:4] == ["Café", "Müller", "'", "s"] and "[UNK]" not in first
    assert hf.encode("東京").tokens == ["東", "京"]


@pytest.mark.parametrize("mode", ["bert", "nfkc_casefold"])
def test_learner_normalises_as_the_in_graph_tokenizer(tmp_path, mode):
    # The bert mode lower-cases as str.lower() ("Straße" -> "straße", full-width "ＡＢＣ" -> "ａｂｃ");
    # nfkc_casefold case-folds them into "strasse" and "abc". The learner counts the words the
    # graph makes, so they become whole pieces, and records the normalisation beside the vocabulary.
    corpus = tmp_path / "compat.txt"
    corpus.write_text("Straße ＡＢＣ plain words here\n" * 30, encoding="utf-8")
    vocab = tmp_path / "v.txt"
    tokens = build_vocab([str(corpus)], 200, str(vocab), sample_lines=0, min_count=2, mode=mode,
                         log=lambda _: None)
    folded = {"strasse", "abc"}
    kept = {"straße", "ａｂｃ"}
    assert (kept if mode == "bert" else folded) <= set(tokens)
    assert not (folded if mode == "bert" else kept) & set(tokens)
    record = json.loads((tmp_path / "v.txt.normalization.json").read_text(encoding="utf-8"))
    assert record["text_normalization"]["mode"] == mode and record["text_normalization"]["lower_case"] is True


def test_same_corpus_same_vocab_file_and_gzip_input_reads_alike(tmp_path):
    brown = corpus_slice("brown.txt", 20, tmp_path / "brown20.txt")
    packed = tmp_path / "brown20.txt.gz"
    packed.write_bytes(gzip.compress(brown.read_bytes()))
    outs = []
    for i, source in enumerate([brown, brown, packed]):
        out = tmp_path / f"v{i}.txt"
        build_vocab([str(source)], 1200, str(out), sample_lines=1500, seed=2, log=lambda _: None)
        outs.append(out.read_bytes())
    # Equally frequent merges are ordered by fixed ids, not by hash-map order: runs agree.
    assert outs[0] == outs[1] == outs[2]
    assert len(outs[0].splitlines()) == 1200
