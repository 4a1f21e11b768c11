"""Dynamic lengths in serving: the answers equal those of padding every text to max_seq_length.

The SavedModel pads each batch to its longest row, and `Predictor` batches texts
in order of length (`sort_by_length`, the default); both are checked here on
real IMDB reviews (their real length distribution) against the padded answers.
"""

import csv
import gzip
import os

import numpy as np
import pytest
import tensorflow as tf

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data")
IMDB = os.path.join(DATA, "imdb", "dev.tsv.gz")
VOCAB = os.path.join(DATA, "encoders", "all-MiniLM-L6-v2", "vocab.txt")
SEQ = 96

pytestmark = [pytest.mark.large,  # exports and serves a MiniLM-sized classifier: not in the fast tier
              pytest.mark.skipif(not (os.path.isfile(IMDB) and os.path.isfile(VOCAB)),
                                 reason="needs ../shared/data (IMDB reviews and the MiniLM vocab)")]


def _reviews(n):
    csv.field_size_limit(1 << 30)
    with gzip.open(IMDB, "rt", encoding="utf-8") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row["sentence"] for _, row in zip(range(n), rows)]


@pytest.fixture(scope="module")
def reviews():
    # Real reviews plus short ones, so that batches differ in width.
    texts = _reviews(30)
    return texts + [t[:80] for t in texts[:10]]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A small classifier on the real 30,522-piece uncased vocabulary, exported as a SavedModel."""
    import keras

    from electra_tf.config import ElectraConfig
    from electra_tf.export import export
    from electra_tf.models.model_folder import save_classifier
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    keras.utils.set_random_seed(3)
    config = ElectraConfig(vocab_size=30522, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, generator_hidden_size=0.5,
                           max_position_embeddings=128, max_seq_length=SEQ, model_size="tiny")
    model = ClassifierModel(build_encoder(config), 2)
    build_and_call(model, SEQ)
    rng = np.random.default_rng(0)
    for v in model.weights:  # weights that make the logits depend on every token
        v.assign(v + rng.normal(0, 0.2, v.shape).astype("float32"))
    seed_dir = str(tmp_path_factory.mktemp("clf") / "seed_1")
    save_classifier(seed_dir, model, config, VOCAB, ["negative", "positive"], "imdb", pair=False,
                    max_seq_length=SEQ)
    saved = export(seed_dir, str(tmp_path_factory.mktemp("sm") / "1"), kind="classifier")
    return seed_dir, saved


def _padded_logits(saved, texts):
    """Every text padded to max_seq_length, through the SavedModel's `encoded` signature."""
    from electra_tf.preprocessing import TextPreprocessor

    pre = TextPreprocessor(VOCAB, SEQ, do_lower_case=True)
    enc = pre(tf.constant(texts), pad_to_sequence_length=True)
    assert enc["input_ids"].shape[1] == SEQ
    fn = tf.saved_model.load(saved).signatures["encoded"]
    out = fn(input_ids=enc["input_ids"], input_mask=enc["input_mask"], segment_ids=enc["segment_ids"])
    return out["logits"].numpy(), enc["input_mask"].numpy().sum(1)


def test_saved_model_pads_to_the_longest_row_and_equals_the_padded_answers(classifier, reviews):
    _, saved = classifier
    padded, lengths = _padded_logits(saved, reviews)
    assert lengths.min() < SEQ // 2 and lengths.max() == SEQ  # the batches below are narrower than SEQ
    fn = tf.saved_model.load(saved).signatures["serving_default"]
    for start in range(0, len(reviews), 8):
        out = fn(text=tf.constant(reviews[start:start + 8]))
        np.testing.assert_allclose(out["logits"].numpy(), padded[start:start + 8], atol=2e-5, rtol=1e-5)
        np.testing.assert_array_equal(out["label_id"].numpy(), padded[start:start + 8].argmax(-1))


