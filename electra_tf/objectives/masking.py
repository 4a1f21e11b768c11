"""Choosing and masking the positions the generator must fill, with static shapes.

Everything here is stateless (explicit seeds) and shape-static so it runs inside
an XLA-compiled, distributed train step.
"""

from typing import NamedTuple, Sequence

import tensorflow as tf

from electra_tf.objectives.random import row_uniform


class MaskedBatch(NamedTuple):
    input_ids: tf.Tensor  # [B, L] ids with [MASK] (or a random id) at the chosen positions
    positions: tf.Tensor  # [B, P] chosen positions; unused slots point at 0
    original_ids: tf.Tensor  # [B, P] ids at `positions` before masking (0 in unused slots)
    weights: tf.Tensor  # [B, P] float32, 1 for a used slot, 0 otherwise


def num_to_predict(input_mask, max_predictions, mask_prob):
    """Per-example count: max(1, min(P, round(non_pad_tokens * mask_prob))).

    As in the reference, [CLS]/[SEP] count as tokens here (they are part of
    `input_mask`) even though they can never be chosen. `tf.round` rounds half to
    even, like the reference.
    """
    num_tokens = tf.reduce_sum(tf.cast(input_mask, tf.float32), axis=-1)
    count = tf.cast(tf.round(num_tokens * mask_prob), tf.int32)
    return tf.maximum(1, tf.minimum(max_predictions, count))


def candidate_mask(input_ids, input_mask, never_masked_ids: Sequence[int]):
    """True where a token may be masked: real tokens other than [CLS]/[SEP]/[MASK]."""
    allowed = tf.cast(input_mask, tf.bool)
    for token_id in never_masked_ids:
        allowed &= tf.not_equal(input_ids, token_id)
    return allowed


def prediction_counts(input_ids, input_mask, max_predictions, mask_prob,
                      never_masked_ids: Sequence[int]):
    """Positions actually masked per example: `num_to_predict`, capped by the candidates.

    Returns (count [B], candidates [B, L]). A function of the input alone, so
    callers can know the step's masked total before masking (gradient accumulation).
    """
    candidates = candidate_mask(input_ids, input_mask, never_masked_ids)
    count = tf.minimum(
        num_to_predict(input_mask, max_predictions, mask_prob),
        tf.reduce_sum(tf.cast(candidates, tf.int32), axis=-1),
    )
    return count, candidates


def replace_at_positions(input_ids, positions, values, weights):
    """Writes `values` [B, P] at `positions` [B, P] where `weights` > 0.

    Positions within a row are distinct (see `mask_tokens`), so a one-hot sum
    is an exact scatter; it avoids `tensor_scatter_nd_update`, which XLA on TPU
    handles poorly with batch-dependent indices.
    """
    seq_len = tf.shape(input_ids)[1]
    hits = tf.one_hot(positions, seq_len, dtype=tf.int32) * tf.cast(weights > 0, tf.int32)[..., None]
    written = tf.reduce_sum(hits, axis=1) > 0  # [B, L]
    new_values = tf.reduce_sum(hits * tf.cast(values, tf.int32)[..., None], axis=1)
    return tf.where(written, new_values, tf.cast(input_ids, tf.int32))


def position_weights(positions, weights, seq_len: int):
    """[B, L] float32: 1 at the used `positions` [B, P] (`weights` > 0), else 0.

    Turns per-slot weights into per-token ones, e.g. to restrict a per-token
    loss to the masked positions (ELECTRA 15%). Positions in a row are distinct.
    """
    hits = tf.one_hot(positions, seq_len, dtype=tf.float32) * tf.cast(weights > 0, tf.float32)[..., None]
    return tf.reduce_sum(hits, axis=1)


