"""The post-LN Transformer block of BERT/ELECTRA, with a plain and a fused call path.

The block owns its sub-layers under public names, so nothing in the package
reads a library's private attributes. Its variables have keras-hub's
`TransformerEncoder` shapes and order (Q, K, V and output projections as
`[H, N, D]` / `[N, D, H]` kernels, then the two LayerNorms, then the
feed-forward denses), which is what `keras_hub_compat` and `convert/` rely on
to map weights one to one.

Two call paths compute the same function:

- plain: Keras layers and ops, step by step, as keras-hub's block does;
- fused (the default): fewer, larger matmuls and the element-wise work as
  XLA-fused loops with hand-written gradients (`fused_ops`): Q, K and V from one
  [B*S, H] x [H, 3H] matmul (TensorFlow lowers the three einsums to batched
  matmuls that run at about half the speed of a 2-D matmul on CPU); bias + exact
  GELU; mask + softmax + dropout of the attention probabilities; bias + dropout
  + residual + LayerNorm after each sub-layer. Dropout masks there are a hash
  of a per-call key and the element index, so they differ from Keras' own
  streams at the same rates; without dropout both paths agree to float32
  round-off (tests/models/test_transformer_block.py).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.models import fused_ops
from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.initializers import electra_initializer


def gelu_activation(name):
    """"gelu" -> exact erf GELU (reference); "gelu_approximate" -> tanh form."""
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name == "gelu":
        return keras.activations.gelu
    raise ValueError(f"unknown activation {name!r}; use 'gelu' or 'gelu_approximate'")


def key_mask(padding_mask):
    """[B, S] 1/0 padding mask -> boolean [B, 1, 1, S] mask over attended keys."""
    # expand_dims, not [:, None, None, :]: that StridedSlice (new_axis_mask) has no LiteRT kernel.
    return tf.expand_dims(tf.expand_dims(tf.cast(padding_mask, tf.bool), 1), 1)


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformerBlock(ConfigFields, keras.layers.Layer):
    """Self-attention -> add & LayerNorm -> feed-forward -> add & LayerNorm.

    Args:
        num_heads: attention heads; the width H (from the input) must divide by it.
        intermediate_dim: feed-forward width.
        dropout: rate of the residual-branch dropouts (and of the attention
            probabilities when `attention_dropout` is None).
        attention_dropout: rate of the attention-probability dropout
            (`attention_probs_dropout_prob`); None: `dropout`.
        activation: "gelu" (exact, reference) or "gelu_approximate".
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in the reference).
        initializer_range: stddev of the truncated-normal kernel initializer.
        fused: take the fused call path (same variables, same maths).

    Call with `x` [batch, seq, H] and `attention_mask` from `key_mask`
    (None: attend everywhere).

    Example:

    >>> block = TransformerBlock(num_heads=2, intermediate_dim=32)
    >>> x = np.ones((2, 5, 16), "float32")
    >>> block(x, key_mask(np.ones((2, 5), "int32"))).shape
    TensorShape([2, 5, 16])
    """

    CONFIG_FIELDS = ("num_heads", "intermediate_dim", "dropout", "activation",
                     "layer_norm_epsilon", "initializer_range", "fused", "attention_dropout")

    def __init__(self, num_heads, intermediate_dim, dropout=0.1, activation="gelu",
                 layer_norm_epsilon=1e-12, initializer_range=0.02, fused=True, attention_dropout=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        gelu_activation(activation)  # fail at construction on an unknown name

    def build(self, input_shape):
        hidden = int(input_shape[-1])
        if hidden % self.num_heads:
            raise ValueError(f"hidden width {hidden} is not a multiple of num_heads={self.num_heads}; "
                             "change hidden_size or num_attention_heads")
        self.head_dim = hidden // self.num_heads
        heads, head_dim = self.num_heads, self.head_dim

        def dense(equation, output_shape, bias_axes, name):
            return keras.layers.EinsumDense(
                equation, output_shape=output_shape, bias_axes=bias_axes,
                kernel_initializer=electra_initializer(self.initializer_range),
                dtype=self.dtype_policy, name=name)

        def norm(name):
            return keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon,
                                                   dtype=self.dtype_policy, name=name)

        # Assignment order is variable order: keep it equal to keras-hub's block.
        self.query_dense = dense("abc,cde->abde", (None, heads, head_dim), "de", "query")
        self.key_dense = dense("abc,cde->abde", (None, heads, head_dim), "de", "key")
        self.value_dense = dense("abc,cde->abde", (None, heads, head_dim), "de", "value")
        self.attention_output_dense = dense("abcd,cde->abe", (None, hidden), "e", "attention_output")
        self.attention_layer_norm = norm("attention_layer_norm")
        self.feedforward_layer_norm = norm("feedforward_layer_norm")
        self.feedforward_intermediate_dense = keras.layers.Dense(
            self.intermediate_dim, activation=gelu_activation(self.activation),
            kernel_initializer=electra_initializer(self.initializer_range),
            dtype=self.dtype_policy, name="intermediate")
        self.feedforward_output_dense = keras.layers.Dense(
            hidden, kernel_initializer=electra_initializer(self.initializer_range),
            dtype=self.dtype_policy, name="output")
        probs_rate = self.dropout if self.attention_dropout is None else self.attention_dropout
        self.attention_probs_dropout = keras.layers.Dropout(probs_rate, dtype=self.dtype_policy,
                                                            name="attention_probs_dropout")
        self.attention_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                      name="attention_dropout")
        self.feedforward_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                        name="feedforward_dropout")
        shape = tuple(input_shape)
        for layer in (self.query_dense, self.key_dense, self.value_dense):
            layer.build(shape)
        self.attention_output_dense.build(shape[:-1] + (heads, head_dim))
        self.attention_layer_norm.build(shape)
        self.feedforward_layer_norm.build(shape)
        self.feedforward_intermediate_dense.build(shape)
        self.feedforward_output_dense.build(shape[:-1] + (self.intermediate_dim,))
        self.built = True

    def call(self, x, attention_mask=None, training=None):
        if self.fused:
            return self._fused_call(x, attention_mask, training)
        return self._plain_call(x, attention_mask, training)

    def _plain_call(self, x, mask, training):
        scale = tf.cast(1.0 / float(self.head_dim) ** 0.5, x.dtype)
        q = self.query_dense(x) * scale  # [B, S, N, D]
        k, v = self.key_dense(x), self.value_dense(x)
        scores = tf.cast(tf.einsum("aecd,abcd->acbe", k, q), tf.float32)  # [B, N, S, S]
        if mask is not None:
            scores += tf.where(mask, 0.0, -1e9)
        probs = tf.cast(tf.nn.softmax(scores, axis=-1), x.dtype)
        probs = self.attention_probs_dropout(probs, training=training)
        context = tf.einsum("acbe,aecd->abcd", probs, v)
        y = self.attention_dropout(self.attention_output_dense(context), training=training)
        x = self.attention_layer_norm(x + y)
        y = self.feedforward_output_dense(self.feedforward_intermediate_dense(x))
        y = self.feedforward_dropout(y, training=training)
        return self.feedforward_layer_norm(x + y)

    def _fused_call(self, x, mask, training):
        dtype = x.dtype
        shape = tf.shape(x)
        batch, seq = shape[0], shape[1]
        hidden = x.shape[-1]
        heads, head_dim = self.num_heads, self.head_dim

        def kernel(dense, rows):
            return tf.reshape(tf.cast(dense.kernel, dtype), [rows, -1])

        def bias_of(dense):
            return tf.reshape(tf.cast(dense.bias, dtype), [-1])

        qkv_denses = (self.query_dense, self.key_dense, self.value_dense)
        w_qkv = tf.concat([kernel(d, hidden) for d in qkv_denses], -1)
        b_qkv = tf.concat([bias_of(d) for d in qkv_denses], -1)
        qkv = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, hidden]), w_qkv), b_qkv)
        qkv = tf.transpose(tf.reshape(qkv, [batch, seq, 3, heads, head_dim]), [2, 0, 3, 1, 4])
        # unstack, not qkv[0], qkv[1], qkv[2]: the gradient of each strided slice
        # is a zero-filled [3, B, N, S, D] tensor summed with AddN (measured ~20% of
        # an ELECTRA-Small CPU step); unstack's gradient is one stack.
        q, k, v = tf.unstack(qkv, num=3, axis=0)
        q = q * tf.cast(1.0 / float(head_dim) ** 0.5, dtype)
        scores = tf.matmul(q, k, transpose_b=True)  # [B, N, S, S]
        probs = fused_ops.attention_probs(scores, mask, self.attention_probs_dropout,
                                          training=training, dtype=dtype)
        context = tf.matmul(probs, v)  # [B, N, S, D]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, heads * head_dim])
        out = self.attention_output_dense
        y = tf.reshape(tf.matmul(context, kernel(out, heads * head_dim)), [batch, seq, hidden])
        x = fused_ops.add_dropout_norm(y, x, self.attention_layer_norm, self.attention_dropout,
                                       bias=out.bias, training=training)
        residual = x
        intermediate = self.feedforward_intermediate_dense
        if fused_ops.is_exact_gelu(intermediate.activation):
            y = fused_ops.bias_gelu(tf.matmul(tf.reshape(x, [-1, hidden]),
                                              tf.cast(intermediate.kernel, dtype)), intermediate.bias,
                                    training=training)
        else:
            y = tf.reshape(intermediate(x), [batch * seq, -1])
        output = self.feedforward_output_dense
        y = tf.reshape(tf.matmul(y, tf.cast(output.kernel, dtype)), [batch, seq, hidden])
        return fused_ops.add_dropout_norm(y, residual, self.feedforward_layer_norm,
                                          self.feedforward_dropout, bias=output.bias,
                                          training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

