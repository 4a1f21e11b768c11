"""Small pieces of the Keras training loop shared by pre-training and fine-tuning."""

from __future__ import annotations

import keras


def current_learning_rate(optimizer) -> float:
    """The learning rate the optimizer applies at its current step (what the logs show).

    Unwraps a `LossScaleOptimizer` (mixed_float16), whose own `learning_rate`
    is its inner optimizer's.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    return float(keras.ops.convert_to_numpy(inner.learning_rate))
