"""The carry rule (the builder's default): a line that does not fit is split, at a
sentence end in the second half of the room when there is one, and the rest goes
into the next examples, so every corpus token is written once, in order."""

import random

import pytest

from data_helpers import read_examples, word_vocab
from helpers import write_vocab
from electra_tf.data import build_pretraining_data as bpd
from electra_tf.data.examples import ExampleBuilder
from electra_tf.data.manifest import shard_name

CLS, SEP, STOP = 1, 2, 3  # STOP: a sentence-end token ('.')


def body(example):
    """The corpus tokens of an example: all but [CLS] and the [SEP]s."""
    return [i for i in example[0] if i not in (CLS, SEP)]


def carry_builder(max_len, seed=0):
    return ExampleBuilder(max_len, CLS, SEP, random.Random(seed), carry=True, sentence_end_ids=[STOP])


def test_split_falls_after_the_last_sentence_end_in_the_second_half_of_the_room():
    # max 20: room for 17 corpus tokens ([CLS] A [SEP] B [SEP]); half the room is 8.
    line = list(range(100, 140))
    with_stop = line[:12] + [STOP] + line[13:]  # a sentence ends at index 12 (13 tokens)
    examples = carry_builder(20).add_line(with_stop)
    assert [body(e) for e in examples] == [with_stop[:13], with_stop[13:30]]
    # The last sentence end that fits wins; one in the first half is ignored.
    two = line[:10] + [STOP] + line[11:14] + [STOP] + line[15:]
    assert body(carry_builder(20).add_line(two)[0]) == two[:15]
    early = line[:5] + [STOP] + line[6:]  # index 5 < half of 17: cut at the room's edge
    assert body(carry_builder(20).add_line(early)[0]) == early[:17]
    # Room already partly used: 6 tokens in, 11 left, a sentence end at 7 (>= 11 // 2).
    b = carry_builder(20)
    assert b.add_line(list(range(200, 206))) == []
    third = line[:7] + [STOP] + line[8:]
    examples = b.add_line(third)
    assert [body(e) for e in examples] == [list(range(200, 206)) + third[:8], third[8:25]]
    assert all(len(e[0]) <= 20 for e in examples)
    # The rest waits for the next line or the document's end; nothing is dropped.
    assert body(b.end_document()) == third[25:]


def test_every_token_written_once_in_order_and_no_example_too_long():
    """Random documents of short and very long lines, for several lengths and seeds."""
    for max_len, seed in ((8, 0), (20, 1), (64, 2), (128, 3)):
        rng = random.Random(seed)
        b = carry_builder(max_len, seed)
        next_id = 10
        for _ in range(60):  # documents
            doc_tokens, doc_examples = [], []
            for _ in range(rng.randint(1, 8)):  # lines
                n = rng.choice([0, 1, 3, 10, rng.randint(1, 400)])
                line = []
                for _ in range(n):
                    line.append(STOP if rng.random() < 0.08 else next_id)
                    next_id += 1
                doc_tokens += line
                doc_examples += b.add_line(line)
            last = b.end_document()
            doc_examples += [last] if last else []
            assert [t for e in doc_examples for t in body(e)] == doc_tokens
            for input_ids, segment_ids in doc_examples:
                assert len(input_ids) == len(segment_ids) <= max_len
                assert input_ids[0] == CLS and input_ids[-1] == SEP and len(body((input_ids,))) > 0


def test_reference_step_is_refused_in_carry_mode():
    with pytest.raises(ValueError, match="call add_line"):
        carry_builder(20).add_sentence([5, 6])


@pytest.fixture(scope="module")
def long_lines(tmp_path_factory):
    """Documents of paragraphs far longer than a 16-token example, and a vocab."""
    root = tmp_path_factory.mktemp("carry")
    rng = random.Random(4)
    words = "the film was good bad long short plot actor scene music story end".split()
    docs = []
    for _ in range(12):
        paragraphs = []
        for _ in range(rng.randint(1, 4)):
            sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 12))) + rng.choice(".!?")
                         for _ in range(rng.randint(1, 9))]
            paragraphs.append(" ".join(sentences))
        docs.append("\n".join(paragraphs))
    corpus = root / "reviews.txt"
    corpus.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    vocab = write_vocab(root / "vocab.txt", word_vocab([" ".join(words) + " . ! ?"], 200))
    return dict(root=root, corpus=corpus, vocab=vocab, docs=docs)


