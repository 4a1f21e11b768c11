"""The reference ELECTRA example-building rules, on token ids.

Follows google-research/electra `build_pretraining_dataset.py`: lines
accumulate until a target length; with p=0.1 the example is one segment,
otherwise segment A aims at (target - 3) // 2 tokens; with p=0.05 the next
target is randint(5, max_len). Layout: [CLS] A [SEP] (B [SEP]), zero-padded.

The random draws happen in the same order and under the same conditions as in
the reference, so a seeded `random.Random` fixes every decision.

The reference cuts whatever does not fit: a paragraph longer than the room
left in an example loses its tail (on IMDB reviews at 64 tokens, over half of
the corpus). With `carry=True` (the builder's default) no token is lost: a line
longer than the room left is split, at the last sentence end that keeps at
least half of the room filled, else at the room's edge, and the rest starts
the next example. Random draws then follow the same rules, on the pieces, and
segment B always continues where A stops (the reference can move a short later
line into A), so the examples hold the corpus's tokens in the corpus's order.
"""

from __future__ import annotations

import random
from typing import List, Optional, Sequence, Tuple

# "No limit" for segment A in single-segment examples (the reference value).
SINGLE_SEGMENT_TARGET = 100000
SINGLE_SEGMENT_PROB = 0.1
RANDOM_LENGTH_PROB = 0.05
MIN_RANDOM_LENGTH = 5

Example = Tuple[List[int], List[int]]  # (input_ids, segment_ids), unpadded


class ExampleBuilder:
    """Turns a stream of tokenized lines into examples.

    Args:
      max_seq_length: length of every example, [CLS]/[SEP] included (>= 5).
      cls_id: id of [CLS].
      sep_id: id of [SEP].
      rng: the random source for every decision (seed it for reproducibility).
      carry: split lines that do not fit and carry the rest into the next
        example (no token lost) instead of the reference's truncation.
      sentence_end_ids: token ids that end a sentence ('.', '!', '?'); a
        carried split prefers to fall just after one.
    """

    def __init__(self, max_seq_length: int, cls_id: int, sep_id: int, rng: random.Random,
                 carry: bool = False, sentence_end_ids: Sequence[int] = ()):
        if max_seq_length < MIN_RANDOM_LENGTH:
            raise ValueError(f"max_seq_length={max_seq_length} is too short; use at least {MIN_RANDOM_LENGTH}")
        self.max_length = max_seq_length
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.rng = rng
        self.target_length = max_seq_length
        self.carry = carry
        self._sentence_ends = frozenset(sentence_end_ids)
        self._sentences: List[List[int]] = []
        self._length = 0

    def add_sentence(self, ids: List[int]) -> Optional[Example]:
        """The reference's step: adds one non-blank line's ids; returns an example once the target is met.

        Only in the reference's truncating mode, where a line completes at
        most one example; in carry mode use `add_line`.
        """
        if self.carry:
            raise ValueError("add_sentence is the truncating rule; in carry mode a line can "
                             "complete several examples: call add_line")
        return self._add(ids) if ids else None

    def add_line(self, ids: List[int]) -> List[Example]:
        """Adds one non-blank line's ids; returns the examples it completes (0, 1 or more).

        Args:
          ids: the line's WordPiece ids (an empty list changes nothing).

        Returns:
          The completed examples, in order. In truncating mode at most one.
        """
        if not ids:
            # Empty token lists never change an example nor consume randomness
            # in the reference, so they are simply dropped.
            return []
        if not self.carry:
            example = self._add(ids)
            return [example] if example is not None else []
        out: List[Example] = []
        # Every piece fits beside [CLS] A [SEP] B [SEP], so _create_example never trims a token.
        capacity = self.max_length - 3
        while ids:
            room = capacity - self._length
            if room <= 0:
                out.append(self._create_example())
                continue
            if len(ids) <= room:
                piece, ids = ids, []
            else:
                cut = self._split_point(ids, room)
                piece, ids = ids[:cut], ids[cut:]
            example = self._add(piece)
            if example is not None:
                out.append(example)
            elif ids:
                # The example is as full as this line lets it be but below its
                # target: close it, so the rest of the line starts the next one.
                out.append(self._create_example())
        return out

    def _split_point(self, ids: List[int], room: int) -> int:
        """Where to cut a line that overflows `room`: after a sentence end, else at the room's edge."""
        for i in range(room - 1, room // 2 - 1, -1):
            if ids[i] in self._sentence_ends:
                return i + 1
        return room

    def _add(self, ids: List[int]) -> Optional[Example]:
        self._sentences.append(ids)
        self._length += len(ids)
        if self._length >= self.target_length:
            return self._create_example()
        return None

    def end_document(self) -> Optional[Example]:
        """A blank line or end of input: flush what has accumulated, if anything."""
        if self._length:
            return self._create_example()
        return None

    def _create_example(self) -> Example:
        rng = self.rng
        if rng.random() < SINGLE_SEGMENT_PROB:
            first_target = SINGLE_SEGMENT_TARGET
        else:
            first_target = (self.target_length - 3) // 2  # room for [CLS] [SEP] [SEP]

        first: List[int] = []
        second: List[int] = []
        for sentence in self._sentences:
            # A sentence joins A when A is empty, when it fits, or (once B has
            # not started and A is still short) on a coin flip. The reference
            # lets a short sentence join A after B has started, out of the
            # text's order; carry mode keeps the order (B, once started, takes
            # the rest). The coin is drawn only while B is empty either way,
            # so both modes consume the same random numbers.
            if self.carry and second:
                second.extend(sentence)
            elif (not first
                    or len(first) + len(sentence) < first_target
                    or (not second and len(first) < first_target and rng.random() < 0.5)):
                first.extend(sentence)
            else:
                second.extend(sentence)

        first = first[: self.max_length - 2]
        second = second[: max(0, self.max_length - len(first) - 3)]

        self._sentences = []
        self._length = 0
        if rng.random() < RANDOM_LENGTH_PROB:
            self.target_length = rng.randint(MIN_RANDOM_LENGTH, self.max_length)
        else:
            self.target_length = self.max_length

        input_ids = [self.cls_id] + first + [self.sep_id]
        segment_ids = [0] * len(input_ids)
        if second:
            input_ids += second + [self.sep_id]
            segment_ids += [1] * (len(second) + 1)
        return input_ids, segment_ids


def pad_example(example: Example, max_length: int, pad_id: int = 0):
    """Returns (input_ids, input_mask, segment_ids), each of length max_length.

    The reference pads input_ids with 0 whatever the vocab; [PAD] is 0 in BERT
    vocabularies and in the ones build_vocab writes.
    """
    input_ids, segment_ids = example
    n = len(input_ids)
    pad = max_length - n
    return (input_ids + [pad_id] * pad, [1] * n + [0] * pad, segment_ids + [0] * pad)
