"""Shared inputs for the pre-training job tests: small shards of the sample corpus.

The vocabulary is written directly (specials, characters, frequent words) rather
than learned, to keep the fixture under a few seconds.
"""

import collections
import os
import re

import pytest

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _quick_vocab(text_path, out_path, words=300):
    with open(text_path, encoding="utf-8") as f:
        text = f.read().lower()
    tokens = re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text)
    chars = sorted({c for t in tokens for c in t})
    frequent = [w for w, _ in collections.Counter(t for t in tokens if len(t) > 1).most_common(words)]
    vocab = SPECIALS + chars + ["##" + c for c in chars if c.isalnum()] + frequent
    vocab = list(dict.fromkeys(vocab))
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    return len(vocab)


@pytest.fixture(scope="session")
def job_data(tmp_path_factory, repo_root):
    """dict: data_dir (2 shards), eval_dir (1 shard), vocab_file, vocab_size, config."""
    from electra_tf.data.build_pretraining_data import build_pretraining_data

    root = tmp_path_factory.mktemp("job_data")
    corpus = repo_root / "data" / "sample_corpus.txt"
    docs = corpus.read_text(encoding="utf-8").split("\n\n")
    train_txt, eval_txt = root / "train.txt", root / "eval.txt"
    train_txt.write_text("\n\n".join(docs[:-4]), encoding="utf-8")
    eval_txt.write_text("\n\n".join(docs[-4:]), encoding="utf-8")
    vocab_file = root / "vocab.txt"
    size = _quick_vocab(train_txt, vocab_file)
    quiet = lambda *_: None  # noqa: E731
    build_pretraining_data(str(root / "train"), str(vocab_file), [str(train_txt)], max_seq_length=64,
                           num_shards=2, num_processes=1, progress=False, log=quiet)
    build_pretraining_data(str(root / "eval"), str(vocab_file), [str(eval_txt)], max_seq_length=64,
                           num_shards=1, num_processes=1, progress=False, log=quiet)
    return {
        "data_dir": str(root / "train"), "eval_dir": str(root / "eval"),
        "vocab_file": str(vocab_file), "vocab_size": size,
        "config": str(repo_root / "configs" / "tiny.json"),
    }


@pytest.fixture
def job_args(job_data):
    """A function: (model_dir, *extra flags) -> argv list for python -m electra_tf.pretrain."""

    def make(model_dir, *extra):
        return [
            "--config", job_data["config"], "--data_dir", job_data["data_dir"],
            "--vocab_file", job_data["vocab_file"], "--output_dir", str(model_dir),
            "--override", f"vocab_size={job_data['vocab_size']}", "--batch_size", "8",
            "--verbose", "0", *extra,
        ]

    return make
