"""Hugging Face `tokenizers`' WordPiece trainer (Rust) on counted words, and the vocab.txt layout.

The trainer is bottom-up (merges of characters, most frequent first) and fast
on large corpora; build_vocab uses it unless asked for tensorflow-text's
learner (bert_vocab_learner.py). Either learner's tokens are laid out by
`layout_vocab`: reserved tokens, characters, learned pieces, `##` characters.
"""

from __future__ import annotations

import unicodedata
from typing import Dict, Iterator, List, Sequence

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from electra_tf.data.data_errors import DataError
from electra_tf.data.hf_bert_tokenizer import MAX_CHARS_PER_WORD
from electra_tf.data.vocab import SPECIAL_TOKENS

# Longest string handed to the trainer at once (a frequent word repeated count times).
FEED_CHARS = 1 << 20


def _repeat_words(counts: Dict[str, int]) -> Iterator[str]:
    """Each word `count` times, space-separated, in strings of at most ~FEED_CHARS characters."""
    for word, n in counts.items():
        per_string = max(1, FEED_CHARS // (len(word) + 1))
        while n > 0:
            m = min(n, per_string)
            yield " ".join([word] * m)
            n -= m


def _can_continue_a_word(char: str) -> bool:
    """False for characters BERT always splits off (punctuation, CJK): a `##` form is never used."""
    cp = ord(char)
    if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F):
        return False  # BERT's CJK ranges (BasicTokenizer._is_chinese_char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return False
    return not unicodedata.category(char).startswith("P")


def layout_vocab(learned: Sequence[str], vocab_size: int, reserved: Sequence[str]) -> List[str]:
    """Orders the trainer's vocabulary and fits it to vocab_size.

    Reserved tokens, then every character (sorted), then learned pieces in the
    trainer's order (most frequent merges first), then `##` + every character
    that can continue a word. The trainer only makes the `##` forms it saw;
    the missing ones are added and the last (rarest) pieces dropped to make
    room, so every character stays representable in every position.

    Raises:
      DataError: vocab_size cannot hold the characters.
    """
    head = list(reserved)
    taken = set(head)
    chars = set()
    pieces = []
    for token in learned:
        if token in taken:
            continue
        if len(token) == 1:
            chars.add(token)
        elif len(token) == 3 and token.startswith("##"):
            chars.add(token[2:])
        else:
            pieces.append(token)
    ordered = sorted(chars)
    tail = ["##" + c for c in ordered if _can_continue_a_word(c)]
    keep = vocab_size - len(head) - len(ordered) - len(tail)
    if keep < 0:
        raise DataError(f"--vocab_size={vocab_size} cannot hold the {len(ordered)} distinct characters of the "
                        f"sample ({len(head) + len(ordered) + len(tail)} tokens with the special and ## forms); "
                        f"raise --vocab_size")
    return head + ordered + pieces[:keep] + tail


def learn_wordpiece(counts: Dict[str, int], vocab_size: int, min_count: int) -> List[str]:
    """Runs the `tokenizers` WordPiece trainer on counted words; returns the laid-out vocabulary."""
    reserved = list(SPECIAL_TOKENS)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS_PER_WORD))
    # The words are already normalised and split; the trainer only needs to separate the copies.
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # The trainer breaks ties between equally frequent merges by token id, and numbers the `##`
    # characters in the order a hash map hands it the words, which changes from run to run.
    # Registered up front (as tokens that are never split), they get fixed ids, and the same
    # counts always give the same vocabulary.
    continuations = sorted({c for word in counts for c in word[1:]})
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_count,
        special_tokens=reserved + ["##" + c for c in continuations],
        continuing_subword_prefix="##", show_progress=False)
    tok.train_from_iterator(_repeat_words(counts), trainer)
    vocab = tok.get_vocab()
    return layout_vocab(sorted(vocab, key=vocab.get), vocab_size, reserved)
