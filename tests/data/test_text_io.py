"""Corpus streaming, shard planning and the FastBert tokenizer wrapper."""

from pathlib import Path

import pytest

from electra_tf.data import corpus
from electra_tf.data.corpus import ReadStats, check_text_file, expand_corpus, iter_lines
from electra_tf.data.data_errors import DataError
from electra_tf.data.planning import plan_files
from electra_tf.data.vocab import VocabError
from data_helpers import corpus_file
from helpers import write_vocab


def test_iter_lines_matches_split_across_small_chunks(monkeypatch, tmp_path):
    text = corpus_file("wikitext2.valid.txt").read_bytes()[:200_000]
    text = text[: text.rfind(b"\n") + 1]
    path = tmp_path / "chunks.txt"
    path.write_bytes(text)
    monkeypatch.setattr(corpus, "READ_CHUNK_BYTES", 997)  # lines straddle chunks
    stats = ReadStats()
    lines = list(iter_lines(str(path), 0, len(text), stats, max_line_bytes=1 << 20))
    assert lines == text.decode().split("\n")[:-1]
    assert stats.bytes_read == len(text)
    assert not stats.invalid_bytes and not stats.long_lines_cut


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\nbad \xff\xfe here\nend \xc3\n")
    stats = ReadStats()
    lines = list(iter_lines(str(path), 0, path.stat().st_size, stats, 1000))
    assert lines == ["good line", "bad \ufffd\ufffd here", "end \ufffd"]
    assert stats.invalid_bytes == {str(path): 3}


def test_long_line_is_cut_at_a_space_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "READ_CHUNK_BYTES", 4096)
    path = tmp_path / "long.txt"
    long_line = " ".join(["word"] * 5000)  # 24,999 bytes, many chunks, no newline
    path.write_text("first\n" + long_line + "\nlast\n")
    stats = ReadStats()
    lines = list(iter_lines(str(path), 0, path.stat().st_size, stats, max_line_bytes=1000))
    assert lines[0] == "first" and lines[-1] == "last" and len(lines) == 3
    assert lines[1] == " ".join(["word"] * 200)  # 999 bytes, cut at the last space
    assert stats.long_lines_cut == {str(path): 1}


def test_expand_corpus_and_its_errors(tmp_path):
    (tmp_path / "d").mkdir()
    for name in ("b.txt", "a.txt", ".hidden"):
        (tmp_path / "d" / name).write_text("x\n")
    assert expand_corpus([str(tmp_path / "d")]) == [str(tmp_path / "d" / "a.txt"),
                                                    str(tmp_path / "d" / "b.txt")]
    assert expand_corpus([str(tmp_path / "d" / "*.txt")])[0].endswith("a.txt")
    with pytest.raises(DataError, match="nope.txt' matches no file"):
        expand_corpus([str(tmp_path / "nope.txt")])
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"PK\x03\x04\x00\x00data")
    with pytest.raises(DataError, match="looks binary \\(NUL byte at offset 4\\)"):
        check_text_file(str(binary))
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\n")
    assert check_text_file(str(blank)) is False


def _concat(plan):
    out = b""
    for shard in plan.shards:
        for seg in shard:
            out += Path(seg.path).read_bytes()[seg.start:seg.end]
    return out


def test_plan_cuts_after_blank_lines_and_covers_everything(tmp_path):
    docs = ["\n".join(f"doc{d} line{i}" for i in range(1 + d % 4)) + "\n" for d in range(30)]
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(docs[:20]))
    b.write_text("\n".join(docs[20:]))
    paths = [str(a), str(b)]
    sizes = [a.stat().st_size, b.stat().st_size]
    plan = plan_files(paths, sizes, 5, blanks_separate_docs=True)
    assert _concat(plan) == a.read_bytes() + b.read_bytes()
    assert plan.forced_splits == 0
    for shard in plan.shards:
        assert shard, "every shard gets text on this corpus"
        first = shard[0]
        data = Path(first.path).read_bytes()
        # Each shard starts at a file start or right after a blank line.
        assert first.start == 0 or data[first.start - 2:first.start] == b"\n\n"
    totals = [sum(s.end - s.start for s in shard) for shard in plan.shards]
    assert max(totals) < 2.5 * min(totals)


