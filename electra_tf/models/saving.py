"""Writing and loading the weights of a pre-trained model folder, shared by every tool.

The folder's file names, and reading its config, vocabulary and conversion
record, are `electra_tf.models.model_folder`. A model directory (what
pre-training writes at the end, what `convert` writes, what `finetune --init`
and `export` read):

    config.json                    ElectraConfig of the whole model
    vocab.txt                      the WordPiece vocabulary (if known)
    discriminator.weights.h5       discriminator encoder (its own copy of the embeddings)
    discriminator_head.weights.h5  per-token replaced/original head
    discriminator.keras            the same two as one Keras model (config + weights):
                                   keras.models.load_model(path) with safe_mode on
    generator.weights.h5           generator encoder (embeddings included)
    generator_head.weights.h5      masked-LM head (tied table, dense, LayerNorm, bias)
    mlm_head.weights.h5            the full-size network's masked-LM head (objectives
                                   mlm, replace_mlm, all_tokens_mlm, two_stage)
    copy_head.weights.h5           All-Tokens MLM's copy gate
    pretrainer.weights.h5          every weight (no optimizer state: that stays in the run's
                                   checkpoints), for continuing pre-training

Which files exist depends on the config's `objective` (docs/pretraining.md):
`discriminator.weights.h5` is always the full-size encoder, the network to
fine-tune, whether it was trained as ELECTRA's discriminator or as a masked
LM (BERT-style objectives have no discriminator head, no `.keras` file and,
for `mlm`, no generator).

Weights are Keras `.weights.h5` / `.keras` files: no pickled code is ever loaded.
The generator has no `.keras` file: its head shares the token table with its
encoder, a tie that Keras' whole-model format does not restore. Files are
written under a temporary name and renamed, so a crash never leaves a
half-written file under a final name.

A directory written by `convert` holds the weights of its source once, and only
those: config.json, vocab.txt, discriminator.weights.h5 and, when the source has
them, discriminator_head.weights.h5 and the generator's two files (no
pretrainer.weights.h5 and no discriminator.keras, which would hold the same
weights again). An encoder-only import (a BERT encoder, a keras-hub backbone) is
config.json, vocab.txt and discriminator.weights.h5: about the size of the
source's weights. `pretrain --init` makes the missing generator and heads fresh.
Its conversion.json says where the weights came from and which parts the source
lacked (`absent_parts`), so tools that serve a part (export) can refuse one that
was never trained.

`load_pretraining_weights` fills pre-training networks built for a directory: the
forward-only ones `convert` builds (`electra_tf.convert.common.load_pretraining_model`)
and the whole `ElectraPretrainer`
(`electra_tf.pretrain.pretrainer_loading.load_pretrainer`).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple

import keras
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.errors import error_line
from electra_tf.fileio import write_text_atomic
from electra_tf.models.builders import build_encoder
from electra_tf.models.heads import DiscriminatorHead
from electra_tf.models.model_folder import (CONFIG_FILE, COPY_HEAD_FILE, DISCRIMINATOR_FILE, DISCRIMINATOR_HEAD_FILE,
                                            DISCRIMINATOR_KERAS_FILE, GENERATOR_FILE, GENERATOR_HEAD_FILE,
                                            MLM_HEAD_FILE, PRETRAINER_FILE, ModelDirError, absent_parts, copy_vocab,
                                            load_config, read_conversion_record, resolve_model_dir)
from electra_tf.keras_compat import load_weights_only, save_weights_only

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def _save_layer(layer, path):
    tmp = path + ".tmp.weights.h5"
    # Weights only: a compiled pre-trainer's optimizer state (Adam's two slots per weight) belongs
    # to the resumable checkpoints, not to the model a user copies.
    optimizer = getattr(layer, "optimizer", None)
    save_weights_only(layer, tmp, skip=[optimizer] if optimizer is not None else ())
    os.replace(tmp, path)


def load_layer(layer, path):
    """Loads `path` (.weights.h5) into a built layer; ModelDirError when missing or mismatched."""
    if not os.path.isfile(path):
        raise ModelDirError(f"{path} is missing; pass a directory written by electra_tf (pretrain or convert)")
    try:
        load_weights_only(layer, path)
    except (ValueError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelDirError(
            f"{path} does not fit the model described by {CONFIG_FILE} ({first}); "
            "check that the config belongs to these weights"
        ) from None


# (pre-trainer attribute, file, conversion part): the per-part files of a model directory, in
# the order they are loaded back (the discriminator last: with shared embeddings a generator file
# holds the token table too, and the encoder's copy wins).
PART_FILES = (("discriminator_head", DISCRIMINATOR_HEAD_FILE, "discriminator_head"),
              ("generator", GENERATOR_FILE, "generator"), ("generator_head", GENERATOR_HEAD_FILE, "generator"),
              ("mlm_head", MLM_HEAD_FILE, "mlm_head"), ("copy_head", COPY_HEAD_FILE, "copy_head"),
              ("discriminator", DISCRIMINATOR_FILE, "discriminator"))


def save_pretrained(model_dir: str, pretrainer, vocab_file: Optional[str] = None,
                    parts: Optional[Sequence[str]] = None) -> str:
    """Writes an `ElectraPretrainer` in the model-directory layout above.

    Args:
      parts: None for a pre-training run's model (every part, plus pretrainer.weights.h5 and
        discriminator.keras); else the parts (PART_FILES' third column) a converted source has:
        only their files are written, each weight once.
    """
    os.makedirs(model_dir, exist_ok=True)
    write_text_atomic(os.path.join(model_dir, CONFIG_FILE), pretrainer.config.to_json())
    if vocab_file is not None:
        copy_vocab(vocab_file, model_dir)
    # The encoder to fine-tune as a plain encoder: with embedding_sharing=gdes the
    # pre-trainer merges its token table (E_gen + E_delta) into a copy.
    merged = getattr(pretrainer, "merged_discriminator", None)
    encoder = merged() if merged is not None else pretrainer.discriminator
    _save_layer(encoder, os.path.join(model_dir, DISCRIMINATOR_FILE))
    # Objective-dependent parts: absent layers (e.g. mlm's generator) are skipped, and so are the
    # parts a converted source does not have.
    for attribute, name, part in PART_FILES[:-1]:
        layer = getattr(pretrainer, attribute, None)
        if layer is not None and (parts is None or part in parts):
            _save_layer(layer, os.path.join(model_dir, name))
    if parts is not None:
        return model_dir
    _save_layer(pretrainer, os.path.join(model_dir, PRETRAINER_FILE))
    if getattr(pretrainer, "discriminator_head", None) is not None:
        keras_path = os.path.join(model_dir, DISCRIMINATOR_KERAS_FILE)
        discriminator_model(encoder, pretrainer.discriminator_head).save(
            keras_path + ".tmp.keras")
        os.replace(keras_path + ".tmp.keras", keras_path)
    return model_dir


def load_parts(pretrainer, model_dir: str) -> None:
    """Loads a model directory's per-part files into a built `ElectraPretrainer` (what
    `load_pretrainer` does for a directory without pretrainer.weights.h5, e.g. a converted one).

    In a converted directory, a part its source did not have (conversion.json) keeps its fresh
    values; any other missing file raises ModelDirError.
    """
    if pretrainer.config.embedding_sharing == "gdes":
        raise ModelDirError(f"{model_dir} has no {PRETRAINER_FILE}, which a model with embedding_sharing=gdes "
                            f"needs (its per-part files hold the merged token table); pass the run's directory")
    record = read_conversion_record(model_dir)
    converted = None if record is None else {p for p, s in record.get("parts", {}).items() if s == "converted"}
    for attribute, name, part in PART_FILES:
        layer = getattr(pretrainer, attribute, None)
        path = os.path.join(model_dir, name)
        if layer is None or (converted is not None and part not in converted and not os.path.isfile(path)):
            continue
        load_layer(layer, path)


def load_pretraining_weights(model, model_dir: str) -> None:
    """Loads `model_dir`'s weights into built pre-training networks: pretrainer.weights.h5 where
    there is one, else each part's file (a converted directory holds each part once; the parts its
    source lacked stay fresh)."""
    whole = os.path.join(model_dir, PRETRAINER_FILE)
    if os.path.isfile(whole):
        load_layer(model, whole)
    else:
        load_parts(model, model_dir)


def discriminator_model(encoder, head):
    """A functional Keras model: ids/mask/segments -> sequence output and replaced logits."""
    inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUT_NAMES}
    sequence = encoder(inputs)
    return keras.Model(inputs, {"sequence_output": sequence, "replaced_logits": head(sequence)},
                       name="electra_discriminator")


def _built(encoder, config):
    seq = config.max_seq_length
    encoder.build({k: (None, seq) for k in ("input_ids", "input_mask", "segment_ids")})
    return encoder


def load_encoder(model_dir: str):
    """Returns (encoder, config): the full-size encoder to fine-tune, for every objective.

    `model_dir` may also be a pre-training run directory (its model is in pretrained/).
    """
    model_dir = resolve_model_dir(model_dir, "load_encoder")
    config = load_config(model_dir)
    encoder = _built(build_encoder(config), config)
    load_layer(encoder, os.path.join(model_dir, DISCRIMINATOR_FILE))
    return encoder, config


def load_discriminator(model_dir: str) -> Tuple[object, DiscriminatorHead, ElectraConfig]:
    """Returns (encoder, head, config) of the discriminator, ready to fine-tune or serve.

    `model_dir` may also be a pre-training run directory (its model is in pretrained/).
    """
    model_dir = resolve_model_dir(model_dir, "load_discriminator")
    config = load_config(model_dir)
    # What was saved is what the objective trained: a masked-LM head and no replaced-token head.
    if (not os.path.isfile(os.path.join(model_dir, DISCRIMINATOR_HEAD_FILE))
            and os.path.isfile(os.path.join(model_dir, MLM_HEAD_FILE))):
        raise ModelDirError(
            f"{model_dir} was pre-trained with objective {config.objective!r}, which has no "
            f"replaced-token head; fine-tune its encoder (finetune --init) or load it with load_encoder")
    encoder, config = load_encoder(model_dir)
    head = DiscriminatorHead(config.hidden_size, config.initializer_range,
                             activation=config.hidden_act, name="discriminator_predictions")
    head.build((None, config.max_seq_length, config.hidden_size))
    head_file = os.path.join(model_dir, DISCRIMINATOR_HEAD_FILE)
    # A converted encoder has no head: it stays fresh (export refuses it unless told otherwise).
    if os.path.isfile(head_file) or "discriminator_head" not in absent_parts(model_dir):
        load_layer(head, head_file)
    return encoder, head, config


def load_encoder_weights(encoder, path: str) -> None:
    """Loads pre-trained discriminator weights into a built encoder.

    Args:
      encoder: a built `ElectraEncoder`.
      path: a `.weights.h5` file saved from the encoder (or a model whose only
        layer is it), a `.keras` file of such a model, or a TF checkpoint prefix
        whose object graph has the encoder under `encoder` or `discriminator`.
    """
    if path.endswith(".weights.h5"):
        _load_weights_h5(encoder, path)
    elif path.endswith(".keras"):
        _load_keras_file(encoder, path)
    else:
        _load_tf_checkpoint(encoder, path)


def _load_weights_h5(encoder, path: str) -> None:
    try:
        load_weights_only(encoder, path)  # strict: every variable of the built encoder
    except ValueError as e:
        raise ModelDirError(
            f"--init {path} does not fit the model config ({error_line(e)}); pass the config.json "
            f"of the model that wrote it with --config") from None
    except OSError as e:
        raise ModelDirError(f"--init {path} is not a readable .weights.h5 file ({error_line(e)}); "
                            f"pass the pre-training output directory") from None


def _load_keras_file(encoder, path: str) -> None:
    try:
        # safe_mode: a .keras file that carries Python code (a Lambda layer) is refused.
        saved = keras.saving.load_model(path, compile=False, safe_mode=True)
    except ValueError as e:
        if "safe_mode" in str(e) or "Lambda" in str(e):
            raise ModelDirError(
                f"--init {path} contains Python code (a Lambda layer), which is never executed; "
                f"pass a .weights.h5 file or a model directory written by electra_tf") from None
        raise ModelDirError(f"--init {path} is not a model electra_tf can load ({error_line(e)}); "
                            f"pass a .weights.h5 file or a model directory") from None
    source = saved if hasattr(saved, "transformer_layers") else next(
        (l for l in saved.layers if hasattr(l, "transformer_layers")), None)
    if source is None:
        raise ModelDirError(f"{path}: no ElectraEncoder inside the saved model")
    try:
        encoder.set_weights(source.get_weights())
    except ValueError as e:
        raise ModelDirError(f"--init {path} does not fit the model config ({error_line(e)}); pass "
                            f"the config.json of that model with --config") from None


def _load_tf_checkpoint(encoder, path: str) -> None:
    try:
        names = [n for n, _ in tf.train.list_variables(path)]
    except (tf.errors.OpError, ValueError) as e:
        raise ModelDirError(f"{path}: not a readable TF checkpoint ({error_line(e)}); "
                            f"pass a .weights.h5 file or a run directory") from None
    for key in ("discriminator", "encoder"):
        stored = [n for n in names if n.startswith(key + "/") and n.endswith("VARIABLE_VALUE")
                  and "OPTIMIZER_SLOT" not in n]
        if not stored:
            continue
        # A partial restore would silently leave random layers: demand every variable.
        if len(stored) != len(encoder.weights):
            raise ModelDirError(
                f"{path}: the checkpoint holds {len(stored)} variables under '{key}/' but the encoder has "
                f"{len(encoder.weights)} (Keras 3 layer lists are not tracked by tf.train.Checkpoint); "
                f"save the discriminator as a .weights.h5 file instead")
        tf.train.Checkpoint(**{key: encoder}).read(path).assert_existing_objects_matched()
        return
    raise ModelDirError(f"{path}: no 'discriminator/' or 'encoder/' variables in this checkpoint; "
                        f"pass the pre-training output (or a .weights.h5 of the discriminator encoder)")
