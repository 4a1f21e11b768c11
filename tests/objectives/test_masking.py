"""Masking rules of the reference, pinned on hand-made batches."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.objectives import mask_tokens, num_to_predict, replace_at_positions

# A deliberately non-BERT vocabulary order: special ids must come from the
# caller (looked up in the vocabulary), never be assumed.
PAD, CLS, SEP, MASK = 7, 3, 9, 5


def _batch(rows, seq_len):
    ids = np.full((len(rows), seq_len), PAD, np.int32)
    mask = np.zeros((len(rows), seq_len), np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return tf.constant(ids), tf.constant(mask)


def _mask(ids, mask, seed=(0, 0), max_predictions=6, mask_prob=0.15, **kw):
    return mask_tokens(
        ids, mask, max_predictions=max_predictions, mask_prob=mask_prob,
        mask_token_id=MASK, never_masked_ids=(CLS, SEP, MASK), seed=tf.constant(seed), **kw,
    )


def test_count_formula_matches_reference():
    # max(1, min(P, round(n * p))); tf.round is round-half-to-even like the reference.
    mask = tf.constant([[1] * n + [0] * (40 - n) for n in (1, 2, 10, 20, 30, 40)])
    got = num_to_predict(mask, max_predictions=5, mask_prob=0.15).numpy()
    # n*0.15 = 0.15, 0.3, 1.5, 3.0, 4.5, 6.0 -> round: 0, 0, 2, 3, 4, 6 -> clamp to [1, 5]
    np.testing.assert_array_equal(got, [1, 1, 2, 3, 4, 5])


def test_special_tokens_and_padding_never_masked():
    rows = [
        [CLS, 11, 12, 13, 14, 15, SEP, 16, 17, 18, SEP],
        [CLS, 20, 21, MASK, 22, SEP],
        [CLS, 30, SEP],
    ]
    ids, mask = _batch(rows, 16)
    for step in range(200):
        out = _mask(ids, mask, seed=(1, step), mask_prob=0.5)
        w = out.weights.numpy()
        pos = out.positions.numpy()
        chosen_ids = np.take_along_axis(ids.numpy(), pos, axis=1)[w > 0]
        assert not np.isin(chosen_ids, [CLS, SEP, MASK, PAD]).any()
        assert (np.take_along_axis(mask.numpy(), pos, axis=1)[w > 0] == 1).all()
        # Positions within a row are distinct.
        for r in range(len(rows)):
            used = pos[r][w[r] > 0]
            assert len(set(used.tolist())) == len(used)
        # Nothing outside the chosen positions changes.
        changed = out.input_ids.numpy() != ids.numpy()
        assert not changed[mask.numpy() == 0].any()


def test_counts_weights_and_original_ids():
    rows = [[CLS] + list(range(100, 118)) + [SEP]]  # 20 tokens -> round(3.0) = 3
    ids, mask = _batch(rows, 24)
    out = _mask(ids, mask, seed=(2, 5))
    np.testing.assert_array_equal(out.weights.numpy(), [[1, 1, 1, 0, 0, 0]])
    pos = out.positions.numpy()[0]
    assert (pos[3:] == 0).all()  # unused slots point at 0 with weight 0
    np.testing.assert_array_equal(out.original_ids.numpy()[0, :3], ids.numpy()[0, pos[:3]])
    assert (out.original_ids.numpy()[0, 3:] == 0).all()


def test_row_with_too_few_candidates_uses_what_exists():
    ids, mask = _batch([[CLS, 42, SEP], [CLS, SEP]], 8)
    out = _mask(ids, mask, mask_prob=0.9)
    np.testing.assert_array_equal(out.weights.numpy().sum(1), [1, 0])
    assert out.positions.numpy()[0, 0] == 1


def test_85_15_split_and_uniform_positions_over_many_draws():
    row = [CLS] + list(range(100, 138)) + [SEP]  # 40 tokens, 38 candidates -> 6 slots
    ids, mask = _batch([row] * 64, 40)
    masked = kept = 0
    position_counts = np.zeros(40)
    for step in range(40):
        out = _mask(ids, mask, seed=(3, step))
        w = out.weights.numpy() > 0
        pos = out.positions.numpy()
        became_mask = np.take_along_axis(out.input_ids.numpy(), pos, axis=1) == MASK
        masked += (became_mask & w).sum()
        kept += (~became_mask & w).sum()
        np.add.at(position_counts, pos[w], 1)
    total = masked + kept
    assert total == 40 * 64 * 6
    frac = masked / total  # 15,360 draws: std of the fraction ~0.003
    assert abs(frac - 0.85) < 0.015, frac
    # Candidates 1..38 each drawn ~ total/38 = 404 times; CLS/SEP never.
    assert position_counts[0] == 0 and position_counts[39] == 0
    inner = position_counts[1:39]
    assert inner.min() > 0.8 * inner.mean() and inner.max() < 1.2 * inner.mean()


def test_same_seed_same_mask_and_rows_differ():
    row = [CLS] + list(range(100, 130)) + [SEP]
    ids, mask = _batch([row, row], 32)
    a = _mask(ids, mask, seed=(4, 1))
    b = _mask(ids, mask, seed=(4, 1))
    np.testing.assert_array_equal(a.positions.numpy(), b.positions.numpy())
    # Identical rows still get different masks (keyed by row id).
    assert not np.array_equal(a.positions.numpy()[0], a.positions.numpy()[1])
    # A row's draws depend on its id, not its place in the batch.
    c = _mask(ids[1:], mask[1:], seed=(4, 1), row_ids=tf.constant([1], tf.int64))
    np.testing.assert_array_equal(c.positions.numpy()[0], a.positions.numpy()[1])


def test_replace_at_positions_ignores_unused_slots():
    ids = tf.constant([[1, 2, 3, 4, 5]])
    out = replace_at_positions(ids, tf.constant([[3, 1, 0]]), tf.constant([[30, 10, 99]]),
                               tf.constant([[1.0, 1.0, 0.0]]))
    np.testing.assert_array_equal(out.numpy(), [[1, 10, 3, 30, 5]])


def test_mask_tokens_needs_static_length():
    fn = tf.function(lambda i, m: _mask(i, m).input_ids,
                     input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2)
    with pytest.raises(ValueError, match="static sequence length"):
        fn.get_concrete_function()
