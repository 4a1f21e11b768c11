"""docs/finetune.md "Fine-tune on your own data": every block runs verbatim, in order, and
every model it trains beats the majority class on the reviews it is checked on.

The blocks run in a working directory laid out like a checkout (../shared/data beside it).
`runs/default` there stands in for the 1-minute default pre-training run: the same
vocabulary (learnt from data/sample_corpus.txt as `python -m electra_tf.pretrain` learns
it) and the same tiny config, with the untrained weights it starts from. What the run
prints about the data (rows, labels, the truncated share) depends only on the files and the
vocabulary, so it must equal the output the page shows; docs/finetune.md reports the
accuracy of the real default run.
"""

from __future__ import annotations

import collections
import csv
import json
import re
from pathlib import Path

import pytest
from doc_commands import markdown_commands, run_commands

pytestmark = pytest.mark.large  # runs docs/finetune.md's section, jobs included: not in the fast tier

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "finetune.md"
SECTION = "## Fine-tune on your own data"


def section_text() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end >= 0 else len(text)]


def section_blocks():
    """[(kind, command)] of the section: shell commands one by one, Python blocks whole."""
    return markdown_commands(section_text())


def shown_output():
    """The lines of the section's ```text block: what the finetune command prints."""
    return re.search(r"^```text\n(.*?)^```", section_text(), re.M | re.S).group(1).splitlines()


def test_the_section_has_the_csv_example_and_the_python_example():
    blocks = section_blocks()
    shell = [cmd for kind, cmd in blocks if kind == "shell"]
    assert [c.split()[2] for c in shell] == ["electra_tf.finetune", "electra_tf.predict", "electra_tf.export"]
    assert "--train_file reviews_train.csv" in shell[0] and "--init runs/default" in shell[0]
    python = [cmd for kind, cmd in blocks if kind == "python"]
    assert len(python) == 2 and "imdb/train.tsv.gz" in python[0] and "ElectraClassifier" in python[1]
    assert "epochs=10" in python[1]  # one epoch answered one class for every review
    assert shown_output()[1].startswith("read: 2,000 training rows from reviews_train.csv")


def make_run_dir(run: Path) -> None:
    """runs/default as `python -m electra_tf.pretrain` starts it: the vocabulary it learns from the
    sample corpus (all but the held-out documents) and configs/tiny.json, untrained."""
    from electra_tf.config import ElectraConfig
    from electra_tf.data.build_vocab import build_vocab
    from electra_tf.data.vocab import load_vocab, special_token_ids
    from electra_tf.models.saving import save_pretrained
    from electra_tf.pretrain import ElectraPretrainer
    from electra_tf.pretrain.options import DEMO_EVAL_DOCS, DEMO_VOCAB_MIN_COUNT, DEMO_VOCAB_SIZE

    docs = [d.strip("\n") for d in (REPO / "data" / "sample_corpus.txt").read_text(encoding="utf-8").split("\n\n")
            if d.strip()]
    (run / "corpus").mkdir(parents=True)
    train_txt = run / "corpus" / "train.txt"
    train_txt.write_text("\n\n".join(docs[:-DEMO_EVAL_DOCS]) + "\n", encoding="utf-8")
    vocab = str(run / "vocab.txt")
    build_vocab([str(train_txt)], DEMO_VOCAB_SIZE, vocab, lower_case=True, sample_lines=0,
                min_count=DEMO_VOCAB_MIN_COUNT, learner="bert_vocab", log=lambda message: None)
    config = ElectraConfig.from_json(str(REPO / "configs" / "tiny.json")).for_vocab(vocab)
    save_pretrained(str(run / "pretrained"), ElectraPretrainer(config, special_token_ids(load_vocab(vocab))), vocab)


