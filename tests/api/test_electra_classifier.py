"""The keras-hub-shaped Python API: ElectraPreprocessor, load_encoder, ElectraClassifier.

The pre-trained model is the shared tiny model (tests/helpers.py) (random weights, saved in
the model-directory layout inside a run directory's pretrained/); the texts are
the first IMDB reviews of ../shared/data with positive/negative labels.
"""

from __future__ import annotations

import csv
import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import helpers

pytestmark = pytest.mark.large  # fits, saves and reloads classifiers: not in the fast tier

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A pre-training run directory: runs/<name>/pretrained/ holds the model."""
    run = tmp_path_factory.mktemp("api") / "run"
    run.mkdir()
    helpers.make_model_dir(run / "pretrained")
    return run


@pytest.fixture(scope="module")
def reviews(shared_data):
    texts, labels = [], []
    with gzip.open(shared_data / "imdb" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        for text, label, _ in reader:
            texts.append(text)
            labels.append("positive" if label == "1" else "negative")
            if len(texts) == 96:
                break
    return texts, labels


def test_from_pretrained_fit_predict_save_load(run_dir, reviews, tmp_path):
    import keras
    import tensorflow as tf

    from electra_tf import ElectraClassifier, load_encoder
    from electra_tf.models.saving import load_encoder as load_model_dir_encoder
    from electra_tf.predict import Predictor

    texts, labels = reviews
    clf = ElectraClassifier.from_pretrained(str(run_dir), labels=["negative", "positive"], sequence_length=24)
    # The run directory and its pretrained/ model give the pre-trained encoder's weights.
    for path in (run_dir, run_dir / "pretrained"):
        reference, _ = load_model_dir_encoder(str(path))
        for got, want in zip(clf.encoder.get_weights(), reference.get_weights()):
            np.testing.assert_array_equal(got, want)
        encoder, config = load_encoder(str(path))
        assert config.hidden_size == 32 and len(encoder.get_weights()) == len(reference.get_weights())

    # keras-hub's meaning: the backbone is the encoder; the encoder + head is the classifier model.
    assert clf.backbone is clf.encoder is clf.classifier_model.encoder
    clf.compile(optimizer=keras.optimizers.AdamW(1e-3))
    data = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(32)  # string labels
    before = [w.copy() for w in clf.classifier_model.get_weights()]
    history = clf.fit(data, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert any(not np.array_equal(a, b) for a, b in zip(before, clf.classifier_model.get_weights()))
    probs = clf.predict(texts[:10])
    assert probs.shape == (10, 2) and np.allclose(probs.sum(-1), 1.0, atol=1e-5)
    assert clf.predict_labels(texts[:10]) == [["negative", "positive"][i] for i in probs.argmax(-1)]

    saved = clf.save(str(tmp_path / "clf"))
    back = ElectraClassifier.from_pretrained(saved)
    assert back.label_names == ["negative", "positive"] and back.preprocessor.sequence_length == 24
    np.testing.assert_array_equal(back.predict(texts[:10]), probs)
    # The saved directory is a classifier directory: Predictor (the serving graph) agrees.
    served = Predictor(saved).predict(texts[:10])
    assert [p.label for p in served] == clf.predict_labels(texts[:10])
    np.testing.assert_allclose([p.probabilities["positive"] for p in served], probs[:, 1], atol=1e-5)

    config = clf.get_config()
    again = ElectraClassifier.from_config(config)
    assert again.get_config() == config
    again.classifier_model.set_weights(clf.classifier_model.get_weights())
    np.testing.assert_allclose(again.predict(texts[:4]), probs[:4], atol=1e-6)

    # A fine-tuned directory with other labels: its fine-tuned encoder under a new head.
    other = ElectraClassifier.from_pretrained(saved, labels=["a", "b", "c"])
    assert other.predict(texts[:2]).shape == (2, 3)
    for got, want in zip(other.encoder.get_weights(), clf.encoder.get_weights()):
        np.testing.assert_array_equal(got, want)


def test_preprocessor_matches_fine_tuning_encoding(run_dir):
    from electra_tf import ElectraPreprocessor
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification

    pre = ElectraPreprocessor.from_pretrained(str(run_dir), sequence_length=16)
    texts = ["the cat sat on the mat", "a big dog ran quickly to the old house by the river " * 2]
    got = {k: v.numpy() for k, v in pre(texts).items()}
    want = encode_classification(FinetuneTokenizer(str(run_dir / "pretrained" / "vocab.txt")), texts, None, 16)
    width = got["input_ids"].shape[1]
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(got[name], want[name][:, :width])
    assert got["input_ids"][1, -1] == pre.text.sep_id and width == 16  # the long one is cut to 16


def test_from_preset_gives_the_model_from_pretrained_gives(run_dir):
    # keras-hub's name (from_preset) is the same method as from_pretrained: same encoder weights,
    # same labels, same preprocessing.
    from electra_tf import ElectraClassifier, ElectraPreprocessor

    assert ElectraClassifier.from_preset.__func__ is ElectraClassifier.from_pretrained.__func__
    assert ElectraPreprocessor.from_preset.__func__ is ElectraPreprocessor.from_pretrained.__func__
    texts = ["the cat sat on the mat", "a dog"]
    pre, want_pre = ElectraPreprocessor.from_preset(str(run_dir)), ElectraPreprocessor.from_pretrained(str(run_dir))
    for name, value in want_pre(texts).items():
        np.testing.assert_array_equal(pre(texts)[name].numpy(), value.numpy())
    got = ElectraClassifier.from_preset(str(run_dir), labels=["negative", "positive"])
    want = ElectraClassifier.from_pretrained(str(run_dir), labels=["negative", "positive"])
    assert got.label_names == want.label_names and got.electra_config == want.electra_config
    for a, b in zip(got.encoder.get_weights(), want.encoder.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_paths_and_arguments_are_one_line(run_dir, tmp_path):
    from electra_tf import ElectraClassifier
    from electra_tf.api import ApiError

    with pytest.raises(ApiError, match=r"nope does not exist or is not a directory; pass a pre-training run"):
        ElectraClassifier.from_pretrained(str(tmp_path / "nope"), num_classes=2)
    with pytest.raises(ApiError, match=r"num_classes=None: pass num_classes >= 2 or labels="):
        ElectraClassifier.from_pretrained(str(run_dir))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ApiError, match=r"holds no discriminator.weights.h5"):
        ElectraClassifier.from_pretrained(str(empty), num_classes=2)


def test_scorer_on_a_classifier_points_to_predictor(run_dir, tmp_path):
    from electra_tf import ElectraClassifier
    from electra_tf.export import export
    from electra_tf.models.model_folder import ModelDirError
    from electra_tf.scoring import Scorer

    saved = ElectraClassifier.from_pretrained(str(run_dir), num_classes=2, sequence_length=16).save(
        str(tmp_path / "clf"))
    with pytest.raises(ModelDirError, match=r"clf is a fine-tuned classifier; Scorer takes a pre-trained "
                                            r"discriminator; for a classifier's labels and probabilities use "
                                            r"electra_tf.predict.Predictor\(path\).predict\(texts\)"):
        Scorer(saved)
    export(saved, str(tmp_path / "serving" / "1"), kind="classifier")
    with pytest.raises(ModelDirError, match=r"is a classifier SavedModel \(no sentence_score output\); Scorer takes"):
        Scorer(str(tmp_path / "serving" / "1"))


def test_importing_the_package_prints_no_tensorflow_noise(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "ELECTRA_TF_QUIET_TF")}
    code = ("from electra_tf import ElectraClassifier\nimport tensorflow as tf\n"
            "print(ElectraClassifier.__name__, tf.constant(1).numpy())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["ElectraClassifier", "1"]
    assert r.stderr == "", r.stderr[-2000:]


def test_mean_pooling_classifier_serves_as_it_predicts(run_dir, reviews, tmp_path):
    from electra_tf import ElectraClassifier
    from electra_tf.predict import Predictor

    texts, _ = reviews
    clf = ElectraClassifier.from_pretrained(str(run_dir), num_classes=3, sequence_length=20, pooling="mean")
    served = Predictor(clf.save(str(tmp_path / "mean"))).predict_arrays(texts[:6])["probabilities"]
    np.testing.assert_allclose(served, clf.predict(texts[:6]), atol=1e-5)


def test_more_bad_arguments_are_one_line(run_dir, tmp_path):
    from electra_tf import ElectraClassifier
    from electra_tf.api import ApiError
    from electra_tf.export import export
    from electra_tf.predict import PredictError, Predictor

    with pytest.raises(ApiError, match=r"^num_classes=3 but 2 labels; pass one of them$"):
        ElectraClassifier.from_pretrained(str(run_dir), num_classes=3, labels=["a", "b"])
    with pytest.raises(ApiError, match=r"^labels=\['a', 'a'\]: a classifier needs at least two distinct labels$"):
        ElectraClassifier.from_pretrained(str(run_dir), labels=["a", "a"])
    with pytest.raises(ApiError, match=r"^sequence_length=512 exceeds the model's max_position_embeddings 64; lower it$"):
        ElectraClassifier.from_pretrained(str(run_dir), num_classes=2, sequence_length=512)
    regression = ElectraClassifier.from_pretrained(str(run_dir), regression=True, sequence_length=16)
    assert regression.predict(["a good film"]).shape == (1,)
    with pytest.raises(ApiError, match=r"^predict_labels\(\) is for classes; a regression's predict\(\) returns"):
        regression.predict_labels(["a good film"])
    saved = regression.save(str(tmp_path / "reg"))
    export(saved, str(tmp_path / "serving" / "1"), kind="classifier")
    with pytest.raises(ApiError, match=r"serving/1 is an exported SavedModel, which serves but cannot be trained "
                                       r"further; load it with electra_tf.predict.Predictor"):
        ElectraClassifier.from_pretrained(str(tmp_path / "serving" / "1"))
    scores = Predictor(str(tmp_path / "serving" / "1")).predict(["a good film", "bad"])
    assert [p.label for p in scores] == [None, None] and all(isinstance(p.score, float) for p in scores)
    with pytest.raises(PredictError, match=r"^this model takes single texts, not pairs; leave out pairs$"):
        Predictor(saved).predict(["a"], pairs=["b"])
    # The same check as Scorer.score (electra_tf.preprocessing.text_list).
    with pytest.raises(TypeError, match=r"^predict\(\) takes a list of strings, but texts\[1\] is int 3; "
                                        r"convert it to str first$"):
        Predictor(saved).predict(["ok", 3])
    with pytest.raises(TypeError, match=r"^predict\(\) takes a list of strings as texts, not NoneType$"):
        Predictor(saved).predict(None)
    export(str(run_dir), str(tmp_path / "disc" / "1"), kind="discriminator")
    with pytest.raises(PredictError, match=r"disc/1 is a discriminator SavedModel \(per-token scores\); score it with "
                                           r"electra_tf.scoring.Scorer, or export a fine-tuned seed_<n>/ with --kind "
                                           r"classifier"):
        Predictor(str(tmp_path / "disc" / "1"))


def test_pair_classifier_predicts_pairs_as_served(run_dir, tmp_path):
    from electra_tf import ElectraClassifier
    from electra_tf.predict import PredictError, Predictor

    clf = ElectraClassifier.from_pretrained(str(run_dir), labels=["no", "yes"], sequence_length=16, pair=True)
    first, second = ["the cat sat on the mat", "a dog ran"], ["the cat is on the mat", "nothing ran"]
    probs = clf.predict((first, second))
    predictor = Predictor(clf.save(str(tmp_path / "pair")))
    assert predictor.pair
    np.testing.assert_allclose([p.probabilities["yes"] for p in predictor.predict(first, second)], probs[:, 1],
                               atol=1e-5)
    with pytest.raises(PredictError, match=r"^this model takes text pairs: pass pairs=\[\.\.\.\] \(one second text "
                                           r"per text\)$"):
        predictor.predict(first)
    with pytest.raises(PredictError, match=r"^2 texts but 1 pairs; pass one second text per text$"):
        predictor.predict(first, second[:1])
    with pytest.raises(TypeError, match=r"^predict\(\) takes a list of strings as pairs; wrap a single text "
                                        r"in a list$"):
        predictor.predict(first, "a dog ran")


def test_fit_uses_finetunes_optimizer_spec_and_stops_on_nan(run_dir, reviews):
    """`fit` with the default optimizer builds what `finetune` builds for the same steps: the
    ElectraAdamW with fine-tuning's layer-wise multipliers, 10% warm-up and linear decay to 0,
    weight decay 0.01 and clipping 1.0; a NaN loss stops it with one line."""
    import tensorflow as tf

    from electra_tf import ElectraClassifier
    from electra_tf.api.classifier import ApiError
    from electra_tf.finetune.settings import Settings
    from electra_tf.training.finetune_optimizer import make_optimizer
    from electra_tf.training.optimization import ElectraAdamW

    texts, labels = reviews
    clf = ElectraClassifier.from_pretrained(str(run_dir), labels=["negative", "positive"], sequence_length=24)
    data = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(16)  # 6 batches
    clf.fit(data, epochs=2, verbose=0)
    opt = clf.optimizer
    assert isinstance(opt, ElectraAdamW) and int(opt.iterations.numpy()) == 12
    s = Settings(task="own_data", init="random", data_dir=None, output_dir="")
    lr, decay = clf._size_defaults["learning_rate"], clf._size_defaults["layerwise_lr_decay"]
    want, mult = make_optimizer(clf.classifier_model, clf.encoder, s, lr, decay, 12)
    assert opt.lr_multipliers == dict(mult) and len(mult) == len(clf.trainable_variables)
    assert (opt.clip_norm, opt.weight_decay) == (want.clip_norm, want.weight_decay) == (1.0, 0.01)
    schedule, want_schedule = opt._learning_rate, want._learning_rate  # the schedules (Keras keeps them there)
    assert schedule.get_config() == want_schedule.get_config()
    assert (schedule.train_steps, schedule.warmup_steps, schedule.peak_learning_rate) == (12, 1, lr)
    assert float(schedule(12)) == 0.0  # decayed to 0 at the last step

    nan_texts = tf.data.Dataset.from_tensor_slices((texts[:32], [float("nan")] * 32)).batch(16)
    reg = ElectraClassifier.from_pretrained(str(run_dir), regression=True, sequence_length=24)
    with pytest.raises(ApiError, match=r"^the training loss became nan at step 1; training stopped"):
        reg.fit(nan_texts, epochs=1, verbose=0)


def test_a_litert_export_is_refused_with_the_way_to_run_it(tmp_path):
    """A LiteRT export (a .tflite file, or the folder `export --format tflite` writes) serves but does not train:
    from_pretrained names the Predictor, which runs it, in one line."""
    from electra_tf import ElectraClassifier
    from electra_tf.api import ApiError

    folder = tmp_path / "litert"
    folder.mkdir()
    (folder / "model.json").write_text("{}", encoding="utf-8")
    (folder / "model_ids.tflite").write_bytes(b"TFL3")
    for path in (folder, folder / "model_ids.tflite"):
        with pytest.raises(ApiError, match=rf"^{re.escape(str(path))} is a LiteRT export, which serves but cannot be "
                                           r"trained further; run it with electra_tf.predict.Predictor \(or python -m "
                                           r"electra_tf.predict\), or pass the model directory it was exported from$"):
            ElectraClassifier.from_pretrained(str(path))
