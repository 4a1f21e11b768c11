"""The pre-training metrics: one set of Keras metrics and one updater for every objective.

An objective's forward returns its losses and metric inputs (see
`electra_tf.objectives.base.Objective.forward`); `metric_inputs` turns them
into summable losses and per-example tensors, which gradient accumulation can
concatenate over micro-batches before the single `update_metrics` call.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.objectives.base import METRIC_NAMES
from electra_tf.objectives.objective_registry import get_objective

# (model attribute, metric name, factory), in the order `fit` reports them.
# The attribute names are part of the saved pre-trainer's layout: keep them.
_METRICS = (
    ("loss_tracker", "loss", keras.metrics.Mean),
    ("mlm_loss_tracker", "mlm_loss", keras.metrics.Mean),
    ("mlm_accuracy", "mlm_accuracy", keras.metrics.Mean),
    ("gen_loss_tracker", "gen_loss", keras.metrics.Mean),
    ("gen_accuracy", "gen_accuracy", keras.metrics.Mean),
    ("sampled_accuracy", "sampled_accuracy", keras.metrics.Mean),
    ("disc_loss_tracker", "disc_loss", keras.metrics.Mean),
    ("disc_auc", "disc_auc", keras.metrics.AUC),
    ("disc_accuracy", "disc_accuracy", keras.metrics.BinaryAccuracy),
    ("disc_precision", "disc_precision", keras.metrics.Precision),
    ("disc_recall", "disc_recall", keras.metrics.Recall),
)
_LOSSES = ("loss", "mlm_loss", "gen_loss", "disc_loss")


def metric_names(objective="electra"):
    """The metrics `fit` and `evaluate` report for a pre-training objective.

    `mlm_*` is always the objective's masked-LM term (the generator's where a
    discriminator is trained, else the full-size network's); `gen_*` is the
    generator where both a generator and a full-size masked LM exist;
    `sampled_accuracy` is the share of generator samples equal to the
    original; `disc_*` only exist with a discriminator.

    Args:
        objective: a config `objective` value.
    """
    return tuple(get_objective(objective).metric_names)


def create_metrics(model, names):
    """Sets the metric attributes of `model` (None for the ones not in `names`)."""
    for attribute, name, factory in _METRICS:
        setattr(model, attribute, factory(name=name) if name in names else None)


def model_metrics(model):
    """The model's metrics, in the reported order."""
    every = (getattr(model, attribute) for attribute, _, _ in _METRICS)
    return [m for m in every if m is not None]


def loss_names(names):
    """The losses among metric `names`, in the order of `metric_inputs`' loss vector."""
    return tuple(n for n in _LOSSES if n in names)


def value_shapes(names, batch, slots, tokens):
    """{name: shape} of `metric_inputs`' per-example tensors (all float32).

    Args:
        names: the objective's metric names.
        batch: examples in the batch.
        slots: prediction slots per example (P).
        tokens: sequence length (L).
    """
    slot, token = [batch, slots], [batch, tokens]
    shapes = {"mlm_hits": slot, "mlm_weights": slot}
    if "gen_accuracy" in names:
        shapes.update(gen_hits=slot, gen_weights=slot)
    if "sampled_accuracy" in names:
        shapes.update(sampled_hits=slot, sample_weights=slot)
    if "disc_loss" in names:
        shapes.update(disc_labels=token, disc_probs=token, disc_weights=token)
    return shapes


def metric_inputs(out, names):
    """(losses [n], per-example tensors, disc_active) from one forward's outputs.

    Losses are this replica's shares of the batch losses (they add up over
    replicas and micro-batches); per-example tensors have the batch first.

    Args:
        out: an objective's forward outputs.
        names: the metric names of the objective.
    """
    losses = tf.stack([tf.cast(out[n], tf.float32) for n in loss_names(names)])
    original_ids = out["masked_original_ids"]

    def hits(ids):
        return tf.cast(tf.equal(tf.cast(ids, tf.int32), original_ids), tf.float32)

    values = {
        "mlm_hits": hits(tf.argmax(out["mlm_logits"], -1, output_type=tf.int32)),
        "mlm_weights": tf.cast(out["mlm_weights"], tf.float32),
    }
    if "gen_accuracy" in names:
        values["gen_hits"] = hits(tf.argmax(out["gen_logits"], -1, output_type=tf.int32))
        values["gen_weights"] = tf.cast(out["masked_weights"], tf.float32)
    if "sampled_accuracy" in names:
        values["sampled_hits"] = hits(out["sampled_ids"])
        values["sample_weights"] = tf.cast(out["sample_weights"], tf.float32)
    if "disc_loss" in names:
        values["disc_labels"] = tf.cast(out["disc_labels"], tf.float32)
        values["disc_probs"] = tf.sigmoid(tf.cast(out["disc_logits"], tf.float32))
        values["disc_weights"] = tf.cast(out["disc_weights"], tf.float32)
    disc_active = tf.cast(out.get("disc_active", 1.0), tf.float32)
    return losses, values, disc_active


def update_metrics(model, losses, values, disc_active):
    """Updates the model's metrics; returns {name: result}.

    Args:
        model: the pre-trainer (its metric attributes).
        losses: float [n] the global batch's losses (summed over replicas),
            ordered as `loss_names`.
        values: per-example tensors from `metric_inputs`.
        disc_active: weight of this step's `disc_loss` (0 in a phase without
            a discriminator step).
    """
    names = [m.name for m in model_metrics(model)]
    summed = dict(zip(loss_names(names), tf.unstack(losses)))
    model.loss_tracker.update_state(summed["loss"])
    model.mlm_loss_tracker.update_state(summed["mlm_loss"])
    model.mlm_accuracy.update_state(values["mlm_hits"], sample_weight=values["mlm_weights"])
    if model.gen_loss_tracker is not None:
        model.gen_loss_tracker.update_state(summed["gen_loss"])
        model.gen_accuracy.update_state(values["gen_hits"], sample_weight=values["gen_weights"])
    if model.sampled_accuracy is not None:
        model.sampled_accuracy.update_state(values["sampled_hits"],
                                            sample_weight=values["sample_weights"])
    if model.disc_loss_tracker is not None:
        model.disc_loss_tracker.update_state(summed["disc_loss"], sample_weight=disc_active)
        for metric in (model.disc_auc, model.disc_accuracy, model.disc_precision,
                       model.disc_recall):
            metric.update_state(values["disc_labels"], values["disc_probs"],
                                sample_weight=values["disc_weights"])
    return {m.name: m.result() for m in model_metrics(model)}


__all__ = ["METRIC_NAMES", "create_metrics", "metric_inputs", "metric_names", "model_metrics",
           "update_metrics"]
