"""Loading a model never runs code from the file; exported SavedModels carry no path of the
machine that exported them (the discriminator case: tests/export/test_export_serving.py::
test_no_absolute_paths_in_saved_model; here the classifier)."""

import ast
import json
import os
import sys

import pytest

import helpers
from reliability_helpers import REPO_ROOT


@pytest.fixture
def code_carrying_model(tmp_path):
    """A .keras file whose Lambda layer would create `marker` if its code ever ran."""
    import keras

    marker = tmp_path / "code_ran"
    path = str(tmp_path / "evil.keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Lambda(
        lambda x, m=str(marker): (open(m, "w").close(), x)[1])])
    model.save(path)
    if marker.exists():  # building the model above called the function once
        marker.unlink()
    return path, marker, keras.saving.serialize_keras_object(model.layers[0])


def test_keras_file_with_a_lambda_layer_is_refused_by_the_finetune_loader(code_carrying_model, tmp_path):
    from electra_tf.models.model_folder import ModelDirError
    from electra_tf.models.saving import load_encoder_weights
    from electra_tf.models import build_encoder

    path, marker, _ = code_carrying_model
    encoder = build_encoder(helpers.tiny_config(max_seq_length=24))
    with pytest.raises(ModelDirError) as info:
        load_encoder_weights(encoder, path)
    assert str(info.value) == (f"--init {path} contains Python code (a Lambda layer), which is never executed; "
                               f"pass a .weights.h5 file or a model directory written by electra_tf")
    assert not marker.exists()


def test_keras_hub_preset_naming_a_lambda_layer_is_refused_by_convert(code_carrying_model, tmp_path, capsys):
    import keras

    from electra_tf.convert.__main__ import main as convert_main

    _, marker, config = code_carrying_model
    preset = tmp_path / "preset"
    preset.mkdir()
    for registered in ("keras>Lambda", "keras_hub>ElectraBackbone"):
        (preset / "config.json").write_text(json.dumps(dict(config, registered_name=registered)))
        (preset / "metadata.json").write_text(json.dumps({"keras_version": keras.__version__}))
        assert convert_main(["--from", "keras_hub", "--input", str(preset), "--output_dir",
                             str(tmp_path / "out")]) == 2
        err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
        assert len(err) == 1 and err[0].startswith(f"error: {preset}: keras_hub ElectraBackbone.from_preset failed")
        assert err[0].endswith("; pass a keras-hub ElectraBackbone preset directory")
    assert not marker.exists() and not (tmp_path / "out").exists()


def _keyword_is_true(call, name):
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def test_no_loader_can_unpickle_or_switch_safe_mode_off():
    """Every load path in the package is data-only: Keras .weights.h5 / .keras (safe_mode),
    JSON, safetensors read with numpy, TF checkpoints and SavedModels. Checked on the code
    itself (the AST): no pickle-family import, no eval/exec, every `load_model` call passes
    safe_mode=True, every `torch.load` weights_only=True."""
    banned_modules = {"pickle", "cPickle", "dill", "joblib", "marshal", "shelve", "cloudpickle"}
    found = []
    for root, _, files in os.walk(REPO_ROOT / "electra_tf"):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, name)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            for node in ast.walk(tree):
                where = f"{os.path.relpath(path, REPO_ROOT)}:{getattr(node, 'lineno', '?')}"
                if isinstance(node, ast.Import):
                    found += [where for a in node.names if a.name.split(".")[0] in banned_modules]
                elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in banned_modules:
                    found.append(where)
                elif isinstance(node, ast.Call):
                    func = node.func
                    fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    if fname in ("eval", "exec", "enable_unsafe_deserialization"):
                        found.append(f"{where} {fname}()")
                    if fname == "load_model" and not _keyword_is_true(node, "safe_mode"):
                        found.append(f"{where} load_model() without safe_mode=True")
                    if (fname == "load" and isinstance(func, ast.Attribute)
                            and getattr(func.value, "id", "") == "torch"
                            and not _keyword_is_true(node, "weights_only")):
                        found.append(f"{where} torch.load() without weights_only=True")
                    if fname == "load" and any(k.arg == "allow_pickle" for k in node.keywords):
                        found.append(f"{where} allow_pickle")
    assert found == []


def test_exported_classifier_holds_no_path_of_the_exporting_machine(tmp_path):
    import numpy as np

    from electra_tf.models.model_folder import save_classifier
    from electra_tf.export.__main__ import main as export_main
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models.saving import load_discriminator

    model_dir, _, _ = helpers.make_model_dir(tmp_path / "model")
    encoder, _, config = load_discriminator(model_dir)
    model = ClassifierModel(encoder, 2, name="electra_sst2")
    build_and_call(model, 20)
    for v in model.head.weights:
        v.assign(np.full(v.shape, 0.1, "float32"))
    clf = tmp_path / "clf"
    save_classifier(str(clf), model, config, os.path.join(model_dir, "vocab.txt"), ["negative", "positive"],
                    "sst2", pair=False, max_seq_length=20)
    saved = tmp_path / "serving" / "sst2" / "1"
    assert export_main(["--model_dir", str(clf), "--output_dir", str(saved), "--kind", "classifier"]) == 0
    needles = {str(tmp_path), str(clf), str(saved), os.getcwd(), str(REPO_ROOT), os.path.expanduser("~"),
               sys.prefix, model_dir}
    needles = {n.encode() for n in needles if len(n) > 4}
    files = [os.path.join(root, name) for root, _, names in os.walk(saved) for name in names]
    assert any(f.endswith("saved_model.pb") for f in files)
    for path in files:
        data = open(path, "rb").read()
        for needle in needles:
            assert needle not in data, f"{path} contains {needle!r}"
