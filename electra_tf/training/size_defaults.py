"""Fine-tuning defaults by model size (a config's `model_size`): what `finetune` uses for a flag
left unset, and what `ElectraClassifier` starts from; `reference_hparams` joins a size's row with a
task's epochs and sequence length, and the `OWN_DATA_*` numbers are the own-data task's (a labelled
file, `finetune --train_file`), here so that `ElectraClassifier` reads them without the finetune job.

The paper's sizes base and large (and a size named in no row, treated as base) get the reference's
recipe (google-research/electra configure_finetuning.py): lr 1e-4 with layer-wise decay 0.8 (large:
5e-5, 0.9), the task's epochs, the [CLS] vector.

ELECTRA-Small (small, small_plus) gets the paper's learning rate for it (Clark et al. 2020, appendix
Table 7: 3e-4; the reference code's 1e-4 is its generic default, meant to be overridden per size),
without layer-wise decay and with the mean of the token vectors: on 500 IMDB reviews the
ELECTRA-Small this project pre-trained learns nothing in 48 steps at the reference's recipe and
scores best with these settings (docs/domain_study.md, "The kept ELECTRA-Small"). An early
ELECTRA-Small's pre-trained knowledge sits mostly in its embeddings; a decay of 0.8 over 12 blocks
gives them 0.8^13 = 5% of the head's rate.

The paper's sizes train at least `FEW_LABEL_STEPS` optimizer steps when the task's epochs give
fewer (a file of a few hundred rows: 3 epochs of 500 rows are 48 steps), the few-label practice of
Mosbach et al. (2021) and Zhang et al. (2021): fine-tuning that stops after a few dozen steps
leaves the head at the majority class.

The sizes made to be pre-trained on a CPU (configs/tiny.json, cpu_demo.json, mini.json) get the
recipe the domain study chose on its dev sets (docs/domain_study.md, recipe `r1`): from a few
thousand rows their encoders need a larger learning rate, no layer-wise decay, more epochs (the
task's `cpu_epochs`) and the mean of the token vectors, whether pre-trained or not.

Encoders imported from the BERT family (`convert --from hf` of a BERT, MiniLM or
sentence-transformers model: their config says `model_size: imported`) get the usual recipe for a
pre-trained public encoder of that size: lr 5e-5, no layer-wise decay, batch 16, the task's
epochs, and the encoder's own read-out (config.json's `pooling`, which the import takes from
sentence-transformers' `1_Pooling/config.json`: the mean of the tokens for all-MiniLM-L6-v2; the
[CLS] vector when the source records none). On 500 IMDB reviews all-MiniLM-L6-v2 scores 79.05 with it
(median of 3 seeds) and 73.55 with the reference's recipe (seed 1); 81.8 on SST-2 with 2,000
sentences (docs/finetune.md, "Fine-tune an imported encoder").

>>> for_size("mini").learning_rate, for_size("my_size") == for_size("base")
(0.001, True)
>>> for_size("small")
SizeDefaults(learning_rate=0.0003, layerwise_lr_decay=1.0, pooling='mean', cpu_epochs=False, batch_size=32, min_train_steps=160)
>>> for_size("imported", pooling="mean")
SizeDefaults(learning_rate=5e-05, layerwise_lr_decay=1.0, pooling='mean', cpu_epochs=False, batch_size=16, min_train_steps=0)
>>> reference_hparams("mini", None, epochs=3.0, cpu_epochs=10.0, max_seq_length=128)["epochs"]
10.0
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional


@dataclasses.dataclass(frozen=True)
class SizeDefaults:
    """One size's fine-tuning defaults.

    Attributes:
      learning_rate: the peak learning rate.
      layerwise_lr_decay: the layer-wise learning-rate decay (1: none).
      pooling: the classifier head's input: "cls" (the [CLS] vector) or "mean" (of the tokens).
      cpu_epochs: train for the task's `cpu_epochs` (more, for encoders that learn from few rows
        slowly) rather than its reference epochs.
      batch_size: the global training batch.
      min_train_steps: the fewest optimizer steps the default epochs give: on a small file they
        are raised to reach it (0: no floor). An explicit --epochs is taken as it is.
    """

    learning_rate: float
    layerwise_lr_decay: float
    pooling: str
    cpu_epochs: bool = False
    batch_size: int = 32
    min_train_steps: int = 0


# The fewest optimizer steps of the paper's sizes' default epochs: 10 epochs of 500 rows at batch 32,
# the domain study's few-label recipe, the fewest it measured that learn on 500 reviews.
FEW_LABEL_STEPS = 160

REFERENCE = SizeDefaults(learning_rate=1e-4, layerwise_lr_decay=0.8, pooling="cls", min_train_steps=FEW_LABEL_STEPS)
# ELECTRA-Small: the paper's rate for it (appendix Table 7), no layer-wise decay, mean pooling
# (docs/domain_study.md, "The kept ELECTRA-Small").
SMALL = SizeDefaults(learning_rate=3e-4, layerwise_lr_decay=1.0, pooling="mean", min_train_steps=FEW_LABEL_STEPS)
# Chosen by the domain study (docs/domain_study.md): its recipe r1 at the task's cpu_epochs.
CPU_PRETRAINED = SizeDefaults(learning_rate=1e-3, layerwise_lr_decay=1.0, pooling="mean", cpu_epochs=True)

# BERT-family encoders imported with `convert` (their config's model_size is "imported"): the usual
# fine-tuning of a pre-trained BERT-size encoder (Devlin et al.'s grid: lr 2e-5..5e-5, batch 16/32);
# the pooling is the encoder's own when its config records one (`for_size(..., pooling=)`).
IMPORTED = SizeDefaults(learning_rate=5e-5, layerwise_lr_decay=1.0, pooling="cls", batch_size=16)

SIZE_DEFAULTS = {
    "small": SMALL,
    "small_plus": SMALL,
    "base": REFERENCE,
    "large": SizeDefaults(learning_rate=5e-5, layerwise_lr_decay=0.9, pooling="cls", min_train_steps=FEW_LABEL_STEPS),
    "tiny": CPU_PRETRAINED,
    "cpu_demo": CPU_PRETRAINED,
    "mini": CPU_PRETRAINED,
    "imported": IMPORTED,
}


def for_size(model_size: str, pooling: Optional[str] = None) -> SizeDefaults:
    """The defaults of a config's `model_size` (a size named in no row: as base).

    Args:
      model_size: the config's `model_size`.
      pooling: the encoder's own read-out (the config's `pooling`): "cls" or "mean"; None: the
        size's.
    """
    row = SIZE_DEFAULTS.get(model_size, REFERENCE)
    return dataclasses.replace(row, pooling=pooling) if pooling else row


# The own-data task's reference epochs, epochs for the sizes pre-trained on a CPU (as GLUE's: a
# CPU-sized encoder learns from few rows slowly) and sequence length: `OwnDataFinetuneTask`'s, and
# what `ElectraClassifier` starts from.
OWN_DATA_EPOCHS = 3.0
OWN_DATA_CPU_EPOCHS = 10.0
OWN_DATA_MAX_SEQ_LENGTH = 128


def reference_hparams(model_size: str, pooling: Optional[str], epochs: float, cpu_epochs: Optional[float],
                      max_seq_length: int) -> Dict[str, object]:
    """A task's default fine-tuning settings for a model size: the size's row with the task's epochs
    (its `cpu_epochs` where the row says `cpu_epochs` and the task has them) and sequence length.

    Args:
      model_size: the config's `model_size` (anything named in no row: as base).
      pooling: the encoder's own read-out (the config's `pooling`), which wins over the size's;
        None: the size's.
      epochs: the task's reference epochs.
      cpu_epochs: the task's epochs for the sizes pre-trained on a CPU; None: `epochs`.
      max_seq_length: the task's reference sequence length.
    """
    defaults = for_size(model_size, pooling)
    return {"learning_rate": defaults.learning_rate, "pooling": defaults.pooling,
            "batch_size": defaults.batch_size, "max_seq_length": max_seq_length,
            "layerwise_lr_decay": defaults.layerwise_lr_decay,
            "epochs": (cpu_epochs or epochs) if defaults.cpu_epochs else epochs,
            "min_train_steps": defaults.min_train_steps}


def source_of(model_size: str) -> str:
    """How the opening lines of a run name where a size default came from."""
    if model_size == "imported":
        return "imported-encoder default"
    if model_size in SIZE_DEFAULTS:
        return f"{model_size} default"
    return f"default of the paper's sizes ({model_size!r} is not a size here)"
