"""Layer-wise learning-rate decay (ELECTRA fine-tuning) as an AdamW subclass.

With decay d and L Transformer layers, depth 0 is the embeddings (and the E->H
projection), depth i the i-th layer from the bottom (1..L), and the task head
depth L+1. A variable at depth k gets lr * d^(L+1-k): head lr, top layer lr*d,
embeddings lr*d^(L+1).

The reference code (google-research/electra `_get_layer_lrs`) puts the head at
depth L+2 with the same exponent base, so every encoder variable gets one extra
factor d (top layer lr*d^2, embeddings lr*d^(L+2)); see google-research/electra
issue #51. `reference_extra_power=True` reproduces that.
"""

from __future__ import annotations

import collections
from typing import Dict, List, Optional

import keras


class LayerwiseLRError(ValueError):
    """A model whose variables cannot all be given a learning rate."""


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


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak`, then linear decay to 0 (reference schedule).

    Args:
      peak: peak learning rate.
      warmup_steps: steps of warmup (reference: 10% of training).
      total_steps: total training steps.
    """

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        self.peak = float(peak)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = max(int(total_steps), 1)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        decayed = self.peak * keras.ops.maximum(0.0, 1.0 - step / self.total_steps)
        if self.warmup_steps <= 0:
            return decayed
        warm = self.peak * step / self.warmup_steps
        return keras.ops.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


@keras.saving.register_keras_serializable(package="electra_tf")
class LayerwiseAdamW(keras.optimizers.AdamW):
    """AdamW whose learning rate (and decoupled weight decay) is scaled per variable.

    Rank-1 variables (biases, LayerNorm scales/offsets) get no weight decay, as
    the reference's `exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]`.
    Works under tf.distribute: the multiplier is looked up by the optimizer's own
    variable index, which maps mirrored components to their variable.

    Args:
      lr_multipliers: `variable.path` -> multiplier; every trained variable must
        be present (an unassigned one is an error, never a silent 1.0).
      **kwargs: `keras.optimizers.AdamW` arguments (learning_rate, weight_decay,
        beta_1, beta_2, epsilon, global_clipnorm, ...).
    """

    def __init__(self, lr_multipliers: Optional[Dict[str, float]] = None, **kwargs):
        super().__init__(**kwargs)
        self.lr_multipliers = dict(lr_multipliers or {})
        self._var_multipliers: List[float] = []
        self._var_decays: List[bool] = []

    def build(self, var_list):
        missing = [v.path for v in var_list if v.path not in self.lr_multipliers]
        if missing:
            raise LayerwiseLRError(
                f"{len(missing)} variable(s) have no learning-rate multiplier, e.g. {missing[0]!r}; "
                f"compute them with layerwise_lr_multipliers() on the built model")
        super().build(var_list)
        self._var_multipliers = [float(self.lr_multipliers[v.path]) for v in var_list]
        self._var_decays = [len(v.shape) > 1 for v in var_list]

    def _apply_weight_decay(self, variables):
        # Decay is applied per variable in update_step, scaled like the lr.
        return

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        lr = keras.ops.cast(learning_rate, variable.dtype) * self._var_multipliers[index]
        if self.weight_decay and self._var_decays[index]:
            variable.assign_sub(variable * keras.ops.cast(self.weight_decay, variable.dtype) * lr)
        super().update_step(gradient, variable, lr)

    def get_config(self):
        config = super().get_config()
        config["lr_multipliers"] = self.lr_multipliers
        return config
