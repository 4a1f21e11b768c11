"""Shared fixtures: a small handmade WordPiece vocabulary."""

import os

import pytest

# Words chosen so that the handmade SQuAD/tagging examples tokenize predictably.
_WORDS = """the a an of in on to and was is born john smith leader 1895 1943 ( ) - . , ?
what year who where when did went store man bought milk gallon paris france capital city
new york lives works at google eu rejects german call to boycott british lamb peter blackburn
japan ##ese electronics industry largest world good bad movie film great ##s ##ing it not
""".split()


def write_vocab(path, extra=()):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS + list(extra)
    seen, out = set(), []
    for t in tokens:
        if t not in seen:
            seen.add(t)
            out.append(t)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return path


@pytest.fixture(scope="session")
def sst2_dir(shared_data):
    """The GLUE SST-2 folder (train.tsv, dev.tsv) in the shared data beside the checkout."""
    return str(shared_data / "glue" / "SST-2")


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory):
    return write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt"))


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer
    return FinetuneTokenizer(vocab_file)
