"""Checkpoint interop: Google TF1, Hugging Face and keras-hub weights <-> our model directory.

See `python -m electra_tf.convert --help` and docs/serving.md.
"""

from electra_tf.convert.mapping import ConversionError

__all__ = ["ConversionError"]
