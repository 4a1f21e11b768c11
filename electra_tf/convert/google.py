"""Original google-research/electra TF1 checkpoints, both ways.

Reading uses `tf.train.load_checkpoint` (any checkpoint written by the
reference `run_pretraining.py`: discriminator under `electra/`, generator under
`generator/` with the shared embeddings under `electra/embeddings/`, heads under
`discriminator_predictions/` and `generator_predictions/`). Optimizer slots
(`.../adam_m`, `.../adam_v`), `global_step` and similar bookkeeping entries are
skipped; every other name must map onto our model.

Writing produces a TF checkpoint with exactly those names (via the `SaveV2` op),
which the reference code and Hugging Face's `load_tf_weights_in_electra` read.
"""

from __future__ import annotations

import glob
import os
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from electra_tf.convert.mapping import ConversionError, export_tensors, is_ignored, pretrainer_entries


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


def export_pretrainer(pretrainer, prefix: str, global_step: Optional[int] = None) -> str:
    """Our pre-trainer as a reference-named TF1 checkpoint."""
    tensors = export_tensors(pretrainer_entries(pretrainer))
    if global_step is not None:
        tensors["global_step"] = np.asarray(global_step, np.int64)
    return write_checkpoint(tensors, prefix)


def find_vocab(path: str) -> Optional[str]:
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    for name in ("vocab.txt",):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None
