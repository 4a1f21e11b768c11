"""Pre-training heads: the generator's masked-LM head and the discriminator's."""

import keras
import keras_hub

from electra_tf.models.initializers import electra_initializer


def gelu_activation(name):
    """"gelu" -> exact erf GELU (reference); "gelu_approximate" -> tanh form."""
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name == "gelu":
        return keras.activations.gelu
    raise ValueError(f"unknown activation {name!r}; use 'gelu' or 'gelu_approximate'")


def build_generator_head(token_embedding, layer_norm_epsilon=1e-12,
                         initializer_range=0.02, name="generator_predictions"):
    """Masked-LM head: dense(E, gelu) -> LayerNorm -> tied softmax weights + bias.

    keras-hub's `MaskedLMHead` gathers the masked positions first, so logits are
    [batch, P, vocab] rather than [batch, seq, vocab]: the vocabulary projection,
    the largest matmul of the generator, runs on ~15% of the tokens.
    Its defaults (relu, eps 1e-5) are not ELECTRA's; exact GELU and 1e-12 are.
    """
    return keras_hub.layers.MaskedLMHead(
        token_embedding=token_embedding,
        intermediate_activation=keras.activations.gelu,
        layer_norm_epsilon=layer_norm_epsilon,
        kernel_initializer=electra_initializer(initializer_range),
        name=name,
    )


@keras.saving.register_keras_serializable(package="electra_tf")
class DiscriminatorHead(keras.layers.Layer):
    """Per-token replaced/original logit: dense(H, gelu) -> dense(1).

    Args:
        hidden_dim: width of the intermediate dense layer (H of the encoder).
        initializer_range: stddev of the truncated-normal initializer.
        activation: "gelu" (exact) or "gelu_approximate"; follows the
            encoder's `hidden_act`, as in the reference and Hugging Face.

    Returns float32 logits [batch, seq]; positive means "replaced".
    """

    def __init__(self, hidden_dim, initializer_range=0.02, activation="gelu", **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.initializer_range = initializer_range
        self.activation = activation
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

    def get_config(self):
        config = super().get_config()
        config.update(hidden_dim=self.hidden_dim, initializer_range=self.initializer_range,
                      activation=self.activation)
        return config
