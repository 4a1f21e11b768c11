"""Builds a `ServingModule` from a model directory, and the classifier directory format.

Discriminator: our model directory (electra_tf/models/saving.py layout).

Classifier: a directory written by `save_classifier`:

    config.json              ElectraConfig of the encoder
    vocab.txt                the WordPiece vocabulary
    classifier.weights.h5    the whole `ClassifierModel` (encoder + task head)
    classifier.json          task, labels, regression, pair, num_outputs,
                             two_layer_head, max_seq_length, do_lower_case
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Optional, Sequence

from electra_tf.export.serving import CLASSIFIER, DISCRIMINATOR, ServingModule

CLASSIFIER_FILE = "classifier.json"
CLASSIFIER_WEIGHTS = "classifier.weights.h5"


class ExportError(ValueError):
    """A model directory that cannot be exported."""


def save_classifier(output_dir: str, model, config, vocab_file: str, labels: Sequence[str], task: str,
                    pair: bool, max_seq_length: int, regression: bool = False,
                    two_layer_head: bool = False, pooling: str = "cls") -> str:
    """Writes a fine-tuned `ClassifierModel` so `export --kind classifier` can serve it.

    Args:
      output_dir: directory to write (e.g. a fine-tuning run's seed_<n>/).
      model: the trained `ClassifierModel` (built).
      config: its `ElectraConfig`.
      vocab_file: the vocabulary it was fine-tuned with.
      labels: class names in logit order (empty for regression).
      task: task name (informative).
      pair: the task takes sentence pairs.
      max_seq_length: the fine-tuning sequence length.
      regression: one output score instead of classes.
      two_layer_head: the head was built with two_layer_head=True.
      pooling: the head's pooling ("cls" or "mean").
    """
    from keras.src.saving import saving_lib

    os.makedirs(output_dir, exist_ok=True)
    config.to_json(os.path.join(output_dir, "config.json"))
    target = os.path.join(output_dir, "vocab.txt")
    if os.path.abspath(vocab_file) != os.path.abspath(target):
        shutil.copyfile(vocab_file, target)
    tmp = os.path.join(output_dir, CLASSIFIER_WEIGHTS + ".tmp.weights.h5")
    saving_lib.save_weights_only(model, tmp)
    os.replace(tmp, os.path.join(output_dir, CLASSIFIER_WEIGHTS))
    meta = {"task": task, "labels": list(labels), "regression": bool(regression), "pair": bool(pair),
            "num_outputs": 1 if regression else len(labels), "two_layer_head": bool(two_layer_head),
            "pooling": pooling,
            "max_seq_length": int(max_seq_length), "do_lower_case": bool(config.do_lower_case)}
    with open(os.path.join(output_dir, CLASSIFIER_FILE), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    return output_dir


def _vocab(model_dir):
    from electra_tf.data.vocab import load_vocab

    path = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(path):
        raise ExportError(f"{model_dir} has no vocab.txt, which in-graph tokenization needs; copy the "
                          f"vocab.txt the model was trained with into it")
    return load_vocab(path)


def discriminator_module(model_dir: str, max_seq_length: Optional[int] = None,
                         allow_untrained_head: bool = False) -> ServingModule:
    from electra_tf.convert.common import absent_parts
    from electra_tf.models.saving import load_discriminator

    absent = absent_parts(model_dir)
    if "discriminator_head" in absent and not allow_untrained_head:
        raise ExportError(f"{model_dir} was converted from a checkpoint without the discriminator head "
                          f"(conversion.json); its replaced-token probabilities would be random. Convert a "
                          f"checkpoint that has discriminator_predictions/, or pass --allow_untrained_head")
    encoder, head, config = load_discriminator(model_dir)
    seq = max_seq_length or config.max_seq_length
    if seq > config.max_position_embeddings:
        raise ExportError(f"max_seq_length {seq} exceeds max_position_embeddings {config.max_position_embeddings}")
    return ServingModule(DISCRIMINATOR, encoder, head, _vocab(model_dir), seq, config.do_lower_case)


def load_classifier(model_dir: str):
    """Returns (ClassifierModel, ElectraConfig, classifier.json dict)."""
    from keras.src.saving import saving_lib

    from electra_tf.config import ElectraConfig
    from electra_tf.finetune.tasks import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    meta_path = os.path.join(model_dir, CLASSIFIER_FILE)
    weights = os.path.join(model_dir, CLASSIFIER_WEIGHTS)
    for path in (meta_path, weights, os.path.join(model_dir, "config.json")):
        if not os.path.isfile(path):
            raise ExportError(f"{path} is missing; a classifier directory is written by "
                              f"electra_tf.export.save_classifier (config.json, vocab.txt, {CLASSIFIER_WEIGHTS}, "
                              f"{CLASSIFIER_FILE})")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    config = ElectraConfig.from_json(os.path.join(model_dir, "config.json"))
    model = ClassifierModel(build_encoder(config), meta["num_outputs"], meta["regression"],
                            config.hidden_dropout_prob, config.initializer_range, meta["two_layer_head"],
                            pooling=meta.get("pooling", "cls"))
    build_and_call(model, meta["max_seq_length"])
    try:
        saving_lib.load_weights_only(model, weights)
    except ValueError as e:
        raise ExportError(f"{weights} does not fit config.json / {CLASSIFIER_FILE} ({str(e).splitlines()[0]})") from None
    return model, config, meta


def classifier_module(model_dir: str, max_seq_length: Optional[int] = None) -> ServingModule:
    model, config, meta = load_classifier(model_dir)
    seq = max_seq_length or meta["max_seq_length"]
    return ServingModule(CLASSIFIER, model.encoder, model.head, _vocab(model_dir), seq,
                         meta.get("do_lower_case", config.do_lower_case), labels=meta["labels"],
                         pair=meta["pair"], regression=meta["regression"])


def build_module(model_dir: str, kind: str, max_seq_length: Optional[int] = None,
                 allow_untrained_head: bool = False) -> ServingModule:
    if not os.path.isdir(model_dir):
        raise ExportError(f"--model_dir {model_dir!r} is not a directory; pass a model directory written by "
                          f"electra_tf (pretrain, convert) or a fine-tuning seed_<n>/ directory")
    from electra_tf.paths import resolve_model_dir

    # A pre-training run directory: its model is in <run>/pretrained/.
    model_dir = resolve_model_dir(model_dir, "--model_dir", lambda line: print(line, file=sys.stderr, flush=True))
    if kind == DISCRIMINATOR:
        return discriminator_module(model_dir, max_seq_length, allow_untrained_head)
    if kind == CLASSIFIER:
        return classifier_module(model_dir, max_seq_length)
    raise ExportError(f"--kind must be discriminator or classifier, not {kind!r}")
