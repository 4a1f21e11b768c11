"""Fine-tuning tokenization: thin NumPy-side users of `electra_tf.preprocessing`.

`encode_classification` packs GLUE-style inputs with `TextPreprocessor`, the
same in-graph code the exported SavedModel runs, so training and serving see
the same ids. `FinetuneTokenizer` also gives word-piece ids and character
offsets for SQuAD and tagging, which build their own windows: offsets let
SQuAD map answers between characters and word pieces without the reference's
`get_final_text` heuristics.
"""

from __future__ import annotations

import itertools
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from electra_tf.data.normalization import TextNormalization
from electra_tf.data.vocab import load_vocab, special_token_ids
from electra_tf.preprocessing import TextPreprocessor

_BATCH = 4096  # texts per TensorFlow call: large enough that per-call overhead vanishes


class FinetuneTokenizer:
    """Turns text into vocabulary ids.

    Args:
      vocab_file: one-token-per-line WordPiece vocabulary containing
        [PAD] [UNK] [CLS] [SEP] [MASK].
      do_lower_case: without `normalization`: the casing of a model whose
        folder records no text normalisation (`TextNormalization.legacy`).
      normalization: the model's text normalisation (`ElectraConfig.normalization`).
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 normalization: Optional[TextNormalization] = None):
        self.vocab = load_vocab(vocab_file)
        self.special = special_token_ids(self.vocab)
        self.vocab_file = vocab_file
        # What the saved classifier records for serving. No default length: encode_classification passes
        # its max_seq_length.
        self.normalization = normalization if normalization is not None else TextNormalization.legacy(do_lower_case)
        self.do_lower_case = self.normalization.lower_case
        self.preprocessor = TextPreprocessor(self.vocab, normalization=self.normalization)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def tokenize(self, texts: Sequence[str], batch_size: int = 4096) -> List[List[int]]:
        """Tokenizes many texts (batched through TensorFlow for speed).

        Args:
          texts: strings.
          batch_size: texts per TensorFlow call.
        """
        out: List[List[int]] = []
        for chunk in _chunks(texts, batch_size):
            out.extend(self.preprocessor.tokenize(chunk).to_list())
        return out

    def tokenize_with_char_offsets(self, text: str) -> Tuple[List[int], List[int], List[int]]:
        """Tokenizes one text and returns each piece's [start, end) character offsets.

        Args:
          text: the string.

        Returns:
          (ids, starts, ends); offsets index into `text` (characters, not bytes).
        """
        ids, starts, ends = self.preprocessor.tokenize_with_offsets([text])
        byte_to_char = _byte_to_char(text)
        starts = [int(byte_to_char[b]) for b in starts.to_list()[0]]
        ends = [int(byte_to_char[b]) for b in ends.to_list()[0]]
        return ids.to_list()[0], starts, ends

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        """Maps ids back to vocabulary strings (for logs and tests).

        Args:
          ids: vocabulary ids.
        """
        return [self.vocab[int(i)] for i in ids]


def _chunks(texts: Sequence[str], size: int):
    """Yields consecutive lists of at most `size` texts."""
    texts = list(texts)
    for i in range(0, len(texts), size):
        yield texts[i:i + size]


def _byte_to_char(text: str) -> np.ndarray:
    """Maps each UTF-8 byte offset (and the end offset) of `text` to a character offset."""
    mapping = []
    for ci, ch in enumerate(text):
        mapping.extend([ci] * len(ch.encode("utf-8")))
    mapping.append(len(text))
    return np.asarray(mapping, dtype=np.int64)


def encode_classification(tokenizer: FinetuneTokenizer, texts_a: Sequence[str],
                          texts_b: Sequence[str] | None, max_seq_length: int, return_truncated: bool = False):
    """Builds `[CLS] a [SEP] (b [SEP])` inputs padded to `max_seq_length`.

    Args:
      tokenizer: the tokenizer.
      texts_a: first sentences.
      texts_b: second sentences, or None for single-sentence tasks.
      max_seq_length: sequence length after padding.
      return_truncated: also return which examples were cut to fit.

    Returns:
      dict of int32 arrays input_ids, input_mask, segment_ids of shape [n, max_seq_length];
      with `return_truncated`, (that dict, bool array [n]: the text (pair) had more
      word pieces than fit and was cut).
    """
    if max_seq_length < 3 + (1 if texts_b is not None else 0):
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text; use at least 8")
    texts_a = list(texts_a)
    if texts_b is not None:
        texts_b = list(texts_b)
        if len(texts_b) != len(texts_a):
            raise ValueError(f"texts_a holds {len(texts_a)} texts but texts_b {len(texts_b)}; "
                             f"pass one second text per first text")
    keys = ("input_ids", "input_mask", "segment_ids")
    parts = {k: [np.zeros((0, max_seq_length), np.int32)] for k in keys}
    truncated = [np.zeros((0,), bool)]
    chunks_b = _chunks(texts_b, _BATCH) if texts_b is not None else itertools.repeat(None)
    for chunk_a, chunk_b in zip(_chunks(texts_a, _BATCH), chunks_b):
        text_b = None if chunk_b is None else tf.constant(chunk_b, tf.string)
        enc = tokenizer.preprocessor(tf.constant(chunk_a, tf.string), text_b,
                                     sequence_length=max_seq_length, pad_to_sequence_length=True)
        for k in keys:
            parts[k].append(enc[k].numpy())
        truncated.append(enc["truncated"].numpy().astype(bool))
    features = {k: np.concatenate(parts[k]) for k in keys}
    return (features, np.concatenate(truncated)) if return_truncated else features
