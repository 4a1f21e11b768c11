"""Counting the words a WordPiece learner sees, normalised as the in-graph tokenizer does it.

Words are counted first and each distinct word is normalised once, so the
cost of normalisation grows with the vocabulary of the corpus, not its size.
Printable ASCII words (the bulk of most corpora) are split here with a regular
expression; the few others go through the shards' own ops
(`wordpiece_ops.bert_words`; for the nfkc_casefold mode, tensorflow-text's
normaliser and the `tokenizers` BERT pre-tokenizer).
"""

from __future__ import annotations

import collections
import re
import unicodedata
from typing import Counter, Dict, Iterable, List, Optional

from tokenizers import pre_tokenizers

from electra_tf.data.hf_bert_tokenizer import hf_normalizer
from electra_tf.data.normalization import TextNormalization
from electra_tf.data.tokenizer import normalization_of

# Lines joined per Counter.update call: one C-level split and count instead of one per line.
COUNT_BATCH_LINES = 4096

# Printable ASCII words (the bulk of most corpora) are normalised here, without a call into
# `tokenizers` per word: for them BERT's clean-up and accent stripping change nothing, and
# every non-alphanumeric character is punctuation, split off on its own.
_ASCII_PIECES_LOWER = re.compile(r"[a-z0-9]+|[^a-z0-9]")
_ASCII_PIECES_CASED = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")


def count_raw_words(lines: Iterable[str]) -> Counter[str]:
    """Counts space-separated words (before any normalisation).

    Splitting on U+0020 alone is safe: BERT treats it as a word boundary, and
    whatever else a word holds (tabs, other spaces, punctuation) is split by
    the normaliser afterwards, once per distinct word.
    """
    counts: Counter[str] = collections.Counter()
    batch: List[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= COUNT_BATCH_LINES:
            counts.update(" ".join(batch).split(" "))
            batch.clear()
    if batch:
        counts.update(" ".join(batch).split(" "))
    counts.pop("", None)
    return counts


def _in_graph_normalize(words: List[str], lower_case: bool, strip: bool) -> List[str]:
    """Normalises words as the nfkc_casefold mode's in-graph tokenizer does, with its own ops.

    That is: the mixed modes' pre-normalisation (wordpiece_ops.legacy_prenormalize), then
    FastBertTokenizer's normaliser (NFKC case folding, NFD and accent
    stripping in the lower-case mode; control and format characters to spaces
    in both), so the learner counts the words the shards will be made of.
    """
    if not lower_case and not strip:
        # The cased normaliser only turns control and format characters into spaces: no
        # need for the TensorFlow import (seconds) to do that.
        return ["".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c for c in w) for w in words]
    # Lazy: TensorFlow takes seconds to import, and only non-ASCII words of these modes need it.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    fused = lower_case and strip
    text = tf.constant(words, tf.string)
    if lower_case and not fused:
        text = tf_text.case_fold_utf8(text)
    if strip and not fused:
        text = tf.strings.regex_replace(tf_text.normalize_utf8(text, "NFD"), r"\p{Mn}", "")
    text = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=fused).normalize(text)
    return [t.decode("utf-8") for t in text.numpy().tolist()]


def _bert_words(words: List[str], normalization: TextNormalization) -> List[List[str]]:
    """The bert mode's words of each of `words`, with the shards' own ops (wordpiece_ops.bert_words)."""
    # Lazy: TensorFlow takes seconds to import, and only non-ASCII words need it.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from electra_tf.data.wordpiece_ops import bert_words  # pylint: disable=import-outside-toplevel

    out: List[List[str]] = []
    for start in range(0, len(words), COUNT_BATCH_LINES):
        split = bert_words(tf.constant(words[start:start + COUNT_BATCH_LINES], tf.string), normalization)
        out.extend([piece.decode("utf-8") for piece in row] for row in split.to_list())
    return out


def pre_tokenized_counts(raw: Counter[str], lower_case: bool = True,
                         strip_accents: Optional[bool] = None,
                         normalization: Optional[TextNormalization] = None) -> Dict[str, int]:
    """Word counts after normalisation and pre-tokenization, as the in-graph tokenizer does them.

    Printable ASCII words are split here; the few other distinct words go
    through tensorflow-text's FastBertNormalizer (TensorFlow is imported only
    then, and not for cased text) and the `tokenizers` BERT pre-tokenizer
    (CJK characters and punctuation split off, whitespace dropped).

    Args:
      raw: counts of space-separated words (count_raw_words).
      lower_case: lower-case (the bert mode's casing, without `normalization`).
      strip_accents: strip accents; None follows lower_case.
      normalization: the `TextNormalization` (overrides the two above).

    Returns:
      {piece: count}, where a piece is what the WordPiece step sees (a word,
      one punctuation character or one CJK character), sorted by falling count
      then text so that the trainer's input does not depend on dict order.
    """
    normalization = normalization_of(lower_case, strip_accents, normalization)
    lower_case, strip = normalization.lower_case, normalization.strip_accents
    ascii_pieces = _ASCII_PIECES_LOWER if lower_case else _ASCII_PIECES_CASED
    counts: Counter[str] = collections.Counter()
    others: List[str] = []
    for word, n in raw.items():
        if word.isascii() and word.isprintable():
            for piece in ascii_pieces.findall(word.lower() if lower_case else word):
                counts[piece] += n
        else:
            others.append(word)
    if others and normalization.is_bert:
        for word, pieces in zip(others, _bert_words(others, normalization)):
            n = raw[word]
            for piece in pieces:
                counts[piece] += n
    elif others:
        # Already normalised: only the CJK split is still to do (clean-up is the normaliser's).
        split_cjk = hf_normalizer(False, False, clean_text=False)
        pre = pre_tokenizers.BertPreTokenizer()
        for word, text in zip(others, _in_graph_normalize(others, lower_case, strip)):
            n = raw[word]
            for piece, _ in pre.pre_tokenize_str(split_cjk.normalize_str(text)):
                counts[piece] += n
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
