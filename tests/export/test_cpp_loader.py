"""Every export serves in TensorFlow's C++ SavedModel loader, the one TF Serving runs.

Why `tf.saved_model.load` is not enough: it is TF2's object-based loader, which rebuilds the saved
objects and restores each variable by its place in the object graph. TF Serving's `SavedModelBundle`
comes from `tensorflow::LoadSavedModel`, which imports the graph, runs the saver's restore op on
`variables/` by name and then runs the signature tensors in a session. A SavedModel whose functions
read variables the restore op never fills (a Keras 3 variable saved through its Keras layer: see
`test_the_two_loaders_disagree_on_a_keras_layer_in_a_module`) loads and runs in TF2 and fails in TF
Serving. So each export kind and option is loaded here through that C++ function (its C API, called
with ctypes: `electra_tf.export.cpp_loader`), its warm-up requests are replayed as TF Serving replays
them at load, and its outputs are compared with TF2's.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
from electra_tf.export.__main__ import main as export_main
from electra_tf.export.check import main as check_main
from electra_tf.export.cpp_loader import CppLoaderError, CppSavedModel
from electra_tf.export.warmup import WARMUP_FILE

pytestmark = pytest.mark.large  # exports models and serves them in the C++ loader: not in the fast tier

TEXTS = ["The cat sat on the mat.", "", "she walked quickly; the children read books!" * 4,
         "猫はマットの上に座った。Кошка", "?!"]
IDS = np.array([[2, 10, 11, 3, 0], [2, 12, 3, 0, 0]], np.int32)
OPTIONS = {"default": [], "freeze_weights": ["--freeze_weights"], "bf16": ["--precision", "bf16"],
           "jit_compile": ["--jit_compile", "--warmup_batch_sizes", "1,3"]}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The three things one exports: a pre-trained discriminator, a pair classifier, a one-text classifier."""
    from electra_tf.models.model_folder import save_classifier
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models.saving import load_discriminator

    root = tmp_path_factory.mktemp("sources")
    model_dir = h.make_model_dir(root / "model")[0]
    pair_dir = h.make_pair_classifier_dir(model_dir, root / "pair" / "seed_1")[0]
    encoder, _, config = load_discriminator(model_dir)
    single = ClassifierModel(encoder, 2, name="electra_sst2")
    build_and_call(single, 24)
    rng = np.random.default_rng(3)
    for v in single.head.weights:
        v.assign(rng.normal(0, 0.5, v.shape).astype("float32"))
    single_dir = str(root / "single" / "seed_1")
    save_classifier(single_dir, single, config, os.path.join(model_dir, "vocab.txt"), ["negative", "positive"],
                    "sst2", pair=False, max_seq_length=24)
    return {"discriminator": ("discriminator", model_dir), "pair_classifier": ("classifier", pair_dir),
            "classifier": ("classifier", single_dir)}


def _feed(model):
    texts = np.array([t.encode("utf-8") for t in TEXTS], dtype=object)
    if "text" in model.signatures["serving_default"].inputs:
        return {"text": texts}
    return {"text_a": texts, "text_b": texts[::-1].copy()}


def _assert_equal_outputs(got, want):
    assert sorted(got) == sorted(want)
    for key, value in got.items():
        other = np.asarray(want[key])
        assert value.shape == other.shape, key
        if value.dtype.kind == "f":
            np.testing.assert_allclose(value, other, rtol=0, atol=1e-5, err_msg=key)
        else:
            assert value.tolist() == other.tolist(), key


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("source", ["discriminator", "pair_classifier", "classifier"])
def test_every_export_serves_in_the_cpp_loader_as_in_tf2(source, option, sources, tmp_path):
    kind, src = sources[source]
    out = str(tmp_path / "serving" / "1")
    assert export_main(["--model_dir", src, "--output_dir", out, "--kind", kind, *OPTIONS[option]]) == 0
    loaded = tf.saved_model.load(out)
    with CppSavedModel(out) as model:
        assert sorted(model.signatures) == ["encoded", "serving_default"]
        replayed = model.replay_warmup()
        feed = _feed(model)
        got = model.run("serving_default", feed)
        got_ids = model.run("encoded", {"input_ids": IDS, "input_mask": (IDS > 0).astype(np.int32),
                                        "segment_ids": np.zeros_like(IDS)})
    want = {k: v.numpy() for k, v in loaded.signatures["serving_default"](
        **{k: tf.constant(v.tolist(), tf.string) for k, v in feed.items()}).items()}
    want_ids = {k: v.numpy() for k, v in loaded.signatures["encoded"](
        input_ids=tf.constant(IDS), input_mask=tf.constant((IDS > 0).astype(np.int32)),
        segment_ids=tf.constant(np.zeros_like(IDS))).items()}
    _assert_equal_outputs(got, want)
    _assert_equal_outputs(got_ids, want_ids)
    # The outputs are the model's, not a constant: the texts get different scores.
    scores = got["sentence_score"] if kind == "discriminator" else got["probabilities"][:, 0]
    assert len(set(np.round(scores[[0, 2, 3]], 6).tolist())) == 3
    # --jit_compile writes one warm-up request per padded batch (1 and 3 -> 1, 4) x width (16, 20 or 24):
    # TF Serving replays them all at load, and here they all ran.
    warmup = os.path.join(out, "assets.extra", WARMUP_FILE)
    assert replayed == (sum(1 for _ in tf.data.TFRecordDataset(warmup)) if option == "jit_compile" else 0)
    assert replayed == (4 if option == "jit_compile" else 0)


