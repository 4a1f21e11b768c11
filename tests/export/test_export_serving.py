"""SavedModel export: in-graph tokenization, fresh-process reload, edge cases, classifier."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import helpers as h
from electra_tf.export import build_module
from electra_tf.export.__main__ import main as export_main

EDGE_TEXTS = [
    "The cat sat on the mat.",
    "",
    "the big dog ran to the river " * 1430,  # 10,010 characters
    "猫はマットの上に座った。Кошка сидела на коврике. القطة جلست",
    "   ",
    "x" * 10000,
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return h.make_model_dir(tmp_path_factory.mktemp("m") / "model")


@pytest.fixture(scope="module")
def saved(model_dir, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("serving") / "electra" / "1")
    assert export_main(["--model_dir", model_dir[0], "--output_dir", out, "--kind", "discriminator"]) == 0
    return out


def _numpy(outputs):
    return {k: v.numpy() for k, v in outputs.items()}


def test_in_graph_encoding_matches_finetune_tokenization(model_dir, tmp_path):
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification

    module = build_module(model_dir[0], "discriminator")
    texts = ["The cat sat on the mat.", "", "she walked quickly; the children read books!" * 5]
    enc = _numpy(module.encode(tf.constant(texts)))
    ref = encode_classification(FinetuneTokenizer(h.write_vocab(tmp_path / "v.txt")), texts, None,
                                module.max_seq_length)
    n = enc["input_ids"].shape[1]
    for key in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(enc[key], ref[key][:, :n])
    assert enc["truncated"].tolist() == [False, False, True]


@pytest.mark.large
def test_signatures_and_fresh_process_reload(saved, model_dir, tmp_path):
    module = build_module(model_dir[0], "discriminator")
    want = _numpy(module.serve(tf.constant(EDGE_TEXTS)))
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  registers the tokenizer ops
        model = tf.saved_model.load({saved!r})
        texts = json.load(open({str(tmp_path / 'texts.json')!r}, encoding="utf-8"))
        out = model.signatures["serving_default"](text=tf.constant(texts))
        enc = model.signatures["encoded"](
            input_ids=tf.constant([[2, 5, 6, 3]]), input_mask=tf.constant([[1, 1, 1, 1]]),
            segment_ids=tf.constant([[0, 0, 0, 0]]))
        arrays = {{k: (np.char.decode(v.numpy().astype(bytes), "utf-8") if v.dtype == tf.string else v.numpy())
                  for k, v in out.items()}}
        arrays["encoded_probs"] = enc["replaced_probs"].numpy()
        np.savez({str(tmp_path / 'out.npz')!r}, **arrays)
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("electra_tf",))))
    """)
    (tmp_path / "texts.json").write_text(json.dumps(EDGE_TEXTS), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []  # electra_tf never imported
    got = dict(np.load(tmp_path / "out.npz"))
    assert set(got) - {"encoded_probs"} == set(want)
    for key, value in want.items():
        if value.dtype.kind in "fc":
            np.testing.assert_allclose(got[key], value, atol=1e-6, err_msg=key)
        elif value.dtype.kind in "OS":
            np.testing.assert_array_equal(got[key], np.char.decode(value.astype(bytes), "utf-8"), err_msg=key)
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=key)
    ids = {"input_ids": np.array([[2, 5, 6, 3]], "int32"), "input_mask": np.ones((1, 4), "int32"),
           "segment_ids": np.zeros((1, 4), "int32")}
    np.testing.assert_allclose(got["encoded_probs"], _numpy(module.serve_encoded(**ids))["replaced_probs"],
                               atol=1e-6)


