"""Pins the reference example-building rules with hand-made token ids."""

import random

import pytest

from electra_tf.data.examples import ExampleBuilder, pad_example

CLS, SEP = 101, 102


class ScriptedRng:
    """random()/randint() answer from a script; randint's bounds are recorded."""

    def __init__(self, randoms, randints=()):
        self.randoms = list(randoms)
        self.randints = list(randints)
        self.randint_calls = []

    def random(self):
        return self.randoms.pop(0)

    def randint(self, a, b):
        self.randint_calls.append((a, b))
        return self.randints.pop(0)


def ids(start, n):
    return list(range(start, start + n))


def test_two_segments_split_at_half_target():
    # max 20 -> A target (20-3)//2 = 8. Sentences of 5, 5, 6: A gets 5 (5+5=10 >= 8,
    # then coin 0.9 >= 0.5 -> B); B gets the rest.
    rng = ScriptedRng([0.5, 0.9, 0.5])  # not single; coin -> B; no random length
    b = ExampleBuilder(20, CLS, SEP, rng)
    assert b.add_sentence(ids(1, 5)) is None
    assert b.add_sentence(ids(10, 5)) is None
    example = b.add_sentence(ids(20, 10))  # total 20 >= target 20
    input_ids, segment_ids = example
    # Third sentence: B already started -> B. Trim: A<=18, B<=20-5-3=12 (15 -> 12).
    assert input_ids == [CLS] + ids(1, 5) + [SEP] + (ids(10, 5) + ids(20, 10))[:12] + [SEP]
    assert segment_ids == [0] * 7 + [1] * 13
    assert len(input_ids) == 20
    assert rng.randoms == []


def test_coin_flip_puts_overflowing_sentence_in_a():
    rng = ScriptedRng([0.5, 0.3, 0.5])  # coin 0.3 < 0.5 -> second sentence joins A
    b = ExampleBuilder(20, CLS, SEP, rng)
    b.add_sentence(ids(1, 5))
    b.add_sentence(ids(10, 5))
    input_ids, segment_ids = b.end_document()
    assert input_ids == [CLS] + ids(1, 5) + ids(10, 5) + [SEP]
    assert segment_ids == [0] * 12


def test_sentence_that_fits_goes_to_a_without_a_coin():
    # A target 8: 3 + 4 = 7 < 8 fits; then 7 + 2 = 9 -> coin.
    rng = ScriptedRng([0.5, 0.7, 0.5])
    b = ExampleBuilder(20, CLS, SEP, rng)
    b.add_sentence(ids(1, 3))
    b.add_sentence(ids(10, 4))
    b.add_sentence(ids(20, 2))
    input_ids, segment_ids = b.end_document()
    assert input_ids == [CLS] + ids(1, 3) + ids(10, 4) + [SEP] + ids(20, 2) + [SEP]
    assert segment_ids == [0] * 9 + [1] * 3


def test_single_segment_with_p_point_one():
    rng = ScriptedRng([0.09, 0.5])  # < 0.1: one segment, no coin flips at all
    b = ExampleBuilder(20, CLS, SEP, rng)
    for start in (1, 10, 20):
        assert b.add_sentence(ids(start, 6)) is None  # 18 < target 20
    input_ids, segment_ids = b.end_document()
    # 18 tokens, trimmed to max-2 = 18.
    assert input_ids == [CLS] + ids(1, 6) + ids(10, 6) + ids(20, 6) + [SEP]
    assert segment_ids == [0] * 20
    assert rng.randoms == []


def test_long_first_sentence_is_trimmed_and_b_dropped():
    rng = ScriptedRng([0.5, 0.5])
    b = ExampleBuilder(10, CLS, SEP, rng)
    input_ids, segment_ids = b.add_sentence(ids(1, 30))
    assert input_ids == [CLS] + ids(1, 8) + [SEP]
    assert segment_ids == [0] * 10


def test_random_target_length_with_p_point_o_five():
    rng = ScriptedRng([0.5, 0.04, 0.5, 0.5], randints=[7])
    b = ExampleBuilder(20, CLS, SEP, rng)
    b.add_sentence(ids(1, 25))  # first example; then target -> randint(5, 20) = 7
    assert rng.randint_calls == [(5, 20)]
    assert b.target_length == 7
    assert b.add_sentence(ids(40, 4)) is None  # 4 < 7
    # 4 + 3 = 7 >= 7 -> example. A target (7-3)//2 = 2: A=[4 tokens] (A empty),
    # the next sentence: 4 >= 2 so no coin and it goes to B.
    input_ids, segment_ids = b.add_sentence(ids(50, 3))
    assert input_ids == [CLS] + ids(40, 4) + [SEP] + ids(50, 3) + [SEP]
    assert segment_ids == [0] * 6 + [1] * 4
    assert b.target_length == 20  # back to max


def test_document_end_flushes_and_blank_without_text_does_nothing():
    rng = ScriptedRng([0.5, 0.5])
    b = ExampleBuilder(20, CLS, SEP, rng)
    assert b.end_document() is None
    assert b.add_sentence([]) is None  # a line that tokenizes to nothing
    b.add_sentence(ids(1, 3))
    assert b.end_document() == ([CLS, 1, 2, 3, SEP], [0] * 5)
    assert b.end_document() is None


def test_padding_layout():
    input_ids, mask, segs = pad_example(([CLS, 5, SEP, 6, SEP], [0, 0, 0, 1, 1]), 8, pad_id=0)
    assert input_ids == [CLS, 5, SEP, 6, SEP, 0, 0, 0]
    assert mask == [1, 1, 1, 1, 1, 0, 0, 0]
    assert segs == [0, 0, 0, 1, 1, 0, 0, 0]


def test_rates_match_reference_probabilities():
    b = ExampleBuilder(64, CLS, SEP, random.Random(0))
    rng_len = random.Random(1)
    single = short_target = total = 0
    for i in range(40000):
        example = b.add_sentence(list(range(rng_len.randint(3, 30))))
        if example is not None:
            total += 1
            single += 1 not in example[1]
            short_target += b.target_length < 64
    assert total > 2000
    # Single-segment: 10% by the coin plus the few examples whose B ends up empty.
    assert 0.09 < single / total < 0.16
    assert 0.035 < short_target / total < 0.065


def test_too_short_max_length_is_refused():
    with pytest.raises(ValueError, match="too short"):
        ExampleBuilder(4, CLS, SEP, random.Random(0))
