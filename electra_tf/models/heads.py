"""Pre-training heads: the generator's masked-LM head and the discriminator's."""

import keras

from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.initializers import electra_initializer
from electra_tf.models.transformer_block import gelu_activation


@keras.saving.register_keras_serializable(package="electra_tf")
class MaskedLMHead(ConfigFields, keras.layers.Layer):
    """Masked-LM head: gather -> dense(E, gelu) -> LayerNorm -> tied softmax weights + bias.

    The masked positions are gathered first, so logits are [batch, P, vocab]
    rather than [batch, seq, vocab]: the vocabulary projection, the largest
    matmul of the generator, runs on ~15% of the tokens. The output weights are
    the token embedding table (`token_embedding(x, reverse=True)`), as in
    BERT/ELECTRA; only the output bias is the head's own. Variables and maths
    follow keras-hub's `MaskedLMHead` with exact GELU, so `convert/` maps them
    one to one.

    Args:
        token_embedding: a `keras_hub.layers.ReversibleEmbedding` (the shared table).
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in the reference).
        initializer_range: stddev of the truncated-normal dense initializer.
        activation: "gelu" (exact) or "gelu_approximate".

    Call with `inputs` [batch, seq, width] and `mask_positions` int [batch, P];
    returns logits [batch, P, vocab] in the compute dtype.
    """

    CONFIG_FIELDS = ("token_embedding", "layer_norm_epsilon", "initializer_range", "activation")
    LAYER_FIELDS = ("token_embedding",)

    def __init__(self, token_embedding, layer_norm_epsilon=1e-12, initializer_range=0.02,
                 activation="gelu", **kwargs):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        token_embedding = self.token_embedding  # the layer, also when given as a config
        self.intermediate_dense = keras.layers.Dense(
            token_embedding.output_dim, activation=gelu_activation(activation),
            kernel_initializer=electra_initializer(initializer_range), dtype=self.dtype_policy,
            name="intermediate_dense")
        self.intermediate_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="intermediate_layer_norm")

    def build(self, inputs_shape, mask_positions_shape=None):
        width = self.token_embedding.output_dim
        self.intermediate_dense.build((inputs_shape[0], None, inputs_shape[-1]))
        self.intermediate_layer_norm.build((inputs_shape[0], None, width))
        self.bias = self.add_weight(name="output_bias", shape=[self.token_embedding.input_dim],
                                    initializer="zeros", dtype=self.variable_dtype)
        self.built = True

    def call(self, inputs, mask_positions):
        x = keras.ops.take_along_axis(inputs, keras.ops.expand_dims(mask_positions, -1), axis=1)
        x = self.intermediate_layer_norm(self.intermediate_dense(x))
        logits = keras.ops.cast(self.token_embedding(x, reverse=True), self.compute_dtype)
        return logits + keras.ops.cast(self.bias, self.compute_dtype)

    def compute_output_shape(self, inputs_shape, mask_positions_shape):
        return tuple(mask_positions_shape) + (self.token_embedding.input_dim,)



def build_generator_head(token_embedding, layer_norm_epsilon=1e-12,
                         initializer_range=0.02, name="generator_predictions"):
    """The generator's (or an MLM network's) `MaskedLMHead` on the shared table."""
    return MaskedLMHead(token_embedding, layer_norm_epsilon=layer_norm_epsilon,
                        initializer_range=initializer_range, name=name)


@keras.saving.register_keras_serializable(package="electra_tf")
class DiscriminatorHead(ConfigFields, keras.layers.Layer):
    """Per-token replaced/original logit: dense(H, gelu) -> dense(1).

    Args:
        hidden_dim: width of the intermediate dense layer (H of the encoder).
        initializer_range: stddev of the truncated-normal initializer.
        activation: "gelu" (exact) or "gelu_approximate"; follows the
            encoder's `hidden_act`, as in the reference and Hugging Face.

    Returns float32 logits [batch, seq]; positive means "replaced".
    """

    CONFIG_FIELDS = ("hidden_dim", "initializer_range", "activation")

    def __init__(self, hidden_dim, initializer_range=0.02, activation="gelu", **kwargs):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        init = electra_initializer(initializer_range)
        self.dense = keras.layers.Dense(
            hidden_dim, activation=gelu_activation(activation), kernel_initializer=init,
            dtype=self.dtype_policy, name="dense",
        )
        self.dense_prediction = keras.layers.Dense(
            1, kernel_initializer=init, dtype=self.dtype_policy, name="dense_prediction"
        )

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.dense_prediction.build(tuple(input_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, sequence_output):
        logits = self.dense_prediction(self.dense(sequence_output))
        return keras.ops.cast(keras.ops.squeeze(logits, -1), "float32")

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1])

