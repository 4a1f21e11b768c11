"""Text -> model inputs in TensorFlow: WordPiece tokenization and [CLS]/[SEP] packing.

`TextPreprocessor` is the one place text becomes `input_ids` / `input_mask` /
`segment_ids`: fine-tuning (`finetune.tokenization.encode_classification`),
the exported SavedModel (`export.serving.ServingModule`) and `scoring.Scorer`
(through the serving graph) all call it, so a model sees the same ids at
training and at serving time. It is built from TensorFlow and tensorflow-text
ops only, so a SavedModel holding it loads without electra_tf or Keras.

Encoding follows the reference BERT / ELECTRA code:

* The model's text normalisation (`electra_tf.data.normalization`: the
  reference's cleanup, casing, accent stripping, whitespace / punctuation / CJK
  split), then greedy longest-match-first WordPiece, in the ops of
  `electra_tf.data.wordpiece_ops`, which the pre-training shards are made with.
* One text: `[CLS] a [SEP]`, `a` cut to `sequence_length - 2` pieces.
* A pair: `[CLS] a [SEP] b [SEP]`, cut to `sequence_length - 3` pieces by the
  reference `_truncate_seq_pair` rule (drop the last piece of the longer text,
  one at a time; of `b` on ties), computed in closed form by `pair_lengths`.
* `segment_ids` are 0 over `[CLS] a [SEP]` and 1 over `b [SEP]`.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import tensorflow as tf

from electra_tf.data.normalization import TextNormalization
from electra_tf.data.tokenizer import UNKNOWN_TOKEN
from electra_tf.data.vocab import load_vocab
from electra_tf.data.wordpiece_ops import WordPieceOps

__all__ = ["TextPreprocessor", "pair_lengths", "text_list"]

# Tokens the packer writes; [MASK] is not needed to encode text.
_REQUIRED = ("[PAD]", UNKNOWN_TOKEN, "[CLS]", "[SEP]")


def text_list(texts, call: str, name: str = "texts") -> List[Union[str, bytes]]:
    """`texts` as a list, refusing anything but a list of strings with one line.

    The Python entry points that take texts (`Scorer.score`, `Predictor.predict`)
    check them here, so a single string, None or a number in the list is refused
    the same way everywhere instead of failing inside TensorFlow.

    Args:
      texts: what the caller passed: a list, tuple or other iterable of str / bytes.
      call: the method's name, for the message ("score", "predict").
      name: the argument's name, for the message ("texts", "pairs").

    Raises:
      TypeError: a single string, something not iterable, or an element that is not a string.
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{call}() takes a list of strings as {name}; wrap a single text in a list")
    if texts is None or not hasattr(texts, "__iter__"):
        raise TypeError(f"{call}() takes a list of strings as {name}, not {type(texts).__name__}")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"{call}() takes a list of strings, but {name}[{i}] is {type(text).__name__} "
                            f"{text!r:.50}; convert it to str first")
    return texts


def pair_lengths(len_a, len_b, budget):
    """Lengths of a pair after the reference `_truncate_seq_pair`.

    The reference pops the last token of the longer sequence (of `b` on ties)
    until the pair fits `budget`. In closed form: unchanged if the pair fits;
    else if the shorter one fits in half the budget it stays and the longer
    gets the rest; else `a` gets `ceil(budget / 2)` and `b` `floor(budget / 2)`.

    Args:
      len_a: int tensor (any shape) of first-sequence lengths.
      len_b: int tensor of second-sequence lengths, same shape.
      budget: int (or scalar tensor), the most tokens the pair may keep; >= 0.

    Returns:
      `(kept_a, kept_b)`, int64 tensors of the shape of `len_a`.

    Example:

    >>> [int(n) for n in pair_lengths(10, 3, 8)]
    [5, 3]
    """
    len_a = tf.cast(len_a, tf.int64)
    len_b = tf.cast(len_b, tf.int64)
    budget = tf.cast(budget, tf.int64)
    fits = len_a + len_b <= budget
    short = tf.minimum(len_a, len_b)
    short_stays = 2 * short <= budget
    a_short = len_a < len_b
    half_a, half_b = (budget + 1) // 2, budget // 2
    out_a = tf.where(fits, len_a, tf.where(short_stays, tf.where(a_short, len_a, budget - len_b), half_a))
    out_b = tf.where(fits, len_b, tf.where(short_stays, tf.where(a_short, budget - len_a, len_b), half_b))
    return out_a, out_b


def _gather_pieces(ids: tf.RaggedTensor, offsets, valid):
    """`ids[i, offsets[i, j]]` where `valid[i, j]`, else 0, as a dense int32 tensor.

    Dense index arithmetic on the flat values instead of ragged masking and
    `combine_segments`: those take seconds to trace and ~0.2 s per eager call.
    """
    flat = tf.concat([ids.flat_values, tf.zeros([1], ids.dtype)], 0)  # one spare 0 for invalid slots
    index = tf.where(valid, ids.row_starts()[:, tf.newaxis] + offsets, tf.size(flat, tf.int64) - 1)
    return tf.gather(flat, index)


class TextPreprocessor(tf.Module):
    """Texts or text pairs -> `input_ids`, `input_mask`, `segment_ids` for ELECTRA.

    A tokenizer (`tokenize`, `tokenize_with_offsets`) and a packer (`pack`)
    in TensorFlow ops; calling the preprocessor does both. Works eagerly, in a
    `tf.function`, in `tf.data` and inside a SavedModel.

    Args:
      vocabulary: the WordPiece vocabulary: a list of tokens (id = position)
        or the path of a one-token-per-line `vocab.txt`. Must hold
        [PAD] [UNK] [CLS] [SEP].
      sequence_length: the default most ids per example, [CLS] and [SEP]s
        included; None to pass `sequence_length` at every call.
      normalization: the text normalisation the model was trained with (a
        `TextNormalization` or its JSON record, as config.json holds it; a
        bool means `TextNormalization.legacy` of that casing).
      do_lower_case: instead of `normalization`, for models whose folder
        records no normalisation: the casing of the first releases' tokenizer
        (`TextNormalization.legacy`). Pass exactly one of the two.
      name: the module's name.

    Example:

    >>> pre = TextPreprocessor(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s"],
    ...     sequence_length=8, normalization=TextNormalization())
    >>> out = pre(["The cats sat"], ["the cat"], pad_to_sequence_length=True)
    >>> out["input_ids"].numpy().tolist()
    [[2, 5, 6, 8, 3, 5, 6, 3]]
    >>> out["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 0, 1, 1, 1]]
    >>> out["truncated"].numpy().tolist()  # "sat" was dropped: a was the longer text
    [True]
    """

    def __init__(self, vocabulary: Union[str, Sequence[str]], sequence_length: Optional[int] = None, *,
                 do_lower_case: Optional[bool] = None,
                 normalization: Union[TextNormalization, dict, bool, None] = None, name: Optional[str] = None):
        super().__init__(name=name)
        vocab: List[str] = load_vocab(vocabulary) if isinstance(vocabulary, str) else [str(t) for t in vocabulary]
        index = {}
        for i, token in enumerate(vocab):
            index.setdefault(token, i)  # a listed-twice token: its first id, as data.vocab.special_token_ids
        missing = [t for t in _REQUIRED if t not in index]
        if missing:
            raise ValueError(f"the vocabulary lacks {' '.join(missing)}")
        if sequence_length is not None and int(sequence_length) < 3:
            raise ValueError(f"sequence_length={sequence_length} leaves no room for text; [CLS] and [SEP] take 2")
        self.vocabulary = vocab
        self.sequence_length = None if sequence_length is None else int(sequence_length)
        if (normalization is None) == (do_lower_case is None):
            raise TypeError("TextPreprocessor takes the model's text normalisation: pass normalization= (its "
                            "config.json record), or do_lower_case= for a model folder that records none")
        if normalization is None or isinstance(normalization, bool):
            normalization = TextNormalization.legacy(bool(do_lower_case if normalization is None else normalization))
        self.normalization = TextNormalization.from_json(normalization, "TextPreprocessor(normalization=...)")
        self.do_lower_case = self.normalization.lower_case
        self.pad_id, self.unk_id = index["[PAD]"], index[UNKNOWN_TOKEN]
        self.cls_id, self.sep_id = index["[CLS]"], index["[SEP]"]
        self.tokenizer = WordPieceOps(vocab, self.normalization)
        self._tokens = tf.constant(vocab, tf.string)

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocabulary)

    # ------------------------------------------------------------------ tokenizer
    def tokenize(self, texts) -> tf.RaggedTensor:
        """WordPiece ids of each text, no special tokens.

        Args:
          texts: `[batch]` strings (a tensor or a list).

        Returns:
          int32 `RaggedTensor` `[batch, (pieces)]`.
        """
        return tf.cast(self.tokenizer.tokenize(tf.convert_to_tensor(texts, tf.string)), tf.int32)

    def tokenize_with_offsets(self, texts):
        """WordPiece ids with each piece's `[start, end)` UTF-8 byte offsets in its text.

        Args:
          texts: `[batch]` strings.

        Returns:
          `(ids, starts, ends)`: int32 ids and int64 byte offsets, each a
          `RaggedTensor` `[batch, (pieces)]`.
        """
        ids, starts, ends = self.tokenizer.tokenize_with_offsets(tf.convert_to_tensor(texts, tf.string))
        return tf.cast(ids, tf.int32), starts, ends

    def id_to_token(self, ids) -> tf.Tensor:
        """The vocabulary strings of `ids` (any shape)."""
        return tf.gather(self._tokens, ids)

    # ------------------------------------------------------------------ packer
    def _length(self, sequence_length: Optional[int], pair: bool) -> int:
        length = self.sequence_length if sequence_length is None else int(sequence_length)
        if length is None:
            raise ValueError("pass sequence_length: this TextPreprocessor was built without one")
        if length < (4 if pair else 3):
            raise ValueError(f"sequence_length={length} leaves no room for text; "
                             f"[CLS] and {'two [SEP]' if pair else '[SEP]'} take {3 if pair else 2}")
        return length

    def pack(self, ids_a: tf.RaggedTensor, ids_b: Optional[tf.RaggedTensor] = None,
             sequence_length: Optional[int] = None, pad_to_sequence_length: bool = False) -> dict:
        """`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated to fit, as dense tensors.

        Args:
          ids_a: int32 `RaggedTensor` `[batch, (pieces)]`, first texts.
          ids_b: the same for the second texts of pairs, or None.
          sequence_length: the most ids per example; default: the constructor's.
          pad_to_sequence_length: pad every row to `sequence_length` (else to
            the longest row of the batch).

        Returns:
          dict of int32 `input_ids` (padded with [PAD]), `input_mask`,
          `segment_ids`, each `[batch, seq]`, and bool `truncated` `[batch]`
          (pieces were dropped).
        """
        length = self._length(sequence_length, pair=ids_b is not None)
        len_a = ids_a.row_lengths()
        if ids_b is None:
            keep_a = tf.minimum(len_a, length - 2)
            truncated = keep_a < len_a
        else:
            len_b = ids_b.row_lengths()
            keep_a, keep_b = pair_lengths(len_a, len_b, length - 3)
            truncated = (keep_a < len_a) | (keep_b < len_b)
        # Row i, position j reads [CLS], a[j - 1], [SEP], b[j - start_b], [SEP] or [PAD].
        sep_a = (keep_a + 1)[:, tf.newaxis]
        total = sep_a + 1 if ids_b is None else sep_a + keep_b[:, tf.newaxis] + 2
        width = tf.constant(length, tf.int64) if pad_to_sequence_length else tf.maximum(tf.reduce_max(total), 0)
        pos = tf.range(width, dtype=tf.int64)[tf.newaxis, :]
        in_a = (pos >= 1) & (pos < sep_a)
        ids = tf.where(in_a, _gather_pieces(ids_a, pos - 1, in_a), self.pad_id)
        ids = tf.where(pos == 0, self.cls_id, tf.where(pos == sep_a, self.sep_id, ids))
        input_mask = pos < total
        if ids_b is None:
            segment_ids = tf.zeros_like(ids)
        else:
            start_b = sep_a + 1
            in_b = (pos >= start_b) & (pos < total - 1)
            ids = tf.where(in_b, _gather_pieces(ids_b, pos - start_b, in_b), ids)
            ids = tf.where(pos == total - 1, self.sep_id, ids)
            segment_ids = tf.cast((pos >= start_b) & input_mask, tf.int32)
        return {"input_ids": ids, "input_mask": tf.cast(input_mask, tf.int32), "segment_ids": segment_ids,
                "truncated": truncated}

    def __call__(self, text_a, text_b=None, sequence_length: Optional[int] = None,
                 pad_to_sequence_length: bool = False) -> dict:
        """Tokenizes and packs; see `pack` for the outputs.

        Args:
          text_a: `[batch]` strings.
          text_b: `[batch]` second strings of pairs, or None.
          sequence_length: the most ids per example; default: the constructor's.
          pad_to_sequence_length: pad every row to `sequence_length`.
        """
        ids_b = None if text_b is None else self.tokenize(text_b)
        return self.pack(self.tokenize(text_a), ids_b, sequence_length, pad_to_sequence_length)

    # ------------------------------------------------------------------ config
    def get_config(self) -> dict:
        return {"vocabulary": list(self.vocabulary), "sequence_length": self.sequence_length,
                "normalization": self.normalization.to_json(), "name": self.name}

    @classmethod
    def from_config(cls, config: dict) -> "TextPreprocessor":
        config = dict(config)
        if "normalization" in config:
            config.pop("do_lower_case", None)
        return cls(**config)
