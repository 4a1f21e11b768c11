"""--init: finding the pre-trained model's files and loading its encoder weights.

--init is "random", a weights file (.weights.h5, .keras, or a TF checkpoint
prefix), or a directory (a pre-training run or converted checkpoint) holding
one of them and normally config.json and vocab.txt. Every way a file can fail
to fit the model is one `FinetuneError` line naming the file and the fix.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Tuple

import keras
import tensorflow as tf

from electra_tf.errors import error_line
from electra_tf.finetune.settings import FinetuneError
from electra_tf.models.classifier_model import build_and_call
from electra_tf.keras_compat import load_weights_only
from electra_tf.models import build_encoder
from electra_tf.paths import hub_download_hint, resolve_config, resolve_model_dir

INIT_FILES = ("discriminator.weights.h5", "encoder.weights.h5", "discriminator.keras", "encoder.keras")


def _weights_in_dir(init: str) -> str:
    """The encoder weights inside a model directory, in `INIT_FILES` order, then a TF checkpoint."""
    for name in INIT_FILES:
        if os.path.isfile(os.path.join(init, name)):
            return os.path.join(init, name)
    for d in (init, os.path.join(init, "checkpoints")):
        if os.path.isdir(d) and tf.train.latest_checkpoint(d):
            return tf.train.latest_checkpoint(d)
    source = _foreign_format(init)
    if source is not None:
        out = "models/" + os.path.basename(os.path.normpath(init))
        raise FinetuneError(
            f"--init {init!r} is {source[1]}, not a model directory of electra_tf; convert it first: "
            f"python -m electra_tf.convert --from {source[0]} --input {init} --output_dir {out}, then pass "
            f"--init {out}")
    raise FinetuneError(
        f"--init {init!r} holds no {' / '.join(INIT_FILES)} and no TF checkpoint; "
        f"pass the pre-training output directory or 'random'")


def _foreign_format(directory: str) -> Optional[Tuple[str, str]]:
    """(convert --from value, description) for a keras-hub preset or Hugging Face directory, else None."""
    config = {}
    try:
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        pass
    config = config if isinstance(config, dict) else {}
    # keras-hub presets: metadata.json, and a config.json naming the backbone's module / class.
    if (os.path.isfile(os.path.join(directory, "metadata.json"))
            or str(config.get("module", "")).startswith("keras_hub")):
        return "keras_hub", "a keras-hub preset directory"
    if "model_type" in config and any(os.path.isfile(os.path.join(directory, name)) for name in
                                      ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")):
        return "hf", "a Hugging Face model directory"
    return None


def find_init_files(init: str, config_flag: Optional[str],
                    vocab_flag: Optional[str]) -> Tuple[Optional[str], str, str]:
    """Resolves --init / --config / --vocab_file to (weights or None, config path, vocab path).

    Args:
      init: the --init value.
      config_flag: --config (a file or a shipped config's name), overrides the directory's config.json.
      vocab_flag: --vocab_file, overrides the directory's vocab.txt.
    """
    weights = None
    search_dir = None
    if init != "random":
        if os.path.isdir(init):
            # A pre-training run directory: its model is in <run>/pretrained/.
            init = resolve_model_dir(init, "--init", lambda line: print(line, flush=True))
            search_dir = init
            weights = _weights_in_dir(init)
        elif os.path.isfile(init) or os.path.isfile(init + ".index"):
            weights = init
            search_dir = os.path.dirname(init)
        else:
            hint = hub_download_hint(init)
            if hint:
                name = init.split("/")[1]
                raise FinetuneError(f"--init {init!r} does not exist; {hint}, convert it with python -m "
                                    f"electra_tf.convert --from hf --input {name} --output_dir models/{name}, "
                                    f"then pass --init models/{name}")
            raise FinetuneError(f"--init {init!r} does not exist; pass a pre-training run directory, "
                                f"a .weights.h5 file, or 'random'")
    config = config_flag
    if config is not None:
        try:  # a file, or a shipped config's name (small)
            config = resolve_config(config)
        except ValueError as e:
            raise FinetuneError(str(e)) from None
    if config is None and search_dir and os.path.isfile(os.path.join(search_dir, "config.json")):
        config = os.path.join(search_dir, "config.json")
    if config is None:
        raise FinetuneError("no model config: pass --config with a config name (small, ...) or a JSON file "
                            "(or an --init directory with config.json)")
    vocab = vocab_flag
    if vocab is None and search_dir and os.path.isfile(os.path.join(search_dir, "vocab.txt")):
        vocab = os.path.join(search_dir, "vocab.txt")
    if vocab is None:
        raise FinetuneError("no vocabulary: pass --vocab_file (or an --init directory with vocab.txt)")
    return weights, config, vocab


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
        raise FinetuneError(
            f"--init {path} does not fit the model config ({error_line(e)}); pass the config.json "
            f"of the model that wrote it with --config") from None
    except OSError as e:
        raise FinetuneError(f"--init {path} is not a readable .weights.h5 file ({error_line(e)}); "
                            f"pass the pre-training output directory") from None


def _load_keras_file(encoder, path: str) -> None:
    try:
        # safe_mode: a .keras file that carries Python code (a Lambda layer) is refused.
        saved = keras.saving.load_model(path, compile=False, safe_mode=True)
    except ValueError as e:
        if "safe_mode" in str(e) or "Lambda" in str(e):
            raise FinetuneError(
                f"--init {path} contains Python code (a Lambda layer), which is never executed; "
                f"pass a .weights.h5 file or a model directory written by electra_tf") from None
        raise FinetuneError(f"--init {path} is not a model electra_tf can load ({error_line(e)}); "
                            f"pass a .weights.h5 file or a model directory") from None
    source = saved if hasattr(saved, "transformer_layers") else next(
        (l for l in saved.layers if hasattr(l, "transformer_layers")), None)
    if source is None:
        raise FinetuneError(f"{path}: no ElectraEncoder inside the saved model")
    try:
        encoder.set_weights(source.get_weights())
    except ValueError as e:
        raise FinetuneError(f"--init {path} does not fit the model config ({error_line(e)}); pass "
                            f"the config.json of that model with --config") from None


def _load_tf_checkpoint(encoder, path: str) -> None:
    try:
        names = [n for n, _ in tf.train.list_variables(path)]
    except (tf.errors.OpError, ValueError) as e:
        raise FinetuneError(f"{path}: not a readable TF checkpoint ({error_line(e)}); "
                            f"pass a .weights.h5 file or a run directory") from None
    for key in ("discriminator", "encoder"):
        stored = [n for n in names if n.startswith(key + "/") and n.endswith("VARIABLE_VALUE")
                  and "OPTIMIZER_SLOT" not in n]
        if not stored:
            continue
        # A partial restore would silently leave random layers: demand every variable.
        if len(stored) != len(encoder.weights):
            raise FinetuneError(
                f"{path}: the checkpoint holds {len(stored)} variables under '{key}/' but the encoder has "
                f"{len(encoder.weights)} (Keras 3 layer lists are not tracked by tf.train.Checkpoint); "
                f"save the discriminator as a .weights.h5 file instead")
        tf.train.Checkpoint(**{key: encoder}).read(path).assert_existing_objects_matched()
        return
    raise FinetuneError(f"{path}: no 'discriminator/' or 'encoder/' variables in this checkpoint; "
                        f"pass the pre-training output (or a .weights.h5 of the discriminator encoder)")


def reinit_top_layers(encoder, config, n: int) -> None:
    """Re-draws the top `n` Transformer blocks of a built encoder from their initializers.

    Fine-tuning on few examples often does better when the blocks closest to the
    pre-training head start fresh (Zhang et al. 2021, "Revisiting Few-sample BERT
    Fine-tuning"): they are the most specialised to that head. The embeddings and
    lower blocks keep their loaded weights.

    Args:
      encoder: a built `ElectraEncoder` (weights loaded or random).
      config: its ElectraConfig.
      n: how many of the top blocks to re-draw (0: none).
    """
    if n <= 0:
        return
    fresh = build_and_call(build_encoder(config), 2)  # same layers and initializers, new draws
    for block, new in zip(encoder.transformer_layers[-n:], fresh.transformer_layers[-n:]):
        block.set_weights(new.get_weights())
