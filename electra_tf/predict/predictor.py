"""Label names and class probabilities from a fine-tuned classifier, in Python.

`Predictor` reads a fine-tuning seed directory (`seed_<n>/`, what
`python -m electra_tf.finetune` writes), a classifier SavedModel (what
`python -m electra_tf.export --kind classifier` writes) or a LiteRT folder or
.tflite file (`export --kind classifier --format tflite`). Either way the text
is tokenized by the same `TextPreprocessor` the model was trained with: in
the serving graph TF Serving runs, inside the text-in .tflite file, or, for
the ids-in model_ids.tflite, in TensorFlow before the file runs.

Example:

>>> from electra_tf.predict import Predictor
>>> predictor = Predictor("runs/reviews/seed_1")                           # doctest: +SKIP
>>> [(p.label, round(p.probabilities["positive"], 2)) for p in predictor.predict(["a great film"])]  # doctest: +SKIP
[('positive', 0.81)]
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of a SavedModel's tokenizer)

from electra_tf.errors import ElectraError
from electra_tf.export.serving_loader import classifier_module
from electra_tf.export.serving import ASSETS_EXTRA, CLASSIFIER_METADATA, ENCODED_INPUTS
from electra_tf.export.tflite import IDS_FILE, METADATA_FILE, LiteRTError, LiteRTModel, read_metadata
from electra_tf.models.model_folder import (CLASSIFIER_FILE, VOCAB_FILE, is_classifier_dir, read_classifier_meta,
                                            resolve_model_dir)
from electra_tf.preprocessing import TextPreprocessor, text_list


class PredictError(ElectraError, ValueError):
    """A model directory or input that `Predictor` cannot use."""


@dataclasses.dataclass
class Prediction:
    """The classifier's answer for one text.

    Attributes:
      label: the predicted class name (None for a regression).
      label_id: its index in `Predictor.labels` (None for a regression).
      probabilities: class name -> probability (empty for a regression).
      score: the predicted number of a regression (None for classes).
      truncated: the text was cut to the model's max_seq_length.
    """
    label: Optional[str]
    label_id: Optional[int]
    probabilities: Dict[str, float]
    score: Optional[float]
    truncated: bool


def _is_litert(path: str) -> bool:
    """A .tflite file, or a folder `export --format tflite` wrote."""
    if os.path.isfile(path):
        return path.endswith(".tflite")
    return os.path.isfile(os.path.join(path, METADATA_FILE)) and not is_classifier_dir(path)


class Predictor:
    """A fine-tuned classifier (or regressor) that answers with label names.

    Args:
      model_dir: a fine-tuning seed directory (with classifier.json), a
        classifier SavedModel directory (with saved_model.pb; then only
        TensorFlow and tensorflow-text run), or a LiteRT folder (with
        model.json) or one of its .tflite files: model.tflite (text in; the
        folder's file by default) or model_ids.tflite (tokenized here first).
        A LiteRT file runs in ai-edge-litert's interpreter when that package
        is installed, else in TensorFlow's `tf.lite`.
      batch_size: texts per model call.
      max_seq_length: word pieces per text, [CLS]/[SEP] included (seed
        directories only; default: the fine-tuning length).
      sort_by_length: when a call gets more than `batch_size` texts, batch
        them in order of length (characters) and put the answers back in
        input order. Each batch is padded to its longest row, so texts of
        like length waste less work on padding (on IMDB reviews at 256
        pieces: docs/performance.md). The answers equal those of batches
        taken in input order up to float rounding.
      precision: "bf16" runs a seed directory's encoder in bfloat16 (opt-in:
        faster on CPUs with AVX512_BF16, logits within a few 1e-1 of float32;
        docs/performance.md); None or "none": float32. A SavedModel or LiteRT
        file runs as exported.
      num_threads: a LiteRT file's interpreter threads (None: the runtime's default).

    Attributes:
      labels: class names in the order of the probabilities (empty: regression).
      regression: the model predicts a number.
      pair: the model takes text pairs.
      columns: {"text", "text_pair", "label"} columns the model was fine-tuned
        on (own files; {} for the built-in tasks).
      max_seq_length: word pieces per text it reads, [CLS]/[SEP] included (a
        longer text is cut and its `Prediction.truncated` is True); None when
        a SavedModel does not record it.

    Raises:
      PredictError: a directory that does not exist, or holds no classifier.
    """

    def __init__(self, model_dir: str, batch_size: int = 64, max_seq_length: Optional[int] = None,
                 sort_by_length: bool = True, precision: Optional[str] = None, num_threads: Optional[int] = None):
        self.runtime = "tensorflow"  # or the LiteRT interpreter that runs a .tflite file
        litert = _is_litert(model_dir)
        if not litert and not os.path.isdir(model_dir):
            raise PredictError(f"{model_dir} does not exist; pass a fine-tuning seed_<n>/ directory, a classifier "
                               f"SavedModel or a LiteRT folder / .tflite file")
        self.batch_size = int(batch_size)
        self.sort_by_length = bool(sort_by_length)
        if self.batch_size < 1:
            raise PredictError(f"batch_size={batch_size} must be a positive integer")
        if not litert:
            model_dir = resolve_model_dir(model_dir, "Predictor", logging.getLogger(__name__).info)
        if litert:
            meta = self._load_litert(model_dir, max_seq_length, precision, num_threads)
        elif os.path.isfile(os.path.join(model_dir, "saved_model.pb")):
            if precision not in (None, "none"):
                raise PredictError(f"precision={precision!r} applies to a fine-tuning seed directory; a SavedModel "
                                   f"runs in the precision it was exported with")
            meta = self._load_saved_model(model_dir)
        elif is_classifier_dir(model_dir):
            module = classifier_module(model_dir, max_seq_length, precision)
            self._call = module.serve
            meta = dict(read_classifier_meta(model_dir), max_seq_length=module.max_seq_length)
        else:
            raise PredictError(f"{model_dir} holds no fine-tuned classifier ({CLASSIFIER_FILE} or saved_model.pb); "
                               f"fine-tune one with python -m electra_tf.finetune and pass its seed_<n>/ directory "
                               f"(a pre-trained model scores tokens with electra_tf.scoring.Scorer)")
        self.labels: List[str] = [str(label) for label in meta.get("labels", [])]
        self.regression = bool(meta.get("regression", False))
        self.pair = bool(meta.get("pair", False))
        self.columns: Dict[str, Optional[str]] = dict(meta.get("columns") or {})
        length = meta.get("max_seq_length")
        self.max_seq_length: Optional[int] = None if length is None else int(length)

    def _load_saved_model(self, model_dir: str) -> dict:
        fn = tf.saved_model.load(model_dir).signatures["serving_default"]
        outputs = set(fn.structured_outputs)
        if "sentence_score" in outputs:
            raise PredictError(f"{model_dir} is a discriminator SavedModel (per-token scores); score it with "
                               f"electra_tf.scoring.Scorer, or export a fine-tuned seed_<n>/ with --kind classifier")
        if not outputs & {"probabilities", "score"}:
            raise PredictError(f"{model_dir} is not a SavedModel written by python -m electra_tf.export --kind "
                               f"classifier (its outputs: {', '.join(sorted(outputs))})")
        pair = "text_b" in fn.structured_input_signature[1]
        self._call = (lambda a, b: fn(text_a=a, text_b=b)) if pair else (lambda a: fn(text=a))
        path = os.path.join(model_dir, ASSETS_EXTRA, CLASSIFIER_METADATA)
        meta = {"pair": pair, "regression": "score" in outputs}
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                meta.update(json.load(f))
        return meta

    def _load_litert(self, path: str, max_seq_length: Optional[int], precision: Optional[str],
                     num_threads: Optional[int]) -> dict:
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        try:
            meta = read_metadata(folder)
        except LiteRTError as e:
            raise PredictError(str(e)) from None
        if meta.get("kind") != "classifier":
            raise PredictError(f"{path} is a discriminator LiteRT export (per-token scores); export a fine-tuned "
                               f"seed_<n>/ with --kind classifier --format tflite")
        if precision not in (None, "none"):
            raise PredictError(f"precision={precision!r} applies to a fine-tuning seed directory; a LiteRT file runs "
                               f"as it was exported (--quantize int8 for int8 weights)")
        if max_seq_length is not None and int(max_seq_length) != int(meta["max_seq_length"]):
            raise PredictError(f"max_seq_length={max_seq_length}: {path} was exported for {meta['max_seq_length']} "
                               f"word pieces; export again with --max_seq_length {max_seq_length}, or leave it out")
        files = meta.get("files") or {}
        file = path if os.path.isfile(path) else os.path.join(folder, files.get("text") or files.get("ids", ""))
        if not os.path.isfile(file):
            raise PredictError(f"{folder} lacks the .tflite file its {METADATA_FILE} names; export again")
        try:
            model = LiteRTModel(file, num_threads=num_threads)
        except LiteRTError as e:
            raise PredictError(str(e)) from None
        self.runtime = model.runtime
        if os.path.basename(file) == files.get("ids", IDS_FILE) or "input_ids" in model.inputs:
            self._call = self._ids_call(model, folder, meta)
        else:
            names = model.inputs
            self._call = lambda *texts: model(**dict(zip(names, texts)))
        return meta

    @staticmethod
    def _ids_call(model: LiteRTModel, folder: str, meta: dict):
        """Texts -> the ids-in file's outputs, tokenized with the folder's vocab.txt and normalisation."""
        vocab = os.path.join(folder, meta.get("vocab", VOCAB_FILE))
        if not os.path.isfile(vocab):
            raise PredictError(f"{folder} has no {os.path.basename(vocab)}, which tokenizes for {IDS_FILE}; export "
                               f"again")
        if meta.get("text_normalization") is not None:
            pre = TextPreprocessor(vocab, meta["max_seq_length"], normalization=meta["text_normalization"])
        else:
            pre = TextPreprocessor(vocab, meta["max_seq_length"], do_lower_case=bool(meta.get("do_lower_case", True)))

        def call(*texts):
            encoded = pre(*texts)
            out = model(**{k: encoded[k] for k in ENCODED_INPUTS})
            out["truncated"] = encoded["truncated"].numpy()
            return out
        return call

    def predict_arrays(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """The raw outputs for one batch: probabilities [n, C] and label_id [n] (or score [n]), truncated [n]."""
        texts = text_list(texts, "predict")
        if self.pair:
            if pairs is None:
                raise PredictError("this model takes text pairs: pass pairs=[...] (one second text per text)")
            pairs = text_list(pairs, "predict", "pairs")
            if len(pairs) != len(texts):
                raise PredictError(f"{len(texts)} texts but {len(pairs)} pairs; pass one second text per text")
        elif pairs is not None:
            raise PredictError("this model takes single texts, not pairs; leave out pairs")
        if not texts:
            width = max(1, len(self.labels))
            return {"probabilities": np.zeros((0, width), np.float32), "label_id": np.zeros((0,), np.int32),
                    "truncated": np.zeros((0,), bool)}
        order = self._order(texts, pairs)
        parts: Dict[str, list] = {}
        for start in range(0, len(texts), self.batch_size):
            rows = order[start:start + self.batch_size]
            args = [tf.constant([texts[i] for i in rows], tf.string)]
            if self.pair:
                args.append(tf.constant([pairs[i] for i in rows], tf.string))
            for key, value in self._call(*args).items():
                if key in ("probabilities", "label_id", "score", "truncated"):
                    parts.setdefault(key, []).append(np.asarray(value.numpy() if hasattr(value, "numpy") else value))
        out = {k: np.concatenate(v) for k, v in parts.items()}
        if len(texts) > self.batch_size and self.sort_by_length:
            back = np.empty_like(order)
            back[order] = np.arange(len(order))
            out = {k: v[back] for k, v in out.items()}
        return out

    def _order(self, texts, pairs) -> np.ndarray:
        """The order the texts go through the model: by length when that can save padding."""
        if len(texts) <= self.batch_size or not self.sort_by_length:
            return np.arange(len(texts))
        lengths = np.fromiter((len(t) for t in texts), np.int64, len(texts))
        if pairs is not None:
            lengths += np.fromiter((len(t) for t in pairs), np.int64, len(pairs))
        return np.argsort(lengths, kind="stable")

    def predict(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> List[Prediction]:
        """A `Prediction` for every text (and its pair, for a pair model)."""
        raw = self.predict_arrays(texts, pairs)
        out = []
        for i in range(len(raw["truncated"])):
            truncated = bool(raw["truncated"][i])
            if self.regression:
                out.append(Prediction(None, None, {}, float(raw["score"][i]), truncated))
                continue
            probs = raw["probabilities"][i]
            names = self.labels if len(self.labels) == len(probs) else [str(c) for c in range(len(probs))]
            label_id = int(raw["label_id"][i])
            out.append(Prediction(names[label_id], label_id,
                                  {n: float(p) for n, p in zip(names, probs)}, None, truncated))
        return out
