"""The model folder: its file names, and finding, reading and writing its non-weight files.

What keras-hub's `preset_utils.py` is to a preset, this module is to our model
folder: every file name a model folder holds is defined here and nowhere else,
and the pre-trained, encoder and classifier folders are found and read here.

A pre-trained model folder (what pre-training writes at the end, what `convert`
writes, what `finetune --init` and `export` read):

    config.json                    ElectraConfig of the whole model
    vocab.txt                      the WordPiece vocabulary (if known); its text normalisation is
                                   config.json's (build_vocab's own record beside a vocabulary,
                                   vocab.txt.normalization.json, is data/normalization.py's)
    discriminator.weights.h5       discriminator encoder (its own copy of the embeddings)
    discriminator_head.weights.h5  per-token replaced/original head
    discriminator.keras            the same two as one Keras model (config + weights)
    generator.weights.h5           generator encoder (embeddings included)
    generator_head.weights.h5      masked-LM head (tied table, dense, LayerNorm, bias)
    mlm_head.weights.h5            the full-size network's masked-LM head
    copy_head.weights.h5           All-Tokens MLM's copy gate
    pretrainer.weights.h5          every weight, for continuing pre-training
    conversion.json                written by convert: the source and each part's status
    finetune_recipe.json           the folder's own fine-tuning defaults (optional, below)
    history.json                   its pre-training history (scripts/gpu/pretrain_small_imdb.py)

Writing and loading the weights is `electra_tf.models.saving`.

A classifier folder (what fine-tuning writes in each seed_<n>/, `ElectraClassifier.save`,
what `export --kind classifier`, `predict` and `from_pretrained` read):

    config.json              ElectraConfig of the encoder (do_lower_case, text_normalization: as fine-tuned)
    vocab.txt                the WordPiece vocabulary
    classifier.weights.h5    the whole `ClassifierModel` (encoder + task head), its weights only:
                             no optimizer state, so the file is the model's size
    classifier.json          task, labels, regression, pair, num_outputs,
                             two_layer_head, pooling, max_seq_length, do_lower_case,
                             text_normalization (and columns, for a model fine-tuned on own files)

classifier.json's `text_normalization` (and its casing, `do_lower_case`) is what the
fine-tuning tokenizer actually applied, so the served model tokenizes as it was
trained, whatever the pre-training config said. A classifier.json without it was
written before the field existed: `do_lower_case` in the nfkc_casefold mode
(`electra_tf.data.normalization.from_record`).

A folder's own fine-tuning defaults, `finetune_recipe.json`: the size defaults
(training/size_defaults.py) suit a fully pre-trained encoder of each size. A given
pre-trained folder can fine-tune best with something else: an early ELECTRA-Small whose
pre-trained blocks start below random initialisation does best with its embeddings under
re-drawn blocks (docs/domain_study.md, "The kept ELECTRA-Small"). Whoever measured that
ships it beside the weights, and `finetune` and `ElectraClassifier.from_pretrained` take it
in place of the size's defaults; a flag (or keyword argument) still overrides each value:

    {"settings": {"learning_rate": 0.001, "reinit_top_layers": 12},
     "why": "what was measured, and where",
     "pretraining_steps": 6942}

`pretraining_steps` ties the recipe to the weights it was measured on: when the folder's
`history.json` says the weights have since been pre-trained further, the recipe is set
aside with a note, since more pre-training is exactly what changes which recipe is best.

    >>> recipe, note = read_model_recipe("models/electra-small-imdb")
    >>> recipe.settings if recipe else note  # doctest: +SKIP
    {'learning_rate': 0.0003, 'layerwise_lr_decay': 1.0, 'pooling': 'mean', 'reinit_top_layers': 12, 'min_train_steps': 320}

Every problem is one `ModelDirError` line naming the file and the fix; the tools
that read a folder for a flag (finetune --init) pass the line on as their own error.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from electra_tf.config import ElectraConfig
from electra_tf.data.normalization import TextNormalization, from_record
from electra_tf.errors import ElectraError
from electra_tf.fileio import read_json, write_json_atomic, write_text_atomic
from electra_tf.keras_compat import save_weights_only
from electra_tf.paths import hub_download_hint, resolve_config

# A pre-trained folder.
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
DISCRIMINATOR_FILE = "discriminator.weights.h5"
DISCRIMINATOR_HEAD_FILE = "discriminator_head.weights.h5"
GENERATOR_FILE = "generator.weights.h5"
GENERATOR_HEAD_FILE = "generator_head.weights.h5"
MLM_HEAD_FILE = "mlm_head.weights.h5"
COPY_HEAD_FILE = "copy_head.weights.h5"
PRETRAINER_FILE = "pretrainer.weights.h5"
DISCRIMINATOR_KERAS_FILE = "discriminator.keras"
CONVERSION_FILE = "conversion.json"  # written by convert: source and per-part status
RECIPE_FILE = "finetune_recipe.json"
HISTORY_FILE = "history.json"
# The encoder weights `finetune --init` takes from a folder, in the order it looks for them
# (encoder.* are what a user saves of the encoder alone).
INIT_FILES = (DISCRIMINATOR_FILE, "encoder.weights.h5", DISCRIMINATOR_KERAS_FILE, "encoder.keras")
# A classifier folder.
CLASSIFIER_FILE = "classifier.json"
CLASSIFIER_WEIGHTS = "classifier.weights.h5"
RUN_MODEL_SUBDIR = "pretrained"  # where a pre-training run writes its model
# Files that make a directory a model directory (ours, a classifier, a SavedModel).
MODEL_FILES = INIT_FILES + (CLASSIFIER_WEIGHTS, "saved_model.pb")

# What a recipe may set: the settings that a model's own pre-training changes the best value of.
RECIPE_SETTINGS = {"learning_rate": float, "layerwise_lr_decay": float, "pooling": str, "batch_size": int,
                   "min_train_steps": int, "reinit_top_layers": int}


class ModelDirError(ElectraError, ValueError):
    """A model directory that is missing files or does not match its config."""


# --------------------------------------------------------------------------- any folder
def has_model_files(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, name)) for name in MODEL_FILES)


def resolve_model_dir(path: str, flag: str, log: Optional[Callable[[str], None]] = None) -> str:
    """`path`, or `path/pretrained` when `path` is a pre-training run directory.

    A directory with no model file of its own whose `pretrained/` subdirectory
    has one is a run directory: its model is used, and `log` gets one line
    saying so. So the tools that read a model accept a pre-training run directory
    as well as the model directory inside it.
    """
    inner = os.path.join(path, RUN_MODEL_SUBDIR)
    if os.path.isdir(path) and not has_model_files(path) and os.path.isdir(inner) and has_model_files(inner):
        if log is not None:
            log(f"{flag} {path} is a pre-training run directory: using its model in {inner}")
        return inner
    return path


def load_config(model_dir: str) -> ElectraConfig:
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise ModelDirError(f"{model_dir} has no {CONFIG_FILE}; pass a directory written by electra_tf (pretrain or convert)")
    return ElectraConfig.from_json(path)


def copy_vocab(vocab_file: str, model_dir: str) -> None:
    """Copies `vocab_file` into `model_dir` as its vocab.txt (through a temporary name; nothing
    when it already is that file)."""
    target = os.path.join(model_dir, VOCAB_FILE)
    if os.path.abspath(vocab_file) != os.path.abspath(target):
        shutil.copyfile(vocab_file, target + ".tmp")
        os.replace(target + ".tmp", target)


def pretraining_vocab(model_dir: str) -> str:
    """The vocab.txt of `model_dir`, which rebuilding its pre-training networks needs (the special-token
    ids); ModelDirError when it has none."""
    vocab = os.path.join(model_dir, VOCAB_FILE)
    if not os.path.isfile(vocab):
        raise ModelDirError(f"{model_dir} has no {VOCAB_FILE}; the pre-trainer needs it for the special-token ids")
    return vocab


def read_conversion_record(model_dir: str) -> Optional[dict]:
    """conversion.json of a converted model directory (None for a pre-trained one)."""
    path = os.path.join(model_dir, CONVERSION_FILE)
    return read_json(path) if os.path.isfile(path) else None


def absent_parts(model_dir: str) -> List[str]:
    """Parts a conversion left at their initial values (empty for trained models)."""
    record = read_conversion_record(model_dir) or {}
    return sorted(p for p, s in record.get("parts", {}).items() if s != "converted")


# --------------------------------------------------------------------------- --init: an encoder's files
def _weights_in_dir(init: str) -> str:
    """The encoder weights inside a model directory, in `INIT_FILES` order, then a TF checkpoint."""
    for name in INIT_FILES:
        if os.path.isfile(os.path.join(init, name)):
            return os.path.join(init, name)
    for d in (init, os.path.join(init, "checkpoints")):
        if os.path.isdir(d) and tf.train.latest_checkpoint(d):
            return tf.train.latest_checkpoint(d)
    source = foreign_format(init)
    if source is not None:
        out = "models/" + os.path.basename(os.path.normpath(init))
        raise ModelDirError(
            f"--init {init!r} is {source[1]}, not a model directory of electra_tf; convert it first: "
            f"python -m electra_tf.convert --from {source[0]} --input {init} --output_dir {out}, then pass "
            f"--init {out}")
    raise ModelDirError(
        f"--init {init!r} holds no {' / '.join(INIT_FILES)} and no TF checkpoint; "
        f"pass the pre-training output directory or 'random'")


def foreign_format(directory: str) -> Optional[Tuple[str, str]]:
    """(convert --from value, description) for a keras-hub preset or Hugging Face directory, else None."""
    config = {}
    try:
        config = read_json(os.path.join(directory, CONFIG_FILE))  # keras-hub and Hugging Face name it as we do
    except (OSError, ValueError):
        pass
    config = config if isinstance(config, dict) else {}
    # keras-hub presets: metadata.json, and a config.json naming the backbone's module / class.
    if (os.path.isfile(os.path.join(directory, "metadata.json"))
            or str(config.get("module", "")).startswith("keras_hub")):
        return "keras_hub", "a keras-hub preset directory"
    if "model_type" in config and any(os.path.isfile(os.path.join(directory, name)) for name in
                                      ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")):
        return "hf", "a Hugging Face model directory"
    return None


def find_init_files(init: str, config_flag: Optional[str],
                    vocab_flag: Optional[str]) -> Tuple[Optional[str], str, str]:
    """Resolves --init / --config / --vocab_file to (weights or None, config path, vocab path).

    Args:
      init: the --init value ("random", a weights file, a TF checkpoint prefix or a model directory).
      config_flag: --config (a file or a shipped config's name), overrides the directory's config.json.
      vocab_flag: --vocab_file, overrides the directory's vocab.txt.

    Raises:
      ModelDirError: one line naming the flag's value and the fix.
    """
    weights = None
    search_dir = None
    if init != "random":
        if os.path.isdir(init):
            # A pre-training run directory: its model is in <run>/pretrained/.
            init = resolve_model_dir(init, "--init", lambda line: print(line, flush=True))
            search_dir = init
            weights = _weights_in_dir(init)
        elif os.path.isfile(init) or os.path.isfile(init + ".index"):
            weights = init
            search_dir = os.path.dirname(init)
        else:
            hint = hub_download_hint(init)
            if hint:
                name = init.split("/")[1]
                raise ModelDirError(f"--init {init!r} does not exist; {hint}, convert it with python -m "
                                    f"electra_tf.convert --from hf --input {name} --output_dir models/{name}, "
                                    f"then pass --init models/{name}")
            raise ModelDirError(f"--init {init!r} does not exist; pass a pre-training run directory, "
                                f"a .weights.h5 file, or 'random'")
    config = config_flag
    if config is not None:
        try:  # a file, or a shipped config's name (small)
            config = resolve_config(config)
        except ValueError as e:
            raise ModelDirError(str(e)) from None
    if config is None and search_dir and os.path.isfile(os.path.join(search_dir, CONFIG_FILE)):
        config = os.path.join(search_dir, CONFIG_FILE)
    if config is None:
        raise ModelDirError("no model config: pass --config with a config name (small, ...) or a JSON file "
                            "(or an --init directory with config.json)")
    vocab = vocab_flag
    if vocab is None and search_dir and os.path.isfile(os.path.join(search_dir, VOCAB_FILE)):
        vocab = os.path.join(search_dir, VOCAB_FILE)
    if vocab is None:
        raise ModelDirError("no vocabulary: pass --vocab_file (or an --init directory with vocab.txt)")
    return weights, config, vocab


# --------------------------------------------------------------------------- a classifier folder
def is_classifier_dir(model_dir: str) -> bool:
    return os.path.isfile(os.path.join(model_dir, CLASSIFIER_FILE))


def read_classifier_meta(model_dir: str) -> dict:
    """classifier.json of a classifier folder."""
    return read_json(os.path.join(model_dir, CLASSIFIER_FILE))


def check_classifier_dir(model_dir: str, error=ModelDirError) -> None:
    """Raises `error` (one line naming the first missing file) unless `model_dir` holds a classifier
    folder's classifier.json, classifier.weights.h5 and config.json."""
    for name in (CLASSIFIER_FILE, CLASSIFIER_WEIGHTS, CONFIG_FILE):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            raise error(f"{path} is missing; a classifier directory is written by "
                        f"electra_tf.models.model_folder.save_classifier ({CONFIG_FILE}, {VOCAB_FILE}, "
                        f"{CLASSIFIER_WEIGHTS}, {CLASSIFIER_FILE})")


def classifier_normalization(meta: dict, config, source: str) -> TextNormalization:
    """The text normalisation a classifier directory serves with: classifier.json's, else the config's
    (with classifier.json's casing, in a directory written before the field existed)."""
    if meta.get("text_normalization") is not None or config.text_normalization is None:
        return from_record(dict(meta, do_lower_case=meta.get("do_lower_case", config.do_lower_case)), source)
    return config.normalization


def save_classifier(output_dir: str, model, config, vocab_file: str, labels: Sequence[str], task: str,
                    pair: bool, max_seq_length: int, regression: bool = False,
                    two_layer_head: bool = False, pooling: str = "cls",
                    do_lower_case: Optional[bool] = None, columns: Optional[dict] = None,
                    normalization=None) -> str:
    """Writes a fine-tuned `ClassifierModel` so `export --kind classifier` can serve it.

    Args:
      output_dir: directory to write (e.g. a fine-tuning run's seed_<n>/).
      model: the trained `ClassifierModel` (built).
      config: its `ElectraConfig`.
      vocab_file: the vocabulary it was fine-tuned with.
      labels: class names in logit order (empty for regression).
      task: task name (informative).
      pair: the task takes sentence pairs.
      max_seq_length: the fine-tuning sequence length.
      regression: one output score instead of classes.
      two_layer_head: the head was built with two_layer_head=True.
      pooling: the head's pooling ("cls" or "mean").
      do_lower_case: the casing the fine-tuning tokenizer used (None: the config's).
      normalization: the `TextNormalization` the fine-tuning tokenizer used
        (None: the config's, with `do_lower_case`'s casing).
      columns: for a model fine-tuned on own files, the columns it read
        ({"text": ..., "text_pair": ..., "label": ...}): `predict` reads the same ones.
    """
    if normalization is None:
        normalization = config.normalization
        if do_lower_case is not None and bool(do_lower_case) != normalization.lower_case:
            normalization = TextNormalization.create(bool(do_lower_case), None, normalization.mode)
    lower = normalization.lower_case
    if normalization != config.normalization:
        config = config.with_normalization(normalization)  # config.json says what was trained
    os.makedirs(output_dir, exist_ok=True)
    write_text_atomic(os.path.join(output_dir, CONFIG_FILE), config.to_json())
    copy_vocab(vocab_file, output_dir)
    tmp = os.path.join(output_dir, CLASSIFIER_WEIGHTS + ".tmp.weights.h5")
    # The model's weights only: a compiled model's optimizer state (Adam's two slots per weight,
    # twice the model again) lives in the resumable checkpoints, not in the model a user copies.
    optimizer = getattr(model, "optimizer", None)
    # Into a temporary name, then renamed: never a half-written file.
    save_weights_only(model, tmp, skip=[optimizer] if optimizer is not None else ())
    os.replace(tmp, os.path.join(output_dir, CLASSIFIER_WEIGHTS))
    meta = {"task": task, "labels": list(labels), "regression": bool(regression), "pair": bool(pair),
            "num_outputs": 1 if regression else len(labels), "two_layer_head": bool(two_layer_head),
            "pooling": pooling, "max_seq_length": int(max_seq_length), "do_lower_case": lower,
            "text_normalization": normalization.to_json()}
    if columns:
        meta["columns"] = dict(columns)
    write_json_atomic(os.path.join(output_dir, CLASSIFIER_FILE), meta, sort_keys=True)
    return output_dir


# --------------------------------------------------------------------------- finetune_recipe.json
@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """A model folder's fine-tuning defaults.

    Attributes:
      settings: setting name -> value (the keys of `RECIPE_SETTINGS`).
      why: the measurement behind it, as the file says it.
      path: the file it came from.
    """
    settings: Dict[str, object]
    why: str
    path: str


def _bad_recipe(path: str, problem: str) -> ModelDirError:
    return ModelDirError(f"{path}: {problem}; fix the file or delete it (the model size's defaults then apply)")


def _check_recipe_value(path: str, name: str, value):
    kind = RECIPE_SETTINGS[name]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    else:
        ok = value in ("cls", "mean")
    if not ok:
        want = {int: "a non-negative integer", float: "a positive number", str: '"cls" or "mean"'}[kind]
        raise _bad_recipe(path, f"settings.{name}={value!r} must be {want}")
    return float(value) if kind is float else value


def _trained_steps(model_dir: str) -> Optional[int]:
    """The folder's pre-training steps in all, from its history.json (None: no history)."""
    path = os.path.join(model_dir, HISTORY_FILE)
    if not os.path.isfile(path):
        return None
    try:
        return int(read_json(path)[-1]["cumulative_steps"])
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise ModelDirError(f"{path} cannot be read ({type(e).__name__}: {e}); restore it from git or delete "
                            f"it") from None


def read_model_recipe(model_dir: Optional[str]) -> Tuple[Optional[ModelRecipe], Optional[str]]:
    """The folder's `finetune_recipe.json`, checked.

    Args:
      model_dir: the model folder (None, or a folder without the file: no recipe).

    Returns:
      (recipe, None); (None, a note saying why the file is set aside) when the weights were
      pre-trained further than the recipe was measured on; (None, None) without a file.

    Raises:
      ModelDirError: one line, naming the file, for a file that is not a valid recipe.
    """
    if not model_dir:
        return None, None
    path = os.path.join(model_dir, RECIPE_FILE)
    if not os.path.isfile(path):
        return None, None
    try:
        doc = read_json(path)
    except ValueError as e:
        raise _bad_recipe(path, f"not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("settings"), dict) or not doc["settings"]:
        raise _bad_recipe(path, 'needs {"settings": {...}, "why": "...", "pretraining_steps": N}')
    unknown = sorted(set(doc["settings"]) - set(RECIPE_SETTINGS))
    if unknown:
        raise _bad_recipe(path, f"settings {', '.join(unknown)} cannot be set here (only {', '.join(RECIPE_SETTINGS)})")
    settings = {k: _check_recipe_value(path, k, v) for k, v in doc["settings"].items()}
    why = doc.get("why")
    if not isinstance(why, str) or not why.strip():
        raise _bad_recipe(path, '"why" must say what the recipe was chosen on')
    steps = doc.get("pretraining_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)):
        raise _bad_recipe(path, f"pretraining_steps={steps!r} must be an integer")
    trained = _trained_steps(model_dir)
    if steps is not None and trained is not None and trained != steps:
        return None, (f"{path} was measured on these weights at {steps:,} pre-training steps; they now have "
                      f"{trained:,}, so the model size's defaults apply (measure again and update the file)")
    return ModelRecipe(settings, why.strip(), path), None
