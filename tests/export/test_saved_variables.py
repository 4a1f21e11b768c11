"""The default export stores each weight once: its variables checkpoint holds as many values as the model's
encoder + head have parameters, one entry per weight, for both kinds, in bf16 and under --jit_compile too.
(It once held every weight twice: a tracked list of the tf.Variables inside the Keras variables, saved
beside the Keras variables themselves.)"""

import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
from electra_tf.export.__main__ import main as export_main
from electra_tf.export.serving_loader import load_classifier
from electra_tf.models.saving import load_discriminator

pytestmark = pytest.mark.large  # exports under each precision: not in the fast tier

OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"  # the checkpoint's own entry, not a weight


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return h.make_model_dir(tmp_path_factory.mktemp("m") / "model")[0]


@pytest.fixture(scope="module")
def classifier_dir(model_dir, tmp_path_factory):
    return h.make_pair_classifier_dir(model_dir, tmp_path_factory.mktemp("clf") / "seed_1")[0]


def _weights(kind, src):
    """The exported model's weights (encoder + head), as the model directory loads them."""
    if kind == "discriminator":
        encoder, head, _ = load_discriminator(src)
    else:
        model, _, _ = load_classifier(src)
        encoder, head = model.encoder, model.head
    return list(encoder.weights) + list(head.weights)


@pytest.mark.parametrize("extra", [[], ["--precision", "bf16", "--jit_compile", "--nowarmup"]],
                         ids=["default", "bf16_jit"])
@pytest.mark.parametrize("kind", ["discriminator", "classifier"])
def test_export_stores_each_weight_once(kind, extra, model_dir, classifier_dir, tmp_path):
    src = model_dir if kind == "discriminator" else classifier_dir
    out = str(tmp_path / "saved")
    assert export_main(["--model_dir", src, "--output_dir", out, "--kind", kind, *extra]) == 0
    entries = [(name, shape) for name, shape in tf.train.list_variables(os.path.join(out, "variables", "variables"))
               if name != OBJECT_GRAPH]
    weights = _weights(kind, src)
    params = sum(int(np.prod(v.shape)) for v in weights)
    assert sum(int(np.prod(shape)) for _, shape in entries) == params
    assert len(entries) == len(weights)
    assert sorted(tuple(shape) for _, shape in entries) == sorted(tuple(v.shape) for v in weights)
    # And it serves: the functions read the variables the checkpoint restores.
    outputs = tf.saved_model.load(out).signatures["encoded"](
        input_ids=tf.constant([[2, 10, 3]]), input_mask=tf.constant([[1, 1, 1]]),
        segment_ids=tf.constant([[0, 0, 0]]))
    assert all(np.isfinite(v.numpy()).all() for v in outputs.values() if v.dtype.is_floating)
