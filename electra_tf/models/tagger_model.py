"""The fine-tuned token tagger: `TaggerModel` (encoder + `TokenClassificationHead`), trainable
with `model.fit`; its constructor arguments are its Keras config."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.token_classification_head import TokenClassificationHead
from electra_tf.models.task_model_inputs import encoder_inputs, per_replica_loss


@keras.saving.register_keras_serializable(package="electra_tf")
class TaggerModel(ConfigFields, keras.Model):
    """Encoder + `TokenClassificationHead`; loss on first word pieces only.

    Inputs also carry `label_ids` and `label_weights` (training/evaluation).

    Args:
      encoder: an `ElectraEncoder`.
      num_labels: number of tags.
      dropout: head dropout.
      initializer_range: head initializer stddev.
    """

    CONFIG_FIELDS = ("encoder", "num_labels", "dropout", "initializer_range")
    LAYER_FIELDS = ("encoder",)

    def __init__(self, encoder, num_labels, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        self.head = TokenClassificationHead(num_labels, dropout, initializer_range, name="task_head")

    def call(self, inputs, training=None):
        return ops.cast(self.head(self.encoder(encoder_inputs(inputs), training=training),
                                  training=training), "float32")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        ce = keras.losses.sparse_categorical_crossentropy(x["label_ids"], y_pred, from_logits=True)
        w = ops.cast(x["label_weights"], "float32")
        loss = ops.sum(ce * w) / ops.maximum(ops.sum(w), 1.0)
        return per_replica_loss(loss)
