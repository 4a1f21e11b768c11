"""The one optimizer of pre-training and fine-tuning, and their one learning-rate schedule.

`ElectraAdamW` is Keras' AdamW with three changes, used by both jobs:

* clipping: `clip_norm` clips the global norm of the gradient *after* the
  cross-replica sum. Keras' own `global_clipnorm` clips each replica's
  gradient before the sum, so N replicas would not reproduce one device on the
  same global batch (the reference's TPU code clipped per core too).
* layer-wise learning rates: `lr_multipliers` (variable.path -> factor) scales
  the learning rate, and with it the decoupled weight decay, per variable
  (fine-tuning's layer-wise decay, training/layerwise_lr.py). None: all 1.
* one XLA-fused element-wise update per variable, and embedding gradients
  densified first (see `apply`).

`adamw` builds it with the reference's weight-decay rule: LayerNorm
scales/offsets and every bias (names gamma, beta, bias) are not decayed.

`OptimizerSpec` is the one description of a run's optimizer (peak rate,
warm-up, decay, weight decay, Adam constants, clipping); `build_optimizer`
turns it, with per-variable multipliers and frozen variables where a job
has them, into the `ElectraAdamW` and its schedule. Pre-training
(`create_optimizer`), fine-tuning and `ElectraClassifier.fit` all use it.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

import keras
import tensorflow as tf

from electra_tf.errors import ElectraError
from electra_tf.keras_compat import AdamWHooks

# Variables whose name matches one of these are not weight-decayed, as in the
# reference (LayerNorm scale/offset and every bias, incl. the MLM output bias
# and the attention layers' per-head (rank-2) biases).
NO_DECAY_NAME_PATTERNS = ("gamma", "beta", "bias")


class LayerwiseLRError(ElectraError, ValueError):
    """A model whose variables cannot all be given a learning rate."""


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * (1 - step/train_steps)^power * min(1, step/warmup_steps).

    The one learning-rate schedule of pre-training and fine-tuning (power 1:
    linear decay), as the reference's `optimization.create_optimizer` for both.
    The reference multiplies the decay by the warmup factor (it does not switch
    from one to the other), so the peak actually reached is slightly below
    `peak`; we keep that.

    Args:
        peak_learning_rate: the base learning rate.
        train_steps: steps after which the rate reaches 0.
        warmup_steps: length of the linear warmup (0 for none).
        power: decay power (1.0: linear).
        adjustable: read `train_steps` from a variable that `set_train_steps` changes while
            training runs (a run whose length is decided from its measured speed, `pretrain
            --train_minutes`). Create the schedule under the strategy's scope then. The
            compiled step reads the variable, so it does not bake the first guess in.
    """

    def __init__(self, peak_learning_rate, train_steps, warmup_steps, power=1.0, adjustable=False):
        self.peak_learning_rate = float(peak_learning_rate)
        self.train_steps = int(train_steps)
        self.warmup_steps = int(warmup_steps)
        self.power = float(power)
        self.adjustable = bool(adjustable)
        self._horizon = (tf.Variable(float(self.train_steps), trainable=False, dtype=tf.float32,
                                     name="lr_decay_steps") if self.adjustable else None)

    def set_train_steps(self, train_steps: int) -> None:
        """Moves the step where the rate reaches 0 (an `adjustable` schedule only)."""
        if self._horizon is None:
            raise ValueError("set_train_steps needs a schedule built with adjustable=True")
        self.train_steps = int(train_steps)
        self._horizon.assign(float(self.train_steps))

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        horizon = float(self.train_steps) if self._horizon is None else tf.cast(self._horizon, tf.float32)
        progress = tf.minimum(step, horizon) / horizon
        lr = self.peak_learning_rate * tf.pow(1.0 - progress, self.power)
        if self.warmup_steps > 0:
            lr *= tf.minimum(1.0, step / float(self.warmup_steps))
        return lr

    def get_config(self):
        return dict(
            peak_learning_rate=self.peak_learning_rate,
            train_steps=self.train_steps,
            warmup_steps=self.warmup_steps,
            power=self.power,
            adjustable=self.adjustable,
        )


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraAdamW(AdamWHooks):
    """AdamW that clips the replica-summed gradient and may scale the lr per variable.

    Args:
        clip_norm: maximum global norm of the aggregated gradient (None: off).
        lr_multipliers: `variable.path` -> learning-rate multiplier (None: 1 for
            every variable). When given, every trained variable must be present:
            an unassigned one is an error, never a silent 1.0. Under
            tf.distribute the multiplier is looked up by the optimizer's own
            variable index, which maps mirrored components to their variable.
        frozen_paths: `variable.path`s that get no update (no Adam step, no weight
            decay, and a zero gradient, so they do not count in the clipped norm)
            while the step is below `frozen_steps`; then they train as the rest.
        frozen_steps: how many steps `frozen_paths` stay as they are.
        **kwargs: passed to `keras.optimizers.AdamW` (not `global_clipnorm` /
            `clipnorm`, which would clip per replica).
    """

    def __init__(self, clip_norm=None, lr_multipliers: Optional[Dict[str, float]] = None,
                 fused: bool = True, frozen_paths=None, frozen_steps: int = 0, **kwargs):
        if kwargs.get("global_clipnorm") or kwargs.get("clipnorm"):
            raise ValueError("ElectraAdamW clips with clip_norm (after the replica sum); "
                             "global_clipnorm / clipnorm would clip each replica's gradient")
        super().__init__(**kwargs)
        if lr_multipliers is not None and self.amsgrad:
            raise LayerwiseLRError("lr_multipliers with amsgrad=True is not supported "
                                   "(Keras' amsgrad path decays with the unscaled rate)")
        if lr_multipliers is not None and not fused:
            raise LayerwiseLRError("lr_multipliers need the fused update (Keras' own path decays "
                                   "with the unscaled rate); leave fused=True")
        self.clip_norm = clip_norm
        self.fused = fused  # False: Keras' own AdamW ops (the fused_kernels switch)
        self.lr_multipliers = None if lr_multipliers is None else dict(lr_multipliers)
        self._var_multipliers: List[float] = []
        self.frozen_paths = sorted(frozen_paths or ()) if frozen_steps else []
        self.frozen_steps = int(frozen_steps)
        if self.frozen_paths and not fused:
            raise ValueError("frozen_paths need the fused update (Keras' own path decays every variable); "
                             "leave fused=True")
        self._var_frozen: List[bool] = []

    def build(self, var_list):
        if self.lr_multipliers is not None:
            missing = [v.path for v in var_list if v.path not in self.lr_multipliers]
            if missing:
                raise LayerwiseLRError(
                    f"{len(missing)} variable(s) have no learning-rate multiplier, e.g. {missing[0]!r}; "
                    f"compute them with layerwise_lr_multipliers() on the built model")
        super().build(var_list)
        if self.lr_multipliers is not None:
            self._var_multipliers = [float(self.lr_multipliers[v.path]) for v in var_list]
        if self.frozen_paths:
            frozen = set(self.frozen_paths)
            self._var_frozen = [v.path in frozen for v in var_list]
            if not any(self._var_frozen):
                raise ValueError(f"frozen_paths name no trained variable (e.g. {self.frozen_paths[0]!r})")

    def _thaw(self, dtype):
        """0 while the step is below frozen_steps, then 1."""
        return tf.cast(self.iterations >= self.frozen_steps, dtype)

    def _is_frozen(self, variable) -> bool:
        return bool(self._var_frozen) and self._var_frozen[self.variable_index(variable)]

    def weight_decay_step(self, variables):
        # Folded into `update_step` (the decay does not depend on the gradient,
        # so decaying first and updating after is the same arithmetic).
        if self.amsgrad or not self.fused:
            super().weight_decay_step(variables)

    def _constants(self, decay, dtype=tf.float32):
        # 1 - beta in float64 first: float32(0.999) is 1.3e-5 off in 1 - beta_2.
        return tf.constant([self.beta_1, self.beta_2, 1 - self.beta_1, 1 - self.beta_2,
                            self.epsilon, decay], dtype)

    def update_step(self, gradient, variable, learning_rate):
        """Keras' AdamW update of one variable as one XLA-fused element-wise loop.

        Keras' update is ~25 small ops per variable (~4,000 a step for
        ELECTRA-Small, whose optimizer step took 78 ms on the 2-core CPU; 56 ms
        fused). Same values as `keras.optimizers.AdamW` (tested). One XLA
        computation for all variables was 7 ms faster still but raised the
        process's peak RSS by 0.8 GB (Small), so each variable has its own.
        The weight decay is scaled by the same (multiplied) learning rate.
        """
        index = self.variable_index(variable)
        dtype = variable.dtype
        learning_rate = tf.cast(learning_rate, dtype)
        if self._var_multipliers:
            learning_rate = learning_rate * self._var_multipliers[index]
        step = tf.cast(self.iterations + 1, dtype)
        if self._is_frozen(variable):
            learning_rate = learning_rate * self._thaw(dtype)
            # Adam's bias correction counts this variable's own steps: its moments start at the thaw
            # (counting from step 0 would make its first steps up to ~6x the normal size).
            step = tf.maximum(step - self.frozen_steps, 1.0)
        if self.amsgrad or not self.fused:  # decayed by `_apply_weight_decay`
            return super().update_step(gradient, variable, learning_rate)
        momentum, velocity = self.slots(index)
        decay = self.weight_decay if self.decays(variable) else 0.0
        new_m, new_v, new_var = _fused_adamw(
            tf.convert_to_tensor(variable), tf.cast(gradient, dtype),
            tf.convert_to_tensor(momentum), tf.convert_to_tensor(velocity),
            learning_rate, step, self._constants(decay, dtype))
        self.assign(momentum, new_m)
        self.assign(velocity, new_v)
        self.assign(variable, new_var)

    def apply(self, grads, trainable_variables=None):
        # Embedding lookups give `tf.IndexedSlices` gradients with repeated rows
        # (every [PAD], every segment-0 token). Keras' sparse Adam path
        # scatter-adds those duplicates into m and v separately, so a row's step
        # grows with how often it repeats (up to sqrt(n) x lr); the reference
        # (and dense Adam) sums the duplicates first. Densify to match it; this
        # also makes micro-batch accumulation equal to the large batch.
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        return super().apply(grads, trainable_variables)

    def reduce_gradients(self, grads_and_vars):
        # Called by the TensorFlow backend before the update (with or without a
        # distribution strategy); the gradients returned here are the
        # replica-summed ones, so this is where the clip belongs.
        grads_and_vars = super().reduce_gradients(grads_and_vars)
        if self._var_frozen:
            grads_and_vars = [(g if g is None or not self._is_frozen(v) else g * self._thaw(g.dtype), v)
                              for g, v in grads_and_vars]
        if not self.clip_norm:
            return grads_and_vars
        grads = [g for g, _ in grads_and_vars]
        clipped, _ = tf.clip_by_global_norm(grads, self.clip_norm)
        return [(g, v) for g, (_, v) in zip(clipped, grads_and_vars)]

    def get_config(self):
        config = super().get_config()
        config["clip_norm"] = self.clip_norm
        config["lr_multipliers"] = self.lr_multipliers
        config["frozen_paths"] = self.frozen_paths
        config["frozen_steps"] = self.frozen_steps
        return config


