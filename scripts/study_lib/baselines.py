"""Baselines a pre-trained encoder has to beat: TF-IDF + logistic regression, and linear probes.

A pre-trained encoder is worth its cost only where it beats what a user would
pick without one. The studies (scripts/domain_study.py, scripts/adaptation_study.py)
put two yardsticks beside every fine-tuned encoder, both plain Keras (no new dependency):

- `tfidf_logistic_regression`: word 1-2-gram TF-IDF (Keras `TextVectorization`,
  `output_mode="tf_idf"`) and an L2-regularised linear layer, the classic text
  classification baseline.
- `linear_probe`: the same linear layer on frozen features (`encoder_features`:
  the embedding layer's and the last block's mean-pooled vectors, and the last
  block's [CLS] vector), which says what an encoder holds before fine-tuning
  moves it.

Each returns the best dev accuracy over a few L2 strengths (and all of them),
so a baseline gets its best setting, as a tuned user baseline would.

Example:

>>> acc = tfidf_logistic_regression(["good film", "bad film"] * 8, [1, 0] * 8,
...                                 ["good", "bad"], [1, 0], l2_strengths=(1e-4,), epochs=50)
>>> acc["best"]
1.0
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

L2_STRENGTHS = (1e-6, 1e-5, 1e-4)


def truncate_to_tokens(texts: Sequence[str], vocab_file: str, num_tokens: int,
                       lower_case: bool = True) -> List[str]:
    """The words of each text that its first `num_tokens` WordPiece tokens cover.

    Lets a word-level baseline see the same text an encoder sees at a sequence
    length of `num_tokens` + 2 ([CLS] and [SEP]).
    """
    from electra_tf.data.normalization import TextNormalization, read_vocab_record  # pylint: disable=import-outside-toplevel
    from electra_tf.data.tokenizer import WordPieceTokenizer  # pylint: disable=import-outside-toplevel

    # The normalisation build_vocab recorded beside the vocabulary; none (a vocabulary of the first
    # releases, as the committed studies used): theirs.
    normalization = read_vocab_record(vocab_file) or TextNormalization.legacy(lower_case)
    tok = WordPieceTokenizer(vocab_file, normalization=normalization)
    flat, splits = tok.tokenize_batch(list(texts))
    pieces = tok.ids_to_tokens(flat.tolist())
    out = []
    for a, b in zip(splits[:-1], splits[1:]):
        words: List[str] = []
        for piece in pieces[a:min(b, a + num_tokens)]:
            if piece.startswith("##") and words:
                words[-1] += piece[2:]
            else:
                words.append(piece)
        out.append(" ".join(words))
    return out


def _fit_linear(x_train, y_train, x_eval, y_eval, l2_strengths, epochs, seed) -> Dict[str, object]:
    """Softmax regression with each L2 strength; dev accuracy of each and the best."""
    import keras  # pylint: disable=import-outside-toplevel

    y_train = np.asarray(y_train, dtype="int64")
    y_eval = np.asarray(y_eval, dtype="int64")
    num_classes = int(max(y_train.max(), y_eval.max())) + 1
    by_l2 = {}
    for l2 in l2_strengths:
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([
            keras.Input((x_train.shape[1],)),
            keras.layers.Dense(num_classes, kernel_regularizer=keras.regularizers.L2(l2)),
        ])
        model.compile(keras.optimizers.Adam(1e-2),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        # Full-batch steps: a convex problem, so the optimum, not the step schedule, is what is compared.
        model.fit(x_train, y_train, batch_size=len(y_train), epochs=epochs, shuffle=False, verbose=0)
        pred = np.argmax(model.predict(x_eval, batch_size=256, verbose=0), axis=-1)
        by_l2[f"{l2:g}"] = float(np.mean(pred == y_eval))
    return {"best": max(by_l2.values()), "by_l2": by_l2}


def _unit_rows(x: np.ndarray) -> np.ndarray:
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-9)


def tfidf_logistic_regression(train_texts: Sequence[str], train_labels: Sequence[int],
                              eval_texts: Sequence[str], eval_labels: Sequence[int], *,
                              ngrams: int = 2, max_tokens: int = 50000,
                              l2_strengths: Sequence[float] = L2_STRENGTHS, epochs: int = 150,
                              seed: int = 1) -> Dict[str, object]:
    """TF-IDF (word 1..`ngrams`-grams, vocabulary from the training texts) + logistic regression.

    Rows are L2-normalised (as scikit-learn's TfidfVectorizer does); without it
    long reviews dominate and the fit is unstable.

    Args:
      train_texts, train_labels: the labelled rows (labels 0..C-1).
      eval_texts, eval_labels: the rows scored.
      ngrams: longest n-gram.
      max_tokens: TF-IDF vocabulary size (most frequent n-grams).
      l2_strengths: L2 penalties tried; the best dev accuracy is reported.
      epochs: full-batch optimizer steps.
      seed: weight initialisation and shuffling.

    Returns:
      {"best": accuracy, "by_l2": {l2: accuracy}}.
    """
    import keras  # pylint: disable=import-outside-toplevel

    vectorizer = keras.layers.TextVectorization(max_tokens=max_tokens, ngrams=ngrams,
                                                output_mode="tf_idf")
    vectorizer.adapt(np.asarray(train_texts, dtype=object))
    x_train = _unit_rows(np.array(vectorizer(np.asarray(train_texts, dtype=object))))
    x_eval = _unit_rows(np.array(vectorizer(np.asarray(eval_texts, dtype=object))))
    return _fit_linear(x_train, train_labels, x_eval, eval_labels, l2_strengths, epochs, seed)


def encoder_features(model_dir: Optional[str], texts: Sequence[str], sequence_length: int, *,
                     config=None, vocab_file: Optional[str] = None, seed: int = 1,
                     batch_size: int = 64) -> Dict[str, np.ndarray]:
    """Frozen features of an encoder: mean-pooled embedding output, mean-pooled and [CLS] last block.

    Args:
      model_dir: a pre-trained model directory (config.json, vocab.txt, weights), or
        None for a randomly initialised encoder of `config` (then pass `vocab_file`).
      texts: the texts to encode.
      sequence_length: tokens per text, [CLS] and [SEP] included.
      config: the `ElectraConfig` of a random encoder.
      vocab_file: its vocabulary.
      seed: the random encoder's initialisation.
      batch_size: texts per forward pass.
    """
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from electra_tf.models import build_encoder  # pylint: disable=import-outside-toplevel
    from electra_tf.models.saving import load_encoder  # pylint: disable=import-outside-toplevel
    from electra_tf.preprocessing import TextPreprocessor  # pylint: disable=import-outside-toplevel

    if model_dir is not None:
        encoder, config = load_encoder(model_dir)
        vocab_file = f"{model_dir}/vocab.txt"
    else:
        keras.utils.set_random_seed(seed)
        encoder = build_encoder(config)
        encoder.build({k: (None, sequence_length) for k in ("input_ids", "input_mask", "segment_ids")})
    pre = TextPreprocessor(vocab_file, sequence_length, do_lower_case=config.do_lower_case)
    parts: Dict[str, List[np.ndarray]] = {"embeddings_mean": [], "last_mean": [], "last_cls": []}
    for i in range(0, len(texts), batch_size):
        inputs = pre(tf.constant(list(texts[i:i + batch_size])))
        mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, None]
        emb = encoder.embeddings(inputs["input_ids"], inputs["segment_ids"], training=False)
        if encoder.embeddings_projection is not None:
            emb = encoder.embeddings_projection(emb)
        last = encoder(inputs, training=False)
        count = tf.reduce_sum(mask, axis=1)
        parts["embeddings_mean"].append((tf.reduce_sum(emb * mask, axis=1) / count).numpy())
        parts["last_mean"].append((tf.reduce_sum(last * mask, axis=1) / count).numpy())
        parts["last_cls"].append(last[:, 0].numpy())
    return {k: np.concatenate(v) for k, v in parts.items()}


def linear_probe(train_features: np.ndarray, train_labels: Sequence[int], eval_features: np.ndarray,
                 eval_labels: Sequence[int], *, l2_strengths: Sequence[float] = L2_STRENGTHS,
                 epochs: int = 300, seed: int = 1) -> Dict[str, object]:
    """Logistic regression on frozen, standardised features (statistics of the training rows)."""
    mean = train_features.mean(axis=0)
    std = train_features.std(axis=0) + 1e-6
    return _fit_linear((train_features - mean) / std, train_labels, (eval_features - mean) / std,
                       eval_labels, l2_strengths, epochs, seed)
