"""ELECTRA as an error / disfluency detector, from Python.

The same graph as the exported SavedModel's `serving_default` (one
`ServingModule`), so scores here and from TF Serving agree.

Example:

>>> from electra_tf.scoring import Scorer
>>> scorer = Scorer("models/small")                      # doctest: +SKIP
>>> [s.sentence_score for s in scorer.score(["the cat sat", "the cat sad"])]  # doctest: +SKIP
[0.04, 0.31]
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import List, Optional, Sequence

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of a SavedModel's tokenizer)

from electra_tf.config import ElectraConfig
from electra_tf.export.serving_loader import discriminator_module
from electra_tf.models.model_folder import CONFIG_FILE, ModelDirError, is_classifier_dir, resolve_model_dir
from electra_tf.preprocessing import text_list


# What Scorer says when it is given a fine-tuned classifier (a seed_<n>/ directory or its SavedModel).
CLASSIFIER_HINT = ("Scorer takes a pre-trained discriminator; for a classifier's labels and probabilities use "
                   "electra_tf.predict.Predictor(path).predict(texts) or python -m electra_tf.predict")


@dataclasses.dataclass
class TokenScores:
    """Scores of one text.

    Attributes:
      tokens: the word pieces of the text ([CLS]/[SEP] excluded), after truncation.
      probabilities: P(replaced) of each piece, same length as `tokens`.
      sentence_score: mean of `probabilities` (0.0 for an empty text).
      truncated: the text was longer than max_seq_length - 2 pieces.
      energies: for a model pre-trained with objective=electric, the energy
        E(x)_t of each piece (the head's logit; higher = less plausible in
        context), same length as `tokens`; None for other models.
    """
    tokens: List[str]
    probabilities: List[float]
    sentence_score: float
    truncated: bool
    energies: Optional[List[float]] = None


class Scorer:
    """Per-token "replaced" probabilities from a discriminator.

    Args:
      model_dir: our model directory, or an exported SavedModel directory
        (one with saved_model.pb; then only TensorFlow + tensorflow-text run).
      max_seq_length: pieces per text including [CLS]/[SEP] (model dirs only;
        default: the config's).
      batch_size: texts per call.
    """

    def __init__(self, model_dir: str, max_seq_length: Optional[int] = None, batch_size: int = 64):
        self.batch_size = int(batch_size)
        if not os.path.isdir(model_dir):
            what = "is not a directory" if os.path.exists(model_dir) else "does not exist"
            raise ModelDirError(f"{model_dir} {what}; pass a model directory written by electra_tf (pretrain, "
                                f"convert), a pre-training run directory or an exported SavedModel directory")
        # A pre-training run directory: its model is in <run>/pretrained/.
        model_dir = resolve_model_dir(model_dir, "Scorer", logging.getLogger(__name__).info)
        if is_classifier_dir(model_dir):
            raise ModelDirError(f"{model_dir} is a fine-tuned classifier; {CLASSIFIER_HINT}")
        # ELECTRIC's head output is an energy: report it next to the probabilities
        # (config.json says which objective trained the model, when it is there).
        config_path = os.path.join(model_dir, CONFIG_FILE)
        self.energies = False
        if os.path.isfile(config_path):
            self.energies = ElectraConfig.from_json(config_path).objective == "electric"
        if os.path.isfile(os.path.join(model_dir, "saved_model.pb")):
            self._fn = tf.saved_model.load(model_dir).signatures["serving_default"]
            if "sentence_score" not in self._fn.structured_outputs:
                raise ModelDirError(f"{model_dir} is a classifier SavedModel (no sentence_score output); "
                                    f"{CLASSIFIER_HINT}")
            self._call = lambda texts: self._fn(text=texts)
        else:
            # Text is encoded in the module's graph by its TextPreprocessor
            # (electra_tf.preprocessing), as in the exported SavedModel.
            self.module = discriminator_module(model_dir, max_seq_length)
            self._call = lambda texts: self.module.serve(texts)

    def _raw(self, texts: Sequence[str]) -> dict:
        return {k: v.numpy() for k, v in self._call(tf.constant(list(texts), tf.string)).items()}

    def score(self, texts: Sequence[str]) -> List[TokenScores]:
        """Scores each text; see `TokenScores`."""
        texts = text_list(texts, "score")
        out: List[TokenScores] = []
        for start in range(0, len(texts), self.batch_size):
            raw = self._raw(texts[start:start + self.batch_size])
            for i in range(len(raw["sentence_score"])):
                keep = raw["text_mask"][i].astype(bool)
                out.append(TokenScores(
                    tokens=[t.decode("utf-8") for t in raw["tokens"][i][keep]],
                    probabilities=[float(p) for p in raw["replaced_probs"][i][keep]],
                    sentence_score=float(raw["sentence_score"][i]),
                    truncated=bool(raw["truncated"][i]),
                    # The serving outputs' replaced logits are E(x)_t for ELECTRIC.
                    energies=([float(e) for e in raw["replaced_logits"][i][keep]]
                              if self.energies else None)))
        return out


def score(texts: Sequence[str], model_dir: str, max_seq_length: Optional[int] = None) -> List[List[float]]:
    """Per-token replaced probabilities of each text (word pieces, [CLS]/[SEP] excluded).

    Builds a `Scorer` on every call; keep a `Scorer` to score repeatedly.
    """
    return [s.probabilities for s in Scorer(model_dir, max_seq_length).score(texts)]


__all__ = ["Scorer", "TokenScores", "score"]
