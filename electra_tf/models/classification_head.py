"""`ClassificationHead`: the sentence(-pair) classifier's head, dropout + one dense layer on the
[CLS] vector (the reference; ELECTRA has no pooler) or on the mean of the token vectors, or the
Hugging Face two-layer head (dropout, dense H + GELU, dropout, dense). One output for regression."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.models.initializers import electra_initializer


@keras.saving.register_keras_serializable(package="electra_tf")
class ClassificationHead(keras.layers.Layer):
    """Sentence(-pair) classification or regression from the [CLS] vector or the token mean.

    Args:
      num_outputs: number of classes (1 for regression).
      dropout: dropout rate before the dense layer(s) (reference 0.1).
      initializer_range: stddev of the truncated-normal initializer.
      two_layer: use the Hugging Face two-layer head.
      hidden_dim: width of the first layer of the two-layer head.
      pooling: "cls" (the reference: the final [CLS] vector) or "mean" (the mean of
        the final vectors of the real tokens). Pre-training never trains the [CLS]
        position to carry the sentence (the discriminator learns that it is
        never replaced), so small pre-trained encoders start fine-tuning with a
        near-constant [CLS] vector; the token mean uses what they did learn.
    """

    POOLINGS = ("cls", "mean")

    def __init__(self, num_outputs, dropout=0.1, initializer_range=0.02, two_layer=False,
                 hidden_dim=None, pooling="cls", **kwargs):
        super().__init__(**kwargs)
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling={pooling!r}: use one of {', '.join(self.POOLINGS)}")
        self.pooling = pooling
        self.num_outputs = num_outputs
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.two_layer = two_layer
        self.hidden_dim = hidden_dim
        self.dropout = keras.layers.Dropout(dropout)
        self.dense = None
        if two_layer:
            if not hidden_dim:
                raise ValueError("two_layer=True needs hidden_dim (the encoder width)")
            self.dense = keras.layers.Dense(hidden_dim, activation="gelu",
                                            kernel_initializer=electra_initializer(initializer_range),
                                            dtype=self.dtype_policy, name="dense")
            self.dropout2 = keras.layers.Dropout(dropout)
        self.out = keras.layers.Dense(num_outputs, kernel_initializer=electra_initializer(initializer_range),
                                      dtype=self.dtype_policy, name="out_proj")

    def build(self, input_shape):
        width = input_shape[-1]
        if self.dense is not None:
            self.dense.build((None, width))
            width = self.hidden_dim
        self.out.build((None, width))
        self.built = True

    def call(self, sequence_output, input_mask=None, training=None):
        if self.pooling == "mean":
            if input_mask is None:
                raise ValueError("pooling='mean' needs the input_mask")
            # expand_dims, not [:, :, None]: that StridedSlice (new_axis_mask) has no LiteRT kernel.
            weights = ops.expand_dims(ops.cast(input_mask, sequence_output.dtype), -1)
            pooled = ops.sum(sequence_output * weights, axis=1) / ops.maximum(
                ops.sum(weights, axis=1), 1.0)
        else:
            pooled = sequence_output[:, 0]
        x = self.dropout(pooled, training=training)
        if self.dense is not None:
            x = self.dropout2(self.dense(x), training=training)
        return self.out(x)

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout=self.dropout_rate,
                      initializer_range=self.initializer_range, two_layer=self.two_layer,
                      hidden_dim=self.hidden_dim, pooling=self.pooling)
        return config
