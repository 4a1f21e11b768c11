"""Shared fixtures: a small handmade WordPiece vocabulary."""

import os

import pytest

import helpers

# Words chosen so that the handmade SQuAD/tagging examples tokenize predictably.
_WORDS = """the a an of in on to and was is born john smith leader 1895 1943 ( ) - . , ?
what year who where when did went store man bought milk gallon paris france capital city
new york lives works at google eu rejects german call to boycott british lamb peter blackburn
japan ##ese electronics industry largest world good bad movie film great ##s ##ing it not
""".split()


def write_vocab(path, extra=()):
    """The handmade vocabulary (specials, _WORDS, then `extra`, without repeats) at `path`."""
    return helpers.write_vocab(path, helpers.unique(helpers.SPECIAL_TOKENS + _WORDS + list(extra)))


@pytest.fixture(scope="session")
def sst2_dir(shared_data):
    """The GLUE SST-2 folder (train.tsv, dev.tsv) in the shared data beside the checkout."""
    return str(shared_data / "glue" / "SST-2")


@pytest.fixture(scope="session")
def sst2_model_files(tmp_path_factory, sst2_dir):
    """A vocabulary of the commonest SST-2 words and the tiny config sized to it (a directory)."""
    import collections

    from electra_tf.config import ElectraConfig

    d = tmp_path_factory.mktemp("sst2model")
    with open(os.path.join(sst2_dir, "train.tsv"), encoding="utf-8") as f:
        rows = f.read().splitlines()[1:2001]
    counts = collections.Counter(w for r in rows for w in r.split("\t")[0].split())
    vocab = write_vocab(str(d / "vocab.txt"), [w for w, _ in counts.most_common(800)])
    n = sum(1 for _ in open(vocab))
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    cfg = ElectraConfig.from_json(os.path.join(root, "configs", "tiny.json")).replace(vocab_size=n)
    cfg.to_json(str(d / "config.json"))
    return str(d)


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory):
    return write_vocab(str(tmp_path_factory.mktemp("vocab") / "vocab.txt"))


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer
    return FinetuneTokenizer(vocab_file)
