"""Fine-tuning on your own files (`finetune --train_file`), `predict`, and label names end to end.

The data are real: IMDB reviews from ../shared/data/imdb/train.tsv.gz, written as a CSV
with `positive` / `negative` labels. The model is the tiny config at random
initialisation with a vocabulary of the reviews' commonest words; one epoch at
max_seq_length 32 checks the mechanics, not the accuracy (docs/finetune.md
reports a measured run).
"""

from __future__ import annotations

import collections
import csv
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from finetune.conftest import write_vocab

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LABEL_NAMES = {"0": "negative", "1": "positive"}


def imdb_rows(shared_data, n):
    """The first n (review, positive/negative) rows of the shared IMDB training file."""
    out = []
    with gzip.open(shared_data / "imdb" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)
        for text, label, _ in reader:
            out.append((text, LABEL_NAMES[label]))
            if len(out) == n:
                break
    return out


def write_csv(path, header, rows, delimiter=","):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def reviews(tmp_path_factory, shared_data):
    """train.csv (300 reviews), dev.csv (100), new.csv (40, no label column), and a tiny model's files."""
    from electra_tf.config import ElectraConfig

    d = tmp_path_factory.mktemp("reviews")
    rows = imdb_rows(shared_data, 440)
    files = {"train": write_csv(d / "train.csv", ["text", "label"], rows[:300]),
             "dev": write_csv(d / "dev.csv", ["text", "label"], rows[300:400]),
             "new": write_csv(d / "new.csv", ["id", "text"], [(i, t) for i, (t, _) in enumerate(rows[400:])])}
    counts = collections.Counter(w for t, _ in rows[:300] for w in t.lower().split())
    vocab = write_vocab(str(d / "vocab.txt"), [w for w, _ in counts.most_common(600)])
    size = sum(1 for _ in open(vocab, encoding="utf-8"))
    ElectraConfig.from_json(os.path.join(ROOT, "configs", "tiny.json")).replace(vocab_size=size).to_json(
        str(d / "config.json"))
    files.update(dir=d, vocab=vocab, config=str(d / "config.json"), rows=rows)
    return files


def settings(reviews, out, **changes):
    from electra_tf.finetune.settings import Settings

    values = dict(task="own_data", init="random", data_dir=None, output_dir=str(out), config=reviews["config"],
                  vocab_file=reviews["vocab"], train_file=reviews["train"], validation_file=reviews["dev"],
                  epochs=1.0, max_seq_length=32, learning_rate=1e-3, save_every=0, log_every=1000)
    values.update(changes)
    return Settings(**values)


