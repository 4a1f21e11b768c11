"""Real text for the pre-training tests: Brown sentences as packed id batches."""

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
