"""The baselines a pre-trained encoder is compared with (scripts/study_lib/baselines.py)."""

import doctest

import numpy as np
import pytest

from scripts.study_lib import baselines
from scripts.study_lib.baselines import linear_probe, tfidf_logistic_regression, truncate_to_tokens

pytestmark = pytest.mark.large  # fits the baselines on real data: not in the fast tier


def _vocab(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "great", "bad", "un", "##bear",
              "##able", "."]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


def test_truncate_to_tokens_keeps_the_words_the_first_pieces_cover(tmp_path):
    vocab = _vocab(tmp_path)
    texts = ["The film was unbearable.", "great"]
    # "unbearable" is three pieces: four tokens end inside it, so its first piece is all of it kept.
    assert truncate_to_tokens(texts, vocab, 4) == ["the film was un", "great"]
    assert truncate_to_tokens(texts, vocab, 6) == ["the film was unbearable", "great"]
    assert truncate_to_tokens(texts, vocab, 100) == ["the film was unbearable .", "great"]


def test_tfidf_separates_classes_by_their_words_and_not_by_chance():
    rng = np.random.default_rng(0)
    filler = ["plot", "actor", "scene", "music", "story", "ending"]

    def review(word):
        return " ".join(list(rng.choice(filler, 5)) + [word])

    train = [review("wonderful") for _ in range(60)] + [review("awful") for _ in range(60)]
    labels = [1] * 60 + [0] * 60
    dev = [review("wonderful") for _ in range(10)] + [review("awful") for _ in range(10)]
    dev_labels = [1] * 10 + [0] * 10
    result = tfidf_logistic_regression(train, labels, dev, dev_labels, ngrams=1, l2_strengths=(1e-5, 1e-4),
                                       epochs=100)
    assert result["best"] == 1.0
    assert set(result["by_l2"]) == {"1e-05", "0.0001"}
    # With 1-2-grams the random filler pairs let it memorise rows too, yet the word still decides.
    assert tfidf_logistic_regression(train, labels, dev, dev_labels, l2_strengths=(1e-5,), epochs=100)["best"] >= 0.8
    # Labels that the word does not predict (alternating within each word's rows): the word's
    # held-out labels are then not learned.
    unrelated = [i % 2 for i in range(len(train))]
    noise = tfidf_logistic_regression(train, unrelated, dev, dev_labels, ngrams=1, l2_strengths=(1e-4,), epochs=100)
    assert noise["best"] <= 0.75


def test_linear_probe_reads_a_feature_that_carries_the_label():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 200)
    x = rng.normal(size=(200, 8))
    x[:, 3] += 3.0 * (2 * y - 1)  # one informative direction among noise
    result = linear_probe(x[:150], y[:150], x[150:], y[150:], l2_strengths=(1e-4,), epochs=100)
    assert result["best"] >= 0.95
    blind = linear_probe(np.delete(x, 3, axis=1)[:150], y[:150], np.delete(x, 3, axis=1)[150:], y[150:],
                         l2_strengths=(1e-4,), epochs=100)
    assert blind["best"] < 0.75


def test_the_docstring_example_runs():
    # Outside electra_tf, so tests/test_doctests.py does not find it.
    result = doctest.testmod(baselines, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
