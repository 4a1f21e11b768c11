"""`split_batch`: the global batch goes down once, to replicas and then micro-batches."""

import pytest

from electra_tf.training.distribution import BatchSplit, StrategyError, split_batch


def test_global_to_replicas_to_micro_batches():
    assert split_batch(64, 2, 4, "2 devices", eval_global=32) == BatchSplit(
        global_batch=64, replicas=2, per_replica=32, grad_accum_steps=4, micro=8, eval_global=32,
        eval_per_replica=16)
    assert split_batch(8, 1, 1, "the CPU") == BatchSplit(8, 1, 8, 1, 8, None, None)


@pytest.mark.parametrize("args, message", [
    ((10, 4, 1), "--batch_size=10 (global) is not divisible by the 4 replicas of M; use a multiple of 4"),
    ((8, 1, 3), "the per-replica batch 8 is not divisible by --grad_accum_steps=3; use a --batch_size that is "
                "a multiple of 3"),
])
def test_uneven_splits_are_refused_naming_the_flag(args, message):
    with pytest.raises(StrategyError) as e:
        split_batch(*args, "M")
    assert str(e.value) == message


def test_uneven_eval_batch_is_refused():
    with pytest.raises(StrategyError, match=r"^the config's eval_batch_size=3 \(global\) is not divisible by the "
                                            r"2 replicas of M; add --override eval_batch_size=<a multiple of 2>$"):
        split_batch(8, 2, 1, "M", eval_global=3)
