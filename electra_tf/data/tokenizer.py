"""WordPiece tokenization with tensorflow-text's C++ FastBertTokenizer.

FastBertTokenizer does the BERT basic step (text cleanup, whitespace and
punctuation split, CJK split, optional lower-case + NFD accent stripping) and
fast WordPiece in one op. Its normalizer only offers "lower-case and strip
accents" or "neither", the two standard BERT modes; the other two
combinations are done with tensorflow-text normalization ops first.

This is the pre-training data builder's tokenizer (ids only, no packing; its
compiled tables are built once and handed to the spawned workers). Fine-tuning,
serving and scoring encode text with `electra_tf.preprocessing.TextPreprocessor`,
which uses the same FastBertTokenizer settings (the constants below).
"""

from __future__ import annotations

import hashlib
from typing import List, Optional, Sequence, Tuple

import numpy as np

from electra_tf.data.corpus import open_binary
from electra_tf.data.vocab import SPECIAL_TOKENS, VocabError, load_vocab, special_token_ids


def resolve_strip_accents(lower_case: bool, strip_accents: Optional[bool]) -> bool:
    """BERT strips accents exactly when it lower-cases, unless told otherwise."""
    return lower_case if strip_accents is None else bool(strip_accents)


def check_vocab(tokens: Sequence[str], source: str) -> None:
    """Raises VocabError for a vocabulary WordPiece cannot use.

    Args:
      tokens: the vocabulary, one token per id.
      source: file name used in the message.
    """
    missing = [t for t in SPECIAL_TOKENS if t not in set(tokens)]
    if missing:
        raise VocabError(
            f"vocab file {source!r} lacks special token(s) {' '.join(missing)}; add them "
            f"(one per line) or rebuild it with python -m electra_tf.data.build_vocab"
        )
    seen = {}
    for i, tok in enumerate(tokens):
        if tok == "":
            raise VocabError(f"vocab file {source!r} has an empty line at line {i + 1}; remove it")
        if tok in seen:
            raise VocabError(
                f"vocab file {source!r} lists token {tok!r} twice (lines {seen[tok] + 1} and {i + 1}); "
                f"remove the duplicate"
            )
        seen[tok] = i


def file_sha256(path: str) -> str:
    """Hex sha256 of a (local or gfile) file."""
    h = hashlib.sha256()
    with open_binary(path) as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


# FastBertTokenizer's settings here (its defaults, and no detokenization table).
SUFFIX_INDICATOR = "##"
MAX_BYTES_PER_WORD = 100
UNKNOWN_TOKEN = "[UNK]"


def build_tokenizer_models(vocab: Sequence[str], lower_case: bool,
                           strip_accents: Optional[bool] = None) -> Tuple[bytes, bytes]:
    """FastBertTokenizer's two compiled tables: (normaliser, WordPiece model).

    Building them takes about a second each (the normaliser walks every
    Unicode code point through ICU); a process that has them can hand them
    to the others (WordPieceTokenizer's `models`) instead of each building
    them. They are what FastBertTokenizer builds from these same arguments.
    """
    # TensorFlow loads here, not at import: the data CLIs import this module and
    # must refuse bad input in a second, without TensorFlow's start-up and logs.
    from tensorflow_text.core.pybinds import pywrap_fast_bert_normalizer_model_builder as normalizer_builder  # pylint: disable=import-outside-toplevel
    from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder as wordpiece_builder  # pylint: disable=import-outside-toplevel

    fused = bool(lower_case) and resolve_strip_accents(lower_case, strip_accents)
    return (normalizer_builder.build_fast_bert_normalizer_model(fused),
            wordpiece_builder.build_fast_wordpiece_model(list(vocab), MAX_BYTES_PER_WORD, SUFFIX_INDICATOR,
                                                         UNKNOWN_TOKEN, False, False))


class WordPieceTokenizer:
    """Text -> WordPiece ids, batched through one compiled TF function.

    Args:
      vocab_file: BERT-style vocab.txt (must hold [PAD] [UNK] [CLS] [SEP] [MASK]).
      lower_case: lower-case the text.
      strip_accents: strip accents (NFD, drop combining marks); None follows
        `lower_case` as BERT does.
      models: build_tokenizer_models(vocab, lower_case, strip_accents) of
        this vocabulary, if already built (saves building them again).
    """

    def __init__(self, vocab_file: str, lower_case: bool = True,
                 strip_accents: Optional[bool] = None, models: Optional[Tuple[bytes, bytes]] = None):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel  (lazy: see build_tokenizer_models)
        import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

        self.vocab: List[str] = load_vocab(vocab_file)
        check_vocab(self.vocab, vocab_file)
        self.special = special_token_ids(self.vocab)
        self.lower_case = bool(lower_case)
        self.strip_accents = resolve_strip_accents(lower_case, strip_accents)
        fused = self.lower_case and self.strip_accents
        normalizer_model, wordpiece_model = models if models is not None else (None, None)
        self._tok = tf_text.FastBertTokenizer(
            vocab=self.vocab, suffix_indicator=SUFFIX_INDICATOR, max_bytes_per_word=MAX_BYTES_PER_WORD,
            token_out_type=tf.int64, unknown_token=UNKNOWN_TOKEN,
            lower_case_nfd_strip_accents=fused, support_detokenization=False,
            fast_wordpiece_model_buffer=wordpiece_model,
            fast_bert_normalizer_model_buffer=normalizer_model,
        )
        pre_lower = self.lower_case and not fused
        pre_strip = self.strip_accents and not fused

        def normalize(text):
            if pre_lower:
                text = tf_text.case_fold_utf8(text)
            if pre_strip:
                text = tf_text.normalize_utf8(text, "NFD")
                text = tf.strings.regex_replace(text, r"\p{Mn}", "")
            return text

        self._normalize = normalize

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def _tokenize(texts):
            ragged = self._tok.tokenize(normalize(texts))
            return ragged.flat_values, ragged.row_splits

        self._tokenize = _tokenize

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def tokenize_batch(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Tokenizes many texts in one call.

        Args:
          texts: strings.

        Returns:
          (flat ids int64, row_splits int64): ids of text i are
          flat[splits[i]:splits[i + 1]].
        """
        if not texts:
            return np.zeros([0], np.int64), np.zeros([1], np.int64)
        flat, splits = self._tokenize(list(texts))
        return flat.numpy(), splits.numpy()

    def tokenize(self, text: str) -> List[int]:
        """Token ids of one text."""
        flat, _ = self.tokenize_batch([text])
        return flat.tolist()

    def ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        return [self.vocab[i] for i in ids]
