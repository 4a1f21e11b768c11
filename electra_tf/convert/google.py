"""Original google-research/electra TF1 checkpoints, both ways.

Reading uses `tf.train.load_checkpoint` (any checkpoint written by the
reference `run_pretraining.py`: discriminator under `electra/`, generator under
`generator/` with the shared embeddings under `electra/embeddings/`, heads under
`discriminator_predictions/` and `generator_predictions/`). Optimizer slots
(`.../adam_m`, `.../adam_v`), `global_step` and similar bookkeeping entries are
skipped; every other name must map onto our model.

Writing produces a TF checkpoint with exactly those names (via the `SaveV2` op),
which the reference code and Hugging Face's `load_tf_weights_in_electra` read,
and beside it the two files the import needs: `vocab.txt`, and
`electra_config.json` with the facts the weights cannot show (the attention head
count, GELU form, LayerNorm epsilon, casing; plus settings such as
max_seq_length). Importing reads them; a head count that neither the sidecar nor
a flag gives is refused rather than guessed, since a wrong one changes every output.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.convert.common import build_config
from electra_tf.convert.mapping import ConversionError, export_tensors, is_ignored, pretrainer_entries
from electra_tf.fileio import write_json_atomic, write_text_atomic
from electra_tf.data.normalization import TextNormalization

# Beside the checkpoint: what `--to google` writes and `--from google` reads.
VOCAB_FILE = "vocab.txt"
SIDECAR_FILE = "electra_config.json"
# Facts of the weights that change the model's outputs but no tensor shape shows.
MODEL_FACTS = ("num_attention_heads", "hidden_act", "layer_norm_eps", "do_lower_case", "text_normalization")
# Settings of the exported model carried along (defaults for fine-tuning and scoring).
SETTINGS = ("max_seq_length", "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")


def resolve_checkpoint(path: str) -> str:
    """A checkpoint prefix from a prefix, a `.index` file, or a directory."""
    if path.endswith(".index"):
        path = path[: -len(".index")]
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(indexes) == 1:
            return indexes[0][: -len(".index")]
        raise ConversionError(f"{path} holds {len(indexes)} checkpoints and no 'checkpoint' file; "
                              f"pass the prefix of one (e.g. {path}/model.ckpt-1000000)")
    if not os.path.isfile(path + ".index"):
        raise ConversionError(f"no TF checkpoint at {path!r} ({path}.index does not exist)")
    return path


def read_checkpoint(path: str) -> Tuple[Dict[str, np.ndarray], list]:
    """Returns ({name: array} of model weights, [skipped names])."""
    prefix = resolve_checkpoint(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise ConversionError(f"{prefix}: not a readable TF checkpoint ({str(e).splitlines()[0]})") from None
    tensors, skipped = {}, []
    for name in sorted(reader.get_variable_to_shape_map()):
        if is_ignored(name):
            skipped.append(name)
            continue
        value = reader.get_tensor(name)
        if not np.issubdtype(np.asarray(value).dtype, np.floating):
            skipped.append(name)
            continue
        tensors[name] = np.asarray(value, np.float32)
    return tensors, skipped


def write_checkpoint(tensors: Dict[str, np.ndarray], prefix: str) -> str:
    """Writes {name: array} as a TF (V2 bundle) checkpoint with exactly these names."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    with open(os.path.join(os.path.dirname(os.path.abspath(prefix)), "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{os.path.basename(prefix)}"\n')
    return prefix