def test_edge_cases_give_valid_outputs(model_dir):
    module = build_module(model_dir[0], "discriminator")
    texts = EDGE_TEXTS
    out = _numpy(module.serve(tf.constant(texts)))
    n, seq = len(texts), module.max_seq_length
    assert out["replaced_probs"].shape[0] == n and out["replaced_probs"].shape[1] <= seq
    assert np.all(np.isfinite(out["replaced_probs"])) and np.all(np.isfinite(out["sentence_score"]))
    assert np.all((out["replaced_probs"] >= 0) & (out["replaced_probs"] <= 1))
    lengths = out["input_mask"].sum(1)
    assert lengths.tolist()[1] == 2 and lengths.tolist()[4] == 2  # "" and "   ": [CLS] [SEP]
    assert out["sentence_score"][1] == 0.0 and out["text_mask"][1].sum() == 0
    assert lengths[2] == seq and out["truncated"].tolist() == [False, False, True, False, False, False]
    tokens = [t.decode() for t in out["tokens"][3][: lengths[3]]]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "猫" in tokens and "[UNK]" in tokens
    assert [t.decode() for t in out["tokens"][5][:3]] == ["[CLS]", "[UNK]", "[SEP]"]
    # Each row scores as it does alone: batching pads, it does not change results.
    for i, text in enumerate(texts):
        alone = _numpy(module.serve(tf.constant([text])))
        k = lengths[i]
        np.testing.assert_allclose(alone["replaced_probs"][0, :k], out["replaced_probs"][i, :k], atol=1e-5)
        np.testing.assert_allclose(alone["sentence_score"][0], out["sentence_score"][i], atol=1e-5)


def test_outputs_match_the_model_on_the_same_ids(model_dir):
    _, model, _ = model_dir
    module = build_module(model_dir[0], "discriminator")
    out = _numpy(module.serve(tf.constant(["The cat sat on the mat."])))
    enc = _numpy(module.encode(tf.constant(["The cat sat on the mat."])))
    logits = model.discriminator_head(model.discriminator(
        {k: enc[k] for k in ("input_ids", "input_mask", "segment_ids")})).numpy()
    np.testing.assert_allclose(out["replaced_probs"], 1 / (1 + np.exp(-logits)), atol=1e-5)
    tm = out["text_mask"][0].astype(bool)
    np.testing.assert_allclose(out["sentence_score"][0], out["replaced_probs"][0][tm].mean(), atol=1e-6)


def test_no_absolute_paths_in_saved_model(saved, model_dir):
    needles = {os.path.abspath(model_dir[0]), os.path.dirname(os.path.abspath(model_dir[0])),
               os.path.abspath(saved), os.getcwd(), os.path.dirname(os.path.abspath(__file__)),
               os.path.expanduser("~"), sys.prefix}
    needles = {n.encode() for n in needles if len(n) > 4}
    for root, _, files in os.walk(saved):
        for name in files:
            data = open(os.path.join(root, name), "rb").read()
            for needle in needles:
                assert needle not in data, f"{name} contains {needle!r}"


@pytest.mark.large
def test_scoring_api_matches_saved_model(saved, model_dir):
    from electra_tf.scoring import Scorer, score

    texts = ["The cat sat on the mat.", "", "猫は"]
    a = Scorer(model_dir[0]).score(texts)
    b = Scorer(saved).score(texts)
    assert [s.tokens for s in a] == [s.tokens for s in b] == [
        ["the", "cat", "sat", "on", "the", "mat", "."], [], ["猫", "は"]]
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.probabilities, y.probabilities, atol=1e-6)
        assert abs(x.sentence_score - y.sentence_score) < 1e-6
    probs = score(texts, saved)
    assert [len(p) for p in probs] == [7, 0, 2]
    with pytest.raises(TypeError):
        Scorer(saved).score("a single string")


def test_scorer_refuses_what_is_not_a_list_of_strings(saved):
    from electra_tf.scoring import Scorer

    scorer = Scorer(saved)
    with pytest.raises(TypeError, match=r"^score\(\) takes a list of strings, but texts\[0\] is int 1; "
                                        r"convert it to str first$"):
        scorer.score([1, 2])
    with pytest.raises(TypeError, match=r"^score\(\) takes a list of strings, but texts\[1\] is int 3; "):
        scorer.score(["ok", 3])
    with pytest.raises(TypeError, match=r"^score\(\) takes a list of strings as texts, not NoneType$"):
        scorer.score(None)
    with pytest.raises(TypeError, match=r"^score\(\) takes a list of strings as texts; wrap a single text in a "
                                        r"list$"):
        scorer.score("one text")
    assert scorer.score([]) == [] and len(scorer.score(("a tuple works",))) == 1


@pytest.fixture(scope="module")
def classifier_dir(model_dir, tmp_path_factory):
    return h.make_pair_classifier_dir(model_dir[0], tmp_path_factory.mktemp("clf") / "seed_1", seed=1)


