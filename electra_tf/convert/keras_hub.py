"""keras-hub `ElectraBackbone` presets, both ways.

A keras-hub preset directory holds config.json, model.weights.h5, metadata.json,
tokenizer.json and assets/tokenizer/vocabulary.txt. `ElectraBackbone` is the
discriminator encoder only, so importing one converts the encoder and leaves the
discriminator head and the generator at their initial values (conversion.json
says so, and `export --kind discriminator` refuses such a directory).

Two differences are inherent to keras-hub and documented in docs/serving.md:

* GELU form: keras-hub's `TransformerEncoder` blocks use the tanh approximation
  (`gelu_approximate`); the original ELECTRA, Hugging Face and our default use
  the exact erf form. Importing keeps `hidden_act="gelu"` (the form the released
  weights were trained with) unless `hidden_act="gelu_approximate"` is asked
  for, which reproduces keras-hub's numbers exactly. `gelu_difference` measures
  the effect.
* Pooler: keras-hub adds `pooled_dense` (tanh on [CLS]), which ELECTRA lacks.
  It is dropped on import; on export it holds random initial values (seeded),
  which the convert tool's output line and docs/serving.md say.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import keras
import keras_hub
import numpy as np

from electra_tf.config import ElectraConfig
from electra_tf.convert.common import new_pretrainer
from electra_tf.convert.mapping import ABSENT, CONVERTED, DISCRIMINATOR, DISCRIMINATOR_HEAD, GENERATOR, ConversionError
from electra_tf.data.vocab import load_vocab
from electra_tf.models.keras_hub_compat import from_keras_hub_backbone, to_keras_hub_backbone

PRESET_CONFIG_FILE = "config.json"  # a keras-hub preset's backbone config (keras_hub preset_utils.CONFIG_FILE)

VOCAB_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")
# The exported pooler's values: keras' initializers under this seed (ELECTRA has no pooler to copy).
POOLER_SEED = 0
POOLER_STATE = f"random, seed {POOLER_SEED}"


def config_from_backbone(backbone, base: Optional[ElectraConfig] = None, hidden_act: str = "gelu") -> ElectraConfig:
    base = base or ElectraConfig()
    values = base.to_dict()
    values.update(vocab_size=backbone.vocab_size, embedding_size=backbone.embedding_dim,
                  hidden_size=backbone.hidden_dim, num_hidden_layers=backbone.num_layers,
                  num_attention_heads=backbone.num_heads, intermediate_size=backbone.intermediate_dim,
                  max_position_embeddings=backbone.max_sequence_length, type_vocab_size=backbone.num_segments,
                  hidden_dropout_prob=float(backbone.dropout), attention_probs_dropout_prob=float(backbone.dropout),
                  layer_norm_eps=1e-12, hidden_act=hidden_act)
    values["max_seq_length"] = min(values["max_seq_length"], backbone.max_sequence_length)
    return ElectraConfig.from_dict(values, source="keras-hub preset")


def read_tokenizer_settings(preset_dir: str) -> dict:
    path = os.path.join(preset_dir, "tokenizer.json")
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("config", {})


def load_preset(preset_dir: str, base: Optional[ElectraConfig] = None, hidden_act: str = "gelu",
                vocab_file: Optional[str] = None):
    """Reads a keras-hub ElectraBackbone preset directory.

    Returns (pretrainer, status, vocab_file): a new `ElectraPretrainingModel` whose
    discriminator encoder (and the shared embeddings) hold the preset's weights.
    """
    if not os.path.isfile(os.path.join(preset_dir, PRESET_CONFIG_FILE)):
        raise ConversionError(f"{preset_dir} is not a keras-hub preset directory (no config.json)")
    try:
        backbone = keras_hub.models.ElectraBackbone.from_preset(preset_dir)
    except Exception as e:  # keras-hub raises several types for a bad preset
        # First line only: keras' deserialization errors carry the whole config.
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConversionError(f"{preset_dir}: keras_hub ElectraBackbone.from_preset failed ({first}); pass a "
                              f"keras-hub ElectraBackbone preset directory") from None
    settings = read_tokenizer_settings(preset_dir)
    base = base or ElectraConfig()
    if "lowercase" in settings:
        base = base.replace(do_lower_case=bool(settings["lowercase"]))
    config = config_from_backbone(backbone, base, hidden_act)
    vocab_file = vocab_file or os.path.join(preset_dir, VOCAB_ASSET)
    if not os.path.isfile(vocab_file):
        raise ConversionError(f"{preset_dir} has no {VOCAB_ASSET}; pass --vocab")
    pretrainer = new_pretrainer(config, load_vocab(vocab_file))
    try:
        from_keras_hub_backbone(backbone, pretrainer.discriminator)
    except ValueError as e:
        raise ConversionError(f"{preset_dir}: {e}") from None
    status = {DISCRIMINATOR: CONVERTED, DISCRIMINATOR_HEAD: ABSENT, GENERATOR: ABSENT}
    return pretrainer, status, vocab_file


def export_preset(encoder, preset_dir: str, vocab_file: Optional[str] = None, do_lower_case: bool = True,
                  seed: int = 0, strip_accents: Optional[bool] = None) -> str:
    """Saves our discriminator encoder as a keras-hub preset that
    `keras_hub.models.ElectraBackbone.from_preset(preset_dir)` loads.

    The pooler, which ELECTRA lacks, holds random initial values drawn under
    `seed` (`export_note` says so where the convert tool's user reads it).
    """
    keras.utils.set_random_seed(seed)
    backbone = to_keras_hub_backbone(encoder)
    os.makedirs(preset_dir, exist_ok=True)
    backbone.save_to_preset(preset_dir)
    if vocab_file:
        tokenizer = keras_hub.models.ElectraTokenizer(
            vocabulary=load_vocab(vocab_file), lowercase=do_lower_case,
            strip_accents=do_lower_case if strip_accents is None else strip_accents)
        tokenizer.save_to_preset(preset_dir)
    return preset_dir


def export_note(preset_dir: str, size: str) -> str:
    """The line the convert tool prints after writing a preset: what it holds, and what it does not."""
    return (f"{preset_dir}: keras-hub ElectraBackbone preset of the encoder ({size}); its pooler "
            f"(pooled_dense, tanh over [CLS]) has no ELECTRA counterpart and holds random weights (seed "
            f"{POOLER_SEED}): use sequence_output[:, 0] or fine-tune the pooler, not pooled_output as it is; "
            f"the blocks use keras-hub's tanh GELU (docs/serving.md)")


def gelu_difference(encoder, inputs, backbone=None) -> dict:
    """Measures how far keras-hub's tanh-GELU backbone is from our exact-GELU encoder.

    Args:
      encoder: our `ElectraEncoder` (exact GELU).
      inputs: dict of input_ids / input_mask / segment_ids.
      backbone: the keras-hub backbone with the same weights (built if None).

    Returns {"max_abs": ..., "mean_abs": ..., "max_abs_activation": ...} over
    the real (unpadded) positions of the sequence output.
    """
    backbone = backbone or to_keras_hub_backbone(encoder)
    ours = keras.ops.convert_to_numpy(encoder(inputs, training=False))
    theirs = keras.ops.convert_to_numpy(backbone({
        "token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"],
        "padding_mask": inputs["input_mask"]}, training=False)["sequence_output"])
    mask = np.asarray(inputs["input_mask"]).astype(bool)
    diff = np.abs(ours - theirs)[mask]
    return {"max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
            "max_abs_activation": float(np.abs(ours[mask]).max())}
