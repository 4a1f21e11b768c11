"""WordPiece vocabulary files: loading and the special tokens ELECTRA needs.

Special-token ids are always looked up in the vocabulary, never hard-coded, so a
vocabulary with a different order (or another language) works unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Sequence, Union

from electra_tf.errors import ElectraError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class VocabError(ElectraError, ValueError):
    """A vocabulary file that cannot be used."""


@dataclasses.dataclass(frozen=True)
class SpecialTokenIds:
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @property
    def never_masked(self) -> tuple:
        """Ids the masking step must never select ([CLS], [SEP], [MASK])."""
        return (self.cls, self.sep, self.mask)


def load_vocab(path: str) -> List[str]:
    """Reads a one-token-per-line vocabulary (the BERT `vocab.txt` format)."""
    if not os.path.isfile(path):
        raise VocabError(f"vocab file {path!r} does not exist; build one with python -m electra_tf.data.build_vocab")
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n").rstrip("\r") for line in f]
    while tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens:
        raise VocabError(f"vocab file {path!r} is empty; build one with python -m electra_tf.data.build_vocab")
    return tokens


def special_token_ids(vocab: Union[str, Sequence[str]]) -> SpecialTokenIds:
    """Finds [PAD] [UNK] [CLS] [SEP] [MASK] in a vocabulary (list or file path)."""
    source = vocab if isinstance(vocab, str) else "vocabulary"
    tokens = load_vocab(vocab) if isinstance(vocab, str) else list(vocab)
    index = {}
    for i, token in enumerate(tokens):
        index.setdefault(token, i)
    missing = [t for t in SPECIAL_TOKENS if t not in index]
    if missing:
        raise VocabError(
            f"{source} lacks special token(s) {' '.join(missing)}; "
            f"add them (one per line) or rebuild it with python -m electra_tf.data.build_vocab"
        )
    return SpecialTokenIds(
        pad=index["[PAD]"], unk=index["[UNK]"], cls=index["[CLS]"],
        sep=index["[SEP]"], mask=index["[MASK]"],
    )
