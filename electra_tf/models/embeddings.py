"""Token, position and segment embeddings, shared by generator and discriminator."""

import keras
import keras_hub

from electra_tf.models import fused_ops
from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.initializers import electra_initializer


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEmbeddings(ConfigFields, keras.layers.Layer):
    """Sum of token, position and segment embeddings, then LayerNorm and dropout.

    In ELECTRA the generator and the discriminator use one instance of this layer
    (the same variables), which is why the E->H projection lives in each encoder
    rather than here. The token table doubles as the generator's output softmax
    weights (`token_embedding(x, reverse=True)`).

    Args:
        vocab_size: number of WordPiece ids.
        embedding_dim: E, the width of the tables.
        max_positions: number of learned position vectors.
        num_segments: number of segment (token type) ids.
        dropout: dropout rate after the LayerNorm.
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in the reference).
        initializer_range: stddev of the truncated-normal initializer.
        fused_kernels: draw the dropout mask with `fused_ops` (hashed bits, per
            replica) instead of Keras' `Dropout`; same rate either way.

    Example:

    >>> layer = ElectraEmbeddings(vocab_size=100, embedding_dim=8)
    >>> layer(np.ones((2, 5), "int32"), np.zeros((2, 5), "int32")).shape
    TensorShape([2, 5, 8])
    """

    CONFIG_FIELDS = ("vocab_size", "embedding_dim", "max_positions", "num_segments", "dropout",
                     "fused_kernels", "layer_norm_epsilon", "initializer_range")

    def __init__(
        self,
        vocab_size,
        embedding_dim,
        max_positions=512,
        num_segments=2,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        fused_kernels=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        init = electra_initializer(initializer_range)
        self.token_embedding = keras_hub.layers.ReversibleEmbedding(
            vocab_size, embedding_dim, embeddings_initializer=init,
            dtype=self.dtype_policy, name="token_embedding",
        )
        self.position_embedding = keras_hub.layers.PositionEmbedding(
            sequence_length=max_positions, initializer=init,
            dtype=self.dtype_policy, name="position_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            num_segments, embedding_dim, embeddings_initializer=init,
            dtype=self.dtype_policy, name="segment_embedding",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy,
            name="embeddings_layer_norm",
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="embeddings_dropout"
        )

    def build(self, input_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(input_ids_shape)
        table_shape = tuple(input_ids_shape) + (self.embedding_dim,)
        self.position_embedding.build(table_shape)
        self.segment_embedding.build(input_ids_shape)
        self.layer_norm.build(table_shape)
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        tokens = self.token_embedding(input_ids)
        x = tokens + self.position_embedding(tokens) + self.segment_embedding(segment_ids)
        x = self.layer_norm(x)
        if not self.fused_kernels:
            return self.dropout_layer(x, training=training)
        # Keras' rate and seed generator, cheaper bits, per-replica masks (fused_ops).
        return fused_ops.dropout(self.dropout_layer, x, training=training)

    def compute_output_shape(self, input_ids_shape, segment_ids_shape=None):
        return tuple(input_ids_shape) + (self.embedding_dim,)

