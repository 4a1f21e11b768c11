"""One loader for every model directory the Python API takes.

`locate(path)` accepts what `finetune --init` accepts (a pre-training run
directory, its `pretrained/` model, a converted model directory) and a
fine-tuned `seed_<n>/` directory (or a directory `ElectraClassifier.save`
wrote), and says what is in it; `load_encoder(path)` returns the pre-trained
(or fine-tuned) encoder with its weights. The files are found and read by
the model folder's module (`electra_tf.models.model_folder`), as `finetune
--init` finds them; this module adds the API's refusals (an export, a missing
path) and its error class.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Optional, Tuple

from electra_tf.config import ElectraConfig
from electra_tf.data.normalization import TextNormalization
from electra_tf.errors import ElectraError
from electra_tf.export.serving_loader import load_classifier
from electra_tf.export.tflite import IDS_FILE, METADATA_FILE as LITERT_METADATA, TEXT_FILE
from electra_tf.models.classifier_model import build_and_call
from electra_tf.models import build_encoder
from electra_tf.models.model_folder import (CLASSIFIER_FILE, CLASSIFIER_WEIGHTS, CONFIG_FILE, VOCAB_FILE,
                                            classifier_normalization, find_init_files, is_classifier_dir,
                                            read_classifier_meta, resolve_model_dir)
from electra_tf.models.saving import load_encoder_weights

log = logging.getLogger(__name__)


class ApiError(ElectraError, ValueError):
    """A path or argument the Python API cannot use."""


@dataclasses.dataclass
class Located:
    """What a model directory holds.

    Attributes:
      model_dir: the directory with the model files (a run's pretrained/).
      config: its ElectraConfig.
      vocab: its vocab.txt (None when absent).
      weights: the encoder weights (pre-trained) or the classifier weights (fine-tuned).
      meta: classifier.json of a fine-tuned directory, None for a pre-trained one.
    """
    model_dir: str
    config: ElectraConfig
    vocab: Optional[str]
    weights: str
    meta: Optional[dict]

    @property
    def fine_tuned(self) -> bool:
        return self.meta is not None

    @property
    def normalization(self) -> TextNormalization:
        """The text normalisation the model was trained (fine-tuned) with."""
        if self.meta is not None:
            return classifier_normalization(self.meta, self.config, os.path.join(self.model_dir, CLASSIFIER_FILE))
        return self.config.normalization

    @property
    def do_lower_case(self) -> bool:
        return self.normalization.lower_case


def _is_litert_export(path: str) -> bool:
    """A .tflite file, or a folder `export --format tflite` wrote (its metadata beside the file, no classifier)."""
    if path.endswith(".tflite"):
        return True
    return (os.path.isfile(os.path.join(path, LITERT_METADATA)) and not is_classifier_dir(path)
            and any(os.path.isfile(os.path.join(path, name)) for name in (TEXT_FILE, IDS_FILE)))


def locate(path: str) -> Located:
    """Finds the config, vocabulary and weights of any model directory the API takes.

    Args:
      path: a pre-training run directory, its pretrained/ directory, a
        converted model directory, or a fine-tuned seed_<n>/ directory.

    Raises:
      ApiError: a path that does not exist, a SavedModel, or a directory
        without model files (one line naming the fix).
    """
    if _is_litert_export(path):
        raise ApiError(f"{path} is a LiteRT export, which serves but cannot be trained further; run it with "
                       f"electra_tf.predict.Predictor (or python -m electra_tf.predict), or pass the model directory "
                       f"it was exported from")
    if not os.path.isdir(path):
        raise ApiError(f"{path} does not exist or is not a directory; pass a pre-training run directory, its "
                       f"pretrained/ model, a converted model directory or a fine-tuned seed_<n>/ directory")
    model_dir = resolve_model_dir(path, "from_pretrained", log.info)
    if os.path.isfile(os.path.join(model_dir, "saved_model.pb")):
        raise ApiError(f"{path} is an exported SavedModel, which serves but cannot be trained further; load it with "
                       f"electra_tf.predict.Predictor, or pass the model directory it was exported from")
    vocab = os.path.join(model_dir, VOCAB_FILE)
    vocab = vocab if os.path.isfile(vocab) else None
    if is_classifier_dir(model_dir):
        meta = read_classifier_meta(model_dir)
        config = ElectraConfig.from_json(os.path.join(model_dir, CONFIG_FILE))
        return Located(model_dir, config, vocab, os.path.join(model_dir, CLASSIFIER_WEIGHTS), meta)
    try:
        weights, config_path, vocab_path = find_init_files(model_dir, None, None)
    except ElectraError as e:
        raise ApiError(str(e).replace("--init ", "", 1)) from None
    return Located(model_dir, ElectraConfig.from_json(config_path), vocab_path, weights, None)


def load_encoder(path: str) -> Tuple[object, ElectraConfig]:
    """The encoder of any model directory, weights loaded: (ElectraEncoder, ElectraConfig).

    A fine-tuned directory gives its fine-tuned encoder (without the head).

    Args:
      path: see `locate`.
    """
    found = locate(path)
    if found.fine_tuned:
        model, config, _ = load_classifier(found.model_dir)
        return model.encoder, config
    encoder = build_encoder(found.config)
    build_and_call(encoder, 2)
    load_encoder_weights(encoder, found.weights)
    return encoder, found.config