def export_pretrainer(pretrainer, prefix: str, global_step: Optional[int] = None,
                      vocab_file: Optional[str] = None) -> str:
    """Our pre-trainer as a reference-named TF1 checkpoint, with `electra_config.json` beside it.

    Args:
      pretrainer: an `ElectraPretrainingModel`.
      prefix: the checkpoint prefix to write (e.g. ckpt/model.ckpt).
      global_step: stored as `global_step` when given, as the reference does.
      vocab_file: copied beside the checkpoint as vocab.txt when given.
    """
    tensors = export_tensors(pretrainer_entries(pretrainer))
    if global_step is not None:
        tensors["global_step"] = np.asarray(global_step, np.int64)
    write_checkpoint(tensors, prefix)
    folder = os.path.dirname(os.path.abspath(prefix))
    config = pretrainer.config.to_dict()
    write_json_atomic(os.path.join(folder, SIDECAR_FILE), {k: config[k] for k in MODEL_FACTS + SETTINGS},
                      sort_keys=True)
    if vocab_file is not None:
        with open(vocab_file, encoding="utf-8") as f:
            write_text_atomic(os.path.join(folder, VOCAB_FILE), f.read())
    return prefix


def _folder(path: str) -> str:
    return path if os.path.isdir(path) else os.path.dirname(path)


def find_vocab(path: str) -> Optional[str]:
    candidate = os.path.join(_folder(path), VOCAB_FILE)
    return candidate if os.path.isfile(candidate) else None


def read_sidecar(path: str) -> Tuple[dict, Optional[str]]:
    """({field: value}, its path) of the electra_config.json beside a checkpoint; ({}, None) without one."""
    sidecar = os.path.join(_folder(path), SIDECAR_FILE)
    if not os.path.isfile(sidecar):
        return {}, None
    try:
        with open(sidecar, encoding="utf-8") as f:
            values = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"{sidecar} is not valid JSON ({e}); write it again with "
                              f"python -m electra_tf.convert --to google, or delete it and pass "
                              f"--num_attention_heads") from None
    unknown = sorted(set(values) - set(MODEL_FACTS + SETTINGS)) if isinstance(values, dict) else None
    if unknown is None or unknown:
        raise ConversionError(f"{sidecar} holds {'key(s) ' + ', '.join(unknown) if unknown else 'no JSON object'}; "
                              f"it may name only {', '.join(MODEL_FACTS + SETTINGS)}")
    return values, sidecar


def import_config(sizes: dict, path: str, base: Optional[ElectraConfig],
                  num_heads: Optional[int]) -> ElectraConfig:
    """The config of a Google checkpoint: sizes from its shapes, facts from its electra_config.json.

    The head count comes from `num_heads` (--num_attention_heads), the sidecar, or
    `base` (--config) of the same hidden size; without any of them it is refused,
    not guessed. A flag that contradicts the sidecar is refused too. The sidecar's
    facts win over `base`, whose other fields fill in the rest.
    """
    facts, sidecar = read_sidecar(path)
    recorded = facts.get("num_attention_heads")
    if num_heads is not None and recorded is not None and num_heads != recorded:
        raise ConversionError(f"--num_attention_heads {num_heads} contradicts {sidecar}, which records "
                              f"{recorded} heads for these weights; drop the flag")
    heads = num_heads if num_heads is not None else recorded
    hidden = sizes["hidden_size"]
    if heads is None and base is not None and base.hidden_size == hidden:
        heads = base.num_attention_heads
    if heads is None:
        raise ConversionError(
            f"{path} does not record its attention heads (no {SIDECAR_FILE} beside it) and the weights "
            f"cannot show them; pass --num_attention_heads (checkpoints of google-research/electra use "
            f"hidden_size // 64 = {max(1, hidden // 64)})")
    values = {k: v for k, v in facts.items() if k != "num_attention_heads"}
    if base is not None:
        # --config fills the settings; the sidecar's facts describe the weights and stay.
        values.update({k: getattr(base, k) for k in SETTINGS})
    if "text_normalization" not in facts and (base is None or base.text_normalization is None):
        # A checkpoint of google-research/electra (or one exported before the field existed): the
        # reference tokenizer's rules, the bert mode, with the recorded casing.
        lower = values.get("do_lower_case", base.do_lower_case if base is not None else True)
        values["do_lower_case"] = bool(lower)
        values["text_normalization"] = TextNormalization.create(bool(lower)).to_json()
    return build_config(sizes, base, heads, **values)
