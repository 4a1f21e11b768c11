"""The fine-tuned sequence classifier: `ClassifierModel` (encoder + `ClassificationHead`), the
`LabelledClassifierModel` that also carries its label names and columns, their loss
`ClassOrScoreLoss`, and `build_and_call`, which builds any fine-tuning model's variables.

Fine-tuning trains it (finetune/tasks), export and the api load it; its constructor arguments are
its Keras config (`get_config`, the encoder serialized as a nested layer), so `from_config`
rebuilds it.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.classification_head import ClassificationHead
from electra_tf.models.task_model_inputs import encoder_inputs


@keras.saving.register_keras_serializable(package="electra_tf")
class ClassifierModel(ConfigFields, keras.Model):
    """Encoder + `ClassificationHead`; outputs float32 logits [batch, C] or scores [batch].

    Args:
      encoder: an `ElectraEncoder`.
      num_outputs: classes, or 1 for regression.
      regression: squeeze the single output to [batch].
      dropout: head dropout.
      initializer_range: head initializer stddev.
      two_layer_head: Hugging Face two-layer head instead of the reference one.
      pooling: "cls" (reference) or "mean" (see `ClassificationHead`).
    """

    CONFIG_FIELDS = ("encoder", "num_outputs", "regression", "dropout", "initializer_range",
                     "two_layer_head", "pooling")
    LAYER_FIELDS = ("encoder",)

    def __init__(self, encoder, num_outputs, regression=False, dropout=0.1,
                 initializer_range=0.02, two_layer_head=False, pooling="cls", **kwargs):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        encoder = self.encoder
        self.head = ClassificationHead(num_outputs, dropout, initializer_range, two_layer_head,
                                       hidden_dim=encoder.hidden_dim, pooling=pooling,
                                       name="task_head")

    def call(self, inputs, training=None):
        x = self.head(self.encoder(encoder_inputs(inputs), training=training),
                      input_mask=inputs["input_mask"], training=training)
        x = ops.cast(x, "float32")
        return ops.squeeze(x, -1) if self.regression else x


class LabelledClassifierModel(ClassifierModel):
    """`ClassifierModel` that knows its label set and the columns it read (what fine-tuning on
    own files records in the saved classifier folder).

    The same layers as `ClassifierModel`, so its weights load into one (export, predict).

    Args:
      label_set: the `LabelSet` of the training file (finetune/readers/own_data.py).
      columns: the `Columns` read.
      *args, **kwargs: `ClassifierModel`'s.
    """

    def __init__(self, label_set, columns, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.label_set = label_set
        self.columns = columns


class ClassOrScoreLoss(keras.losses.Loss):
    """Cross-entropy on class logits [batch, C], mean squared error on scores [batch].

    The task object is stateless, so the loss reads classification or
    regression from the rank of the model's output (`ClassifierModel` squeezes
    a regression's single output).
    """

    def __init__(self, name: str = "class_or_score_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        if len(y_pred.shape) == 1:
            return keras.ops.square(keras.ops.cast(y_true, y_pred.dtype) - y_pred)
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)


def build_and_call(model, max_seq_length, extra=None):
    """Builds a fine-tuning model's variables (classifier, tagger or SQuAD) by calling it once on a
    dummy batch.

    Args:
      model: a fine-tuning model.
      max_seq_length: sequence length of the dummy batch.
      extra: additional dummy inputs (e.g. start_positions for SQuAD training).
    """
    ones = np.ones((2, max_seq_length), "int32")
    inputs = {"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones}
    inputs.update(extra or {})
    model(inputs, training=False)
    return model
