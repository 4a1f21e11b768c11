"""ELECTRA networks as Keras layers: embeddings, encoders and heads."""

from electra_tf.models.builders import build_embeddings, build_encoder, build_generator_encoder
from electra_tf.models.embeddings import ElectraEmbeddings
from electra_tf.models.encoder import ElectraEncoder
from electra_tf.models.heads import DiscriminatorHead, build_generator_head

__all__ = [
    "ElectraEmbeddings",
    "ElectraEncoder",
    "DiscriminatorHead",
    "build_embeddings",
    "build_encoder",
    "build_generator_encoder",
    "build_generator_head",
]