@pytest.fixture(scope="module")
def section(tmp_path_factory, shared_data):
    """Runs the section's blocks in order once: (working directory, [completed processes])."""
    root = tmp_path_factory.mktemp("own_docs")
    work = root / "work"
    work.mkdir()
    (root / "shared").mkdir()
    (root / "shared" / "data").symlink_to(shared_data, target_is_directory=True)
    make_run_dir(work / "runs" / "default")
    done = run_commands(section_blocks(), work, "doc_snippet")
    print("\n".join(f"{seconds:6.1f} s  {cmd.splitlines()[0]}" for cmd, _, seconds in done))
    return work, [proc for _, proc, _ in done]


def read_csv(path: Path):
    return list(csv.DictReader(open(path, encoding="utf-8")))


def test_the_section_runs_verbatim(section):
    work, outputs = section
    rows = read_csv(work / "reviews_train.csv")
    assert len(rows) == 2000 and {r["label"] for r in rows} == {"negative", "positive"}
    results = json.load(open(work / "runs" / "reviews" / "results.json"))
    assert results["task"] == "own_data" and results["seeds"][0]["train_examples"] == 2000
    meta = json.load(open(work / "runs" / "reviews" / "seed_1" / "classifier.json"))
    assert meta["labels"] == ["negative", "positive"]
    predictions = [json.loads(l) for l in open(work / "predictions.jsonl", encoding="utf-8")]
    assert len(predictions) == 100
    assert all(p["predicted_label"] in ("negative", "positive") and set(p["probabilities"]) == {"negative", "positive"}
               for p in predictions)
    assert sum(p["truncated"] for p in predictions) == json.loads(outputs[2].stdout.splitlines()[-1])["truncated"]
    saved = work / "serving" / "reviews" / "1"
    assert json.load(open(saved / "assets.extra" / "classifier.json"))["labels"] == ["negative", "positive"]
    # The Python example prints two label names and saved a classifier directory.
    printed = outputs[-1].stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\['(negative|positive)', '(negative|positive)'\]", printed), printed
    assert json.load(open(work / "models" / "reviews" / "classifier.json"))["labels"] == ["negative", "positive"]


def test_the_finetune_output_is_the_one_shown(section):
    """Every line the page shows, except the losses and the scores of the trained weights, is printed."""
    _, outputs = section
    printed = outputs[1].stdout.splitlines()
    shown = shown_output()
    assert len(printed) == len(shown), printed
    for got, want in zip(printed, shown):
        if not re.match(r"(step \d|validation )", want):
            assert got == want


def test_both_examples_beat_the_majority_class(section):
    """The command's model and the Python example's beat always answering the commonest label."""
    work, outputs = section
    dev = read_csv(work / "reviews_dev.csv")
    labels = [r["label"] for r in dev]
    commonest, count = collections.Counter(labels).most_common(1)[0]
    majority = count / len(labels)

    results = json.load(open(work / "runs" / "reviews" / "results.json"))
    assert results["median"]["majority_accuracy"] == pytest.approx(majority)
    assert results["median"]["accuracy"] > majority + 0.05, results["median"]
    written = read_csv(work / "runs" / "reviews" / "seed_1" / "validation_predictions.csv")
    assert sum(r["prediction"] == r["label"] for r in written) / len(written) == pytest.approx(
        results["median"]["accuracy"])

    line = next(l for l in outputs[-1].stdout.splitlines() if l.startswith("validation accuracy"))
    found = re.fullmatch(r"validation accuracy ([\d.]+)%; always answering '(\w+)': ([\d.]+)%", line)
    assert found and found.group(2) == commonest and float(found.group(3)) == pytest.approx(100 * majority, abs=0.05)
    # Recomputed from the saved model, in a fresh Predictor: the accuracy the example printed.
    from electra_tf.predict import Predictor

    predicted = [p.label for p in Predictor(str(work / "models" / "reviews")).predict([r["text"] for r in dev])]
    accuracy = sum(p == y for p, y in zip(predicted, labels)) / len(labels)
    assert 100 * accuracy == pytest.approx(float(found.group(1)), abs=0.05)
    assert accuracy > majority + 0.05, (accuracy, majority)
