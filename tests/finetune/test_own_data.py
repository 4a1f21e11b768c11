"""Fine-tuning on your own files (`finetune --train_file`), `predict`, and label names end to end.

The data are real: IMDB reviews from ../shared/data/imdb/train.tsv.gz, written as a CSV
with `positive` / `negative` labels (or their 1-10 `rating`). The model is the tiny config at
random initialisation with a vocabulary of the reviews' commonest words; one epoch at
max_seq_length 32 checks the mechanics and what the run prints, not the accuracy
(test_own_data_docs.py checks that the documented examples beat the majority class).
Every number the run prints is recomputed here from the files it read and wrote.
"""

from __future__ import annotations

import collections
import csv
import gzip
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from finetune.cli_helpers import finetune_main, predict_main
from finetune.conftest import write_vocab

pytestmark = pytest.mark.large  # fine-tunes, predicts and exports through the CLI: not in the fast tier

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
    from electra_tf.data.table_columns import Columns
    from electra_tf.finetune.readers.own_data import read_examples

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
    from electra_tf.finetune.readers.own_data import Examples, LabelSet
    from electra_tf.data.table_files import TextFileError

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
    # --label_type overrides the rule, and the reason says so.
    scores = LabelSet.from_training_labels(["10", "2", "1"], "t.csv", label_type="regression")
    assert scores.regression and scores.reason == "chosen by --label_type regression"
    classes = LabelSet.from_training_labels(["0.5", "1.0", "2.50", 2.5, "1"], "t.csv", label_type="classification")
    assert classes.names == ("0.5", "1", "2.5") and not classes.regression  # 1.0 and 1, 2.50 and 2.5: one class
    ex = Examples(["a", "b"], None, ["2.5", 1], [2, 3], "text", None)
    assert classes.encode(ex, "v.csv", "--validation_file").tolist() == [2, 1]
    with pytest.raises(TextFileError, match=r"t.csv:7: label 'x' is not a number, but --label_type regression"):
        LabelSet.from_training_labels(["1", "x"], "t.csv", label_type="regression", lines=[6, 7])


def test_stratified_split_is_seeded_and_keeps_the_class_mix():
    from electra_tf.finetune.readers.own_data import stratified_split

    labels = np.asarray([0] * 80 + [1] * 20 + [2] * 3)
    train, dev = stratified_split(labels, 0.1, 0, regression=False)
    assert sorted(np.concatenate([train, dev]).tolist()) == list(range(103))
    assert collections.Counter(labels[dev].tolist()) == {0: 8, 1: 2, 2: 1}  # every class on both sides
    again = stratified_split(labels, 0.1, 0, regression=False)[1]
    other = stratified_split(labels, 0.1, 1, regression=False)[1]
    assert dev.tolist() == again.tolist() and dev.tolist() != other.tolist()


def test_macro_f1_by_hand():
    from electra_tf.finetune.tasks.task_metrics import macro_f1

    # class 0: tp 1 fp 1 fn 1 -> 0.5; class 1: tp 1 fp 0 fn 1 -> 2/3; class 2: tp 1 fp 1 fn 0 -> 2/3
    assert macro_f1([0, 0, 1, 1, 2], [0, 2, 1, 0, 2], 3) == pytest.approx((0.5 + 2 / 3 + 2 / 3) / 3)


# ------------------------------------------------------------------ fine-tuning
def cut_rows(vocab, texts, max_seq_length):
    """How many texts have more word pieces than fit in max_seq_length (with [CLS] and [SEP])."""
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer

    pieces = FinetuneTokenizer(vocab, do_lower_case=True).tokenize(list(texts))
    return sum(len(p) > max_seq_length - 2 for p in pieces)


def table_rows(stdout):
    """{(split, seed): {header: cell}} of the results table at the end of a run's output."""
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("split "))
    head = re.split(r"\s{2,}", lines[start].strip())
    rows = {}
    for line in lines[start + 2:]:
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0], cells[1]] = dict(zip(head, cells))
    return lines[start - 1], head, rows


def shorten_every_other(rows, words=6):
    """Every other text cut to its first few words: a file with short and long texts."""
    return [(" ".join(t.split()[:words]) if i % 2 else t, y) for i, (t, y) in enumerate(rows)]


