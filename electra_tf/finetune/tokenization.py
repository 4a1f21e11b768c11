"""WordPiece tokenization for fine-tuning, on tensorflow_text.FastBertTokenizer.

BERT-style basic tokenization (lower-casing, accent stripping, punctuation
splitting) and greedy longest-match WordPiece, as the reference `FullTokenizer`,
but in C++; offsets let SQuAD map answers between characters and word pieces
without the reference's `get_final_text` heuristics.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from electra_tf.data.vocab import load_vocab, special_token_ids


class FinetuneTokenizer:
    """Turns text into vocabulary ids.

    Args:
      vocab_file: one-token-per-line WordPiece vocabulary containing
        [PAD] [UNK] [CLS] [SEP] [MASK].
      do_lower_case: lower-case and strip accents (uncased models).
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True):
        import tensorflow as tf
        import tensorflow_text as tf_text

        self.vocab = load_vocab(vocab_file)
        self.special = special_token_ids(self.vocab)
        self.vocab_file = vocab_file
        self.do_lower_case = bool(do_lower_case)  # what the saved classifier records for serving
        self._tf = tf
        self._tokenizer = tf_text.FastBertTokenizer(
            vocab=self.vocab, lower_case_nfd_strip_accents=do_lower_case,
            token_out_type=tf.int64, unknown_token="[UNK]")

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
        for i in range(0, len(texts), batch_size):
            chunk = list(texts[i:i + batch_size])
            if not chunk:
                continue
            ragged = self._tokenizer.tokenize(self._tf.constant(chunk))
            out.extend(ragged.to_list())
        return out

    def tokenize_with_char_offsets(self, text: str) -> Tuple[List[int], List[int], List[int]]:
        """Tokenizes one text and returns each piece's [start, end) character offsets.

        Args:
          text: the string.

        Returns:
          (ids, starts, ends); offsets index into `text` (characters, not bytes).
        """
        ids, starts, ends = self._tokenizer.tokenize_with_offsets(self._tf.constant([text]))
        byte_to_char = _byte_to_char(text)
        starts = [byte_to_char[b] for b in starts.to_list()[0]]
        ends = [byte_to_char[b] for b in ends.to_list()[0]]
        return ids.to_list()[0], starts, ends

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        """Maps ids back to vocabulary strings (for logs and tests).

        Args:
          ids: vocabulary ids.
        """
        return [self.vocab[int(i)] for i in ids]


def _byte_to_char(text: str) -> np.ndarray:
    """Maps each UTF-8 byte offset (and the end offset) of `text` to a character offset."""
    mapping = []
    for ci, ch in enumerate(text):
        mapping.extend([ci] * len(ch.encode("utf-8")))
    mapping.append(len(text))
    return np.asarray(mapping, dtype=np.int64)


def truncate_pair(tokens_a: List[int], tokens_b: List[int], max_length: int) -> None:
    """Truncates a pair in place, one token at a time from the longer (reference rule).

    Args:
      tokens_a: first sequence (modified).
      tokens_b: second sequence (modified).
      max_length: maximum total length.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def encode_classification(tokenizer: FinetuneTokenizer, texts_a: Sequence[str],
                          texts_b: Sequence[str] | None, max_seq_length: int) -> dict:
    """Builds `[CLS] a [SEP] (b [SEP])` inputs padded to `max_seq_length`.

    Args:
      tokenizer: the tokenizer.
      texts_a: first sentences.
      texts_b: second sentences, or None for single-sentence tasks.
      max_seq_length: sequence length after padding.

    Returns:
      dict of int32 arrays input_ids, input_mask, segment_ids of shape [n, max_seq_length].
    """
    if max_seq_length < 3 + (1 if texts_b is not None else 0):
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text; use at least 8")
    ids_a = tokenizer.tokenize(texts_a)
    ids_b = tokenizer.tokenize(texts_b) if texts_b is not None else None
    n = len(ids_a)
    input_ids = np.full((n, max_seq_length), tokenizer.special.pad, dtype=np.int32)
    input_mask = np.zeros((n, max_seq_length), dtype=np.int32)
    segment_ids = np.zeros((n, max_seq_length), dtype=np.int32)
    cls, sep = tokenizer.special.cls, tokenizer.special.sep
    for i in range(n):
        a = ids_a[i]
        if ids_b is not None:
            b = ids_b[i]
            truncate_pair(a, b, max_seq_length - 3)
            seq = [cls] + a + [sep] + b + [sep]
            seg = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        else:
            a = a[:max_seq_length - 2]
            seq = [cls] + a + [sep]
            seg = [0] * len(seq)
        input_ids[i, :len(seq)] = seq
        input_mask[i, :len(seq)] = 1
        segment_ids[i, :len(seq)] = seg
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
