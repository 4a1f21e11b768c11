"""The directory a fine-tuned classifier is saved in (what `export --kind classifier` reads).

    config.json              ElectraConfig of the encoder (do_lower_case, text_normalization: as fine-tuned)
    vocab.txt                the WordPiece vocabulary
    classifier.weights.h5    the whole `ClassifierModel` (encoder + task head), its weights only:
                             no optimizer state, so the file is the model's size
    classifier.json          task, labels, regression, pair, num_outputs,
                             two_layer_head, pooling, max_seq_length, do_lower_case,
                             text_normalization (and columns, for a model fine-tuned on own files)

Fine-tuning writes it and owns its format; `electra_tf.export` (a layer above)
reads it back with `electra_tf.export.load_classifier`. `text_normalization`
(and its casing, `do_lower_case`) is what the fine-tuning tokenizer actually
applied, so the served model tokenizes as it was trained, whatever the
pre-training config said. A classifier.json without it was written before the
field existed: `do_lower_case` in the nfkc_casefold mode
(`electra_tf.data.normalization.from_record`).
"""

from __future__ import annotations

import os
import shutil
from typing import Optional, Sequence

from electra_tf.fileio import write_json_atomic, write_text_atomic
from electra_tf.data.normalization import TextNormalization, from_record
from electra_tf.keras_compat import save_weights_only

CLASSIFIER_FILE = "classifier.json"
CLASSIFIER_WEIGHTS = "classifier.weights.h5"


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
    write_text_atomic(os.path.join(output_dir, "config.json"), config.to_json())
    target = os.path.join(output_dir, "vocab.txt")
    if os.path.abspath(vocab_file) != os.path.abspath(target):
        shutil.copyfile(vocab_file, target + ".tmp")
        os.replace(target + ".tmp", target)
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
