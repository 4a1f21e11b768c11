"""The Transformer encoder used by both the generator and the discriminator."""

import keras

from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.initializers import electra_initializer
from electra_tf.models.transformer_block import TransformerBlock, key_mask


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEncoder(ConfigFields, keras.layers.Layer):
    """Embeddings -> optional E->H projection -> post-LN Transformer layers.

    The layer layout mirrors `keras_hub.models.ElectraBackbone` one to one
    (token/position/segment embeddings, embeddings LayerNorm, projection,
    post-LN Transformer blocks with keras-hub's variable shapes), except that the activation is the exact erf
    GELU of the original ELECTRA (keras-hub uses the tanh approximation) and
    there is no pooler (the original has none).

    Args:
        embeddings: an `ElectraEmbeddings` layer. Pass the same instance to two
            encoders to share the tables (ELECTRA's tied embeddings).
        hidden_dim: H, the Transformer width.
        num_layers: number of Transformer blocks.
        num_heads: attention heads per block.
        intermediate_dim: feed-forward width.
        dropout: dropout of the residual branches (and of the attention
            probabilities when `attention_dropout` is None).
        activation: "gelu" (exact, reference) or "gelu_approximate".
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in the reference).
        initializer_range: stddev of the truncated-normal initializer.
        fused_kernels: run the blocks on the fused path (`TransformerBlock`);
            the variables and the maths are the same either way.
        attention_dropout: dropout of the attention probabilities; None: `dropout`.

    Inputs: a dict with int `input_ids`, `input_mask` (1 = real token) and
    `segment_ids`, each [batch, seq]. Output: [batch, seq, hidden_dim].

    Example:

    >>> emb = ElectraEmbeddings(vocab_size=100, embedding_dim=8)
    >>> enc = ElectraEncoder(emb, hidden_dim=16, num_layers=1, num_heads=2,
    ...                      intermediate_dim=32)
    >>> ids = np.ones((2, 5), "int32")
    >>> enc({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids}).shape
    TensorShape([2, 5, 16])
    """

    CONFIG_FIELDS = ("embeddings", "hidden_dim", "num_layers", "num_heads", "intermediate_dim",
                     "dropout", "activation", "layer_norm_epsilon", "initializer_range",
                     "fused_kernels", "attention_dropout")
    LAYER_FIELDS = ("embeddings",)

    def __init__(
        self,
        embeddings,
        hidden_dim,
        num_layers,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        fused_kernels=True,
        attention_dropout=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        init = electra_initializer(initializer_range)
        self.embeddings_projection = None
        if self.embeddings.embedding_dim != hidden_dim:
            self.embeddings_projection = keras.layers.Dense(
                hidden_dim, kernel_initializer=init, dtype=self.dtype_policy,
                name="embeddings_projection",
            )
        self.transformer_layers = [
            TransformerBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                initializer_range=initializer_range,
                fused=fused_kernels,
                dtype=self.dtype_policy,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]

    def build(self, input_shape):
        ids_shape = tuple(input_shape["input_ids"])
        if not self.embeddings.built:
            self.embeddings.build(ids_shape, ids_shape)
        emb_shape = ids_shape + (self.embeddings.embedding_dim,)
        if self.embeddings_projection is not None:
            self.embeddings_projection.build(emb_shape)
        hidden_shape = ids_shape + (self.hidden_dim,)
        for layer in self.transformer_layers:
            layer.build(hidden_shape)
        self.built = True

    def call(self, inputs, training=None):
        x = self.embeddings(inputs["input_ids"], inputs["segment_ids"], training=training)
        if self.embeddings_projection is not None:
            x = self.embeddings_projection(x)
        mask = key_mask(inputs["input_mask"])  # built once, shared by every block
        for layer in self.transformer_layers:
            x = layer(x, mask, training=training)
        return x

    def compute_output_shape(self, input_shape):
        return tuple(input_shape["input_ids"]) + (self.hidden_dim,)