def mask_tokens(
    input_ids,
    input_mask,
    *,
    max_predictions: int,
    mask_prob: float,
    mask_token_id: int,
    never_masked_ids: Sequence[int],
    seed,
    row_ids=None,
    keep_original_prob: float = 0.15,
    random_token_prob: float = 0.0,
    vocab_size: int = 0,
) -> MaskedBatch:
    """Chooses positions to predict and masks them (ELECTRA's `pretrain_helpers.mask`).

    Positions are drawn uniformly *without* replacement among the candidates
    (random scores + top-k). The reference draws with `tf.random.categorical`,
    i.e. with replacement, so a slot can repeat a position; we avoid that
    duplicate-weight quirk. When a row has fewer candidates than its count, all
    candidates are used. Of the chosen positions, a fraction `keep_original_prob`
    keeps the original token, a fraction `random_token_prob` gets a token drawn
    uniformly from the whole vocabulary (as BERT), and the rest becomes [MASK]:
    85/0/15 by default (ELECTRA's reference), 80/10/10 for BERT.

    Args:
        input_ids: int [B, L].
        input_mask: int [B, L], 1 for real tokens.
        max_predictions: P, the static number of prediction slots.
        mask_prob: fraction of tokens to predict (0.15 in the paper).
        mask_token_id: id of [MASK] in the vocabulary.
        never_masked_ids: ids that are never chosen ([CLS], [SEP], [MASK]).
        seed: int tensor [2]; with `row_ids` it determines every draw.
        row_ids: int [B] stable example ids (default 0..B-1); see `random.py`.
        keep_original_prob: fraction of chosen positions left unmasked.
        random_token_prob: fraction of chosen positions given a random token
            (0.1 for BERT's 80/10/10); needs `vocab_size`.
        vocab_size: V, the range of the random tokens.
    """
    if random_token_prob > 0 and vocab_size < 1:
        raise ValueError(f"random_token_prob={random_token_prob} needs vocab_size > 0 "
                         f"(got {vocab_size}); pass the vocabulary size")
    if keep_original_prob + random_token_prob > 1.0:
        raise ValueError(f"keep_original_prob={keep_original_prob} + random_token_prob="
                         f"{random_token_prob} exceed 1; lower either")
    input_ids = tf.cast(input_ids, tf.int32)
    seed = tf.cast(seed, tf.int64)
    seed_positions = tf.stack([seed[0] * 2, seed[1]])
    seq_len = input_ids.shape[1]
    if seq_len is None:
        raise ValueError("mask_tokens needs a static sequence length (batch with drop_remainder/padding)")
    if row_ids is None:
        row_ids = tf.range(tf.shape(input_ids)[0], dtype=tf.int64)

    count, candidates = prediction_counts(
        input_ids, input_mask, max_predictions, mask_prob, never_masked_ids)
    # Uniform scores in [0, 1) for candidates, -1 elsewhere: top-k is a uniform
    # random subset of the candidates, in random order.
    scores = row_uniform(seed_positions, row_ids, [seq_len])
    scores = tf.where(candidates, scores, -tf.ones_like(scores))
    _, top = tf.math.top_k(scores, k=max_predictions)
    weights = tf.sequence_mask(count, max_predictions, dtype=tf.float32)
    positions = top * tf.cast(weights, tf.int32)
    original_ids = tf.gather(input_ids, positions, batch_dims=1) * tf.cast(weights, tf.int32)

    to_mask, values = _slot_fates(seed, row_ids, positions, max_predictions, mask_token_id,
                                  keep_original_prob, random_token_prob, vocab_size)
    mask_weights = weights * tf.cast(to_mask, tf.float32)
    masked_ids = replace_at_positions(input_ids, positions, values, mask_weights)
    return MaskedBatch(masked_ids, positions, original_ids, weights)


def _slot_fates(seed, row_ids, positions, max_predictions: int, mask_token_id: int,
                keep_original_prob: float, random_token_prob: float, vocab_size: int):
    """(to_mask [B, P] bool, values [B, P]): which chosen slots get written, and with what.

    One uniform per slot decides its fate: [0, keep) kept, [keep, keep + random) random
    token, the rest [MASK]. With random_token_prob = 0 this is exactly the draw of the
    ELECTRA-only version (same stream, same test).
    """
    seed_keep = tf.stack([seed[0] * 2 + 1, seed[1]])
    fate = row_uniform(seed_keep, row_ids, [max_predictions])
    to_mask = fate >= keep_original_prob + random_token_prob
    values = tf.fill(tf.shape(positions), mask_token_id)
    if random_token_prob > 0:
        # A stream of its own: the negated seed word never equals another
        # stream's (those are >= 0 for the non-negative config seeds).
        seed_random = tf.stack([-seed[0] * 2 - 1, seed[1]])
        random_ids = tf.cast(
            row_uniform(seed_random, row_ids, [max_predictions]) * vocab_size, tf.int32)
        random_ids = tf.minimum(random_ids, vocab_size - 1)
        to_random = (fate >= keep_original_prob) & ~to_mask
        values = tf.where(to_random, random_ids, values)
        to_mask |= to_random
    return to_mask, values