def test_plan_forces_a_line_cut_inside_a_huge_document(tmp_path):
    path = tmp_path / "one_doc.txt"
    path.write_text("".join(f"line {i}\n" for i in range(2000)))
    size = path.stat().st_size
    plan = plan_files([str(path)], [size], 4, blanks_separate_docs=True, search_bytes=256)
    assert plan.forced_splits == 3
    assert _concat(plan) == path.read_bytes()
    data = path.read_bytes()
    for shard in plan.shards[1:]:
        assert data[shard[0].start - 1:shard[0].start] == b"\n"
    # Without blank-line documents, any line start is a cut and nothing is "forced".
    plan = plan_files([str(path)], [size], 4, blanks_separate_docs=False)
    assert plan.forced_splits == 0 and len([s for s in plan.shards if s]) == 4


def test_gzip_files_stream_like_plain_ones_from_any_line(monkeypatch, tmp_path):
    import gzip

    text = corpus_file("brown.txt").read_bytes()[:300_000]
    text = text[: text.rfind(b"\n") + 1]
    plain, packed = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    monkeypatch.setattr(corpus, "READ_CHUNK_BYTES", 4093)  # lines straddle decompressed chunks
    seen = []
    stats = ReadStats()
    lines = list(iter_lines(str(packed), 0, None, stats, 1 << 20, progress=seen.append))
    assert lines == list(iter_lines(str(plain), 0, len(text), ReadStats(), 1 << 20))
    # Offsets, progress and bytes_read count uncompressed bytes: they end at the text's length.
    assert sum(seen) == stats.bytes_read == len(text)
    # A range that starts mid-way (at a line start) reads what the plain file's range holds.
    start = text.index(b"\n", 100_000) + 1
    end = text.index(b"\n", 200_000) + 1
    middle = ReadStats()
    assert (list(iter_lines(str(packed), start, end, middle, 1 << 20))
            == list(iter_lines(str(plain), start, end, ReadStats(), 1 << 20))
            == text[start:end - 1].decode().split("\n"))
    assert middle.bytes_read == end - start
    assert check_text_file(str(packed)) is True
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(gzip.compress(text)[:5000])
    with pytest.raises(DataError, match="broken.txt.gz' is not valid gzip .*; re-compress it"):
        list(iter_lines(str(broken), 0, None, ReadStats(), 1 << 20))
    with pytest.raises(DataError, match="is not valid gzip"):
        (tmp_path / "fake.gz").write_bytes(b"plain text, not gzip\n")
        check_text_file(str(tmp_path / "fake.gz"))


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "Hello", ",", "world", "!",
         "cafe", "café", "Cafe", "Café", "the", "##s", "cat", "中", "国"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return str(write_vocab(tmp_path_factory.mktemp("tok") / "vocab.txt", VOCAB))


def _tokens(tok, text):
    return tok.ids_to_tokens(tok.tokenize(text))


def test_tokenizer_modes(vocab_file):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    lower = WordPieceTokenizer(vocab_file, lower_case=True)
    assert _tokens(lower, "Hello, World!") == ["hello", ",", "world", "!"]
    assert _tokens(lower, "Café cats 中国") == ["cafe", "cat", "##s", "中", "国"]
    cased = WordPieceTokenizer(vocab_file, lower_case=False)
    assert _tokens(cased, "Hello, World!") == ["Hello", ",", "[UNK]", "!"]
    assert _tokens(cased, "Café") == ["Café"]
    lower_keep = WordPieceTokenizer(vocab_file, lower_case=True, strip_accents=False)
    assert _tokens(lower_keep, "Café CAFE") == ["café", "cafe"]
    cased_strip = WordPieceTokenizer(vocab_file, lower_case=False, strip_accents=True)
    assert _tokens(cased_strip, "Café") == ["Cafe"]
    flat, splits = lower.tokenize_batch(["hello", "", "the cats"])
    assert splits.tolist() == [0, 1, 1, 4]
    assert flat.tolist() == [5, 14, 16, 15]


def test_tokenizer_rejects_broken_vocabs(tmp_path):
    from electra_tf.data.tokenizer import WordPieceTokenizer

    missing = write_vocab(tmp_path / "missing.txt", [t for t in VOCAB if t != "[MASK]"])
    with pytest.raises(VocabError, match=r"missing.txt' lacks special token\(s\) \[MASK\]"):
        WordPieceTokenizer(str(missing))
    dup = write_vocab(tmp_path / "dup.txt", VOCAB + ["cat"])
    with pytest.raises(VocabError, match="lists token 'cat' twice"):
        WordPieceTokenizer(str(dup))
