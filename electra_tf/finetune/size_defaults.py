"""Fine-tuning defaults by model size (a config's `model_size`): what `finetune` uses for a flag
left unset, and what `ElectraClassifier` starts from.

The paper's sizes (small, base, large; a size named in no row is treated as base) get the
reference's recipe (google-research/electra configure_finetuning.py): lr 1e-4 with layer-wise
decay 0.8 (large: 5e-5, 0.9), the task's epochs, the [CLS] vector.

The sizes made to be pre-trained on a CPU (configs/tiny.json, cpu_demo.json, mini.json) get the
recipe the domain study chose on its dev sets (docs/domain_study.md, recipe `r1`): from a few
thousand rows their encoders need a larger learning rate, no layer-wise decay, more epochs (the
task's `cpu_epochs`) and the mean of the token vectors, whether pre-trained or not.

>>> for_size("mini").learning_rate, for_size("my_size") == for_size("base")
(0.001, True)
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SizeDefaults:
    """One size's fine-tuning defaults.

    Attributes:
      learning_rate: the peak learning rate.
      layerwise_lr_decay: the layer-wise learning-rate decay (1: none).
      pooling: the classifier head's input: "cls" (the [CLS] vector) or "mean" (of the tokens).
      cpu_epochs: train for the task's `cpu_epochs` (more, for encoders that learn from few rows
        slowly) rather than its reference epochs.
    """

    learning_rate: float
    layerwise_lr_decay: float
    pooling: str
    cpu_epochs: bool = False


REFERENCE = SizeDefaults(learning_rate=1e-4, layerwise_lr_decay=0.8, pooling="cls")
# Chosen by the domain study (docs/domain_study.md): its recipe r1 at the task's cpu_epochs.
CPU_PRETRAINED = SizeDefaults(learning_rate=1e-3, layerwise_lr_decay=1.0, pooling="mean", cpu_epochs=True)

SIZE_DEFAULTS = {
    "small": REFERENCE,
    "small_plus": REFERENCE,
    "base": REFERENCE,
    "large": SizeDefaults(learning_rate=5e-5, layerwise_lr_decay=0.9, pooling="cls"),
    "tiny": CPU_PRETRAINED,
    "cpu_demo": CPU_PRETRAINED,
    "mini": CPU_PRETRAINED,
}


def for_size(model_size: str) -> SizeDefaults:
    """The defaults of a config's `model_size` (a size named in no row: as base)."""
    return SIZE_DEFAULTS.get(model_size, REFERENCE)
