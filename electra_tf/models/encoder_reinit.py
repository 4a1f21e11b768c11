"""Re-drawing the top Transformer blocks of an encoder (finetune --reinit_top_layers,
`ElectraClassifier.from_pretrained(reinit_top_layers=...)`): `reinit_problem` says what is wrong
with a count, `reinit_top_layers` re-draws them."""

from __future__ import annotations

from typing import Optional

from electra_tf.models.builders import build_encoder
from electra_tf.models.classifier_model import build_and_call


def reinit_problem(n, num_hidden_layers: int) -> Optional[str]:
    """What is wrong with re-drawing the top `n` blocks of an encoder of `num_hidden_layers`
    ("reinit_top_layers=N must be ..."), or None; the CLI and the Python API word it alike."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= num_hidden_layers:
        return f"reinit_top_layers={n} must be between 0 and the encoder's {num_hidden_layers} layers"
    return None


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
