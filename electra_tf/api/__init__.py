"""The Python API shaped like keras-hub's: preprocessor, encoder, classifier.

    from electra_tf import ElectraClassifier, ElectraPreprocessor, load_encoder

* `ElectraPreprocessor`: raw strings -> input_ids / input_mask / segment_ids
  (the in-graph tokenizer that fine-tuning and the SavedModel use).
* `load_encoder(path)`: the pre-trained (or fine-tuned) `ElectraEncoder` of
  any model directory, with its `ElectraConfig`.
* `ElectraClassifier`: preprocessor + encoder + head; `from_pretrained`,
  `fit` on strings, `predict` on strings, `save` / load back.
"""

from electra_tf.api.classifier import ElectraClassifier
from electra_tf.api.model_locator import ApiError, load_encoder, locate
from electra_tf.api.preprocessor import ElectraPreprocessor

__all__ = ["ApiError", "ElectraClassifier", "ElectraPreprocessor", "load_encoder", "locate"]
