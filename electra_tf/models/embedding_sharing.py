"""How the generator and the full-size network share embeddings (config `embedding_sharing`).

- `shared` (ELECTRA's reference): one `ElectraEmbeddings` layer, trained by
  both losses.
- `none`: separate layers (the legacy `untied_generator_embeddings=true`).
- `gdes`: DeBERTa-v3's gradient-disentangled embedding sharing (He et al.,
  ICLR 2023, Section 4): the full-size network's token table is
  stop_gradient(E_gen) + E_delta, E_delta initialised to zero. The generator's
  loss trains E_gen, the discriminator's loss trains E_delta only, so the
  tug-of-war between the two losses over one table disappears. Position and
  segment tables and the embedding LayerNorm are per network (as in DeBERTa-v3).
  The model directory stores the merged table E_gen + E_delta in
  `discriminator.weights.h5`, an ordinary encoder.
"""

from __future__ import annotations

import keras_hub
import tensorflow as tf

from electra_tf.keras_compat import untrack
from electra_tf.models.builders import build_embeddings, build_encoder


class DeltaEmbedding(keras_hub.layers.ReversibleEmbedding):
    """A token table read as stop_gradient(base table) + this layer's own (delta) table.

    Lookups and the tied output projection (`reverse=True`) both use the merged
    table, so a masked-LM head tied to it predicts with E_gen + E_delta too.
    Its one variable (`embeddings`, the delta) has the same name and shape as a
    plain table, so the layer saves and loads like one.

    Args:
        base: the generator's `ReversibleEmbedding` (E_gen); not tracked here,
            its variable belongs to the generator.
        input_dim, output_dim: vocabulary size and table width (as the base's).
    """

    def __init__(self, base, input_dim, output_dim, **kwargs):
        kwargs.setdefault("embeddings_initializer", "zeros")
        super().__init__(input_dim, output_dim, **kwargs)
        # A closure, so Keras does not track (and save) the generator's layer twice.
        self._base_table = lambda: base.embeddings

    def merged_table(self):
        """float32 [V, E]: stop_gradient(E_gen) + E_delta."""
        return (tf.stop_gradient(tf.convert_to_tensor(self._base_table()))
                + tf.convert_to_tensor(self.embeddings))

    def call(self, inputs, reverse=False):
        table = self.merged_table()
        if not reverse:
            out = tf.gather(table, tf.cast(inputs, tf.int32))
            return tf.cast(out, self.compute_dtype)
        kernel = tf.transpose(table)
        if self.reverse_dtype is not None:
            inputs, kernel = tf.cast(inputs, self.reverse_dtype), tf.cast(kernel, self.reverse_dtype)
        else:
            kernel = tf.cast(kernel, inputs.dtype)
        return tf.matmul(inputs, kernel)

    def get_config(self):
        # It cannot be rebuilt without the generator's table: the pre-trainer
        # rebuilds it from its config, and the saved encoder holds the merged table.
        raise TypeError("DeltaEmbedding is not serialisable on its own; save the pre-trainer's "
                        "weights, or its merged_discriminator()")


def build_shared_embeddings(config):
    """(full-size network's embeddings, generator's embeddings) for `config.embedding_sharing`.

    Args:
        config: an `ElectraConfig`.

    Returns the discriminator's layer (name "embeddings") and the generator's
    (the same object when shared).
    """
    embeddings = build_embeddings(config, name="embeddings")
    mode = config.embedding_sharing
    if mode == "shared":
        return embeddings, embeddings
    generator_embeddings = build_embeddings(config, name="generator_embeddings")
    if mode == "gdes":
        # Swap the discriminator's token table for the delta view before
        # anything is built; the replaced plain layer is dropped from tracking.
        plain = embeddings.token_embedding
        embeddings.token_embedding = DeltaEmbedding(
            generator_embeddings.token_embedding, config.vocab_size, config.embedding_size,
            dtype=embeddings.dtype_policy, name="token_embedding")
        untrack(embeddings, plain)
    return embeddings, generator_embeddings


def merged_discriminator(pretrainer):
    """The full-size encoder to save and fine-tune: a plain encoder for every sharing mode.

    With `gdes` a fresh encoder gets the discriminator's weights and the merged
    token table E_gen + E_delta; otherwise the pre-trainer's own encoder.

    Args:
        pretrainer: an `ElectraPretrainingModel` (or the `ElectraPretrainer` that extends it).
    """
    encoder = pretrainer.discriminator
    token = encoder.embeddings.token_embedding
    if not isinstance(token, DeltaEmbedding):
        return encoder
    config = pretrainer.config
    plain = build_encoder(config, name=encoder.name)
    seq = config.max_seq_length
    plain.build({k: (None, seq) for k in ("input_ids", "input_mask", "segment_ids")})
    # Same layer structure and names: copy variable by variable path.
    source = {v.path: v for v in encoder.weights}
    targets = plain.weights
    missing = [v.path for v in targets if v.path not in source]
    if missing or len(targets) != len(source):
        raise ValueError(f"the merged discriminator does not match the trained one "
                         f"(unmatched: {missing[:3]}); the encoder layout changed")
    for variable in targets:
        variable.assign(source[variable.path])
    plain.embeddings.token_embedding.embeddings.assign(token.merged_table())
    return plain