def test_cli_trains_predicts_and_exports_with_label_names(reviews, tmp_path):
    out = tmp_path / "run"
    dev_rows = shorten_every_other(reviews["rows"][300:400])
    dev = write_csv(tmp_path / "dev_mixed.csv", ["text", "label"], dev_rows)
    r = subprocess.run([sys.executable, "-m", "electra_tf.finetune", "--init", "random", "--config",
                        reviews["config"], "--vocab_file", reviews["vocab"], "--train_file", reviews["train"],
                        "--validation_file", dev, "--test_file", reviews["new"], "--output_dir", str(out),
                        "--epochs", "1", "--max_seq_length", "32", "--learning_rate", "1e-3"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    # No absl INFO line ("I1125 ... task own_data seed 1") among the outputs.
    assert not [l for l in (r.stdout + r.stderr).splitlines() if l[:1] == "I" and "] " in l], r.stderr
    results = json.load(open(out / "results.json"))
    assert results["task"] == "own_data"
    assert results["metrics"] == ["accuracy", "macro_f1", "mcc", "majority_accuracy"]
    seed = results["seeds"][0]
    assert seed["train_examples"] == 300 and seed["train_steps"] == 10  # ceil(300 / 32)
    predicted = list(csv.DictReader(open(out / "seed_1" / "validation_predictions.csv", encoding="utf-8")))
    assert [row["label"] for row in predicted] == [y for _, y in dev_rows]
    correct = sum(row["prediction"] == row["label"] for row in predicted)
    assert seed["accuracy"] == pytest.approx(correct / 100)
    train_labels = [y for _, y in reviews["rows"][:300]]
    # The majority baseline: the best constant answer for the validation rows.
    commonest, most = collections.Counter(y for _, y in dev_rows).most_common(1)[0]
    majority = most / 100
    assert seed["majority_accuracy"] == pytest.approx(majority)

    # What the run says it read, decided and cut, before training.
    lines = r.stdout.splitlines()
    assert lines[0] == (f"read: 300 training rows from {reviews['train']}, 100 validation rows from {dev}, "
                        f"40 test rows from {reviews['new']} (no labels: predicted only)")
    counts = collections.Counter(train_labels)
    assert lines[1] == (f"labels: 2 classes (training rows: negative {counts['negative']}, positive "
                        f"{counts['positive']}): the labels are names, not numbers (e.g. "
                        f"{train_labels[0]!r})")
    cut = {"training": (cut_rows(reviews["vocab"], [t for t, _ in reviews["rows"][:300]], 32), 300),
           "validation": (cut_rows(reviews["vocab"], [t for t, _ in dev_rows], 32), 100),
           "test": (cut_rows(reviews["vocab"], [t for t, _ in reviews["rows"][400:]], 32), 40)}
    assert 30 < cut["validation"][0] < 70  # the short texts fit, the reviews do not
    shares = ", ".join(f"{100 * n / total:.1f}% of {split} rows ({n} of {total})" for split, (n, total) in cut.items())
    assert lines[2] == (f"truncated: {shares} were longer than --max_seq_length 32 word pieces and were cut; a "
                        f"larger --max_seq_length (up to 128 for this model) keeps more of each text")
    assert results["data"]["truncated_rows"] == {"train": cut["training"][0], "validation": cut["validation"][0],
                                                 "test": cut["test"][0]}
    # Where the model is: the last line before the table; every path printed exists when the run ends.
    title, head, rows = table_rows(r.stdout)
    before_table = lines[lines.index(title) - 1]
    assert before_table == (f"seed 1: model saved in {out / 'seed_1'} (python -m electra_tf.predict and export "
                            f"take this directory)")
    printed_paths = re.findall(r"(?:^|\s)(/\S+?)[,;)]?(?=\s|$)", r.stdout, re.M)
    assert printed_paths and all(os.path.exists(p) for p in printed_paths), printed_paths
    assert not (out / "seed_1" / "checkpoints").exists()
    # The table: one row per split and seed; percent where labelled, MCC as a correlation, the baseline beside.
    assert title == (f"own_data results (validation 100 rows): accuracy and macro-F1 in percent, MCC from -1 to 1; "
                     f"majority = always answering the split's commonest label (validation: {commonest!r})")
    assert head == ["split", "seed", "accuracy %", "macro-F1 %", "MCC", "majority accuracy %"]
    assert set(rows) == {("validation", "1"), ("validation", "median")}  # the test file has no labels
    row = rows["validation", "1"]
    assert row["accuracy %"] == f"{100 * correct / 100:.2f}" and row["MCC"] == f"{seed['mcc']:.3f}"
    assert row["majority accuracy %"] == f"{100 * majority:.2f}"
    assert -1 <= seed["mcc"] <= 1

    meta = json.load(open(out / "seed_1" / "classifier.json"))
    assert meta["labels"] == ["negative", "positive"] and meta["task"] == "own_data"
    assert meta["columns"] == {"text": "text", "text_pair": None, "label": "label"}
    test_rows = list(csv.DictReader(open(out / "seed_1" / "test_predictions.csv", encoding="utf-8")))
    assert len(test_rows) == 40 and {row["prediction"] for row in test_rows} <= {"negative", "positive"}

    # predict on the seed directory, then on its exported SavedModel: the same labels and probabilities,
    # and which rows were cut.
    from electra_tf.export.__main__ import main as export_main
    from electra_tf.predict.__main__ import main as predict_main

    assert predict_main(["--model_dir", str(out / "seed_1"), "--input_file", reviews["new"],
                         "--output_file", str(tmp_path / "p.jsonl"), "--batch_size", "16"]) == 0
    lines = [json.loads(l) for l in open(tmp_path / "p.jsonl", encoding="utf-8")]
    assert [l["id"] for l in lines] == [str(i) for i in range(40)]
    for line, test_row in zip(lines, test_rows):
        assert set(line["probabilities"]) == {"negative", "positive"}
        assert sum(line["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        assert line["predicted_label"] == max(line["probabilities"], key=line["probabilities"].get)
        assert line["predicted_label"] == test_row["prediction"]
    assert sum(line["truncated"] for line in lines) == cut["test"][0]
    assert export_main(["--model_dir", str(out / "seed_1"), "--output_dir", str(tmp_path / "serving" / "1"),
                        "--kind", "classifier"]) == 0
    assert predict_main(["--model_dir", str(tmp_path / "serving" / "1"), "--input_file", reviews["new"],
                         "--output_file", str(tmp_path / "p.csv"), "--noprogress"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "p.csv", encoding="utf-8")))
    assert [row["predicted_label"] for row in rows] == [l["predicted_label"] for l in lines]
    assert [float(row["probability_positive"]) for row in rows] == pytest.approx(
        [l["probabilities"]["positive"] for l in lines], abs=2e-6)
    assert [row["truncated"] for row in rows] == ["true" if l["truncated"] else "false" for l in lines]

    # The serving signature itself answers with the label string.
    import tensorflow as tf

    fn = tf.saved_model.load(str(tmp_path / "serving" / "1")).signatures["serving_default"]
    served = fn(text=tf.constant([reviews["rows"][400][0]]))
    assert served["label"].numpy()[0].decode() == lines[0]["predicted_label"]
    assert int(served["label_id"].numpy()[0]) == ["negative", "positive"].index(lines[0]["predicted_label"])
    assert served["probabilities"].numpy()[0, 1] == pytest.approx(lines[0]["probabilities"]["positive"], abs=2e-6)


def test_predict_says_which_rows_were_cut(reviews, tmp_path, capsys):
    """A file of short and long texts: each output row's `truncated`, their count and share on stderr."""
    from electra_tf import ElectraClassifier
    from electra_tf.config import ElectraConfig

    clf = ElectraClassifier(ElectraConfig.from_json(reviews["config"]), reviews["vocab"],
                            labels=["negative", "positive"], sequence_length=24)
    model = clf.save(str(tmp_path / "seed_1"))
    mixed = shorten_every_other(reviews["rows"][400:440], words=4)
    new = write_csv(tmp_path / "mixed.csv", ["text", "label"], mixed)
    code, out, err = predict_main(capsys, ["--model_dir", model, "--input_file", new, "--output_file", tmp_path / "p.jsonl",
                                           "--noprogress"])
    assert code == 0, err
    want = [cut_rows(reviews["vocab"], [t], 24) == 1 for t, _ in mixed]
    got = [json.loads(l)["truncated"] for l in open(tmp_path / "p.jsonl", encoding="utf-8")]
    assert got == want and 0 < sum(want) < 40
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["rows"] == 40 and summary["truncated"] == sum(want) and summary["max_seq_length"] == 24
    n = sum(want)
    assert (f"truncated: {100 * n / 40:.1f}% of the rows ({n} of 40) are longer than the model's max_seq_length 24 "
            f"word pieces and were cut (their \"truncated\" field is true)") in err.splitlines()


def regression_rows(reviews, n):
    """(review, score) rows: negative reviews about 1-2, positive 4.5-5.5, written with one decimal."""
    return [(text, f"{(1.0 if label == 'negative' else 4.5) + (i % 3) * 0.5:.1f}")
            for i, (text, label) in enumerate(reviews["rows"][:n])]


def test_regression_reports_mse_beside_the_mean_and_keeps_labels_as_written(reviews, tmp_path, capsys):
    rows = regression_rows(reviews, 120)
    train = write_csv(tmp_path / "train.csv", ["text", "score"], rows[:90])
    dev = write_csv(tmp_path / "dev.csv", ["text", "score"], rows[90:])
    out = tmp_path / "reg"
    code, stdout, err = finetune_main(capsys, [
        "--init", "random", "--config", reviews["config"], "--vocab_file", reviews["vocab"], "--train_file", train,
        "--validation_file", dev, "--test_file", train, "--label_column", "score", "--output_dir", out,
        "--max_seq_length", "32", "--train_steps", "3", "--save_every", "0"])
    assert code == 0, err
    results = json.load(open(out / "results.json"))
    metrics = ["mse", "rmse", "pearson", "spearman", "mean_mse", "mean_rmse"]
    assert results["metrics"] == metrics + ["test_" + m for m in metrics]  # the labelled test file too
    train_y = np.asarray([float(y) for _, y in rows[:90]])
    lines = stdout.splitlines()
    assert lines[1] == (f"labels: regression, one number per text (training labels 1 to 5.5, mean "
                        f"{train_y.mean():.4g}): every label is a number and some are written with a decimal point "
                        f"or exponent (e.g. '1.0'); --label_type classification makes each value a class")
    # validation_predictions.csv: the labels exactly as the file writes them ("1.0" stays "1.0").
    written = list(csv.DictReader(open(out / "seed_1" / "validation_predictions.csv", encoding="utf-8")))
    assert [row["label"] for row in written] == [y for _, y in rows[90:]]
    assert "1.0" in {row["label"] for row in written}
    assert all("." in row["prediction"] for row in written)
    gold = np.asarray([float(row["label"]) for row in written])
    pred = np.asarray([float(row["prediction"]) for row in written])
    seed = results["seeds"][0]
    assert seed["mse"] == pytest.approx(np.mean((gold - pred) ** 2), rel=1e-4)
    assert seed["rmse"] == pytest.approx(math.sqrt(seed["mse"]))
    assert seed["mean_mse"] == pytest.approx(np.var(gold), rel=1e-6)  # always answering the mean
    assert seed["mean_rmse"] == pytest.approx(math.sqrt(seed["mean_mse"]))
    assert -1 <= seed["pearson"] <= 1 and -1 <= seed["spearman"] <= 1
    # The table: MSE/RMSE in the labels' units, correlations as plain numbers, the mean baseline beside.
    assert seed["test_mean_mse"] == pytest.approx(np.var(train_y), rel=1e-6)
    title, head, table = table_rows(stdout)
    assert title == (f"own_data results (validation 30 rows, test 90 rows): MSE and RMSE in the labels' units (MSE "
                     f"squared), Pearson and Spearman from -1 to 1; mean = always answering the split's mean label "
                     f"(validation: {gold.mean():.4g}, test: {train_y.mean():.4g}), whose MSE is the labels' "
                     f"variance")
    assert set(table) == {(split, seed) for split in ("validation", "test") for seed in ("1", "median")}
    assert float(table["test", "1"]["mean MSE"]) == pytest.approx(np.var(train_y), rel=1e-3)
    assert head == ["split", "seed", "MSE", "RMSE", "Pearson", "Spearman", "mean MSE", "mean RMSE"]
    row = table["validation", "1"]
    assert float(row["MSE"]) == pytest.approx(seed["mse"], rel=1e-3)
    assert row["Pearson"] == f"{seed['pearson']:.3f}" and row["Spearman"] == f"{seed['spearman']:.3f}"
    assert float(row["mean MSE"]) == pytest.approx(np.var(gold), rel=1e-3)


def test_validation_split_pairs_and_regression_from_jsonl(reviews, tmp_path, capsys):
    rows = reviews["rows"][:120]
    path = tmp_path / "pairs.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, (text, label) in enumerate(rows):
            score = (1.5 if label == "positive" else 0.25) + (i % 3) * 0.5
            f.write(json.dumps({"premise": text, "hypothesis": rows[-1 - i][0], "score": score}) + "\n")
    code, stdout, err = finetune_main(capsys, [
        "--init", "random", "--config", reviews["config"], "--vocab_file", reviews["vocab"], "--train_file", path,
        "--validation_split", "0.25", "--text_column", "premise", "--text_pair_column", "hypothesis",
        "--label_column", "score", "--output_dir", tmp_path / "reg", "--max_seq_length", "32", "--train_steps", "2"])
    assert code == 0, err
    out = json.load(open(tmp_path / "reg" / "results.json"))
    assert out["metrics"][:4] == ["mse", "rmse", "pearson", "spearman"]
    assert out["seeds"][0]["train_examples"] == 90  # 30 of 120 held out
    assert stdout.splitlines()[0] == (f"read: 120 rows from {path}: 90 for training, 30 held out for validation "
                                      f"(--validation_split 0.25)")
    meta = json.load(open(tmp_path / "reg" / "seed_1" / "classifier.json"))
    assert meta["regression"] and meta["pair"] and meta["labels"] == []
    assert meta["columns"] == {"text": "premise", "text_pair": "hypothesis", "label": "score"}
    dev = list(csv.DictReader(open(tmp_path / "reg" / "seed_1" / "validation_predictions.csv")))
    # JSON numbers are written as JSON writes them: 2.0 stays 2.0.
    assert len(dev) == 30 and {r["label"] for r in dev} <= {"0.25", "0.75", "1.25", "1.5", "2.0", "2.5"}


def test_integer_ratings_are_classes_unless_label_type_says_regression(reviews, tmp_path, capsys, shared_data):
    """IMDB's 1-10 ratings: integers are classes by default, and the run says so and how to change it."""
    with gzip.open(shared_data / "imdb" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        rated = [(r["sentence"], r["rating"]) for _, r in zip(range(150), csv.DictReader(
            f, delimiter="\t", quoting=csv.QUOTE_NONE))]
    train = write_csv(tmp_path / "ratings.csv", ["text", "rating"], rated[:120])
    dev = write_csv(tmp_path / "ratings_dev.csv", ["text", "rating"], rated[120:])
    ratings = sorted({int(y) for _, y in rated[:120]})
    assert len(ratings) >= 6  # 1-4 and 7-10: the dataset leaves out the neutral ones
    base = ["--init", "random", "--config", reviews["config"], "--vocab_file", reviews["vocab"], "--train_file",
            train, "--validation_file", dev, "--label_column", "rating", "--max_seq_length", "16", "--train_steps", "1"]

    code, stdout, err = finetune_main(capsys, base + ["--output_dir", tmp_path / "classes"])
    assert code == 0, err
    counts = collections.Counter(int(y) for _, y in rated[:120])
    shown = ", ".join(f"{r} {counts[r]}" for r in ratings)
    assert stdout.splitlines()[1] == (
        f"labels: {len(ratings)} classes (training rows: {shown}): every label is an integer, so each of the "
        f"{len(ratings)} values is a class; if they are scores on a scale, --label_type regression predicts one "
        f"number instead")
    meta = json.load(open(tmp_path / "classes" / "seed_1" / "classifier.json"))
    assert meta["labels"] == [str(r) for r in ratings] and not meta["regression"]

    code, stdout, err = finetune_main(capsys, base + ["--output_dir", tmp_path / "scores", "--label_type",
                                                      "regression"])
    assert code == 0, err
    mean = np.mean([int(y) for _, y in rated[:120]])
    assert stdout.splitlines()[1] == (f"labels: regression, one number per text (training labels {ratings[0]} to "
                                      f"{ratings[-1]}, mean {mean:.4g}): chosen by --label_type regression")
    meta = json.load(open(tmp_path / "scores" / "seed_1" / "classifier.json"))
    assert meta["regression"] and meta["labels"] == []
    results = json.load(open(tmp_path / "scores" / "results.json"))
    assert results["data"]["label_type"] == "regression" and "mse" in results["seeds"][0]
    written = list(csv.DictReader(open(tmp_path / "scores" / "seed_1" / "validation_predictions.csv")))
    assert [row["label"] for row in written] == [y for _, y in rated[120:]]  # "7" as the file writes it


def test_rows_stream_without_reading_the_whole_file(tmp_path):
    """predict's reader yields rows as it reads (a file of any size runs in bounded memory)."""
    from electra_tf.data.table_files import TableReader
    from electra_tf.predict.__main__ import _batches

    path = tmp_path / "big.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write("id,text\n")
        for i in range(300_000):
            f.write(f"{i},review number {i} {os.urandom(8).hex()}\n")  # random: gzip cannot shrink it away
    reader = TableReader(str(path), "--input_file")
    batches = _batches(reader, "text", None, 64)
    first = next(batches)
    read, size = reader.progress()
    assert [row["id"] for _, row in first] == [str(i) for i in range(64)]
    assert read < size / 4, (read, size)  # a few buffers of the file, not all of it
    assert sum(len(b) for b in batches) == 300_000 - 64
    assert reader.progress()[0] == size
    reader.close()