def test_build_writes_the_whole_corpus_per_document(long_lines):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    seq = 16
    manifest = bpd.build_pretraining_data(
        str(long_lines["root"] / "carry"), str(long_lines["vocab"]), [str(long_lines["corpus"])],
        max_seq_length=seq, num_shards=1, seed=1, progress=False, log=lambda _: None)
    assert manifest["fraction_written"] == 1.0
    assert manifest["settings"]["carry_long_lines"] is True
    tok = WordPieceTokenizer(str(long_lines["vocab"]))
    examples = read_examples([long_lines["root"] / "carry" / shard_name(0, 1)])
    specials = (tok.special.cls, tok.special.sep, tok.special.pad)
    stream = iter(examples)
    for doc in long_lines["docs"]:
        want = [t for line in doc.split("\n") for t in tok.tokenize(line)]
        got = []
        while len(got) < len(want):  # an example never spans two documents
            ex = next(stream)
            assert len(ex["input_ids"]) == seq
            got += [t for t in ex["input_ids"] if t not in specials]
        assert got == want
    assert next(stream, None) is None
    stops = {tok.tokenize(p)[0] for p in ".!?"}
    # Most examples end at a sentence end (about 1 token in 8 is one: cuts at the room's
    # edge alone would give some 12%; sentences of 3-13 tokens often leave none in the
    # second half of a 13-token room).
    ends = [[t for t in ex["input_ids"] if t not in specials][-1] for ex in examples]
    assert sum(e in stops for e in ends) > 0.5 * len(ends)


def test_truncating_mode_loses_the_tails_and_says_so(long_lines, tmp_path):
    logs = []
    manifest = bpd.build_pretraining_data(
        str(tmp_path / "ref"), str(long_lines["vocab"]), [str(long_lines["corpus"])],
        max_seq_length=16, num_shards=1, seed=1, truncate_long_lines=True, progress=False,
        log=logs.append)
    assert 0 < manifest["fraction_written"] < 0.6
    assert manifest["num_corpus_tokens"] > 1000
    assert f"{manifest['fraction_written']:.1%} of the corpus's tokens" in logs[0]
    # Another rule, another build: re-running without the flag is refused, never mixed.
    with pytest.raises(bpd.DataError, match="other settings \\(carry_long_lines None there vs True now\\)"):
        bpd.build_pretraining_data(
            str(tmp_path / "ref"), str(long_lines["vocab"]), [str(long_lines["corpus"])],
            max_seq_length=16, num_shards=1, seed=1, progress=False, log=lambda _: None)


def test_resumed_build_with_shards_that_were_not_counted_gives_no_fraction(long_lines, tmp_path, monkeypatch):
    """Shards finished by a version that did not count written tokens: no made-up fraction."""
    import json

    from electra_tf.data.manifest import WORK_DIR

    out = tmp_path / "resume"
    args = (str(out), str(long_lines["vocab"]), [str(long_lines["corpus"])])
    kw = dict(max_seq_length=16, num_shards=2, seed=1, truncate_long_lines=True, progress=False)
    real = bpd.build_shard

    def killed_at_shard_1(task):
        if task.index == 1:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(bpd, "build_shard", killed_at_shard_1)
    with pytest.raises(KeyboardInterrupt):
        bpd.build_pretraining_data(*args, log=lambda _: None, **kw)
    stats_file = out / WORK_DIR / "shard-00000.json"
    stats = json.loads(stats_file.read_text())
    del stats["written_corpus_tokens"]
    stats_file.write_text(json.dumps(stats))
    monkeypatch.setattr(bpd, "build_shard", real)
    logs = []
    manifest = bpd.build_pretraining_data(*args, log=logs.append, **kw)
    assert manifest["fraction_written"] is None
    assert "of the corpus's tokens" not in logs[-1] and logs[-1].startswith("wrote ")
