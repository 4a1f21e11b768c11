"""scripts/adapt_demo.sh: the user's path from a public checkpoint, their text and their labelled
CSV to an adapted encoder, a fine-tuned classifier, labelled rows and a SavedModel that returns
label names. On the real public encoder in ../shared/data/encoders/, made small (a few steps, a
few dozen rows, 32 tokens) so that it runs in a couple of minutes."""

import csv
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENCODER = REPO.parent / "shared" / "data" / "encoders" / "all-MiniLM-L6-v2"

pytestmark = [pytest.mark.large,  # runs scripts/adapt_demo.sh end to end: not in the fast tier
              pytest.mark.skipif(not (ENCODER / "model.safetensors").is_file(),
                                 reason="../shared/data/encoders/all-MiniLM-L6-v2 is not beside the checkout")]


def _reviews(path, start, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[start:start + n]
    return [(r["sentence"], {"0": "negative", "1": "positive"}[r["label"]]) for r in rows]


def _write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["review", "sentiment"])
        writer.writerows(rows)
    return path


def test_adapt_demo_from_public_encoder_to_serving(tmp_path, shared_data):
    corpus = tmp_path / "my_text.txt"
    with gzip.open(shared_data / "corpus" / "imdb.unsup.txt.gz", "rt", encoding="utf-8") as f:
        corpus.write_text("".join(line for _, line in zip(range(300), f)), encoding="utf-8")
    train = _write_csv(tmp_path / "train.csv", _reviews(shared_data / "imdb" / "train.tsv.gz", 0, 40))
    dev = _write_csv(tmp_path / "dev.csv", _reviews(shared_data / "imdb" / "dev.tsv.gz", 0, 24))
    new = _write_csv(tmp_path / "new.csv", _reviews(shared_data / "imdb" / "dev.tsv.gz", 100, 7))
    out = tmp_path / "demo"
    env = dict(os.environ, STEPS="3", SEQ="32", LABELS="40", SEEDS="1", EPOCHS="1", VALIDATION_FILE=str(dev),
               PREDICT_FILE=str(new), TEXT_COLUMN="review", LABEL_COLUMN="sentiment",
               PRETRAIN_FLAGS="--batch_size 8")
    cmd = ["bash", str(REPO / "scripts" / "adapt_demo.sh"), str(ENCODER), str(corpus), str(train), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    run = json.loads((out / "adapted" / "run.json").read_text())
    assert run["init_from_parts"]["discriminator"] == "loaded"
    assert run["init_from_parts"]["generator"].startswith("fresh")
    rows = (out / "results.md").read_text(encoding="utf-8").splitlines()
    assert rows[2].startswith("| adapted |") and rows[3].startswith("| as is |")
    adapted, as_is = (float(r.split("|")[2]) for r in rows[2:4])
    assert rows[4].split("|")[2].strip() == f"{adapted - as_is:+.2f}"

    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 7
    assert [p["review"] for p in predictions] == [r[0] for r in _reviews(shared_data / "imdb" / "dev.tsv.gz", 100, 7)]
    assert all(p["predicted_label"] in ("negative", "positive") for p in predictions)

    # The exported classifier, loaded as TF Serving would (a fresh process, no electra_tf), names labels.
    probe = ("import tensorflow as tf, tensorflow_text, sys\n"
             "m = tf.saved_model.load(sys.argv[1])\n"
             "r = m.signatures['serving_default'](text=tf.constant(['A wonderful, moving film.', 'Dull and far too long.']))\n"
             "import json; print(json.dumps({'keys': sorted(r), 'labels': [x.decode() for x in r['label'].numpy()]}))\n")
    served = subprocess.run([sys.executable, "-c", probe, str(out / "serving" / "1")], capture_output=True, text=True,
                            timeout=300)
    assert served.returncode == 0, served.stderr[-2000:]
    answer = json.loads(served.stdout.strip().splitlines()[-1])
    assert "label" in answer["keys"] and "probabilities" in answer["keys"]
    assert len(answer["labels"]) == 2 and set(answer["labels"]) <= {"negative", "positive"}

    # Re-running finds every step done.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1/5" not in again.stdout and "2/5" not in again.stdout and "5/5" in again.stdout
