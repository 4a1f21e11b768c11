"""Layer-wise learning-rate decay (ELECTRA fine-tuning): one multiplier per variable.

With decay d and L Transformer layers, depth 0 is the embeddings (and the E->H
projection), depth i the i-th layer from the bottom (1..L), and the task head
depth L+1. A variable at depth k gets lr * d^(L+1-k): head lr, top layer lr*d,
embeddings lr*d^(L+1).

The reference code (google-research/electra `_get_layer_lrs`) puts the head at
depth L+2 with the same exponent base, so every encoder variable gets one extra
factor d (top layer lr*d^2, embeddings lr*d^(L+2)); see google-research/electra
issue #51. `reference_extra_power=True` reproduces that.

The multipliers are applied by the shared optimizer,
`electra_tf.training.optimization.ElectraAdamW(lr_multipliers=...)`, which
also scales the decoupled weight decay by them.
"""

from __future__ import annotations

import collections

import keras

# Raised here and by the optimizer when a variable has no multiplier.
from electra_tf.training.optimization import LayerwiseLRError

__all__ = ["LayerwiseLRError", "variable_depths", "layerwise_lr_multipliers"]


def _ids(layer) -> set:
    return {id(v) for v in layer.trainable_variables} if layer is not None else set()


def variable_depths(model: keras.Model, encoder) -> "collections.OrderedDict[str, int]":
    """Depth of every trainable variable of `model` (see the module docstring).

    Args:
      model: the built fine-tuning model (encoder + head).
      encoder: its `ElectraEncoder` (with `embeddings`, `embeddings_projection`,
        `transformer_layers`).

    Raises:
      LayerwiseLRError: if an encoder variable belongs to none of those parts, or
        two variables share a path.
    """
    n = len(encoder.transformer_layers)
    depth_of = {}
    for vid in _ids(encoder.embeddings) | _ids(encoder.embeddings_projection):
        depth_of[vid] = 0
    for i, layer in enumerate(encoder.transformer_layers):
        for vid in _ids(layer):
            depth_of[vid] = i + 1
    encoder_ids = _ids(encoder)
    depths = collections.OrderedDict()
    for v in model.trainable_variables:
        if v.path in depths:
            raise LayerwiseLRError(f"two trainable variables share the path {v.path!r}; give layers unique names")
        if id(v) in depth_of:
            depths[v.path] = depth_of[id(v)]
        elif id(v) in encoder_ids:
            raise LayerwiseLRError(
                f"encoder variable {v.path!r} is in neither the embeddings, the projection nor a "
                f"Transformer layer; extend variable_depths() to place it")
        else:
            depths[v.path] = n + 1  # task head
    if not depths:
        raise LayerwiseLRError("the model has no trainable variables; build it before assigning learning rates")
    return depths


def layerwise_lr_multipliers(model: keras.Model, encoder, decay: float,
                             reference_extra_power: bool = False) -> "collections.OrderedDict[str, float]":
    """Learning-rate multiplier of every trainable variable, keyed by `variable.path`.

    Args:
      model: the built fine-tuning model.
      encoder: its encoder.
      decay: d; 1.0 (or <= 0, as the reference treats 0) disables the decay.
      reference_extra_power: reproduce the reference's extra factor d on encoder variables.
    """
    depths = variable_depths(model, encoder)
    n = len(encoder.transformer_layers)
    if decay <= 0 or decay == 1.0:
        return collections.OrderedDict((p, 1.0) for p in depths)
    out = collections.OrderedDict()
    for path, depth in depths.items():
        power = n + 1 - depth
        if reference_extra_power and depth <= n:
            power += 1
        out[path] = float(decay ** power)
    return out
