"""Fine-tuning task heads on top of the ELECTRA discriminator's sequence output.

- `ClassificationHead`: dropout + one dense layer on the [CLS] vector, as the
  reference (ELECTRA has no pooler); `two_layer=True` gives the Hugging Face
  head (dropout, dense H + GELU, dropout, dense). One output for regression.
- `SpanHead`: SQuAD start logits, end logits conditioned on the start (the
  reference's joint prediction: end features = [h_start; h_j] -> dense 512 GELU
  -> dense 1), and beam search over (start, end) at inference.
- `AnswerableHead`: SQuAD 2.0 "unanswerable" logit from [CLS] and the
  start-probability-weighted hidden state (reference `answerable_uses_start_logits`).
- `TokenClassificationHead`: dropout + dense per token.
"""

from __future__ import annotations

import keras
from keras import ops


def _init(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


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
                                            kernel_initializer=_init(initializer_range),
                                            dtype=self.dtype_policy, name="dense")
            self.dropout2 = keras.layers.Dropout(dropout)
        self.out = keras.layers.Dense(num_outputs, kernel_initializer=_init(initializer_range),
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
        self.out = keras.layers.Dense(num_labels, kernel_initializer=_init(initializer_range),
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


def _masked(logits, answer_mask):
    """Pushes positions outside the allowed set to -1000 (reference: 1000 * (mask - 1))."""
    return logits + ops.cast(1000.0, logits.dtype) * (ops.cast(answer_mask, logits.dtype) - 1.0)


@keras.saving.register_keras_serializable(package="electra_tf")
class SpanHead(keras.layers.Layer):
    """SQuAD start/end head with the end conditioned on the start.

    Training (start positions given): end logits use the gold start's hidden
    state. Inference: top-`beam_size` starts, and for each the top-`beam_size` ends.

    Args:
      beam_size: beam width for starts and ends (reference 20).
      hidden_units: width of the end-conditioning layer (reference 512).
      initializer_range: stddev of the truncated-normal initializer.

    Call args:
      sequence_output: [batch, seq, hidden].
      answer_mask: [batch, seq] 1 where an answer may start/end (context and [CLS]).
      start_positions: [batch] gold starts (training), or None (inference).

    Returns:
      dict with start_logits, end_logits ([batch, seq], masked; end_logits only
      when start_positions are given) or the beam outputs start_top_log_probs,
      start_top_index [batch, beam], end_top_log_probs, end_top_index [batch, beam, beam].
    """

    def __init__(self, beam_size=20, hidden_units=512, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.beam_size = beam_size
        self.hidden_units = hidden_units
        self.initializer_range = initializer_range
        init = _init(initializer_range)
        self.start_dense = keras.layers.Dense(1, kernel_initializer=init, dtype=self.dtype_policy,
                                              name="start_logits")
        self.end_hidden = keras.layers.Dense(hidden_units, activation="gelu", kernel_initializer=init,
                                             dtype=self.dtype_policy, name="qa_hidden")
        self.end_dense = keras.layers.Dense(1, kernel_initializer=init, dtype=self.dtype_policy,
                                            name="qa_logits")

    def build(self, input_shape):
        hidden = input_shape[-1]
        self.start_dense.build((None, None, hidden))
        self.end_hidden.build((None, None, 2 * hidden))
        self.end_dense.build((None, None, self.hidden_units))
        self.built = True

    def call(self, sequence_output, answer_mask, start_positions=None):
        seq_len = ops.shape(sequence_output)[1]
        start_logits = _masked(ops.squeeze(self.start_dense(sequence_output), -1), answer_mask)
        if start_positions is not None:
            onehot = ops.one_hot(start_positions, seq_len, dtype=sequence_output.dtype)
            start_feat = ops.einsum("bs,bsh->bh", onehot, sequence_output)
            start_feat = ops.broadcast_to(start_feat[:, None, :], ops.shape(sequence_output))
            rep = ops.concatenate([start_feat, sequence_output], -1)
            end_logits = ops.squeeze(self.end_dense(self.end_hidden(rep)), -1)
            return {"start_logits": start_logits, "end_logits": _masked(end_logits, answer_mask)}
        k = self.beam_size
        start_log_probs = ops.log_softmax(ops.cast(start_logits, "float32"), axis=-1)
        start_top_log_probs, start_top_index = ops.top_k(start_log_probs, k)
        onehot = ops.one_hot(start_top_index, seq_len, dtype=sequence_output.dtype)  # b,k,s
        start_feat = ops.einsum("bks,bsh->bkh", onehot, sequence_output)
        b, s, h = ops.shape(sequence_output)[0], seq_len, ops.shape(sequence_output)[2]
        start_feat = ops.broadcast_to(start_feat[:, :, None, :], (b, k, s, h))
        end_feat = ops.broadcast_to(sequence_output[:, None, :, :], (b, k, s, h))
        rep = ops.concatenate([start_feat, end_feat], -1)
        end_logits = ops.squeeze(self.end_dense(self.end_hidden(rep)), -1)  # b,k,s
        end_logits = _masked(end_logits, answer_mask[:, None, :])
        end_log_probs = ops.log_softmax(ops.cast(end_logits, "float32"), axis=-1)
        end_top_log_probs, end_top_index = ops.top_k(end_log_probs, k)
        return {"start_logits": start_logits, "start_top_log_probs": start_top_log_probs,
                "start_top_index": start_top_index, "end_top_log_probs": end_top_log_probs,
                "end_top_index": end_top_index}

    def get_config(self):
        config = super().get_config()
        config.update(beam_size=self.beam_size, hidden_units=self.hidden_units,
                      initializer_range=self.initializer_range)
        return config


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
        init = _init(initializer_range)
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
