"""One-to-one weight mapping between our encoder and keras-hub's ElectraBackbone.

Our discriminator encoder has exactly keras-hub's variables (same layer order
and shapes), minus keras-hub's `pooled_dense` (the original ELECTRA has no
pooler). Two numerical differences remain and are documented, not hidden:
keras-hub's Transformer uses the tanh approximation of GELU (ours is the exact
erf form of the original), and its pooler is left at its initial values.
"""

import keras
import keras_hub

from electra_tf.models.encoder import ElectraEncoder


def _encoder_layers(encoder: ElectraEncoder):
    emb = encoder.embeddings
    layers = [emb.token_embedding, emb.position_embedding, emb.segment_embedding, emb.layer_norm]
    if encoder.embeddings_projection is not None:
        layers.append(encoder.embeddings_projection)
    return layers + list(encoder.transformer_layers)


def _backbone_layers(backbone):
    layers = [backbone.token_embedding, backbone.position_embedding,
              backbone.segment_embedding, backbone.embeddings_layer_norm]
    if backbone.hidden_dim != backbone.embedding_dim:
        layers.append(backbone.embeddings_projection)
    return layers + list(backbone.transformer_layers)


def weight_pairs(encoder: ElectraEncoder, backbone):
    """[(our variable, keras-hub variable)] in layer order; raises on any mismatch."""
    ours, theirs = _encoder_layers(encoder), _backbone_layers(backbone)
    if len(ours) != len(theirs):
        raise ValueError(
            f"layer count differs: encoder has {len(ours)}, ElectraBackbone has {len(theirs)}; "
            "build the backbone with the encoder's sizes"
        )
    pairs = []
    for a, b in zip(ours, theirs):
        if len(a.weights) != len(b.weights):
            raise ValueError(f"{a.name} has {len(a.weights)} weights but {b.name} has {len(b.weights)}")
        for va, vb in zip(a.weights, b.weights):
            if tuple(va.shape) != tuple(vb.shape):
                raise ValueError(f"shape mismatch {va.path} {tuple(va.shape)} vs {vb.path} {tuple(vb.shape)}")
            pairs.append((va, vb))
    return pairs


def to_keras_hub_backbone(encoder: ElectraEncoder, dtype=None):
    """Returns a `keras_hub.models.ElectraBackbone` holding the encoder's weights."""
    emb = encoder.embeddings
    backbone = keras_hub.models.ElectraBackbone(
        vocab_size=emb.vocab_size,
        num_layers=encoder.num_layers,
        num_heads=encoder.num_heads,
        hidden_dim=encoder.hidden_dim,
        embedding_dim=emb.embedding_dim,
        intermediate_dim=encoder.intermediate_dim,
        dropout=encoder.dropout,
        max_sequence_length=emb.max_positions,
        num_segments=emb.num_segments,
        dtype=dtype,
    )
    for ours, theirs in weight_pairs(encoder, backbone):
        theirs.assign(keras.ops.convert_to_numpy(ours.value))
    return backbone


def from_keras_hub_backbone(backbone, encoder: ElectraEncoder) -> ElectraEncoder:
    """Copies an ElectraBackbone's weights into a (built) encoder of the same sizes."""
    for ours, theirs in weight_pairs(encoder, backbone):
        ours.assign(keras.ops.convert_to_numpy(theirs.value))
    return encoder
