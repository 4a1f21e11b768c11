"""A faster forward pass for keras-hub's post-LN `TransformerEncoder` block.

Same variables and maths as `keras_hub.layers.TransformerEncoder.call` with
`normalize_first=False`; what differs is how the work is laid out:

- Q, K and V come from one [B*S, H] x [H, 3H] matmul on the concatenated
  kernels instead of three `EinsumDense` einsums (which TensorFlow lowers to
  batched matmuls that run at about half the speed of a plain 2-D matmul on
  CPU, forward and backward);
- the attention output projection is a 2-D matmul as well;
- the padding mask is a [B, 1, 1, S] boolean built once per encoder rather
  than a [B, S, S] mask per layer.

- the element-wise work between the matmuls runs as XLA-fused loops from
  `fused_ops`, each with a hand-written gradient: bias + exact GELU; mask +
  softmax + dropout on the attention probabilities; bias + dropout + residual +
  LayerNorm after each sub-layer. Dropout masks are a hash of a per-call key
  and the element index, computed inside those loops (replica-aware keys), so
  masks differ from Keras' own streams, at the same rates.

Without dropout the results match the keras-hub call to float32 round-off
(tests/models compare the two).
"""

import keras
import tensorflow as tf

from electra_tf.models import fused_ops


def key_mask(padding_mask):
    """[B, S] 1/0 padding mask -> boolean [B, 1, 1, S] mask over attended keys."""
    return tf.cast(padding_mask, tf.bool)[:, None, None, :]


def transformer_block(layer, x, mask, training=None):
    """`layer(x, padding_mask=...)` for a built keras-hub `TransformerEncoder`.

    Args:
        layer: keras_hub.layers.TransformerEncoder (post-LN, no attention_mask).
        x: [B, S, H] input in the layer's compute dtype.
        mask: from `key_mask` (None: attend everywhere).
        training: enables dropout.
    """
    attn = layer._self_attention_layer
    dtype = x.dtype
    shape = tf.shape(x)
    batch, seq = shape[0], shape[1]
    hidden = x.shape[-1]
    heads, head_dim = attn._num_heads, attn._key_dim

    def kernel(dense, rows):
        return tf.reshape(tf.cast(dense.kernel, dtype), [rows, -1])

    def bias_of(dense):
        return tf.reshape(tf.cast(dense.bias, dtype), [-1])

    q_dense, k_dense, v_dense = attn._query_dense, attn._key_dense, attn._value_dense
    w_qkv = tf.concat([kernel(q_dense, hidden), kernel(k_dense, hidden), kernel(v_dense, hidden)], -1)
    b_qkv = tf.concat([bias_of(q_dense), bias_of(k_dense), bias_of(v_dense)], -1)
    x2 = tf.reshape(x, [-1, hidden])
    qkv = tf.nn.bias_add(tf.matmul(x2, w_qkv), b_qkv)
    qkv = tf.reshape(qkv, [batch, seq, 3, heads, head_dim])
    qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])  # [3, B, N, S, D]
    # unstack, not qkv[0], qkv[1], qkv[2]: the gradient of each strided slice
    # is a zero-filled [3, B, N, S, D] tensor summed with AddN (measured ~20% of
    # an ELECTRA-Small CPU step); unstack's gradient is one stack.
    q, k, v = tf.unstack(qkv, num=3, axis=0)
    q = q * tf.cast(1.0 / float(head_dim) ** 0.5, dtype)
    scores = tf.matmul(q, k, transpose_b=True)  # [B, N, S, S]
    # Mask, softmax (float32) and dropout: one fused loop each way (fused_ops).
    probs = fused_ops.attention_probs(scores, mask, attn._dropout_layer, training=training,
                                      dtype=dtype)
    context = tf.matmul(probs, v)  # [B, N, S, D]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, heads * head_dim])
    out_dense = attn._output_dense
    y = tf.matmul(context, kernel(out_dense, heads * head_dim))
    y = tf.reshape(y, [batch, seq, hidden])
    # bias, dropout, residual and LayerNorm: one fused loop each way.
    x = fused_ops.add_dropout_norm(y, x, layer._self_attention_layer_norm,
                                   layer._self_attention_dropout, bias=out_dense.bias,
                                   training=training)

    residual = x
    intermediate = layer._feedforward_intermediate_dense
    x2 = tf.reshape(x, [-1, hidden])
    if fused_ops.is_exact_gelu(intermediate.activation):
        y = fused_ops.bias_gelu(tf.matmul(x2, tf.cast(intermediate.kernel, dtype)),
                                intermediate.bias)
    else:
        y = tf.reshape(intermediate(x), [batch * seq, -1])
    output_dense = layer._feedforward_output_dense
    y = tf.reshape(tf.matmul(y, tf.cast(output_dense.kernel, dtype)), [batch, seq, hidden])
    return fused_ops.add_dropout_norm(y, residual, layer._feedforward_layer_norm,
                                      layer._feedforward_dropout, bias=output_dense.bias,
                                      training=training)


def supports_fast_path(layer):
    """True for the layer configuration `transformer_block` reproduces."""
    attn = getattr(layer, "_self_attention_layer", None)
    return (
        not layer.normalize_first
        and isinstance(attn, keras.layers.MultiHeadAttention)
        and len(attn._query_dense.kernel.shape) == 3
        and attn._use_bias
        and attn._value_dim == attn._key_dim
        and layer._feedforward_output_dense.use_bias
        and layer._feedforward_output_dense.activation is keras.activations.linear
        and fused_ops.is_fusable_layer_norm(layer._self_attention_layer_norm)
        and fused_ops.is_fusable_layer_norm(layer._feedforward_layer_norm)
    )
