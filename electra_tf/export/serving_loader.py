"""Builds a `ServingModule` from a model directory.

Discriminator: our model directory (electra_tf/models/model_folder.py layout).

Classifier: a directory written by fine-tuning, `save_classifier`
(electra_tf/models/model_folder.py describes it). Its text normalisation
comes from classifier.json, i.e. from the tokenizer fine-tuning used.
`load_classifier` builds its `ClassifierModel` here, raising `ExportError`,
the class `electra_tf.export.load_classifier`'s callers catch.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Optional

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import load_vocab
from electra_tf.errors import ElectraError, error_line
from electra_tf.export.serving import CLASSIFIER, DISCRIMINATOR, ServingModule
from electra_tf.models.classifier_model import ClassifierModel, build_and_call
from electra_tf.models import build_encoder
from electra_tf.models.model_folder import (CLASSIFIER_FILE, CLASSIFIER_WEIGHTS, CONFIG_FILE, VOCAB_FILE, absent_parts,
                                            check_classifier_dir, classifier_normalization, read_classifier_meta,
                                            resolve_model_dir)
from electra_tf.models.saving import load_discriminator
from electra_tf.keras_compat import load_weights_only


class ExportError(ElectraError, ValueError):
    """A model directory that cannot be exported."""


# Serving precisions: "bf16" runs the encoder's matmuls in bfloat16 (Keras' mixed_bfloat16:
# float32 variables, LayerNorm and softmax statistics; outputs cast back to float32). It is
# opt-in: faster on CPUs with AVX512_BF16 / AMX, but its logits differ from float32 by up to
# a few 1e-1 (docs/performance.md).
SERVING_PRECISIONS = {"none": "float32", "bf16": "mixed_bfloat16"}


@contextlib.contextmanager
def serving_precision(precision: Optional[str]):
    """Builds the Keras layers inside under `precision`'s dtype policy (None / "none": float32)."""
    if precision in (None, "none"):
        yield
        return
    if precision not in SERVING_PRECISIONS:
        raise ExportError(f"precision={precision!r}: use one of {', '.join(SERVING_PRECISIONS)}")
    import keras

    old = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(SERVING_PRECISIONS[precision])
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(old)


def _vocab(model_dir):
    path = os.path.join(model_dir, VOCAB_FILE)
    if not os.path.isfile(path):
        raise ExportError(f"{model_dir} has no {VOCAB_FILE}, which in-graph tokenization needs; copy the "
                          f"{VOCAB_FILE} the model was trained with into it")
    return load_vocab(path)


def discriminator_module(model_dir: str, max_seq_length: Optional[int] = None,
                         allow_untrained_head: bool = False, precision: Optional[str] = None,
                         jit_compile: bool = False, freeze_weights: bool = False) -> ServingModule:
    absent = absent_parts(model_dir)
    if "discriminator_head" in absent and not allow_untrained_head:
        raise ExportError(f"{model_dir} was converted from a checkpoint without the discriminator head "
                          f"(conversion.json); its replaced-token probabilities would be random. Convert a "
                          f"checkpoint that has discriminator_predictions/, or pass --allow_untrained_head")
    with serving_precision(precision):
        encoder, head, config = load_discriminator(model_dir)
    seq = max_seq_length or config.max_seq_length
    if seq > config.max_position_embeddings:
        raise ExportError(f"max_seq_length {seq} exceeds max_position_embeddings {config.max_position_embeddings}")
    return ServingModule(DISCRIMINATOR, encoder, head, _vocab(model_dir), seq, config.normalization,
                         jit_compile=jit_compile, freeze_weights=freeze_weights)


def load_classifier(model_dir: str):
    """Returns (ClassifierModel, ElectraConfig, classifier.json dict)."""
    check_classifier_dir(model_dir, ExportError)
    weights = os.path.join(model_dir, CLASSIFIER_WEIGHTS)
    meta = read_classifier_meta(model_dir)
    config = ElectraConfig.from_json(os.path.join(model_dir, CONFIG_FILE))
    model = ClassifierModel(build_encoder(config), meta["num_outputs"], meta["regression"],
                            config.hidden_dropout_prob, config.initializer_range, meta["two_layer_head"],
                            pooling=meta.get("pooling", "cls"))
    build_and_call(model, meta["max_seq_length"])
    try:
        load_weights_only(model, weights)
    except (ValueError, OSError) as e:
        raise ExportError(f"{weights} does not fit {CONFIG_FILE} / {CLASSIFIER_FILE} ({error_line(e)})") from None
    return model, config, meta


def classifier_module(model_dir: str, max_seq_length: Optional[int] = None,
                      precision: Optional[str] = None, jit_compile: bool = False,
                      freeze_weights: bool = False) -> ServingModule:
    """The serving graph of a fine-tuning seed directory; `precision` "bf16", `jit_compile` and
    `freeze_weights` (`ServingModule`) are opt-in."""
    with serving_precision(precision):
        model, config, meta = load_classifier(model_dir)
    seq = max_seq_length or meta["max_seq_length"]
    return ServingModule(CLASSIFIER, model.encoder, model.head, _vocab(model_dir), seq,
                         classifier_normalization(meta, config, os.path.join(model_dir, CLASSIFIER_FILE)),
                         labels=meta["labels"],
                         pair=meta["pair"], regression=meta["regression"], metadata=meta, jit_compile=jit_compile,
                         freeze_weights=freeze_weights)


def build_module(model_dir: str, kind: str, max_seq_length: Optional[int] = None,
                 allow_untrained_head: bool = False, precision: Optional[str] = None,
                 jit_compile: bool = False, freeze_weights: bool = False) -> ServingModule:
    if not os.path.isdir(model_dir):
        raise ExportError(f"--model_dir {model_dir!r} is not a directory; pass a model directory written by "
                          f"electra_tf (pretrain, convert) or a fine-tuning seed_<n>/ directory")
    # A pre-training run directory: its model is in <run>/pretrained/.
    model_dir = resolve_model_dir(model_dir, "--model_dir", lambda line: print(line, file=sys.stderr, flush=True))
    if kind == DISCRIMINATOR:
        return discriminator_module(model_dir, max_seq_length, allow_untrained_head, precision, jit_compile,
                                    freeze_weights)
    if kind == CLASSIFIER:
        return classifier_module(model_dir, max_seq_length, precision, jit_compile, freeze_weights)
    raise ExportError(f"--kind must be discriminator or classifier, not {kind!r}")
