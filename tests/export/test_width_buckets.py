"""Served batches run at a few padded widths (longest row rounded up to 16), with the outputs of
padding to the longest row only: classifier logits and labels, discriminator per-token outputs
(cut back to the longest row), and the `encoded` signature. The XLA-compiled opt-in
(`jit_compile`, batches padded too) gives the same outputs, also after a SavedModel round trip."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.export.serving import (CLASSIFIER, DISCRIMINATOR, WIDTH_MULTIPLE, ServingModule, padded_batch,
                                      padded_width)
from electra_tf.models.classifier_model import ClassifierModel, build_and_call
from electra_tf.models import build_encoder
from electra_tf.models.heads import DiscriminatorHead

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "river", "good", "bad", "film", "##s"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
SEQ = 40
# Lengths 1..37 words: widths on both sides of several multiples of 16, and cut at SEQ.
TEXTS = [" ".join(WORDS[(i * 7 + j) % 13] for j in range(n)) for i, n in enumerate([1, 5, 13, 14, 15, 16, 29, 30, 37])]


def _config():
    return ElectraConfig(vocab_size=len(VOCAB), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64, generator_hidden_size=0.5,
                         max_position_embeddings=64, max_seq_length=SEQ, model_size="tiny")


def _randomise(layer, seed):
    rng = np.random.default_rng(seed)
    for v in layer.weights:  # logits that depend on every token
        v.assign(v + rng.normal(0, 0.2, v.shape).astype("float32"))


@pytest.fixture(scope="module")
def classifiers():
    import keras

    keras.utils.set_random_seed(5)
    model = ClassifierModel(build_encoder(_config()), 2, pooling="mean")
    build_and_call(model, SEQ)
    _randomise(model, 0)
    return [ServingModule(CLASSIFIER, model.encoder, model.head, VOCAB, SEQ, labels=["neg", "pos"],
                          width_multiple=m) for m in (1, WIDTH_MULTIPLE)]


@pytest.fixture(scope="module")
def discriminators():
    import keras

    keras.utils.set_random_seed(6)
    config = _config()
    encoder = build_encoder(config)
    head = DiscriminatorHead(config.hidden_size)
    ids = tf.ones([1, 8], tf.int32)
    head(encoder({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids}))
    _randomise(encoder, 1)
    _randomise(head, 2)
    return [ServingModule(DISCRIMINATOR, encoder, head, VOCAB, SEQ, width_multiple=m) for m in (1, WIDTH_MULTIPLE)]


def test_padded_width():
    assert [padded_width(w, 16, 40) for w in (1, 16, 17, 32, 33, 40)] == [16, 16, 32, 32, 40, 40]
    assert padded_width(50, 16, 40) == 50  # never below the input's own width
    assert padded_width(7, 1, 40) == 7
    assert int(padded_width(tf.constant(17), 16, 40)) == 32


def test_classifier_outputs_equal(classifiers):
    plain, bucketed = classifiers
    for batch in (TEXTS, [TEXTS[0]], [TEXTS[4]], [TEXTS[8]]):
        a, b = plain.serve(tf.constant(batch)), bucketed.serve(tf.constant(batch))
        np.testing.assert_allclose(b["logits"].numpy(), a["logits"].numpy(), atol=2e-5, rtol=1e-5)
        for key in ("label_id", "label", "truncated"):
            np.testing.assert_array_equal(b[key].numpy(), a[key].numpy())


def test_discriminator_outputs_equal_and_cut_back(discriminators):
    plain, bucketed = discriminators
    for batch in (TEXTS, [TEXTS[1]], [TEXTS[6]]):
        a, b = plain.serve(tf.constant(batch)), bucketed.serve(tf.constant(batch))
        width = int(a["input_mask"].shape[1])  # the longest row
        for key in ("replaced_logits", "replaced_probs", "tokens", "text_mask"):
            assert b[key].shape[1] == width, key
        for key in ("replaced_logits", "replaced_probs", "sentence_score", "max_replaced_prob"):
            np.testing.assert_allclose(b[key].numpy(), a[key].numpy(), atol=2e-5, rtol=1e-5)
        np.testing.assert_array_equal(b["tokens"].numpy(), a["tokens"].numpy())


def test_encoded_signature_equal(discriminators):
    plain, bucketed = discriminators
    ids = tf.constant([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]])
    mask = tf.cast(ids > 0, tf.int32)
    a = plain.serve_encoded(ids, mask, tf.zeros_like(ids))
    b = bucketed.serve_encoded(ids, mask, tf.zeros_like(ids))
    assert b["replaced_probs"].shape == (2, 5)
    np.testing.assert_allclose(b["replaced_probs"].numpy(), a["replaced_probs"].numpy(), atol=2e-5)


def _xla_calls(concrete):
    """Nodes of a traced function (and the functions it calls) that XLA compiles per input shape."""
    graph = concrete.graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    funcs = [f for f in graph.library.function if f.attr["_XlaMustCompile"].b]
    return [n.name for n in nodes if n.attr["_XlaMustCompile"].b] + [f.signature.name for f in funcs]


def test_serving_graph_has_no_per_shape_xla_compile(classifiers):
    _, bucketed = classifiers
    assert not _xla_calls(bucketed.serve.get_concrete_function())
    assert not _xla_calls(bucketed.serve_encoded.get_concrete_function())
    # The check does see the XLA loops where they are on (the opt-in; training's path).
    xla = ServingModule(CLASSIFIER, bucketed.encoder, bucketed.head, VOCAB, SEQ, labels=["neg", "pos"],
                        xla_loops=True)
    assert _xla_calls(xla.serve.get_concrete_function())


def test_xla_loops_and_plain_inference_agree(classifiers):
    plain, bucketed = classifiers
    xla = ServingModule(CLASSIFIER, bucketed.encoder, bucketed.head, VOCAB, SEQ, labels=["neg", "pos"],
                        xla_loops=True)
    a, b = bucketed.serve(tf.constant(TEXTS)), xla.serve(tf.constant(TEXTS))
    np.testing.assert_allclose(b["logits"].numpy(), a["logits"].numpy(), atol=2e-5, rtol=1e-5)


def test_padded_batch():
    expected = {1: 1, 2: 2, 3: 4, 5: 8, 8: 8, 9: 16, 17: 32, 32: 32, 33: 64, 64: 64, 65: 96, 100: 128}
    assert {n: padded_batch(n) for n in expected} == expected
    assert [int(padded_batch(tf.constant(n))) for n in expected] == list(expected.values())


def _jit_twin(module):
    return ServingModule(module.kind, module.encoder, module.head, VOCAB, SEQ, labels=module.labels,
                         jit_compile=True)


def test_jit_compile_opt_in_agrees_with_default(classifiers, discriminators):
    _, bucketed = classifiers
    jit = _jit_twin(bucketed)
    assert _xla_calls(jit.serve.get_concrete_function())  # the encoder really is compiled
    for batch in (TEXTS, TEXTS[:3], [TEXTS[8]]):  # 9 rows run as 16, 3 as 4, 1 as 1
        a, b = bucketed.serve(tf.constant(batch)), jit.serve(tf.constant(batch))
        assert b["logits"].shape == (len(batch), 2)
        np.testing.assert_allclose(b["logits"].numpy(), a["logits"].numpy(), atol=2e-5, rtol=1e-5)
        np.testing.assert_array_equal(b["label"].numpy(), a["label"].numpy())
    _, disc = discriminators
    jit_disc = _jit_twin(disc)
    for batch in (TEXTS[:5], [TEXTS[6]]):
        a, b = disc.serve(tf.constant(batch)), jit_disc.serve(tf.constant(batch))
        assert b["replaced_probs"].shape == a["replaced_probs"].shape
        np.testing.assert_allclose(b["replaced_probs"].numpy(), a["replaced_probs"].numpy(), atol=2e-5)
    ids = tf.constant([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0], [2, 9, 9, 3, 0]])
    mask = tf.cast(ids > 0, tf.int32)
    a = disc.serve_encoded(ids, mask, tf.zeros_like(ids))
    b = jit_disc.serve_encoded(ids, mask, tf.zeros_like(ids))
    np.testing.assert_allclose(b["replaced_probs"].numpy(), a["replaced_probs"].numpy(), atol=2e-5)


def test_jit_compile_saved_model_round_trip(classifiers, tmp_path):
    _, bucketed = classifiers
    path = _jit_twin(bucketed).save(str(tmp_path / "jit"))
    loaded = tf.saved_model.load(path).signatures["serving_default"]
    assert _xla_calls(loaded)  # the compile mark survives saving
    for batch in (TEXTS[:6], [TEXTS[2]]):
        a, b = bucketed.serve(tf.constant(batch)), loaded(text=tf.constant(batch))
        np.testing.assert_allclose(b["logits"].numpy(), a["logits"].numpy(), atol=2e-5, rtol=1e-5)
