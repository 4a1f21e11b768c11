"""Builds ELECTRA networks from an `ElectraConfig`."""

from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.encoder import ElectraEncoder


def _shared_settings(config) -> dict:
    """Dropout, norm epsilon, initializer and kernels: the same for every ELECTRA layer."""
    return {"dropout": config.hidden_dropout_prob, "layer_norm_epsilon": config.layer_norm_eps,
            "initializer_range": config.initializer_range, "fused_kernels": config.fused_kernels}


def build_embeddings(config, name="embeddings"):
    """The token, position and segment embeddings (width E) of `config`."""
    return ElectraEmbeddings(
        vocab_size=config.vocab_size, embedding_dim=config.embedding_size,
        max_positions=config.max_position_embeddings, num_segments=config.type_vocab_size,
        name=name, **_shared_settings(config))


def _encoder(config, embeddings, name, **sizes):
    """An `ElectraEncoder` with the config's dropouts, activation, norms, init and kernels."""
    return ElectraEncoder(embeddings, activation=config.hidden_act, name=name,
                          attention_dropout=config.attention_probs_dropout_prob,
                          **_shared_settings(config), **sizes)


def build_encoder(config, embeddings=None, name="discriminator"):
    """The discriminator-shaped encoder (width H); builds embeddings if not given."""
    return _encoder(config, embeddings if embeddings is not None else build_embeddings(config), name,
                    hidden_dim=config.hidden_size, num_layers=config.num_hidden_layers,
                    num_heads=config.num_attention_heads,
                    intermediate_dim=config.intermediate_size)


def build_generator_encoder(config, embeddings, name="generator"):
    """The generator's encoder: width H*fraction, heads width//64, FFN 4*width."""
    return _encoder(config, embeddings, name, hidden_dim=config.generator_hidden_dim,
                    num_layers=config.generator_num_layers,
                    num_heads=config.generator_num_heads,
                    intermediate_dim=config.generator_intermediate_size)
