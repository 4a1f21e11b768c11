"""`SpanHead`: SQuAD start logits, end logits conditioned on the start (the reference's joint
prediction: end features = [h_start; h_j] -> dense 512 GELU -> dense 1), and beam search over
(start, end) at inference."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.models.initializers import electra_initializer


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
        init = electra_initializer(initializer_range)
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
