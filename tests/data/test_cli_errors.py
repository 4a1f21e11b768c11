"""Both CLIs on bad input: one error line naming the culprit, exit 2, nothing left behind."""

import os

import pytest

from data_helpers import corpus_slice, run_cli, word_vocab
from helpers import nonblank_lines, write_vocab

BUILD = "electra_tf.data.build_pretraining_data"
VOCAB = "electra_tf.data.build_vocab"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    brown = corpus_slice("brown.txt", 3, root / "brown3.txt")
    vocab = write_vocab(root / "vocab.txt", word_vocab([brown.read_text()], 400))
    return root, brown, vocab


def assert_one_error(proc, *fragments):
    lines = nonblank_lines(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in proc.stderr


def build(corpus, vocab, out, *extra):
    return run_cli(BUILD, f"--corpus={corpus}", f"--vocab_file={vocab}", f"--output_dir={out}",
                   "--num_shards=2", "--noprogress", *extra)


def test_empty_corpus(inputs, tmp_path):
    _, _, vocab = inputs
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    proc = build(empty, vocab, tmp_path / "out")
    assert_one_error(proc, "corpus is empty", str(empty))
    assert not (tmp_path / "out").exists()


def test_missing_path(inputs, tmp_path):
    _, _, vocab = inputs
    proc = build(tmp_path / "nope" / "*.txt", vocab, tmp_path / "out")
    assert_one_error(proc, "nope/*.txt' matches no file")
    assert not (tmp_path / "out").exists()


def test_binary_file(inputs, tmp_path):
    _, brown, vocab = inputs
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 10)
    proc = build(f"{brown},{blob}", vocab, tmp_path / "out")
    assert_one_error(proc, f"corpus file '{blob}' looks binary", "remove it from --corpus")
    assert not (tmp_path / "out").exists()


def test_vocab_missing_a_special_token(inputs, tmp_path):
    _, brown, vocab = inputs
    bad = tmp_path / "no_sep.txt"
    bad.write_text("".join(t + "\n" for t in vocab.read_text().split() if t != "[SEP]"))
    proc = build(brown, bad, tmp_path / "out")
    assert_one_error(proc, f"'{bad}' lacks special token(s) [SEP]")


@pytest.mark.large
def test_max_seq_length_beyond_any_model_positions(inputs, tmp_path, repo_root):
    _, brown, vocab = inputs
    proc = build(brown, vocab, tmp_path / "out", "--max_seq_length=100000")
    assert_one_error(proc, "error: --max_seq_length 100000 exceeds max_position_embeddings 512, the most "
                           "positions of any shipped model config (configs/*.json); lower it")
    assert not (tmp_path / "out").exists()
    # The limit is the largest position table of the shipped configs, and it is allowed.
    from electra_tf.data.build_pretraining_data import MAX_SEQ_LENGTH

    from electra_tf.config import ElectraConfig

    # Through the config loader: a recipe file without shape fields (continue.json) takes the defaults.
    shipped = [ElectraConfig.from_json(str(p)).max_position_embeddings for p in (repo_root / "configs").glob("*.json")]
    assert MAX_SEQ_LENGTH == max(shipped) == 512
    ok = build(brown, vocab, tmp_path / "ok", "--max_seq_length=512", "--num_shards=1")
    assert ok.returncode == 0, ok.stderr


def test_unwritable_output_dir(inputs, tmp_path):
    _, brown, vocab = inputs
    blocker = tmp_path / "a_file"
    blocker.write_text("x")  # a directory cannot be created under a file (even as root)
    proc = build(brown, vocab, blocker / "out")
    assert_one_error(proc, f"cannot write to --output_dir '{blocker / 'out'}'", "choose a writable")


@pytest.mark.large
def test_existing_shards_of_another_seq_length(inputs, tmp_path):
    _, brown, vocab = inputs
    out = tmp_path / "out"
    first = build(brown, vocab, out, "--max_seq_length=64")
    assert first.returncode == 0, first.stderr
    assert "wrote " in first.stdout
    before = sorted(os.listdir(out))
    proc = build(brown, vocab, out, "--max_seq_length=128")
    assert_one_error(proc, "already holds a finished build with other settings",
                     "max_seq_length 64 there vs 128 now", "--overwrite")
    assert sorted(os.listdir(out)) == before
    again = build(brown, vocab, out, "--max_seq_length=128", "--overwrite")
    assert again.returncode == 0, again.stderr


def test_build_vocab_errors(inputs, tmp_path):
    _, brown, _ = inputs
    proc = run_cli(VOCAB, f"--corpus={tmp_path / 'missing.txt'}", f"--output_file={tmp_path / 'v.txt'}")
    assert_one_error(proc, "missing.txt' matches no file")
    proc = run_cli(VOCAB, f"--corpus={brown}", f"--output_file={tmp_path / 'no_dir' / 'v.txt'}")
    assert_one_error(proc, "is not a writable directory")
    assert not (tmp_path / "v.txt").exists()