def _adamw_values(variable, gradient, momentum, velocity, learning_rate, step, constants):
    """New (m, v, variable) of one AdamW step.

    `constants` = [beta_1, beta_2, 1 - beta_1, 1 - beta_2, epsilon, decay].
    """
    beta_1, beta_2, one_minus_beta_1, one_minus_beta_2, epsilon, decay = tf.unstack(constants)
    alpha = learning_rate * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))
    momentum = momentum + (gradient - momentum) * one_minus_beta_1
    velocity = velocity + (tf.square(gradient) - velocity) * one_minus_beta_2
    decayed = variable - variable * decay * learning_rate
    return momentum, velocity, decayed - momentum * alpha / (tf.sqrt(velocity) + epsilon)


_fused_adamw = tf.function(_adamw_values, jit_compile=True)



def adamw(learning_rate, weight_decay: float, beta_1: float, beta_2: float, epsilon: float,
          clip_norm: Optional[float], lr_multipliers: Optional[Dict[str, float]] = None,
          fused: bool = True, frozen_paths=None, frozen_steps: int = 0) -> ElectraAdamW:
    """`ElectraAdamW` with the reference's no-decay rule (names gamma, beta, bias).

    Args:
        learning_rate: a float or a schedule.
        weight_decay: decoupled weight-decay rate (0: none).
        beta_1, beta_2, epsilon: Adam's constants.
        clip_norm: global-norm clip of the replica-summed gradient (None or 0: off).
        lr_multipliers: per-variable learning-rate factors (fine-tuning), or None.
        fused: one XLA-fused update per variable (False: Keras' AdamW ops).
        frozen_paths, frozen_steps: variables held as they are for the first steps (`ElectraAdamW`).
    """
    optimizer = ElectraAdamW(learning_rate=learning_rate, weight_decay=weight_decay, beta_1=beta_1,
                             beta_2=beta_2, epsilon=epsilon, clip_norm=clip_norm or None,
                             lr_multipliers=lr_multipliers, fused=fused, frozen_paths=frozen_paths,
                             frozen_steps=frozen_steps)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAME_PATTERNS))
    return optimizer


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    """One run's optimizer: AdamW on the warm-up + polynomial-decay schedule.

    Defaults are the reference's (fine-tuning and pre-training alike: weight
    decay 0.01, Adam 0.9 / 0.999 / 1e-6, global-norm clip 1.0, linear decay).

    Args:
      learning_rate: the peak rate.
      train_steps: steps after which the rate reaches 0.
      warmup_steps: linear warm-up length.
      decay_power: 1.0 is linear decay.
      weight_decay: decoupled weight decay (not on biases and LayerNorm).
      beta_1, beta_2, epsilon: Adam's constants.
      clip_norm: global-norm clip of the replica-summed gradient (None or 0: off).
      fused: one XLA-fused update per variable (False: Keras' AdamW ops).
      adjustable_train_steps: the schedule's `train_steps` can move while training runs
        (`WarmupPolynomialDecay(adjustable=True)`).
    """
    learning_rate: float
    train_steps: int
    warmup_steps: int = 0
    decay_power: float = 1.0
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: Optional[float] = 1.0
    fused: bool = True
    adjustable_train_steps: bool = False

    @classmethod
    def from_warmup_proportion(cls, learning_rate: float, train_steps: int, warmup_proportion: float,
                               **kwargs) -> "OptimizerSpec":
        """The spec with `warmup_proportion` of `train_steps` warming up (fine-tuning's way to say it)."""
        return cls(learning_rate, train_steps, int(round(warmup_proportion * train_steps)), **kwargs)

    def schedule(self) -> WarmupPolynomialDecay:
        return WarmupPolynomialDecay(self.learning_rate, self.train_steps, self.warmup_steps, self.decay_power,
                                     adjustable=self.adjustable_train_steps)


def build_optimizer(spec: OptimizerSpec, lr_multipliers: Optional[Dict[str, float]] = None,
                    frozen_paths=None, frozen_steps: int = 0) -> ElectraAdamW:
    """The `ElectraAdamW` of `spec`.

    Args:
      spec: the run's `OptimizerSpec`.
      lr_multipliers: per-variable learning-rate factors (`variable.path` -> factor), or None.
      frozen_paths, frozen_steps: variables held as they are for the first steps.
    """
    return adamw(spec.schedule(), weight_decay=spec.weight_decay, beta_1=spec.beta_1, beta_2=spec.beta_2,
                 epsilon=spec.epsilon, clip_norm=spec.clip_norm or None, lr_multipliers=lr_multipliers,
                 fused=spec.fused, frozen_paths=frozen_paths, frozen_steps=frozen_steps)