@pytest.mark.parametrize("source", ["saved_model", "seed_dir"])
def test_predictor_length_order_equals_input_order_and_padded(classifier, reviews, source):
    from electra_tf.predict import Predictor

    seed_dir, saved = classifier
    path = saved if source == "saved_model" else seed_dir
    padded, _ = _padded_logits(saved, reviews)
    sorted_ = Predictor(path, batch_size=8)
    assert sorted_.sort_by_length
    order = sorted_._order(reviews, None)
    assert list(order) != list(range(len(reviews)))  # the batches really are regrouped
    in_order = Predictor(path, batch_size=8, sort_by_length=False)
    a, b = sorted_.predict_arrays(reviews), in_order.predict_arrays(reviews)
    expected = tf.nn.softmax(padded).numpy()
    for got in (a, b):
        np.testing.assert_allclose(got["probabilities"], expected, atol=2e-6)
        np.testing.assert_array_equal(got["label_id"], padded.argmax(-1))
    np.testing.assert_array_equal(a["truncated"], b["truncated"])
    assert a["truncated"].any() and not a["truncated"].all()
    labels = [p.label for p in sorted_.predict(reviews)]
    assert labels == [["negative", "positive"][i] for i in padded.argmax(-1)]


def test_predictor_order_is_a_permutation_that_keeps_small_calls(classifier):
    from electra_tf.predict import Predictor

    _, saved = classifier
    p = Predictor(saved, batch_size=4)
    texts = ["a much longer text than the others here", "short", "mid length one", "x", "tiny", "ab c"]
    order = p._order(texts, None)
    assert sorted(order) == list(range(len(texts)))
    assert [len(texts[i]) for i in order] == sorted(len(t) for t in texts)
    assert list(p._order(texts[:4], None)) == [0, 1, 2, 3]  # one batch: nothing to regroup
    out = p.predict_arrays(texts)
    assert out["label_id"].shape == (6,)


def test_bf16_is_opt_in_and_close_to_float32(classifier, reviews):
    from electra_tf.predict import PredictError, Predictor

    seed_dir, saved = classifier
    fp32 = Predictor(seed_dir, batch_size=16).predict_arrays(reviews)
    bf16 = Predictor(seed_dir, batch_size=16, precision="bf16").predict_arrays(reviews)
    np.testing.assert_allclose(bf16["probabilities"], fp32["probabilities"], atol=0.1)
    clear = np.abs(fp32["probabilities"][:, 1] - 0.5) > 0.1
    np.testing.assert_array_equal(bf16["label_id"][clear], fp32["label_id"][clear])
    with pytest.raises(PredictError, match="precision"):
        Predictor(saved, precision="bf16")


def test_cli_precision_flags_and_chunked_length_order(classifier, reviews, tmp_path):
    """`predict` reads chunks of 16 batches (sorted by length inside, written in file order) and
    `--precision bf16` is opt-in on `predict` and `export`; bf16 answers stay near float32."""
    import json
    import subprocess
    import sys

    from electra_tf.predict import Predictor

    seed_dir, _ = classifier
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    src = tmp_path / "reviews.csv"
    with open(src, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text"])
        writer.writerows([t] for t in reviews)
    out = {}
    for precision in ("none", "bf16"):
        target = tmp_path / f"{precision}.jsonl"
        proc = subprocess.run([sys.executable, "-m", "electra_tf.predict", "--model_dir", seed_dir, "--input_file",
                               str(src), "--output_file", str(target), "--batch_size", "2", "--precision", precision,
                               "--noprogress"], capture_output=True, text=True, cwd=root, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[precision] = [json.loads(line) for line in target.read_text().splitlines()]
    want = Predictor(seed_dir, batch_size=2, sort_by_length=False).predict_arrays(reviews)
    got = np.array([[row["probabilities"][n] for n in ("negative", "positive")] for row in out["none"]])
    np.testing.assert_allclose(got, want["probabilities"], atol=1e-5)  # file order kept
    bf16 = np.array([[row["probabilities"][n] for n in ("negative", "positive")] for row in out["bf16"]])
    np.testing.assert_allclose(bf16, got, atol=0.1)

    saved = tmp_path / "bf16_model"
    proc = subprocess.run([sys.executable, "-m", "electra_tf.export", "--model_dir", seed_dir, "--kind",
                           "classifier", "--output_dir", str(saved), "--precision", "bf16"],
                          capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    served = Predictor(str(saved)).predict_arrays(reviews)
    np.testing.assert_allclose(served["probabilities"], got, atol=0.1)
