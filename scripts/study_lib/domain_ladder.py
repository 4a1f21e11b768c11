"""The domain study's ladder: its pre-training runs (rungs), fine-tuning recipes and labelled sets.

scripts/domain_study.py runs them; scripts.study_lib.domain_report tabulates them. Method and
results: docs/domain_study.md.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional

from electra_tf.training import size_defaults


@dataclasses.dataclass(frozen=True)
class Rung:
    """One pre-training run: a size (config file), a sequence length, steps and overrides."""

    name: str
    config: str  # configs/<config>.json
    seq: int
    steps: int
    overrides: tuple = ()
    warmup: Optional[int] = None  # default: 10% of the steps
    continue_from: Optional[str] = None  # a finished rung this one trains on from (to `steps` in all)
    long_tasks: bool = False  # also fine-tune on IMDB at 256 tokens (where whole reviews start to fit)
    # A model directory pre-trained elsewhere (relative to the repository; its history.json says how):
    # the rung fine-tunes it and a random encoder of its shape and vocabulary, and pre-trains nothing.
    model_dir: Optional[str] = None

    @property
    def size(self) -> str:
        return self.config


# The ladder, in the order it runs. Equal-FLOPs comparisons share a budget (see FLOPs in results.md).
RUNGS = [
    Rung("cpu_demo_electra_5k", "cpu_demo", 128, 5000),
    # Equal FLOPs to cpu_demo_electra_5k (electra_tf.flops): an MLM step costs 1/1.70 of an
    # ELECTRA step at this size.
    Rung("cpu_demo_mlm_eq5k", "cpu_demo", 128, 8490, ("objective=mlm",)),
    Rung("cpu_demo_electra_15k", "cpu_demo", 128, 15000, continue_from="cpu_demo_electra_5k"),
    Rung("cpu_demo_electra_t1_5k", "cpu_demo", 128, 5000, ("temperature=1.0",)),
    Rung("mini_electra_3k", "mini", 128, 3000, ("temperature=2.0",), long_tasks=True),
    Rung("cpu_demo_mlm_eq15k", "cpu_demo", 128, 25470, ("objective=mlm",), continue_from="cpu_demo_mlm_eq5k"),
    # A generator as wide as the discriminator: a step costs 1/0.889 of the 0.5-wide one.
    Rung("cpu_demo_electra_gen1_eq5k", "cpu_demo", 128, 4445, ("generator_hidden_size=1.0",)),
    # Pre-training at 64 tokens, equal FLOPs to cpu_demo_electra_5k (a step costs 1/2.09 of a 128-token one).
    Rung("cpu_demo_electra_seq64_eq5k", "cpu_demo", 64, 10457),
    # DeBERTa-v3's gradient-disentangled embedding sharing: the token table learns from the
    # generator's MLM alone, the discriminator adds its own delta (one V x E merge a step: the
    # same FLOPs to 4 digits as cpu_demo_electra_5k).
    Rung("cpu_demo_electra_gdes_5k", "cpu_demo", 128, 5000, ("embedding_sharing=gdes",)),
    # One GPU (bf16 + XLA: --pretrain_flags "--mixed_precision bf16 --jit_compile" --parallel 10):
    # ELECTRA-Small, the paper's settings but temperature 2 (at 1 the CPU sizes' discriminators
    # collapsed on this text).
    Rung("small_electra_gpu_20k", "small", 128, 20000, ("temperature=2.0",), long_tasks=True),
    # The same recipe pre-trained on lent GPUs a few minutes at a time and kept in the repository
    # (scripts/gpu/pretrain_small_imdb.py); its steps are what models/electra-small-imdb/ holds.
    Rung("small_electra_gpu_kept", "small", 128, 0, long_tasks=True, model_dir="models/electra-small-imdb"),
    # An earlier point of the same run, for the curve: the 2-minute snapshot of the first loan
    # (step 3,767), unpacked outside the repository first:
    #   python scripts/gpu/pretrain_small_imdb.py unpack --files <its files> --model_dir runs/electra-small-imdb-step3767
    Rung("small_electra_gpu_step3767", "small", 128, 0, long_tasks=True, model_dir="runs/electra-small-imdb-step3767"),
]

# Fine-tuning recipes (chosen on the dev sets; see docs/domain_study.md). A recipe passes its
# settings as `finetune` flags; a setting it leaves out is `finetune`'s default for the model's size,
# spelled out below (`_pinned`) so that a model folder's own recipe cannot change it.
_SMALL = size_defaults.for_size("small")
RECIPES = {
    # What a user gets with no recipe flags: the model folder's own recipe where it ships one
    # (finetune_recipe.json, electra_tf/models/model_folder.py), else the size's defaults
    # (electra_tf/training/size_defaults.py).
    "defaults": dict(),
    # ELECTRA-Small's size defaults spelled out, whatever recipe a model folder ships (what
    # `defaults` ran on the kept model before its folder had a recipe).
    "size_defaults": dict(learning_rate=_SMALL.learning_rate, layerwise_lr_decay=_SMALL.layerwise_lr_decay,
                          pooling=_SMALL.pooling, reinit_top_layers=0, min_train_steps=_SMALL.min_train_steps),
    # The reference code's recipe (configure_finetuning.py: lr 1e-4, layer-wise decay 0.8, [CLS]) at
    # the task's 3 epochs: 48 optimizer steps on 500 rows (Small's defaults before they had a floor).
    "reference_3ep": dict(learning_rate=1e-4, epochs=3, pooling="cls", warmup_proportion=0.1,
                          layerwise_lr_decay=0.8),
    "r1": dict(learning_rate=1e-3, epochs=10, pooling="mean", warmup_proportion=0.1, layerwise_lr_decay=1.0),
    # The paper's fine-tuning of ELECTRA-Small (lr 3e-4, layer-wise decay 0.8, [CLS]), 10 epochs
    # as for its small GLUE sets.
    "paper": dict(learning_rate=3e-4, epochs=10, pooling="cls", warmup_proportion=0.1, layerwise_lr_decay=0.8),
}
# The fine-tuning levers, each one change to r1 (chosen on the scored dev rows: run them with
# --recipes and --tasks on one rung, pre-trained and random alike).
_R1 = RECIPES["r1"]
RECIPES.update({
    "r1_epochs20": dict(_R1, epochs=20),
    "r1_lr3e-3": dict(_R1, learning_rate=3e-3),
    "r1_warmup0": dict(_R1, warmup_proportion=0.0),
    "r1_warmup30": dict(_R1, warmup_proportion=0.3),
    "r1_cls": dict(_R1, pooling="cls"),
    # The head at lr 1e-3 and each layer below at half the rate of the one above: a separate,
    # faster head learning rate.
    "r1_decay0.5": dict(_R1, layerwise_lr_decay=0.5),
})
# The kept ELECTRA-Small's recipes (docs/domain_study.md, "The kept ELECTRA-Small").
RECIPES.update({
    # r1 at the paper's learning rate for Small (its appendix, Table 7: 3e-4).
    "r1_lr3e-4": dict(_R1, learning_rate=3e-4),
    # The few-label practice (Mosbach et al. 2021; Zhang et al. 2021): more steps (20 epochs), Adam
    # with bias correction (Keras' AdamW has it), the top blocks re-drawn before fine-tuning.
    "fewlabel": dict(_R1, learning_rate=3e-4, epochs=20, reinit_top_layers=3),
    # A diagnosis, not a recipe: the pre-trained embeddings under twelve freshly drawn blocks.
    "r1_reinit12": dict(_R1, reinit_top_layers=12),
    # The same diagnosis under the defaults: what the defaults would give if they kept only the
    # pre-trained embeddings.
    "defaults_reinit12": dict(learning_rate=3e-4, reinit_top_layers=12),
    # A candidate for the kept model's own recipe (a finetune_recipe.json): the defaults at r1's
    # learning rate with all blocks re-drawn (on 500 rows: r1_reinit12's 160 steps).
    "lr1e-3_reinit12": dict(learning_rate=1e-3, reinit_top_layers=12),
    # Between the two: lr 1e-3 collapses SST-2 to its majority class (from random init too), lr 3e-4
    # re-drawn trails lr 1e-3 on IMDB 500.
    "lr5e-4_reinit12": dict(learning_rate=5e-4, reinit_top_layers=12),
})
RECIPES.update({
    # Fresh blocks at the defaults' lr 3e-4 given twice the floor's steps: what lr 1e-3 buys on IMDB
    # may be speed, which more steps give without lr 1e-3's collapses on SST-2.
    "defaults_reinit12_steps320": dict(RECIPES["defaults_reinit12"], min_train_steps=320),
    # Its control: the same lr and steps with no block re-drawn (for random init, the same recipe).
    "size_defaults_steps320": dict(RECIPES["size_defaults"], min_train_steps=320),
})


def _pinned(recipe: dict) -> dict:
    """`recipe` with every setting a model folder's own recipe may set (finetune_recipe.json) spelled
    out as `finetune` resolves it without one (Small's size defaults; no step floor under a recipe's own
    epochs, as `finetune` applies the floor to the default epochs only), so that a recipe runs the same
    on the kept folder, an earlier snapshot of it and random init. (`batch_size`: recipe_flags' 32.)"""
    floor = 0 if "epochs" in recipe else _SMALL.min_train_steps
    implied = dict(learning_rate=_SMALL.learning_rate, layerwise_lr_decay=_SMALL.layerwise_lr_decay,
                   pooling=_SMALL.pooling, reinit_top_layers=0, min_train_steps=floor)
    return dict(recipe, **{name: value for name, value in implied.items() if name not in recipe})


# Every recipe but `defaults` (which is what a user gets, the folder's recipe included) is pinned.
RECIPES = {name: recipe if name == "defaults" else _pinned(recipe) for name, recipe in RECIPES.items()}

# Labelled sets: name -> fine-tuning sequence length.
TASKS = {"imdb500": 128, "imdb2000": 128, "sst2_2000": 64}
# Rungs with long_tasks also fine-tune these: the same rows as the task before "_", longer inputs.
LONG_TASKS = {"imdb500_256": 256, "imdb2000_256": 256}


def rung_tasks(rung: Rung) -> List[str]:
    """The labelled sets a rung fine-tunes on, in order."""
    return list(TASKS) + (list(LONG_TASKS) if rung.long_tasks else [])


def task_seq(task: str) -> int:
    return {**TASKS, **LONG_TASKS}[task]


def task_data(task: str) -> str:
    """The labelled set a task reads (a long task reads the set its name extends: imdb500_256 -> imdb500)."""
    return task.rsplit("_", 1)[0] if task in LONG_TASKS else task
