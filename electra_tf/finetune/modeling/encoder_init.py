"""--init's last step: re-drawing the top Transformer blocks of the loaded encoder.

Finding the pre-trained model's files is `electra_tf.models.model_folder.find_init_files`;
loading its encoder weights `electra_tf.models.saving.load_encoder_weights`.
"""

from __future__ import annotations

from electra_tf.models.classifier_model import build_and_call
from electra_tf.models import build_encoder


def reinit_top_layers(encoder, config, n: int) -> None:
    """Re-draws the top `n` Transformer blocks of a built encoder from their initializers.

    Fine-tuning on few examples often does better when the blocks closest to the
    pre-training head start fresh (Zhang et al. 2021, "Revisiting Few-sample BERT
    Fine-tuning"): they are the most specialised to that head. The embeddings and
    lower blocks keep their loaded weights.

    Args:
      encoder: a built `ElectraEncoder` (weights loaded or random).
      config: its ElectraConfig.
      n: how many of the top blocks to re-draw (0: none).
    """
    if n <= 0:
        return
    fresh = build_and_call(build_encoder(config), 2)  # same layers and initializers, new draws
    for block, new in zip(encoder.transformer_layers[-n:], fresh.transformer_layers[-n:]):
        block.set_weights(new.get_weights())
