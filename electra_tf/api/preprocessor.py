"""`ElectraPreprocessor`: raw strings in, `input_ids` / `input_mask` / `segment_ids` out (a Keras layer).

A thin Keras face on `electra_tf.preprocessing.TextPreprocessor`, the one
in-graph WordPiece tokenizer and packer that fine-tuning, export and `Scorer`
share, so a model sees the same ids from Python as from its SavedModel.

Example:

>>> pre = ElectraPreprocessor.from_pretrained("runs/default", sequence_length=32)  # doctest: +SKIP
>>> pre(["a great film"])["input_ids"].shape                                      # doctest: +SKIP
TensorShape([1, 5])
"""

from __future__ import annotations

import os
from typing import Optional

import keras
import tensorflow as tf

from electra_tf.api.model_locator import ApiError, locate
from electra_tf.data.normalization import TextNormalization
from electra_tf.data.vocab import load_vocab
from electra_tf.preprocessing import TextPreprocessor

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPreprocessor(keras.layers.Layer):
    """Tokenizes strings (or pairs of strings) and packs `[CLS] a [SEP] (b [SEP])`.

    Args:
      vocabulary: the WordPiece vocabulary, a list of tokens (or a vocab.txt path).
      sequence_length: the most word pieces per example, [CLS]/[SEP] included;
        batches are padded to their longest row.
      do_lower_case: without `normalization`: the casing of a model whose
        folder records no text normalisation (`TextNormalization.legacy`).
      normalization: the model's text normalisation (a `TextNormalization` or
        its config.json record); `from_pretrained` passes the model's.

    Call with a `[batch]` string tensor or list, or a `(texts, second_texts)`
    tuple for pairs; returns a dict of int32 `[batch, seq]` tensors
    `input_ids`, `input_mask`, `segment_ids`.
    """

    def __init__(self, vocabulary, sequence_length: int = 128, do_lower_case: bool = True, normalization=None,
                 **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if isinstance(vocabulary, str):
            vocabulary = load_vocab(vocabulary)
        self.vocabulary = list(vocabulary)
        self.sequence_length = int(sequence_length)
        self.text = TextPreprocessor(self.vocabulary, self.sequence_length,
                                     normalization=bool(do_lower_case) if normalization is None else normalization)
        self.normalization = self.text.normalization
        self.do_lower_case = self.normalization.lower_case
        self.built = True  # no weights

    @classmethod
    def from_pretrained(cls, path: str, sequence_length: Optional[int] = None,
                        do_lower_case: Optional[bool] = None) -> "ElectraPreprocessor":
        """The preprocessor of a model directory (any kind `ElectraClassifier.from_pretrained` takes).

        Args:
          path: a pre-training run directory, its pretrained/ model, a converted
            model directory, or a fine-tuned seed_<n>/ directory.
          sequence_length: default: the fine-tuning length, else the config's max_seq_length.
          do_lower_case: default: the casing the model was trained with (its
            text normalisation's; another casing keeps the normalisation's mode).
        """
        found = locate(path)
        if found.vocab is None or not os.path.isfile(found.vocab):
            raise ApiError(f"{path} has no vocab.txt; the preprocessor needs the vocabulary the model was trained with")
        seq = sequence_length or (found.meta or {}).get("max_seq_length") or found.config.max_seq_length
        normalization = found.normalization
        if do_lower_case is not None and bool(do_lower_case) != normalization.lower_case:
            normalization = TextNormalization.create(bool(do_lower_case), None, normalization.mode)
        return cls(found.vocab, seq, normalization=normalization)

    # keras-hub's name for it (`Preprocessor.from_preset`): the same method.
    from_preset = from_pretrained

    def __call__(self, inputs, *args, **kwargs):
        # Python strings and lists of them become string tensors first (Keras passes only tensors).
        if isinstance(inputs, tuple) and len(inputs) == 2 and not isinstance(inputs[0], str):
            inputs = tuple(_strings(t) for t in inputs)
        else:
            inputs = _strings(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs):
        if isinstance(inputs, tuple):
            first, second = (tf.convert_to_tensor(t, tf.string) for t in inputs)
        else:
            first, second = tf.convert_to_tensor(inputs, tf.string), None
        packed = self.text(first, second)
        return {name: packed[name] for name in INPUT_NAMES}

    def compute_output_spec(self, inputs):
        spec = keras.KerasTensor((None, None), dtype="int32")
        return {name: spec for name in INPUT_NAMES}

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"vocabulary": list(self.vocabulary), "sequence_length": self.sequence_length,
                       "do_lower_case": self.do_lower_case, "normalization": self.normalization.to_json()})
        return config


def _strings(texts):
    """A `[batch]` string tensor of a list of strings (tensors pass through)."""
    if isinstance(texts, str):
        raise TypeError("pass a list of strings; wrap a single text in a list")
    return texts if tf.is_tensor(texts) else tf.constant(list(texts), tf.string)
