"""Gradient accumulation == one full-batch step, for objectives other than electra.

(electra itself: tests/pretrain/test_pretrain_numerics.py.)
"""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretrain import ElectraPretrainer, create_optimizer

from helpers import pretrain_batch as make_batch, pretrain_config as make_config, pretrain_special_ids

SPECIAL = pretrain_special_ids()


def _pair(objective, **kw):
    cfg = make_config(objective, **kw)
    full = ElectraPretrainer(cfg, SPECIAL)
    full.compile(optimizer=create_optimizer(cfg))
    accum = ElectraPretrainer(cfg, SPECIAL, grad_accum_steps=2)
    accum.compile(optimizer=create_optimizer(cfg))
    accum.set_weights(full.get_weights())
    return full, accum


@pytest.mark.parametrize("objective, steps, extra", [
    ("mlm", 1, {}),
    # Step 0 is the MLM phase, step 1 the ELECTRA phase: both accumulate.
    pytest.param("two_stage", 2, {"two_stage_mlm_steps": 1}, marks=pytest.mark.large),
    pytest.param("electric", 1, {}, marks=pytest.mark.large),
])
def test_two_micro_batches_equal_one_full_batch_step(objective, steps, extra):
    full, accum = _pair(objective, **extra)
    before = full.get_weights()
    data = tf.data.Dataset.from_tensors(make_batch(rows=8)).repeat()  # 2 micro-batches of 4
    h_full = full.fit(data, steps_per_epoch=steps, verbose=0, shuffle=False).history
    h_accum = accum.fit(data, steps_per_epoch=steps, verbose=0, shuffle=False).history
    assert set(h_accum) == set(h_full)
    for name in h_full:
        assert h_accum[name][-1] == pytest.approx(h_full[name][-1], rel=1e-5, abs=1e-6), name
    moved = 0
    for start, a, b in zip(before, full.get_weights(), accum.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
        moved += not np.allclose(a, start)
    assert moved > len(before) // 2
    assert int(accum.optimizer.iterations.numpy()) == steps
