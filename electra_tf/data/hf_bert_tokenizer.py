"""The Hugging Face `tokenizers` BERT pieces: normaliser, and a tokenizer for a vocab.txt.

Used to learn vocabularies (build_vocab) and to check the in-graph tokenizer
against the tokenizer `transformers` builds for the same vocab.txt.
"""

from __future__ import annotations

from typing import Optional

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from electra_tf.data.data_errors import DataError
from electra_tf.data.tokenizer import resolve_strip_accents

# WordPiece gives up on (and emits [UNK] for) longer words, in HF tokenizers and BERT alike.
MAX_CHARS_PER_WORD = 100


def hf_normalizer(lower_case: bool, strip_accents: bool, clean_text: bool = True):
    """`tokenizers`' BertNormalizer (CJK characters spaced out) for the given mode."""
    return normalizers.BertNormalizer(clean_text=clean_text, handle_chinese_chars=True,
                                      strip_accents=bool(strip_accents), lowercase=bool(lower_case))


def is_standard_mode(lower_case: bool, strip: bool) -> bool:
    """BERT's two modes: lower-case + strip accents, or neither (HF's normaliser does both)."""
    return lower_case == strip


def hf_tokenizer(vocab_file: str, lower_case: bool = True, strip_accents: Optional[bool] = None):
    """The Hugging Face BERT tokenizer (`tokenizers.Tokenizer`) for a vocab.txt.

    BertNormalizer, BERT pre-tokenization and greedy longest-match WordPiece
    over `vocab_file`: what `transformers`' BertTokenizer builds. It gives
    the in-graph tokenizer's pieces in the bert mode (electra_tf/data/
    normalization.py) but for a word-final capital sigma (kept "σ" here),
    unassigned code points (kept here) and words of 101-200 characters
    ([UNK] here); the exports' tokenizer.json adds those rules
    (electra_tf/convert/tokenizer_files.py). The nfkc_casefold mode differs
    from it on compatibility characters, which NFKC case folding maps
    (full-width forms, ligatures, superscripts, "ß" to "ss"), and on
    zero-width and other format characters. Only BERT's two modes exist here.

    Raises:
      DataError: a mixed mode was asked.
    """
    strip = resolve_strip_accents(lower_case, strip_accents)
    if not is_standard_mode(lower_case, strip):
        raise DataError(f"hf_tokenizer: lower_case={lower_case} with strip_accents={strip} has no Hugging Face "
                        f"normaliser; use WordPieceTokenizer from electra_tf.data.tokenizer")
    tok = Tokenizer(models.WordPiece.from_file(vocab_file, unk_token="[UNK]",
                                               max_input_chars_per_word=MAX_CHARS_PER_WORD))
    tok.normalizer = hf_normalizer(lower_case, strip)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok
