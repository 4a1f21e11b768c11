"""Helpers shared by every test directory: vocabularies, CLI output, tiny models, torch checks.

`tests/` is on `sys.path` for every test (pytest inserts the directory of the
root `conftest.py`), so any test imports this module as `import helpers`.

- Vocabularies: `VOCAB` (100 tokens, the specials first) and `write_vocab`.
- CLI output: `error_lines` (the `error: ...` lines) and `nonblank_lines`.
- Tiny models: `tiny_config`, `random_pretrainer`, `make_model_dir` (a saved
  pre-trainer with its vocabulary), and the pre-training objective fixtures
  `pretrain_config` / `pretrain_batch` / `pretrain_model` / `pretrain_forward`
  with numpy's cross-entropies to check losses against.
- `require_torch`: PyTorch, skipping where it is absent, failing under CI=true.
"""

from __future__ import annotations

import math
import os
from typing import Iterable, List, Sequence

import numpy as np

# ----------------------------------------------------------------------------- vocabularies
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = """the a an of in on to and was is it cat dog sat ran mat house city river walked
quickly slowly he she they we said good bad new old big small red blue green man woman
child children school book books read ##s ##ed ##ing ##ly . , ! ? ' paris london 猫 は
""".split()
# The tiny models' vocabulary: specials, WORDS, then [unusedN] up to 100 tokens.
VOCAB = SPECIAL_TOKENS + WORDS
VOCAB += [f"[unused{i}]" for i in range(100 - len(VOCAB))]


def write_vocab(path, tokens: Sequence[str] = VOCAB):
    """Writes `tokens` one per line (as given: duplicates stay) to `path`; returns `path`."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return path


def unique(tokens: Iterable[str]) -> List[str]:
    """`tokens` without repeats, first occurrence kept."""
    return list(dict.fromkeys(tokens))


# ----------------------------------------------------------------------------- CLI output
def error_lines(text: str) -> List[str]:
    """The `error: ...` lines of a CLI's stderr (TensorFlow's own log lines are left out)."""
    return [line for line in text.splitlines() if line.startswith("error: ")]


def nonblank_lines(text: str) -> List[str]:
    """Every non-blank line (to assert that a CLI printed nothing but its one error)."""
    return [line for line in text.splitlines() if line.strip()]


# ----------------------------------------------------------------------------- tiny models
def tiny_config(**changes):
    """A 2-layer ELECTRA config over `VOCAB`, without dropout (deterministic forwards)."""
    from electra_tf.config import ElectraConfig

    values = dict(vocab_size=len(VOCAB), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=64, generator_hidden_size=0.5,
                  max_position_embeddings=64, max_seq_length=32, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, model_size="tiny")
    values.update(changes)
    return ElectraConfig(**values)


def random_pretrainer(config, seed=0):
    """A pre-trainer over `VOCAB` whose every weight is moved away from its initial value."""
    import tensorflow as tf

    from electra_tf.data.vocab import special_token_ids
    from electra_tf.pretrain import ElectraPretrainer

    model = ElectraPretrainer(config, special_token_ids(VOCAB))
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(v + tf.constant(rng.normal(0, 0.1, v.shape).astype("float32")))
    return model


def make_model_dir(path, seed=0, **config_changes):
    """A saved model directory (`save_pretrained`) of a random tiny pre-trainer.

    The vocabulary is written beside it, to `<path>_vocab.txt`. Default config:
    `tiny_config` with sequences of 24 and the default dropout of 0.1 (a model
    to fine-tune). Returns (path as str, the model, its config).
    """
    from electra_tf.models.saving import save_pretrained

    config = tiny_config(**{"max_seq_length": 24, "hidden_dropout_prob": 0.1,
                            "attention_probs_dropout_prob": 0.1, **config_changes})
    model = random_pretrainer(config, seed)
    vocab = write_vocab(str(path) + "_vocab.txt")
    save_pretrained(str(path), model, vocab)
    return str(path), model, config


def make_pair_classifier_dir(model_dir, out, seed=1):
    """A saved 3-way sentence-pair classifier folder (MNLI labels, 20 pieces) on `model_dir`'s encoder.

    The head's weights are drawn with `seed` at a scale (0.5) that makes the logits move with the text,
    so an export that drops or changes a weight shows in its outputs. Returns (out as str, the model).
    """
    from electra_tf.models.model_folder import save_classifier
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models.saving import load_discriminator

    encoder, _, config = load_discriminator(model_dir)
    model = ClassifierModel(encoder, 3, name="electra_mnli")
    build_and_call(model, 20)
    rng = np.random.default_rng(seed)
    for v in model.head.weights:
        v.assign(rng.normal(0, 0.5, v.shape).astype("float32"))
    save_classifier(str(out), model, config, os.path.join(model_dir, "vocab.txt"),
                    ["contradiction", "entailment", "neutral"], "mnli", pair=True, max_seq_length=20)
    return str(out), model


# ------------------------------------------------------------- pre-training objectives
# Ids of the objective tests' made-up vocabulary (no file: ids only).
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
PRETRAIN_VOCAB_SIZE = 60
PRETRAIN_SEQ = 24


def pretrain_special_ids():
    from electra_tf.data.vocab import SpecialTokenIds

    return SpecialTokenIds(PAD, UNK, CLS, SEP, MASK)


def pretrain_config(objective, **kw):
    """A 1-layer config of `objective` over ids 0..59, sequences of 24, mask_prob 0.25."""
    from electra_tf.config import ElectraConfig

    values = dict(
        vocab_size=PRETRAIN_VOCAB_SIZE, embedding_size=16, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, generator_hidden_size=0.5,
        max_position_embeddings=32, max_seq_length=PRETRAIN_SEQ, mask_prob=0.25,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, learning_rate=1e-3,
        num_warmup_steps=0, num_train_steps=100, objective=objective,
        two_stage_mlm_steps=2 if objective == "two_stage" else 0,
    )
    values.update(kw)
    return ElectraConfig(**values)


def pretrain_batch(rows=8, seed=0):
    """[CLS] a... [SEP] b... [SEP] with padding; ids 5..59."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    ids = np.zeros((rows, PRETRAIN_SEQ), np.int32)
    segments = np.zeros_like(ids)
    for r in range(rows):
        n = int(rng.integers(12, PRETRAIN_SEQ - 2))
        a = n // 2
        body = rng.integers(5, PRETRAIN_VOCAB_SIZE, size=n)
        row = [CLS] + list(body[:a]) + [SEP] + list(body[a:]) + [SEP]
        ids[r, :len(row)] = row
        segments[r, a + 2:len(row)] = 1
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant((ids > 0).astype(np.int32)),
            "segment_ids": tf.constant(segments)}