# ------------------------------------------------------------------ reading files
def test_csv_tsv_jsonl_and_gz_read_the_same_rows(tmp_path):
    from electra_tf.finetune.own_data import Columns, read_examples

    rows = [("a film, \"quoted\"", "pos"), ("bad", "neg"), ("ok\nsecond line", "pos")]
    paths = [write_csv(tmp_path / "x.csv", ["text", "label"], rows)]
    tsv_rows = [(t.replace("\n", " "), y) for t, y in rows]  # TSV fields are not quoted: no newlines
    with open(tmp_path / "x.tsv", "w", encoding="utf-8") as f:
        f.write("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in tsv_rows))
    with open(tmp_path / "x.jsonl", "w", encoding="utf-8") as f:
        f.write("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    with open(tmp_path / "x.jsonl", "rb") as src, gzip.open(tmp_path / "x.jsonl.gz", "wb") as dst:
        dst.write(src.read())
    paths += [str(tmp_path / "x.tsv"), str(tmp_path / "x.jsonl"), str(tmp_path / "x.jsonl.gz")]
    for path in paths:
        got = read_examples(path, "--train_file", Columns())
        want = tsv_rows if path.endswith(".tsv") else rows
        assert list(zip(got.texts, got.labels)) == want, path
    assert read_examples(paths[0], "--train_file", Columns()).lines == [2, 3, 4]  # line of each row
    assert read_examples(paths[2], "--train_file", Columns()).lines == [1, 2, 3]


def test_label_set_strings_integers_and_decimals():
    from electra_tf.finetune.own_data import Examples, LabelSet

    strings = LabelSet.from_training_labels(["shipping", "billing", "other", "billing"], "t.csv")
    assert strings == LabelSet(False, ("billing", "other", "shipping"))
    ints = LabelSet.from_training_labels(["10", "2", "1", 2], "t.csv")  # numerically sorted, JSON ints too
    assert ints.names == ("1", "2", "10") and not ints.regression
    floats = LabelSet.from_training_labels(["0.5", "4", "3.25"], "t.csv")
    assert floats.regression and floats.num_outputs == 1
    ex = Examples(["a", "b", "c"], None, ["10", 1.0, "2"], [2, 3, 4], "text", None)
    assert ints.encode(ex, "v.csv", "--validation_file").tolist() == [2, 0, 1]
    ex = Examples(["a", "b"], None, ["1.5", 2], [2, 3], "text", None)
    assert floats.encode(ex, "v.csv", "--validation_file").tolist() == [1.5, 2.0]


def test_stratified_split_is_seeded_and_keeps_the_class_mix():
    from electra_tf.finetune.own_data import stratified_split

    labels = np.asarray([0] * 80 + [1] * 20 + [2] * 3)
    train, dev = stratified_split(labels, 0.1, 0, regression=False)
    assert sorted(np.concatenate([train, dev]).tolist()) == list(range(103))
    assert collections.Counter(labels[dev].tolist()) == {0: 8, 1: 2, 2: 1}  # every class on both sides
    again = stratified_split(labels, 0.1, 0, regression=False)[1]
    other = stratified_split(labels, 0.1, 1, regression=False)[1]
    assert dev.tolist() == again.tolist() and dev.tolist() != other.tolist()


def test_macro_f1_by_hand():
    from electra_tf.finetune.metrics import macro_f1

    # class 0: tp 1 fp 1 fn 1 -> 0.5; class 1: tp 1 fp 0 fn 1 -> 2/3; class 2: tp 1 fp 1 fn 0 -> 2/3
    assert macro_f1([0, 0, 1, 1, 2], [0, 2, 1, 0, 2], 3) == pytest.approx((0.5 + 2 / 3 + 2 / 3) / 3)


# ------------------------------------------------------------------ fine-tuning
def test_cli_trains_predicts_and_exports_with_label_names(reviews, tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "electra_tf.finetune", "--init", "random", "--config",
                        reviews["config"], "--vocab_file", reviews["vocab"], "--train_file", reviews["train"],
                        "--validation_file", reviews["dev"], "--test_file", reviews["new"], "--output_dir", str(out),
                        "--epochs", "1", "--max_seq_length", "32", "--learning_rate", "1e-3"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    # No absl INFO line ("I1125 ... task own_data seed 1") among the outputs.
    assert not [l for l in (r.stdout + r.stderr).splitlines() if l[:1] == "I" and "] " in l], r.stderr
    results = json.load(open(out / "results.json"))
    assert results["task"] == "own_data" and results["metrics"] == ["accuracy", "macro_f1", "mcc"]
    seed = results["seeds"][0]
    assert seed["train_examples"] == 300 and seed["train_steps"] == 10  # ceil(300 / 32)
    dev = list(csv.DictReader(open(out / "seed_1" / "validation_predictions.csv", encoding="utf-8")))
    assert [row["label"] for row in dev] == [y for _, y in reviews["rows"][300:400]]
    correct = sum(row["prediction"] == row["label"] for row in dev)
    assert seed["accuracy"] == pytest.approx(correct / 100)
    meta = json.load(open(out / "seed_1" / "classifier.json"))
    assert meta["labels"] == ["negative", "positive"] and meta["task"] == "own_data"
    assert meta["columns"] == {"text": "text", "text_pair": None, "label": "label"}
    test_rows = list(csv.DictReader(open(out / "seed_1" / "test_predictions.csv", encoding="utf-8")))
    assert len(test_rows) == 40 and {row["prediction"] for row in test_rows} <= {"negative", "positive"}

    # predict on the seed directory, then on its exported SavedModel: the same labels and probabilities.
    from electra_tf.export.__main__ import main as export_main
    from electra_tf.predict.__main__ import main as predict_main

    assert predict_main(["--model_dir", str(out / "seed_1"), "--input", reviews["new"],
                         "--output", str(tmp_path / "p.jsonl"), "--batch_size", "16"]) == 0
    lines = [json.loads(l) for l in open(tmp_path / "p.jsonl", encoding="utf-8")]
    assert [l["id"] for l in lines] == [str(i) for i in range(40)]
    for line, test_row in zip(lines, test_rows):
        assert set(line["probabilities"]) == {"negative", "positive"}
        assert sum(line["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        assert line["predicted_label"] == max(line["probabilities"], key=line["probabilities"].get)
        assert line["predicted_label"] == test_row["prediction"]
    assert export_main(["--model_dir", str(out / "seed_1"), "--output", str(tmp_path / "serving" / "1"),
                        "--kind", "classifier"]) == 0
    assert predict_main(["--model_dir", str(tmp_path / "serving" / "1"), "--input", reviews["new"],
                         "--output", str(tmp_path / "p.csv"), "--noprogress"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "p.csv", encoding="utf-8")))
    assert [row["predicted_label"] for row in rows] == [l["predicted_label"] for l in lines]
    assert [float(row["probability_positive"]) for row in rows] == pytest.approx(
        [l["probabilities"]["positive"] for l in lines], abs=2e-6)

    # The serving signature itself answers with the label string.
    import tensorflow as tf

    fn = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures["serving_default"]
    served = fn(text=tf.constant([reviews["rows"][400][0]]))
    assert served["label"].numpy()[0].decode() == lines[0]["predicted_label"]
    assert int(served["label_id"].numpy()[0]) == ["negative", "positive"].index(lines[0]["predicted_label"])
    assert served["probabilities"].numpy()[0, 1] == pytest.approx(lines[0]["probabilities"]["positive"], abs=2e-6)


def test_validation_split_pairs_and_regression_from_jsonl(reviews, tmp_path):
    from electra_tf.finetune.run import run_task

    rows = reviews["rows"][:120]
    path = tmp_path / "pairs.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, (text, label) in enumerate(rows):
            score = (1.5 if label == "positive" else 0.25) + (i % 3) * 0.5
            f.write(json.dumps({"premise": text, "hypothesis": rows[-1 - i][0], "score": score}) + "\n")
    out = run_task(settings(reviews, tmp_path / "reg", train_file=str(path), validation_file=None,
                            validation_split=0.25, text_column="premise", text_pair_column="hypothesis",
                            label_column="score", max_steps=2))
    assert out["metrics"] == ["pearson", "spearman"]
    assert out["seeds"][0]["train_examples"] == 90  # 30 of 120 held out
    meta = json.load(open(tmp_path / "reg" / "seed_1" / "classifier.json"))
    assert meta["regression"] and meta["pair"] and meta["labels"] == []
    assert meta["columns"] == {"text": "premise", "text_pair": "hypothesis", "label": "score"}
    dev = list(csv.DictReader(open(tmp_path / "reg" / "seed_1" / "validation_predictions.csv")))
    assert len(dev) == 30 and all(float(r["label"]) in (0.25, 0.75, 1.25, 1.5, 2.0, 2.5) for r in dev)


def test_rows_stream_without_reading_the_whole_file(tmp_path):
    """predict's reader yields rows as it reads (a file of any size runs in bounded memory)."""
    from electra_tf.finetune.text_files import TableReader
    from electra_tf.predict.__main__ import _batches

    path = tmp_path / "big.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write("id,text\n")
        for i in range(300_000):
            f.write(f"{i},review number {i} {os.urandom(8).hex()}\n")  # random: gzip cannot shrink it away
    reader = TableReader(str(path), "--input")
    batches = _batches(reader, "text", None, 64)
    first = next(batches)
    read, size = reader.progress()
    assert [row["id"] for _, row in first] == [str(i) for i in range(64)]
    assert read < size / 4, (read, size)  # a few buffers of the file, not all of it
    assert sum(len(b) for b in batches) == 300_000 - 64
    assert reader.progress()[0] == size
    reader.close()
