"""`--precision bf16` really runs the encoder in bfloat16 (predict, export), and stays close.

A precision option mapped to float32 would give answers equal to float32's and
pass any closeness check; here the dtype policy must reach every layer of the
encoder, its matmuls must be bfloat16 (in the Keras layers and in the exported
SavedModel's graph), the answers must differ from float32's, and stay within
the stated tolerance: probabilities within 2e-2, logits within 2e-2 of their
largest magnitude (bfloat16 keeps 8 significant bits: ~4e-3 per rounding,
compounded over the two layers).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import helpers

pytestmark = pytest.mark.large  # exports and reloads classifiers under bf16: not in the fast tier

TEXTS = ["The cat sat on the mat.", "She walked quickly to the old school, and he read books!",
         "They said the river was big and blue.", "a big red dog ran to the house in paris",
         "the man and the woman read good new books", "old london"]
PROB_ATOL = 2e-2
LOGIT_RTOL = 2e-2


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory):
    """A fine-tuning seed directory: a tiny 3-class classifier with weights moved off their init."""
    import keras

    from electra_tf.models.model_folder import save_classifier
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    keras.utils.set_random_seed(3)
    config = helpers.tiny_config(max_seq_length=24)
    model = ClassifierModel(build_encoder(config), 3)
    build_and_call(model, 24)
    rng = np.random.default_rng(0)
    for v in model.weights:
        v.assign(v + rng.normal(0, 0.2, v.shape).astype("float32"))
    d = tmp_path_factory.mktemp("bf16")
    vocab = helpers.write_vocab(str(d / "vocab.txt"))
    path = str(d / "seed_1")
    save_classifier(path, model, config, vocab, ["a", "b", "c"], "made_up", pair=False, max_seq_length=24)
    return path


def _float_outputs(serve, texts):
    out = serve(tf.constant(texts))
    return out["logits"].numpy(), out["probabilities"].numpy()


def _assert_bf16_close(bf16, fp32):
    (logits, probs), (ref_logits, ref_probs) = bf16, fp32
    assert logits.dtype == probs.dtype == np.float32  # outputs are cast back
    # Really another precision: not float32's answers.
    assert np.abs(logits - ref_logits).max() > 1e-4
    assert np.abs(probs - ref_probs).max() <= PROB_ATOL
    assert np.abs(logits - ref_logits).max() <= LOGIT_RTOL * np.abs(ref_logits).max()


def _layer_policies(encoder):
    return {layer.dtype_policy.name for layer in encoder._flatten_layers() if hasattr(layer, "dtype_policy")}


def test_the_bf16_policy_reaches_every_encoder_layer_and_answers_differ_within_tolerance(seed_dir):
    import keras

    from electra_tf.export.serving_loader import classifier_module
    from electra_tf.predict import Predictor

    fp32 = classifier_module(seed_dir)
    bf16 = classifier_module(seed_dir, precision="bf16")
    assert keras.mixed_precision.global_policy().name == "float32"  # restored after the build
    assert _layer_policies(fp32.encoder) == {"float32"}
    assert _layer_policies(bf16.encoder) == {"mixed_bfloat16"}
    # mixed_bfloat16: variables stay float32, the computation is bfloat16.
    assert {v.dtype for v in bf16.encoder.weights} == {"float32"}
    ids = np.random.default_rng(1).integers(5, 60, (2, 12)).astype(np.int32)
    batch = {"input_ids": tf.constant(ids), "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
    assert bf16.encoder(batch).dtype == tf.bfloat16
    assert fp32.encoder(batch).dtype == tf.float32

    _assert_bf16_close(_float_outputs(bf16.serve, TEXTS), _float_outputs(fp32.serve, TEXTS))

    # The Predictor's option is the same module.
    ours = Predictor(seed_dir, batch_size=4, precision="bf16").predict_arrays(TEXTS)
    ref = Predictor(seed_dir, batch_size=4).predict_arrays(TEXTS)
    assert np.abs(ours["probabilities"] - ref["probabilities"]).max() > 1e-5
    assert np.abs(ours["probabilities"] - ref["probabilities"]).max() <= PROB_ATOL


def _graph_dtypes(saved_dir):
    """{op type: set of its T attrs} over the SavedModel's functions (matmul types)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    types = {}
    for meta in proto.meta_graphs:
        nodes = list(meta.graph_def.node)
        for fn in meta.graph_def.library.function:
            nodes += list(fn.node_def)
        for node in nodes:
            if node.op in ("MatMul", "BatchMatMulV2", "Einsum") and "T" in node.attr:
                types.setdefault(node.op, set()).add(tf.dtypes.as_dtype(node.attr["T"].type).name)
    return types


def test_export_precision_bf16_writes_a_bfloat16_graph(seed_dir, tmp_path, capsys):
    from electra_tf.export.__main__ import main as export_main

    dirs = {}
    for precision in ("none", "bf16"):
        out = str(tmp_path / precision)
        assert export_main(["--model_dir", seed_dir, "--output_dir", out, "--kind", "classifier",
                            "--precision", precision]) == 0, capsys.readouterr().err
        dirs[precision] = out
    fp32_types, bf16_types = _graph_dtypes(dirs["none"]), _graph_dtypes(dirs["bf16"])
    assert fp32_types and all(t == {"float32"} for t in fp32_types.values()), fp32_types
    assert any("bfloat16" in t for t in bf16_types.values()), bf16_types

    outputs = {}
    for p, d in dirs.items():
        fn = tf.saved_model.load(d).signatures["serving_default"]
        outputs[p] = _float_outputs(lambda texts: fn(text=texts), TEXTS)
    _assert_bf16_close(outputs["bf16"], outputs["none"])