def pretrain_model(objective, **kw):
    """A compiled `ElectraPretrainer` of `pretrain_config(objective, **kw)`."""
    from electra_tf.pretrain import ElectraPretrainer, create_optimizer

    cfg = pretrain_config(objective, **kw)
    model = ElectraPretrainer(cfg, pretrain_special_ids())
    model.compile(optimizer=create_optimizer(cfg))
    return model


def pretrain_forward(model, batch, step=0, **kw):
    """The model's forward with seed (0, step)."""
    import tensorflow as tf

    return model.forward(batch, tf.constant([0, step], tf.int64), **kw)


def cross_entropy(logits, target):
    """-log softmax(logits)[target] in float64."""
    z = np.asarray(logits, np.float64)
    return -(z[target] - z.max() - np.log(np.exp(z - z.max()).sum()))


def sigmoid_cross_entropy(logit, label):
    """Binary cross-entropy of a logit against a 0/1 label, in float64."""
    logit = float(logit)
    return max(logit, 0) - logit * label + math.log1p(math.exp(-abs(logit)))


# ----------------------------------------------------------------------------- torch
def require_torch():
    """`import torch`, or skip the test where it is not installed; under CI (CI=true) fail.

    The parity tests against Hugging Face transformers must run in CI: a
    missing `[hf]` extra there is an error, not a reason to skip.
    """
    import pytest

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and PyTorch/transformers are missing ({exc}); install the "
                        f"[hf] extra: pip install -e .[hf]")
        pytest.skip(f"needs PyTorch and transformers (the [hf] extra): {exc}")
    return torch
