"""The fine-tuned SQuAD reader: `SquadModel` (encoder + `SpanHead`, + `AnswerableHead` for
SQuAD 2.0), trainable with `model.fit`; its constructor arguments are its Keras config."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.models.config_fields import ConfigFields
from electra_tf.models.answerable_head import AnswerableHead
from electra_tf.models.span_head import SpanHead
from electra_tf.models.task_model_inputs import encoder_inputs, per_replica_loss

# Width of the SQuAD heads' hidden layers (google-research/electra qa_tasks.py: 512 for
# every model size).
SQUAD_HIDDEN_UNITS = 512


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
        h = self.encoder(encoder_inputs(inputs), training=training)
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
        return per_replica_loss(ops.mean(loss))
