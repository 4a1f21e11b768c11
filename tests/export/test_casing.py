"""Casing is recorded once and survives to serving.

Fine-tuning with --nodo_lower_case records the casing its tokenizer used
(settings.json, classifier.json, the classifier's config.json), and the
exported SavedModel tokenizes in-graph with it: "Hello" stays the cased piece.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.large  # fine-tunes and exports a cased classifier: not in the fast tier

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
WORDS = ["Hello", "hello", "world", "World", "good", "bad", "movie", "the", "a", "."]


def _glue_sst2(directory):
    os.makedirs(directory)
    rows = [("Hello world , a good movie .", 1), ("hello world , a bad movie .", 0),
            ("the World movie is good", 1), ("the world movie is bad", 0)] * 4
    for name, part in (("train.tsv", rows), ("dev.tsv", rows[:4])):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in part))
    return directory


def test_cased_finetune_exports_a_cased_classifier(tmp_path):
    from electra_tf.export import build_module, load_classifier
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ","] + WORDS) + "\n")
    out = tmp_path / "ft"
    r = subprocess.run(
        [sys.executable, "-m", "electra_tf.finetune", "--task", "sst2", "--init", "random",
         "--config", os.path.join(ROOT, "configs", "tiny.json"), "--vocab_file", str(vocab),
         "--data_dir", _glue_sst2(str(tmp_path / "sst2")), "--output_dir", str(out),
         "--max_seq_length", "16", "--batch_size", "8", "--train_steps", "2", "--nodo_lower_case"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    seed_dir = out / "seed_1"
    # The flag given is what every record says (the config's own value is uncased).
    assert json.loads((out / "settings.json").read_text())["do_lower_case"] is False
    assert json.loads((seed_dir / "classifier.json").read_text())["do_lower_case"] is False
    assert json.loads((seed_dir / "config.json").read_text())["do_lower_case"] is False

    saved = str(tmp_path / "sm")
    build_module(str(seed_dir), "classifier").save(saved)
    serve = tf.saved_model.load(saved).signatures["serving_default"]
    texts = ["Hello World", "hello world"]
    got = serve(text=tf.constant(texts))["probabilities"].numpy()

    model, _, meta = load_classifier(str(seed_dir))
    cased = FinetuneTokenizer(str(vocab), do_lower_case=False)
    assert cased.tokenize(["Hello"]) != cased.tokenize(["hello"])  # two pieces in this vocabulary
    want = tf.nn.softmax(model(encode_classification(cased, texts, None, meta["max_seq_length"]),
                               training=False)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)  # served with the cased tokenizer
    assert not np.allclose(got[0], got[1], atol=1e-6)  # "Hello World" is not read as "hello world"
