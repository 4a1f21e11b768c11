"""Our side of the check: `ElectraPretrainer` stepped through its own `train_step`."""

from __future__ import annotations

from typing import Dict

import keras
import numpy as np
import tensorflow as tf

from electra_tf.pretrain.pretrain_optimizer import create_optimizer
from electra_tf.pretrain.pretrainer import ElectraPretrainer


class TFPretrainer:
    """Our `ElectraPretrainer`, stepped through its own `train_step`.

    A subclass records the forward outputs `train_step` hands to its metrics
    (labels, logits, masks), so the window metrics use the same numbers as the
    reference's; the update itself is the unmodified `train_step`.
    """

    def __init__(self, config, special, train_steps: int):
        tap = {}

        class RecordingPretrainer(ElectraPretrainer):
            def _update_metrics(self, out):
                tap["out"] = out
                return super()._update_metrics(out)

        keras.mixed_precision.set_global_policy("float32")
        keras.utils.set_random_seed(config.seed)
        self.model = model = RecordingPretrainer(config, special)
        self.optimizer = optimizer = create_optimizer(config, train_steps=train_steps)
        model.compile(optimizer=optimizer)
        optimizer.build(model.trainable_variables)
        variables = model.trainable_variables
        self.num_params = int(sum(np.prod(v.shape) for v in variables))
        try:
            self.num_decayed = int(sum(np.prod(v.shape) for v in variables
                                       if optimizer._use_weight_decay(v)))
        except AttributeError:  # a Keras without the private helper
            self.num_decayed = None

        @tf.function
        def step(batch):
            lr = tf.identity(optimizer.learning_rate)  # this step's rate (read before it)
            model.train_step(batch)
            out = tap["out"]
            hits = tf.cast(tf.equal(tf.argmax(out["mlm_logits"], -1, output_type=tf.int32),
                                    out["masked_original_ids"]), tf.float32)
            return {
                "loss": out["loss"], "mlm_loss": out["mlm_loss"], "disc_loss": out["disc_loss"],
                "lr": lr, "mlm_hits": hits * out["masked_weights"],
                "mlm_weights": out["masked_weights"], "labels": out["disc_labels"],
                "probs": tf.sigmoid(tf.cast(out["disc_logits"], tf.float32)),
                "input_mask": out["input_mask"],
            }

        self._step = step

    def step(self, batch) -> Dict[str, np.ndarray]:
        out = {k: v.numpy() for k, v in self._step(batch).items()}
        for name in ("loss", "mlm_loss", "disc_loss", "lr"):
            out[name] = float(out[name])
        return out
