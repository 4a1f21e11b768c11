"""`TokenClassificationHead`: the tagger's head, dropout + dense per token."""

from __future__ import annotations

import keras

from electra_tf.models.initializers import electra_initializer


@keras.saving.register_keras_serializable(package="electra_tf")
class TokenClassificationHead(keras.layers.Layer):
    """Per-token logits for tagging.

    Args:
      num_labels: number of tags.
      dropout: dropout rate.
      initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, num_labels, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout)
        self.out = keras.layers.Dense(num_labels, kernel_initializer=electra_initializer(initializer_range),
                                      dtype=self.dtype_policy, name="out_proj")

    def build(self, input_shape):
        self.out.build(input_shape)
        self.built = True

    def call(self, sequence_output, training=None):
        return self.out(self.dropout(sequence_output, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, dropout=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config
