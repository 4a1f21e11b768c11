"""An imported public encoder fine-tunes with its own read-out and a recipe fit for it.

all-MiniLM-L6-v2 (a sentence-transformers model, BERT architecture) is imported with
`convert --from hf`: its config says `model_size: imported` and `pooling: mean` (from
`1_Pooling/config.json`), and both `finetune` and `ElectraClassifier.from_pretrained` then use mean
pooling, lr 5e-5, no layer-wise decay and batch 16 (docs/finetune.md, "Fine-tune an imported
encoder"; on 500 IMDB reviews this recipe scores 8 points above the one of ELECTRA's sizes).
"""

import csv
import json
import os

import pytest

from electra_tf.convert import hf
from electra_tf.convert.__main__ import main as convert_main
from finetune.cli_helpers import finetune_main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENCODER = os.path.join(REPO, "..", "shared", "data", "encoders", "all-MiniLM-L6-v2")

needs_encoder = pytest.mark.skipif(not os.path.isfile(os.path.join(ENCODER, "model.safetensors")),
                                   reason="../shared/data/encoders/all-MiniLM-L6-v2 is not beside the checkout")


@pytest.mark.parametrize("modes, expected", [
    ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, "mean"),
    ({"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}, "cls"),
    # Read-outs fine-tuning does not offer, or several at once: none is claimed.
    ({"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}, None),
    ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, None),
    (None, None),
])
def test_native_pooling_reads_sentence_transformers_record(tmp_path, modes, expected):
    if modes is not None:
        (tmp_path / "1_Pooling").mkdir()
        (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(dict(modes, word_embedding_dimension=8)))
    assert hf.native_pooling(str(tmp_path)) == expected


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("imported") / "minilm")
    assert convert_main(["--from", "hf", "--input", ENCODER, "--output_dir", out]) == 0
    return out


@needs_encoder
def test_import_records_size_and_read_out(imported):
    with open(os.path.join(imported, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert (config["model_size"], config["pooling"]) == ("imported", "mean")


@pytest.mark.large
@needs_encoder
def test_finetune_uses_the_imported_recipe(imported, tmp_path, capsys):
    train = tmp_path / "train.csv"
    with open(train, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows([("a wonderful film", "pos"), ("a dreadful film", "neg")] * 10)
    out = tmp_path / "run"
    code, stdout, _ = finetune_main(capsys, ["--init", imported, "--train_file", train, "--validation_split", "0.2",
                                             "--output_dir", out, "--max_seq_length", "16", "--train_steps", "1"])
    assert code == 0
    lines = stdout.splitlines()
    assert "recipe (model_size 'imported'; a flag overrides each):" in lines
    assert "  --learning_rate=5e-05  [imported-encoder default]" in lines
    assert "  --batch_size=16  [imported-encoder default]" in lines
    assert "  --layerwise_lr_decay=1 (none)  [imported-encoder default]" in lines
    assert "  --pooling=mean (of the token vectors)  [the encoder's own: its config.json records pooling]" in lines
    assert "  --epochs=3 (3 steps, 1 an epoch; --train_steps stops at 1)  [default for own_data]" in lines
    with open(out / "settings.json", encoding="utf-8") as f:
        settings = json.load(f)
    assert (settings["learning_rate"], settings["layerwise_lr_decay"], settings["batch_size"], settings["pooling"]) \
        == (5e-5, 1.0, 16, "mean")
    with open(out / "seed_1" / "lr_multipliers.json", encoding="utf-8") as f:
        assert set(json.load(f).values()) == {1.0}  # no layer-wise decay


@needs_encoder
def test_electra_classifier_takes_the_same_recipe(imported):
    from electra_tf import ElectraClassifier

    clf = ElectraClassifier.from_pretrained(imported, labels=["neg", "pos"], sequence_length=16)
    assert clf.pooling == "mean" and clf.recommended_batch_size == 16
    # What fit's optimizer is built from (tests/api/test_electra_classifier.py ties the two).
    assert clf._size_defaults["learning_rate"] == 5e-5 and clf._size_defaults["layerwise_lr_decay"] == 1.0
