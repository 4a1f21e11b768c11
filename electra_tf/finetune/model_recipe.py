"""A model folder's own fine-tuning defaults: `finetune_recipe.json`.

The size defaults (size_defaults.py) suit a fully pre-trained encoder of each size. A given
pre-trained folder can fine-tune best with something else: an early ELECTRA-Small whose
pre-trained blocks start below random initialisation does best with its embeddings under
re-drawn blocks (docs/domain_study.md, "The kept ELECTRA-Small"). Whoever measured that
ships it beside the weights, and `finetune` and `ElectraClassifier.from_pretrained` take it
in place of the size's defaults; a flag (or keyword argument) still overrides each value.

The file:

    {"settings": {"learning_rate": 0.001, "reinit_top_layers": 12},
     "why": "what was measured, and where",
     "pretraining_steps": 6942}

`pretraining_steps` ties the recipe to the weights it was measured on: when the folder's
`history.json` (written by scripts/gpu/pretrain_small_imdb.py) says the weights have since been
pre-trained further, the recipe is set aside with a note, since more pre-training is exactly
what changes which recipe is best.

Example:

    >>> recipe, note = read_model_recipe("models/electra-small-imdb")
    >>> recipe.settings if recipe else note  # doctest: +SKIP
    {'learning_rate': 0.0003, 'layerwise_lr_decay': 1.0, 'pooling': 'mean', 'reinit_top_layers': 12, 'min_train_steps': 320}
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, Optional, Tuple

from electra_tf.finetune.settings import FinetuneError

RECIPE_FILE = "finetune_recipe.json"
HISTORY_FILE = "history.json"
# What a recipe may set: the settings that a model's own pre-training changes the best value of.
SETTINGS = {"learning_rate": float, "layerwise_lr_decay": float, "pooling": str, "batch_size": int,
            "min_train_steps": int, "reinit_top_layers": int}


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """A model folder's fine-tuning defaults.

    Attributes:
      settings: setting name -> value (the keys of `SETTINGS`).
      why: the measurement behind it, as the file says it.
      path: the file it came from.
    """
    settings: Dict[str, object]
    why: str
    path: str


def _bad(path: str, problem: str) -> FinetuneError:
    return FinetuneError(f"{path}: {problem}; fix the file or delete it (the model size's defaults then apply)")


def _check_value(path: str, name: str, value):
    kind = SETTINGS[name]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    else:
        ok = value in ("cls", "mean")
    if not ok:
        want = {int: "a non-negative integer", float: "a positive number", str: '"cls" or "mean"'}[kind]
        raise _bad(path, f"settings.{name}={value!r} must be {want}")
    return float(value) if kind is float else value


def _trained_steps(model_dir: str) -> Optional[int]:
    """The folder's pre-training steps in all, from its history.json (None: no history)."""
    path = os.path.join(model_dir, HISTORY_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
        return int(rows[-1]["cumulative_steps"])
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise FinetuneError(f"{path} cannot be read ({type(e).__name__}: {e}); restore it from git or delete "
                            f"it") from None


def read_model_recipe(model_dir: Optional[str]) -> Tuple[Optional[ModelRecipe], Optional[str]]:
    """The folder's `finetune_recipe.json`, checked.

    Args:
      model_dir: the model folder (None, or a folder without the file: no recipe).

    Returns:
      (recipe, None); (None, a note saying why the file is set aside) when the weights were
      pre-trained further than the recipe was measured on; (None, None) without a file.

    Raises:
      FinetuneError: one line, naming the file, for a file that is not a valid recipe.
    """
    if not model_dir:
        return None, None
    path = os.path.join(model_dir, RECIPE_FILE)
    if not os.path.isfile(path):
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except ValueError as e:
        raise _bad(path, f"not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("settings"), dict) or not doc["settings"]:
        raise _bad(path, 'needs {"settings": {...}, "why": "...", "pretraining_steps": N}')
    unknown = sorted(set(doc["settings"]) - set(SETTINGS))
    if unknown:
        raise _bad(path, f"settings {', '.join(unknown)} cannot be set here (only {', '.join(SETTINGS)})")
    settings = {k: _check_value(path, k, v) for k, v in doc["settings"].items()}
    why = doc.get("why")
    if not isinstance(why, str) or not why.strip():
        raise _bad(path, '"why" must say what the recipe was chosen on')
    steps = doc.get("pretraining_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)):
        raise _bad(path, f"pretraining_steps={steps!r} must be an integer")
    trained = _trained_steps(model_dir)
    if steps is not None and trained is not None and trained != steps:
        return None, (f"{path} was measured on these weights at {steps:,} pre-training steps; they now have "
                      f"{trained:,}, so the model size's defaults apply (measure again and update the file)")
    return ModelRecipe(settings, why.strip(), path), None
