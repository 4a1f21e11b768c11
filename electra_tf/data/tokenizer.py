"""The pre-training data builder's WordPiece tokenizer, and vocabulary checks.

`WordPieceTokenizer` runs `wordpiece_ops.WordPieceOps` (the text
normalisation of a `normalization.TextNormalization`, then WordPiece) for ids
only, no packing; its compiled tables are built once and handed to the spawned
workers. Fine-tuning, serving and scoring encode text with
`electra_tf.preprocessing.TextPreprocessor`, which runs the same ops.
"""

from __future__ import annotations

import hashlib
from typing import List, Optional, Sequence, Tuple

import numpy as np

from electra_tf.fileio import open_binary
from electra_tf.data.normalization import LEGACY_MAX_BYTES_PER_WORD, TextNormalization
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


# The WordPiece settings every tokenizer here uses (wordpiece_ops.py).
SUFFIX_INDICATOR = "##"
MAX_BYTES_PER_WORD = LEGACY_MAX_BYTES_PER_WORD  # nfkc_casefold's limit; bert mode counts characters
UNKNOWN_TOKEN = "[UNK]"


def normalization_of(lower_case: bool = True, strip_accents: Optional[bool] = None,
                     normalization: Optional[TextNormalization] = None) -> TextNormalization:
    """The `TextNormalization` an old-style (lower_case, strip_accents) call means: `normalization`
    when given, else the bert mode with that casing."""
    if normalization is not None:
        return normalization
    return TextNormalization.create(lower_case, strip_accents)


def build_tokenizer_models(vocab: Sequence[str], lower_case: bool = True, strip_accents: Optional[bool] = None,
                           normalization: Optional[TextNormalization] = None) -> Tuple[Optional[bytes], bytes]:
    """The tokenizer's compiled tables: (normaliser or None, WordPiece model).

    Building them takes about a second each (the legacy normaliser walks every
    Unicode code point through ICU); a process that has them can hand them to
    the others (WordPieceTokenizer's `models`) instead of each building them.
    """
    # TensorFlow loads here, not at import: the data CLIs import this module and
    # must refuse bad input in a second, without TensorFlow's start-up and logs.
    from electra_tf.data.wordpiece_ops import build_models  # pylint: disable=import-outside-toplevel

    return build_models(list(vocab), normalization_of(lower_case, strip_accents, normalization))


class WordPieceTokenizer:
    """Text -> WordPiece ids, batched through one compiled TF function.

    The shard builder's tokenizer: `wordpiece_ops.WordPieceOps`, the ops
    fine-tuning and the SavedModel run too.

    Args:
      vocab_file: BERT-style vocab.txt (must hold [PAD] [UNK] [CLS] [SEP] [MASK]).
      lower_case: lower-case the text (with `strip_accents`: the bert mode's
        casing, when `normalization` is not given).
      strip_accents: strip accents (NFD, drop combining marks); None follows
        `lower_case` as BERT does.
      models: build_tokenizer_models(...) of this vocabulary and
        normalisation, if already built (saves building them again).
      normalization: the `TextNormalization` (overrides the two above).
    """

    def __init__(self, vocab_file: str, lower_case: bool = True,
                 strip_accents: Optional[bool] = None, models: Optional[Tuple[Optional[bytes], bytes]] = None,
                 normalization: Optional[TextNormalization] = None):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel  (lazy: see build_tokenizer_models)

        from electra_tf.data.wordpiece_ops import WordPieceOps  # pylint: disable=import-outside-toplevel

        self.vocab: List[str] = load_vocab(vocab_file)
        check_vocab(self.vocab, vocab_file)
        self.special = special_token_ids(self.vocab)
        self.normalization = normalization_of(lower_case, strip_accents, normalization)
        self.lower_case = self.normalization.lower_case
        self.strip_accents = self.normalization.strip_accents
        self._ops = WordPieceOps(self.vocab, self.normalization, models)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def _tokenize(texts):
            ragged = self._ops.tokenize(texts)
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
