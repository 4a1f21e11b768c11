"""Fine-tuning's optimizer, one for `finetune` and `ElectraClassifier.fit`: AdamW with layer-wise
learning rates, warm-up and linear decay (`make_optimizer`), and the settings it reads besides
the rate, the decay and the steps (`FinetuneOptimizerSettings`, whose defaults are the flags')."""

from __future__ import annotations

import dataclasses

from electra_tf.training.layerwise_lr import layerwise_lr_multipliers
from electra_tf.training.optimization import OptimizerSpec, build_optimizer


@dataclasses.dataclass(frozen=True)
class FinetuneOptimizerSettings:
    """The optimizer's settings besides rate, decay and steps; fine-tuning's `Settings` has the
    same fields (the flags --warmup_proportion, --weight_decay, --clip_norm, --reference_lr_power)
    and takes its defaults from here.

    Attributes:
      warmup_proportion: the share of the steps the rate warms up over.
      weight_decay: AdamW's decoupled weight decay.
      clip_norm: the global gradient-norm clip (0 or None: none).
      reference_lr_power: the reference code's extra factor of the layer-wise decay (layerwise_lr.py).
    """
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    reference_lr_power: bool = False


def make_optimizer(model, encoder, s, lr, decay, steps):
    """Fine-tuning's optimizer: the one `OptimizerSpec` (peak `lr`, `steps` steps,
    --warmup_proportion, --weight_decay, --clip_norm, linear decay) as an `ElectraAdamW`
    with layer-wise learning rates.

    The schedule is pre-training's (power 1 here); --clip_norm acts on the replica-summed
    gradient, so --strategy mirrored takes the same step as one device.

    Args:
      model: the built fine-tuning model.
      encoder: its encoder (layer depths are counted in it).
      s: fine-tuning's resolved `Settings`, or a `FinetuneOptimizerSettings` (`ElectraClassifier`).
      lr: peak learning rate.
      decay: layer-wise learning-rate decay (1.0: none).
      steps: total optimizer steps.

    Returns:
      (optimizer, {variable path: lr multiplier}).
    """
    spec = OptimizerSpec.from_warmup_proportion(lr, steps, s.warmup_proportion, weight_decay=s.weight_decay,
                                                clip_norm=s.clip_norm or None)
    mult = layerwise_lr_multipliers(model, encoder, decay, s.reference_lr_power)
    return build_optimizer(spec, lr_multipliers=mult), mult
