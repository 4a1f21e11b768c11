"""LiteRT export (`export --format tflite`): outputs against the SavedModel's, int8, the weightless-file
trap, the self-check, the CLI's error lines, and `Predictor` / `predict` on the files."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
from electra_tf.export import build_module
from electra_tf.export import tflite as lt
from electra_tf.export.__main__ import main as export_main
from electra_tf.export.serving import ServingModule

pytestmark = pytest.mark.large  # converts exports to LiteRT: not in the fast tier

TEXTS = ["The cat sat on the mat.", "", "the big dog ran to the river " * 12,
         "猫はマットの上に座った。Кошка сидела на коврике.", "Café naïve RÉSUMÉ",
         "she walked quickly; the children read"]
PAIRS = TEXTS[2:] + TEXTS[:2]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return h.make_model_dir(tmp_path_factory.mktemp("m") / "model")[0]


@pytest.fixture(scope="module")
def classifier_dir(model_dir, tmp_path_factory):
    return h.make_pair_classifier_dir(model_dir, tmp_path_factory.mktemp("c") / "mnli")[0]


def _export(model_dir, out, *flags, kind="classifier"):
    code = export_main(["--model_dir", model_dir, "--output_dir", str(out), "--kind", kind, *flags])
    assert code == 0
    return str(out)


@pytest.fixture(scope="module")
def fp32(classifier_dir, tmp_path_factory):
    return _export(classifier_dir, tmp_path_factory.mktemp("lite") / "fp32", "--format", "tflite")


@pytest.fixture(scope="module")
def int8(classifier_dir, tmp_path_factory):
    return _export(classifier_dir, tmp_path_factory.mktemp("lite") / "int8", "--format", "tflite", "--quantize", "int8")


@pytest.fixture(scope="module")
def saved_model(classifier_dir, tmp_path_factory):
    out = _export(classifier_dir, tmp_path_factory.mktemp("sm") / "1")
    return tf.saved_model.load(out)


def _numpy(outputs):
    return {k: v.numpy() for k, v in outputs.items()}


def _runtimes():
    return ["tf.lite"] + (["ai-edge-litert"] if lt.runtime_name() == "ai-edge-litert" else [])


@pytest.mark.parametrize("runtime", _runtimes())
def test_fp32_files_answer_as_the_saved_model(fp32, saved_model, runtime):
    assert sorted(os.listdir(fp32)) == ["model.json", "model.tflite", "model_ids.tflite", "vocab.txt"]
    meta = lt.read_metadata(fp32)
    assert meta["labels"] == ["contradiction", "entailment", "neutral"] and meta["max_seq_length"] == 20
    assert meta["inputs"] == {"text": ["text_a", "text_b"], "ids": ["input_ids", "input_mask", "segment_ids"]}
    assert meta["custom_ops"]["model_ids.tflite"] == []
    want = _numpy(saved_model.signatures["serving_default"](text_a=tf.constant(TEXTS), text_b=tf.constant(PAIRS)))
    text_in = lt.LiteRTModel(os.path.join(fp32, "model.tflite"), runtime=runtime)
    assert text_in.inputs == ["text_a", "text_b"] and text_in.custom_ops
    got = text_in(text_a=TEXTS, text_b=PAIRS)
    assert sorted(got) == sorted(want)
    for key in ("logits", "probabilities"):
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5)
    for key in ("label", "label_id", "truncated"):
        np.testing.assert_array_equal(got[key], want[key])
    assert want["truncated"].any()  # the long text is cut in both
    # The ids-in file on the SavedModel's ids.
    ids = np.array([[2, 5, 13, 3, 6, 14, 3, 0], [2, 7, 3, 8, 3, 0, 0, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    segments = np.array([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]], np.int32)
    want = _numpy(saved_model.signatures["encoded"](input_ids=ids, input_mask=mask, segment_ids=segments))
    got = lt.LiteRTModel(os.path.join(fp32, "model_ids.tflite"), runtime=runtime)(
        input_ids=ids, input_mask=mask, segment_ids=segments)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=0, atol=1e-5)


def test_int8_is_smaller_and_agrees_on_the_labels(fp32, int8):
    sizes = {name: [os.path.getsize(os.path.join(d, name)) for d in (fp32, int8)]
             for name in ("model.tflite", "model_ids.tflite")}
    assert sizes["model_ids.tflite"][1] < 0.7 * sizes["model_ids.tflite"][0]
    assert lt.read_metadata(int8)["quantize"] == "int8"
    want = lt.LiteRTModel(os.path.join(fp32, "model.tflite"))(text_a=TEXTS, text_b=PAIRS)
    got = lt.LiteRTModel(os.path.join(int8, "model.tflite"))(text_a=TEXTS, text_b=PAIRS)
    np.testing.assert_array_equal(got["label"], want["label"])
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=0.05)
    assert np.abs(got["logits"] - want["logits"]).max() > 0  # really quantized


def test_discriminator_text_file_gives_the_saved_model_outputs(model_dir, tmp_path):
    out = _export(model_dir, tmp_path / "d", "--format", "tflite", "--tflite_inputs", "text", kind="discriminator")
    assert sorted(os.listdir(out)) == ["model.json", "model.tflite", "vocab.txt"]
    want = _numpy(build_module(model_dir, "discriminator").serve(tf.constant(TEXTS)))
    got = lt.LiteRTModel(os.path.join(out, "model.tflite"))(text=TEXTS)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[key], value, rtol=0, atol=1e-5)
        else:
            np.testing.assert_array_equal(got[key], value)


def test_a_conversion_from_variables_holds_no_weights_and_is_refused(model_dir, tmp_path, capsys, monkeypatch):
    module = build_module(model_dir, "discriminator")
    content = lt.convert(module.serve_encoded.get_concrete_function(), module)
    facts = lt.inspect_model(content)
    assert facts.variable_ops > 0 and facts.weight_bytes < 1000  # the silent trap: a file, no weights
    with pytest.raises(lt.LiteRTError, match="holds no weights"):
        lt.check_weights(content, lt.weight_count(module), "none", "model_ids.tflite")
    # Through the CLI (given that file): the export refuses, in one line, and writes nothing.
    monkeypatch.setattr(lt, "convert", lambda *args, **kwargs: content)
    out = tmp_path / "lite" / "trap"
    assert export_main(["--model_dir", model_dir, "--output_dir", str(out), "--format", "tflite",
                        "--tflite_inputs", "ids"]) == 2
    lines = h.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "model_ids.tflite holds no weights" in lines[0] and "frozen" in lines[0], lines
    assert os.listdir(tmp_path) == []


def test_outputs_that_differ_from_the_saved_model_are_refused(model_dir, tmp_path, capsys, monkeypatch):
    frozen = ServingModule._frozen_module

    def frozen_then_changed(self):  # the file gets the weights as they were; the SavedModel path new ones
        out = frozen(self)
        self.head.weights[0].assign_add(tf.ones_like(self.head.weights[0]) * 0.01)
        return out

    monkeypatch.setattr(ServingModule, "_frozen_module", frozen_then_changed)
    out = tmp_path / "diff"
    assert export_main(["--model_dir", model_dir, "--output_dir", str(out), "--format", "tflite",
                        "--kind", "discriminator", "--tflite_inputs", "ids"]) == 2
    lines = h.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "differs from the SavedModel's by" in lines[0] and "1e-05" in lines[0], lines
    assert not out.exists() and os.listdir(tmp_path) == []
    # The tolerance: 1e-5, relative where an output's values are above 1 (float32 round-off grows with them).
    assert lt.allowed(np.array([0.5, -0.2])) == pytest.approx(1e-5)
    assert lt.allowed(np.array([3.0, -40.0])) == pytest.approx(4e-4)


@pytest.mark.parametrize("flags, message", [
    (["--quantize", "int8"], "--quantize int8 applies to --format tflite"),
    (["--format", "tflite", "--jit_compile"], "--format tflite does not take --jit_compile"),
    (["--format", "tflite", "--precision", "bf16"], "--format tflite does not take --precision bf16"),
    (["--format", "tflite", "--tflite_inputs", "txt"], "--tflite_inputs txt: use text, ids or text,ids"),
])
def test_cli_error_lines(model_dir, tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    assert export_main(["--model_dir", model_dir, "--output_dir", str(out), *flags]) == 2
    lines = h.error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and message in lines[0], lines
    assert not out.exists()


def test_a_tokenizer_without_litert_kernels_is_refused_for_text_in(model_dir):
    normalization = pytest.importorskip("electra_tf.data.normalization")
    module = build_module(model_dir, "discriminator")
    module.preprocessor.normalization = normalization.TextNormalization()  # bert mode: regex ops
    with pytest.raises(lt.LiteRTError, match="no LiteRT kernel implements.*--tflite_inputs ids"):
        lt.tflite_files(module)


def test_predictor_runs_the_files(classifier_dir, fp32, int8, tmp_path):
    from electra_tf.predict import PredictError, Predictor
    from electra_tf.predict.__main__ import main as predict_main

    texts = [t for t in TEXTS if t]  # predict refuses blank rows
    pairs = texts[1:] + texts[:1]
    want = Predictor(classifier_dir).predict_arrays(texts, pairs)
    for path in (fp32, os.path.join(fp32, "model.tflite"), os.path.join(fp32, "model_ids.tflite")):
        predictor = Predictor(path, batch_size=2)  # batches of 2, by length: resized between calls
        assert predictor.labels == ["contradiction", "entailment", "neutral"] and predictor.pair
        assert predictor.max_seq_length == 20 and predictor.runtime == lt.runtime_name()
        got = predictor.predict_arrays(texts, pairs)
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], rtol=0, atol=1e-5)
        np.testing.assert_array_equal(got["label_id"], want["label_id"])
        np.testing.assert_array_equal(got["truncated"], want["truncated"])
    labels = [p.label for p in Predictor(int8).predict(texts, pairs)]
    assert labels == [p.label for p in Predictor(classifier_dir).predict(texts, pairs)]
    with pytest.raises(PredictError, match="max_seq_length=30: .* exported for 20"):
        Predictor(fp32, max_seq_length=30)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "model.tflite").write_bytes(open(os.path.join(fp32, "model.tflite"), "rb").read())
    with pytest.raises(PredictError, match="has no model.json"):
        Predictor(str(alone / "model.tflite"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"premise": a, "hypothesis": b}) + "\n" for a, b in zip(texts, pairs)),
                    encoding="utf-8")
    out = tmp_path / "predictions.jsonl"
    assert predict_main(["--model_dir", os.path.join(fp32, "model.tflite"), "--input_file", str(rows),
                         "--output_file", str(out), "--text_column", "premise", "--text_pair_column", "hypothesis",
                         "--noprogress"]) == 0
    written = [json.loads(line)["predicted_label"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert written == labels