@pytest.mark.large
def test_pair_classifier_export(classifier_dir, tmp_path):
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification

    path, model = classifier_dir
    out = str(tmp_path / "sm")
    assert export_main(["--model_dir", path, "--output_dir", out, "--kind", "classifier"]) == 0
    loaded = tf.saved_model.load(out)
    fn = loaded.signatures["serving_default"]
    assert set(fn.structured_input_signature[1]) == {"text_a", "text_b"}
    a = ["The cat sat on the mat.", "", "the dog ran " * 50]
    b = ["A cat sat.", "猫は", "the river " * 40]
    res = _numpy(fn(text_a=tf.constant(a), text_b=tf.constant(b)))
    assert res["probabilities"].shape == (3, 3)
    np.testing.assert_allclose(res["probabilities"].sum(1), 1.0, atol=1e-5)
    assert set(res["label"].astype(str)) <= {"contradiction", "entailment", "neutral"}
    assert res["truncated"].tolist() == [False, False, True]
    ref = encode_classification(FinetuneTokenizer(h.write_vocab(tmp_path / "v.txt")), a, b, 20)
    want = tf.nn.softmax(model(ref, training=False)).numpy()
    np.testing.assert_allclose(res["probabilities"], want, atol=1e-5)
    enc = _numpy(loaded.signatures["encoded"](**{k: tf.constant(v) for k, v in ref.items()}))
    np.testing.assert_allclose(enc["probabilities"], want, atol=1e-5)


def test_cli_errors(tmp_path, model_dir, capsys):
    assert export_main(["--model_dir", str(tmp_path / "nope"), "--output_dir", str(tmp_path / "o")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert export_main(["--model_dir", model_dir[0], "--output_dir", str(tmp_path / "o"), "--kind",
                        "classifier"]) == 2
    assert "classifier.json" in capsys.readouterr().err


@pytest.mark.large
def test_jit_compile_export_writes_warmup_requests_for_every_shape(classifier_dir, tmp_path):
    """`--jit_compile`: TF Serving warm-up requests cover every padded batch x width (max_seq_length 20:
    widths 16 and 20; batch sizes 1 and 3 -> 1 and 4), each encodes to its shape, and the loaded
    SavedModel runs them and still gives the model's probabilities."""
    from tensorflow_serving.apis import prediction_log_pb2

    from electra_tf.export.warmup import WARMUP_FILE, replay_warmup_requests

    path, model = classifier_dir
    out = str(tmp_path / "jit")
    assert export_main(["--model_dir", path, "--output_dir", out, "--kind", "classifier", "--jit_compile",
                        "--warmup_batch_sizes", "1,3"]) == 0
    records = list(tf.data.TFRecordDataset(os.path.join(out, "assets.extra", WARMUP_FILE)).as_numpy_iterator())
    module = build_module(path, "classifier")
    shapes = []
    for raw in records:
        request = prediction_log_pb2.PredictionLog.FromString(raw).predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        a, b = (tf.constant(tf.make_ndarray(request.inputs[k])) for k in ("text_a", "text_b"))
        shapes.append(tuple(module.encode(a, b)["input_ids"].shape))
    assert sorted(shapes) == [(1, 16), (1, 20), (4, 16), (4, 20)]
    loaded = tf.saved_model.load(out)
    assert replay_warmup_requests(out, loaded.signatures) == 4
    a, b = ["The cat sat on the mat.", "the dog ran " * 50], ["A cat sat.", "the river"]
    res = loaded.signatures["serving_default"](text_a=tf.constant(a), text_b=tf.constant(b))
    want = module.serve(tf.constant(a), tf.constant(b))["probabilities"].numpy()
    np.testing.assert_allclose(res["probabilities"].numpy(), want, atol=1e-5)


def test_jit_compile_bad_warmup_batch_sizes(classifier_dir, tmp_path, capsys):
    out = tmp_path / "jit"
    assert export_main(["--model_dir", classifier_dir[0], "--output_dir", str(out), "--kind", "classifier",
                        "--jit_compile", "--warmup_batch_sizes", "0,8"]) == 2
    err = capsys.readouterr().err
    assert "--warmup_batch_sizes 0,8" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing half-written
