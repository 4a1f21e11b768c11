"""Fine-tuning models: the encoder plus one task head, trainable with `model.fit`.

The task objects that build them (and own their data and evaluation) are the
`FinetuneTask`s of base_task.py; export loads `ClassifierModel` from here.
Each model's constructor arguments are its Keras config (`get_config`, the
encoder serialized as a nested layer), so `from_config` rebuilds it.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from electra_tf.finetune.modeling.task_heads import (AnswerableHead, ClassificationHead, SpanHead,
                                       TokenClassificationHead)
from electra_tf.models.config_fields import ConfigFields

# Width of the SQuAD heads' hidden layers (google-research/electra qa_tasks.py: 512 for
# every model size).
SQUAD_HIDDEN_UNITS = 512


def _per_replica(loss):
    """Divides by the replica count, as Keras' own losses do under tf.distribute
    (gradients are summed across replicas)."""
    n = tf.distribute.get_strategy().num_replicas_in_sync
    return loss / n if n > 1 else loss


def _inputs(inputs):
    return {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}


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
        x = self.head(self.encoder(_inputs(inputs), training=training),
                      input_mask=inputs["input_mask"], training=training)
        x = ops.cast(x, "float32")
        return ops.squeeze(x, -1) if self.regression else x


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
        return ops.cast(self.head(self.encoder(_inputs(inputs), training=training),
                                  training=training), "float32")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        ce = keras.losses.sparse_categorical_crossentropy(x["label_ids"], y_pred, from_logits=True)
        w = ops.cast(x["label_weights"], "float32")
        loss = ops.sum(ce * w) / ops.maximum(ops.sum(w), 1.0)
        return _per_replica(loss)


@keras.saving.register_keras_serializable(package="electra_tf")
class SquadModel(ConfigFields, keras.Model):
    """Encoder + `SpanHead` (+ `AnswerableHead` for SQuAD 2.0).

    Training inputs carry start_positions, end_positions and is_impossible; the
    end logits are then conditioned on the gold start (reference joint
    prediction). Without start_positions (inference) the outputs are the beams.

    Args:
      encoder: an `ElectraEncoder`.
      version_2: add the answerability head.
      beam_size: start/end beam width (reference 20).
      answerable_weight: weight of the answerability loss (reference 0.5).
      initializer_range: head initializer stddev.
      hidden_units: width of the heads' hidden layers (`SQUAD_HIDDEN_UNITS`).
    """

    CONFIG_FIELDS = ("encoder", "version_2", "beam_size", "answerable_weight", "initializer_range",
                     "hidden_units")
    LAYER_FIELDS = ("encoder",)

    def __init__(self, encoder, version_2=False, beam_size=20, answerable_weight=0.5,
                 initializer_range=0.02, hidden_units=SQUAD_HIDDEN_UNITS, **kwargs):
        super().__init__(**kwargs)
        self.set_config_fields(locals())
        self.span_head = SpanHead(beam_size, hidden_units, initializer_range, name="task_span_head")
        self.answerable_head = (AnswerableHead(hidden_units, initializer_range, name="task_answerable_head")
                                if version_2 else None)

    def call(self, inputs, training=None):
        h = self.encoder(_inputs(inputs), training=training)
        seq_len = ops.shape(h)[1]
        # Answers may lie in the context (segment 1, unpadded) or be [CLS] (no answer).
        answer_mask = (ops.cast(inputs["input_mask"], "float32") * ops.cast(inputs["segment_ids"], "float32")
                       + ops.one_hot(ops.zeros_like(inputs["input_ids"][:, 0]), seq_len, dtype="float32"))
        starts = inputs.get("start_positions") if isinstance(inputs, dict) else None
        out = self.span_head(h, ops.cast(answer_mask, h.dtype), starts)
        out = {k: (ops.cast(v, "float32") if "index" not in k else v) for k, v in out.items()}
        if self.answerable_head is not None:
            out["answerable_logit"] = ops.cast(self.answerable_head(h, out["start_logits"]), "float32")
        return out

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        def ce(logits, positions):
            return keras.losses.sparse_categorical_crossentropy(positions, logits, from_logits=True)

        loss = (ce(y_pred["start_logits"], x["start_positions"]) + ce(y_pred["end_logits"], x["end_positions"])) / 2.0
        if self.answerable_head is not None:
            loss = loss + self.answerable_weight * keras.losses.binary_crossentropy(
                ops.cast(x["is_impossible"], "float32")[:, None], y_pred["answerable_logit"][:, None],
                from_logits=True)
        return _per_replica(ops.mean(loss))


def build_and_call(model, max_seq_length, extra=None):
    """Builds a model's variables by calling it once on a dummy batch.

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