def test_a_warm_up_request_that_fails_is_reported(sources, tmp_path):
    """The replay runs each request for real: one naming an input the signature lacks stops the load."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    kind, src = sources["classifier"]
    out = str(tmp_path / "1")
    assert export_main(["--model_dir", src, "--output_dir", out, "--kind", kind]) == 0
    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name="serving_default"))
    request.inputs["sentence"].CopyFrom(tf.make_tensor_proto(["a text"], dtype=tf.string))
    os.makedirs(os.path.join(out, "assets.extra"), exist_ok=True)  # classifier.json is there
    with tf.io.TFRecordWriter(os.path.join(out, "assets.extra", WARMUP_FILE)) as writer:
        writer.write(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())
    with CppSavedModel(out) as model, pytest.raises(CppLoaderError, match="warm-up request 0 .* takes inputs text"):
        model.replay_warmup()


class _KerasInModule(tf.Module):
    """What `tf.saved_model.save` users write: a Keras 3 layer inside a `tf.Module`."""

    def __init__(self):
        super().__init__()
        import keras

        self.dense = keras.layers.Dense(3, kernel_initializer="ones", bias_initializer="ones")
        self.dense.build((None, 2))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, text):
        x = tf.stack([tf.cast(tf.strings.length(text), tf.float32), tf.ones_like(text, tf.float32)], -1)
        return {"scores": self.dense(x)}


def test_the_two_loaders_disagree_on_a_keras_layer_in_a_module(tmp_path, capsys):
    """Why this file exists: TF2's loader serves this SavedModel, TF Serving's does not, and the check says so."""
    module = _KerasInModule()
    out = str(tmp_path / "1")
    tf.saved_model.save(module, out, signatures={"serving_default": module.serve.get_concrete_function()})
    scores = tf.saved_model.load(out).signatures["serving_default"](text=tf.constant(["abcd"]))["scores"]
    np.testing.assert_allclose(scores.numpy(), [[6.0, 6.0, 6.0]])  # 4 + 1 + bias 1
    with CppSavedModel(out) as model:  # it loads: the failure comes at the first request
        with pytest.raises(CppLoaderError, match="uninitialized|Could not find variable"):
            model.run("serving_default", {"text": np.array([b"abcd"], dtype=object)})
    capsys.readouterr()
    assert check_main(["--model_dir", out]) == 2
    err = h.error_lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith(f"error: TF Serving would not serve {out}: "), err
    assert err[0].endswith("if electra_tf wrote it, export it again with this version"), err


def test_check_command_on_a_served_export(sources, tmp_path, capsys):
    kind, src = sources["pair_classifier"]
    out = str(tmp_path / "1")
    assert export_main(["--model_dir", src, "--output_dir", out, "--kind", kind, "--jit_compile",
                        "--warmup_batch_sizes", "1"]) == 0
    capsys.readouterr()
    assert check_main(["--model_dir", out, "--text", "the cat sat", "--text", "a dog ran",
                       "--text_b", "the mat", "--text_b", ""]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  input  text_a: string (serving_default_text_a:0)" in lines
    assert any(line.startswith("  output probabilities: float32") for line in lines)
    assert sum(line.startswith("  'the cat sat': label '") or line.startswith("  'a dog ran': label '")
               for line in lines) == 2
    assert any(line.startswith("note: the encoder is XLA-compiled") for line in lines)
    assert lines[-1].startswith(f"ok: TF Serving will serve {out}: loaded by its C++ loader in ")
    assert ", 2 warm-up requests replayed, 2 texts run with outputs equal to tf.saved_model.load's" in lines[-1]


def test_check_command_refuses_a_folder_without_a_saved_model(tmp_path, capsys):
    assert check_main(["--model_dir", str(tmp_path)]) == 2
    assert h.error_lines(capsys.readouterr().err) == [
        f"error: --model_dir '{tmp_path}' holds no saved_model.pb; pass a SavedModel version folder written by "
        f"python -m electra_tf.export (e.g. serving/sst2/1)"]
