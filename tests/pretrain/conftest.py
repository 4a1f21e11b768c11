"""Shared inputs of the pre-training tests (electra_tf/pretrain).

- `brown_examples`: real text, Brown sentences as packed id batches, for the
  pre-trainer, objectives and optimizer tests.
- `job_data` / `job_args`: small shards of the sample corpus for the job
  (`python -m electra_tf.pretrain`) tests. The vocabulary is written directly
  (specials, characters, frequent words) rather than learned, to keep the
  fixture under a few seconds.
"""

import collections
import os
import re

import numpy as np
import pytest
import tensorflow as tf

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="session")
def brown_examples(shared_data):
    """~600 Brown sentences -> ([N, 64] ids, mask, segments, vocab list).

    Two sentences per example ([CLS] A [SEP] B [SEP]) so segment ids are real.
    """
    import keras_hub

    lines = []
    with open(shared_data / "corpus" / "brown.txt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line.strip())
            if len(lines) == 1200:
                break
    vocab = keras_hub.tokenizers.compute_word_piece_vocabulary(
        tf.data.Dataset.from_tensor_slices(lines), vocabulary_size=1500,
        lowercase=True, reserved_tokens=RESERVED,
    )
    tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=vocab, lowercase=True)
    pieces = [[int(i) for i in row] for row in tokenizer(tf.constant(lines))]
    seq = 64
    ids = np.zeros((len(lines) // 2, seq), np.int32)
    segments = np.zeros_like(ids)
    for i in range(len(lines) // 2):
        a, b = pieces[2 * i][:30], pieces[2 * i + 1][:31]
        row = [2] + a + [3] + b + [3]
        ids[i, : len(row)] = row
        segments[i, len(a) + 2: len(row)] = 1
    assert vocab[:5] == RESERVED
    return ids, (ids > 0).astype(np.int32), segments, vocab


@pytest.fixture(scope="session")
def make_dataset():
    """A function: (examples, batch_size, repeat=True) -> batched tf.data.Dataset."""
    return _make_dataset


def _make_dataset(examples, batch_size, repeat=True):
    ids, mask, segments, _ = examples
    ds = tf.data.Dataset.from_tensor_slices(
        {"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    if repeat:
        ds = ds.repeat()
    return ds.batch(batch_size, drop_remainder=True)


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
