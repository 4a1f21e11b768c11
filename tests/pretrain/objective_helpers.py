"""Tiny pre-training models and batches shared by the tests of tests/pretrain."""

import math

import numpy as np
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.pretrain import ElectraPretrainer, create_optimizer

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = SpecialTokenIds(PAD, UNK, CLS, SEP, MASK)
VOCAB = 60
SEQ = 24


def make_config(objective, **kw):
    values = dict(
        vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, generator_hidden_size=0.5,
        max_position_embeddings=32, max_seq_length=SEQ, mask_prob=0.25,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, learning_rate=1e-3,
        num_warmup_steps=0, num_train_steps=100, objective=objective,
        two_stage_mlm_steps=2 if objective == "two_stage" else 0,
    )
    values.update(kw)
    return ElectraConfig(**values)


def make_batch(rows=8, seed=0):
    """[CLS] a... [SEP] b... [SEP] with padding; ids 5..VOCAB-1."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((rows, SEQ), np.int32)
    segments = np.zeros_like(ids)
    for r in range(rows):
        n = int(rng.integers(12, SEQ - 2))
        a = n // 2
        body = rng.integers(5, VOCAB, size=n)
        row = [CLS] + list(body[:a]) + [SEP] + list(body[a:]) + [SEP]
        ids[r, :len(row)] = row
        segments[r, a + 2:len(row)] = 1
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant((ids > 0).astype(np.int32)),
            "segment_ids": tf.constant(segments)}


def make_model(objective, **kw):
    cfg = make_config(objective, **kw)
    model = ElectraPretrainer(cfg, SPECIAL)
    model.compile(optimizer=create_optimizer(cfg))
    return model


def forward(model, batch, step=0, **kw):
    return model.forward(batch, tf.constant([0, step], tf.int64), **kw)


def cross_entropy(logits, target):
    z = np.asarray(logits, np.float64)
    return -(z[target] - z.max() - np.log(np.exp(z - z.max()).sum()))


def sigmoid_cross_entropy(logit, label):
    return max(logit, 0) - logit * label + math.log1p(math.exp(-abs(logit)))
