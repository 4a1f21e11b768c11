"""`export --freeze_weights`: the serving graphs hold the encoder and head weights as constants (no variable
saved, each weight stored once), and the SavedModel serves the same signatures with the same outputs as the
default export; it refuses --jit_compile in one line."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer's ops, to load the SavedModels)

import helpers as h
from electra_tf.export.__main__ import main as export_main

pytestmark = pytest.mark.large  # exports and serves frozen graphs: not in the fast tier

TEXTS = ["The cat sat on the mat.", "", "the dog ran to the river " * 9, "猫は a cat"]
SECOND = ["A cat sat.", "the river", "", "the dog " * 20]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return h.make_model_dir(tmp_path_factory.mktemp("m") / "model")


@pytest.fixture(scope="module")
def pair_classifier_dir(model_dir, tmp_path_factory):
    return h.make_pair_classifier_dir(model_dir[0], tmp_path_factory.mktemp("clf") / "seed_1", seed=3)[0]


def _export(src, out, kind, *extra):
    assert export_main(["--model_dir", src, "--output_dir", str(out), "--kind", kind, *extra]) == 0
    return tf.saved_model.load(str(out)).signatures


def _assert_same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        x, y = a[key].numpy(), b[key].numpy()
        if x.dtype.kind == "f":
            np.testing.assert_allclose(y, x, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(y, x, err_msg=key)


def _signature_specs(fn):
    return fn.structured_input_signature, {k: (v.dtype, v.shape.as_list()) for k, v in fn.structured_outputs.items()}


def _saved_ops(path):
    """Op types in every graph and function of the SavedModel, and the Const nodes' shapes."""
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    graph = sm.meta_graphs[0].graph_def
    nodes = list(graph.node) + [n for fn in graph.library.function for n in fn.node_def]
    const_shapes = [tuple(d.size for d in n.attr["value"].tensor.tensor_shape.dim) for n in nodes if n.op == "Const"]
    return {n.op for n in nodes}, const_shapes


@pytest.mark.parametrize("kind", ["discriminator", "classifier"])
def test_frozen_export_serves_the_same_outputs_without_variables(kind, model_dir, pair_classifier_dir, tmp_path):
    src = model_dir[0] if kind == "discriminator" else pair_classifier_dir
    plain = _export(src, tmp_path / "plain", kind)
    frozen = _export(src, tmp_path / "frozen", kind, "--freeze_weights")
    assert sorted(frozen) == sorted(plain) == ["encoded", "serving_default"]
    for name in plain:
        assert _signature_specs(frozen[name]) == _signature_specs(plain[name])
    texts = {"text_a": tf.constant(TEXTS), "text_b": tf.constant(SECOND)} if kind == "classifier" else \
        {"text": tf.constant(TEXTS)}
    _assert_same(plain["serving_default"](**texts), frozen["serving_default"](**texts))
    ids = {"input_ids": tf.constant([[2, 5, 6, 7, 3, 8, 3], [2, 9, 3, 0, 0, 0, 0]]),
           "input_mask": tf.constant([[1] * 7, [1, 1, 1, 0, 0, 0, 0]]),
           "segment_ids": tf.constant([[0, 0, 0, 0, 0, 1, 1], [0] * 7])}
    _assert_same(plain["encoded"](**ids), frozen["encoded"](**ids))

    # No weight is a variable: the checkpoint holds only its object graph, no op reads a variable...
    names = [name for name, _ in tf.train.list_variables(str(tmp_path / "frozen" / "variables" / "variables"))]
    assert names == ["_CHECKPOINTABLE_OBJECT_GRAPH"]
    ops, consts = _saved_ops(str(tmp_path / "frozen"))
    assert not {op for op in ops if "Variable" in op or op == "VarHandleOp"}
    assert "ReadVariableOp" in _saved_ops(str(tmp_path / "plain"))[0]
    # ...and the word embeddings are one constant, shared by both signatures.
    config = model_dir[2]
    assert consts.count((config.vocab_size, config.embedding_size)) == 1


def test_frozen_bf16_export_equals_the_bf16_export(model_dir, tmp_path):
    plain = _export(model_dir[0], tmp_path / "plain", "discriminator", "--precision", "bf16")
    frozen = _export(model_dir[0], tmp_path / "frozen", "discriminator", "--precision", "bf16", "--freeze_weights")
    _assert_same(plain["serving_default"](text=tf.constant(TEXTS)), frozen["serving_default"](text=tf.constant(TEXTS)))


def test_freeze_weights_refuses_jit_compile_in_one_line(pair_classifier_dir, tmp_path, capsys):
    out = tmp_path / "x"
    assert export_main(["--model_dir", pair_classifier_dir, "--output_dir", str(out), "--kind", "classifier",
                        "--freeze_weights", "--jit_compile"]) == 2
    err = capsys.readouterr().err
    assert len(h.nonblank_lines(err)) == 1 and "error: --freeze_weights does not combine with --jit_compile" in err
    assert not out.exists()  # nothing half-written
