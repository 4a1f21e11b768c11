"""Text -> WordPiece ids in TensorFlow ops, for a `TextNormalization`.

`WordPieceOps` is the one tokenizer behind the shard builder
(`tokenizer.WordPieceTokenizer`), fine-tuning and the SavedModel
(`electra_tf.preprocessing.TextPreprocessor`), so they give the same ids by
construction. It is made of TensorFlow and tensorflow-text ops only and saves
inside a SavedModel.

bert mode, in the reference's order (each step on the whole text):

1. invalid UTF-8 -> U+FFFD; U+FFFD and every character of category C
   (control, format, private use, unassigned) but tab, newline and carriage
   return removed;
2. lower-case with `tf.strings.lower(encoding="utf-8")` (ICU's full
   lower-case mapping, which is Python's `str.lower()`, final sigma included);
3. accent stripping: NFD, then every Mn character removed;
4. split on whitespace (tab, newline, carriage return, Zs, U+2028, U+2029),
   with every punctuation character and every CJK ideograph a word of its own;
5. greedy longest-match-first WordPiece over each word; a word of more than
   `max_chars_per_word` characters, or one WordPiece cannot cover, is [UNK].

Offsets (`tokenize_with_offsets`) are mapped back to the original text through
each character's normalised length, so they are exact whatever the
normalisation removed or changed.

nfkc_casefold mode is tensorflow-text's FastBertTokenizer as the first
releases used it (NFKC case folding when lower-casing), with the mixed
casing/accent combinations done by tensorflow-text ops first.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.data.normalization import LEGACY_MAX_BYTES_PER_WORD, TextNormalization

SUFFIX_INDICATOR = "##"
UNKNOWN_TOKEN = "[UNK]"
# What WordPiece sees for a word over the character limit: a noncharacter (category Cn, removed by
# step 1), so never a vocabulary entry, and the word becomes one [UNK].
LONG_WORD = "\U0010FFFF"

# Reference BasicTokenizer's classes, as RE2 patterns.
WHITESPACE = r"[\t\n\r\p{Zs}\x{2028}\x{2029}]"
# Category C but tab, newline and carriage return (Cc but those, Cf, Co; Cs cannot occur in UTF-8),
# the unassigned code points (Cn: what no other category covers), and U+FFFD.
REMOVED = (r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\x{FFFD}\p{Cf}\p{Co}]"
           r"|[^\p{L}\p{M}\p{N}\p{P}\p{S}\p{Z}\p{C}]")
PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
CJK = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}"
       r"\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")
_KEEP = PUNCTUATION + "|" + CJK
_SPLIT = WHITESPACE + "+|" + _KEEP
# One pass that makes every split point a space: whitespace -> "  ", a kept character c -> " c ".
_SPACED = "(" + _KEEP + ")|" + WHITESPACE


def bert_normalize(texts: tf.Tensor, normalization: TextNormalization) -> tf.Tensor:
    """Steps 1-3 of the bert mode on a string tensor of any shape (module docstring), but for
    whitespace, which stays as it is (step 4 splits on it: no step changes a whitespace character or
    makes one, so this is the reference's result with its spaces in other forms)."""
    text = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
    text = tf.strings.regex_replace(text, REMOVED, "")
    if normalization.lower_case:
        text = tf.strings.lower(text, encoding="utf-8")
    if normalization.strip_accents:
        text = tf.strings.regex_replace(tf_text.normalize_utf8(text, "NFD"), r"\p{Mn}", "")
    return text


def bert_words(texts: tf.Tensor, normalization: TextNormalization) -> tf.RaggedTensor:
    """Steps 1-4 of the bert mode: the words WordPiece sees, `[batch, (words)]` strings of `[batch]` texts."""
    return _split_words(bert_normalize(texts, normalization))


def _split_words(normalised: tf.Tensor) -> tf.RaggedTensor:
    """Step 4 without offsets: split points made spaces in one regex pass, then a split on spaces
    (the words of `regex_split_with_offsets(normalised, _SPLIT, _KEEP)`, faster)."""
    return tf.strings.split(tf.strings.regex_replace(normalised, _SPACED, " \\1 "))


def legacy_prenormalize(texts: tf.Tensor, normalization: TextNormalization) -> tf.Tensor:
    """nfkc_casefold's mixed modes: what FastBertTokenizer's own normaliser does not (it lower-cases
    and strips accents together, or does neither)."""
    fused = normalization.lower_case and normalization.strip_accents
    if normalization.lower_case and not fused:
        texts = tf_text.case_fold_utf8(texts)
    if normalization.strip_accents and not fused:
        texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"), r"\p{Mn}", "")
    return texts


def max_bytes_per_word(normalization: TextNormalization) -> int:
    """FastWordpiece's byte limit: the legacy one, or one no word within the character limit reaches."""
    return normalization.max_chars_per_word * 4 if normalization.is_bert else LEGACY_MAX_BYTES_PER_WORD


def build_models(vocab: Sequence[str], normalization: TextNormalization):
    """The compiled tables (normaliser or None, WordPiece model), built once and handed to worker
    processes (`WordPieceOps(models=...)`); about a second each."""
    from tensorflow_text.core.pybinds import pywrap_fast_bert_normalizer_model_builder as normalizer_builder  # pylint: disable=import-outside-toplevel
    from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder as wordpiece_builder  # pylint: disable=import-outside-toplevel

    wordpiece = wordpiece_builder.build_fast_wordpiece_model(
        list(vocab), max_bytes_per_word(normalization), SUFFIX_INDICATOR, UNKNOWN_TOKEN,
        normalization.is_bert, False)
    if normalization.is_bert:
        return None, wordpiece
    fused = normalization.lower_case and normalization.strip_accents
    return normalizer_builder.build_fast_bert_normalizer_model(fused), wordpiece


class WordPieceOps(tf.Module):
    """Texts -> WordPiece ids (and byte offsets) under a `TextNormalization`.

    Args:
      vocab: the tokens, id = position; must hold [UNK].
      normalization: the `TextNormalization`.
      models: `build_models(vocab, normalization)`, if already built.
    """

    def __init__(self, vocab: Sequence[str], normalization: TextNormalization, models=None,
                 name: Optional[str] = None):
        super().__init__(name=name)
        self.normalization = normalization
        vocab = list(vocab)
        self.unk_id = vocab.index(UNKNOWN_TOKEN)
        if normalization.is_bert and LONG_WORD in vocab:
            raise ValueError("the vocabulary holds U+10FFFF, the stand-in the tokenizer uses for words over the "
                             "length limit (a noncharacter, never in normalised text); remove that line")
        normalizer_model, wordpiece_model = models if models is not None else (None, None)
        if normalization.is_bert:
            self._wordpiece = tf_text.FastWordpieceTokenizer(
                vocab=None if wordpiece_model is not None else vocab, suffix_indicator=SUFFIX_INDICATOR,
                max_bytes_per_word=max_bytes_per_word(normalization), token_out_type=tf.int64,
                unknown_token=UNKNOWN_TOKEN, no_pretokenization=True, support_detokenization=False,
                model_buffer=wordpiece_model)
        else:
            fused = normalization.lower_case and normalization.strip_accents
            self._legacy = tf_text.FastBertTokenizer(
                vocab=vocab, suffix_indicator=SUFFIX_INDICATOR, max_bytes_per_word=LEGACY_MAX_BYTES_PER_WORD,
                token_out_type=tf.int64, unknown_token=UNKNOWN_TOKEN, lower_case_nfd_strip_accents=fused,
                support_detokenization=False, fast_wordpiece_model_buffer=wordpiece_model,
                fast_bert_normalizer_model_buffer=normalizer_model)

    # ------------------------------------------------------------------ bert mode
    def _bert_pieces(self, texts, with_offsets: bool):
        normalised = bert_normalize(texts, self.normalization)
        if with_offsets:
            words, word_starts, _ = tf_text.regex_split_with_offsets(normalised, _SPLIT, _KEEP)
        else:
            words = _split_words(normalised)
        flat = words.flat_values
        # A word over the character limit is one [UNK]: WordPiece sees a stand-in no vocabulary holds.
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > self.normalization.max_chars_per_word
        pieces_of = tf.where(too_long, LONG_WORD, flat)
        if not with_offsets:
            return words.with_flat_values(self._wordpiece.tokenize(pieces_of)).merge_dims(1, 2)
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(pieces_of)
        out_ids = words.with_flat_values(ids).merge_dims(1, 2)
        pieces_per_word = ids.row_lengths()
        word_lengths = tf.cast(tf.strings.length(flat), tf.int64)
        base = tf.repeat(word_starts.flat_values, pieces_per_word)
        piece_ends = tf.where(tf.repeat(too_long, pieces_per_word), tf.repeat(word_lengths, pieces_per_word),
                              ends.values)
        norm_starts, norm_ends = base + starts.values, base + piece_ends
        row_of_piece = out_ids.value_rowids()
        orig_starts, orig_ends = _to_original_offsets(texts, self.normalization, row_of_piece, norm_starts, norm_ends)
        as_ragged = lambda v: out_ids.with_flat_values(v)  # noqa: E731
        return out_ids, as_ragged(orig_starts), as_ragged(orig_ends)

    # ------------------------------------------------------------------ both modes
    def tokenize(self, texts) -> tf.RaggedTensor:
        """int64 ids `[batch, (pieces)]` of `[batch]` texts, no special tokens."""
        texts = tf.convert_to_tensor(texts, tf.string)
        if self.normalization.is_bert:
            return self._bert_pieces(texts, with_offsets=False)
        ids = self._legacy.tokenize(legacy_prenormalize(texts, self.normalization))
        return ids.merge_dims(-2, -1) if ids.shape.rank > 2 else ids

    def tokenize_with_offsets(self, texts):
        """(ids, starts, ends), `[batch, (pieces)]`: int64 ids and `[start, end)` UTF-8 byte offsets
        in the texts as given (nfkc_casefold's mixed modes: in the texts after its pre-normalisation)."""
        texts = tf.convert_to_tensor(texts, tf.string)
        if self.normalization.is_bert:
            return self._bert_pieces(texts, with_offsets=True)
        ids, starts, ends = self._legacy.tokenize_with_offsets(legacy_prenormalize(texts, self.normalization))
        if ids.shape.rank > 2:
            ids, starts, ends = (t.merge_dims(-2, -1) for t in (ids, starts, ends))
        return ids, starts, ends


def _to_original_offsets(texts, normalization, rows, norm_starts, norm_ends):
    """Byte offsets in the normalised texts -> byte offsets in `texts`.

    Every step of the bert mode maps characters independently (the final-sigma
    rule changes a letter, not its length), so a text's normalised bytes are its
    characters' normalised bytes in order: a normalised offset falls in the
    normalised bytes of exactly one original character.
    """
    chars, char_starts = tf.strings.unicode_split_with_offsets(texts, "UTF-8", errors="replace",
                                                               replacement_char=0xFFFD)
    text_lengths = tf.strings.length(texts)
    flat_starts = char_starts.flat_values
    next_starts = tf.concat([flat_starts[1:], tf.zeros([1], flat_starts.dtype)], 0)
    last = tf.range(tf.size(flat_starts, tf.int64)) == tf.repeat(char_starts.row_limits() - 1,
                                                                   char_starts.row_lengths())
    char_ends = tf.where(last, tf.repeat(tf.cast(text_lengths, flat_starts.dtype), char_starts.row_lengths()),
                         next_starts)
    char_norm = tf.cast(tf.strings.length(bert_normalize(chars.flat_values, normalization)), tf.int64)
    # One increasing sequence over the batch: row r's normalised ends shifted by the lengths before it (+1 each).
    row_totals = tf.math.unsorted_segment_sum(char_norm, chars.value_rowids(), chars.nrows())
    row_base = tf.math.cumsum(row_totals + 1, exclusive=True)
    global_ends = tf.math.cumsum(char_norm) + tf.repeat(row_base - tf.math.cumsum(row_totals, exclusive=True),
                                                        chars.row_lengths())
    base = tf.gather(row_base, rows)
    first = tf.searchsorted(global_ends, base + norm_starts, side="right", out_type=tf.int64)
    last_char = tf.searchsorted(global_ends, base + norm_ends - 1, side="right", out_type=tf.int64)
    count = tf.size(flat_starts, tf.int64)
    starts = tf.gather(flat_starts, tf.minimum(first, count - 1))
    ends = tf.gather(char_ends, tf.minimum(last_char, count - 1))
    return tf.cast(starts, tf.int64), tf.cast(ends, tf.int64)
