"""`AnswerableHead`: the SQuAD 2.0 "unanswerable" logit from [CLS] and the
start-probability-weighted hidden state (reference `answerable_uses_start_logits`)."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.models.initializers import electra_initializer


@keras.saving.register_keras_serializable(package="electra_tf")
class AnswerableHead(keras.layers.Layer):
    """SQuAD 2.0 answerability: logit > 0 means "no answer" (trained on is_impossible).

    Args:
      hidden_units: width of the hidden layer (reference 512).
      initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, hidden_units=512, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_units = hidden_units
        self.initializer_range = initializer_range
        init = electra_initializer(initializer_range)
        self.hidden = keras.layers.Dense(hidden_units, activation="gelu", kernel_initializer=init,
                                         dtype=self.dtype_policy, name="hidden")
        self.out = keras.layers.Dense(1, kernel_initializer=init, dtype=self.dtype_policy, name="out")

    def build(self, input_shape):
        self.hidden.build((None, 2 * input_shape[-1]))
        self.out.build((None, self.hidden_units))
        self.built = True

    def call(self, sequence_output, start_logits):
        start_p = ops.softmax(ops.cast(start_logits, "float32"), axis=-1)
        start_p = ops.cast(start_p, sequence_output.dtype)
        start_feat = ops.einsum("bs,bsh->bh", start_p, sequence_output)
        rep = ops.concatenate([sequence_output[:, 0], start_feat], -1)
        return ops.squeeze(self.out(self.hidden(rep)), -1)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_units=self.hidden_units, initializer_range=self.initializer_range)
        return config
