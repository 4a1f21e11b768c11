"""docs/finetune.md "Fine-tune on your own data": every block runs verbatim, in order.

The blocks run in a working directory laid out like a checkout (../shared/data beside it).
`runs/default` there is a pre-training run directory holding the export tests' tiny model
(random weights) instead of the 2-minute default pre-training run: the commands, files
and label names are what is checked here; docs/finetune.md reports the accuracy of the
real default run.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest
from doc_commands import markdown_commands, run_commands

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "finetune.md"
SECTION = "## Fine-tune on your own data"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def section_blocks():
    """[(kind, command)] of the section: shell commands one by one, Python blocks whole."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return markdown_commands(text[start:end if end >= 0 else len(text)])


def test_the_section_has_the_csv_example_and_the_python_example():
    blocks = section_blocks()
    shell = [cmd for kind, cmd in blocks if kind == "shell"]
    assert [c.split()[2] for c in shell] == ["electra_tf.finetune", "electra_tf.predict", "electra_tf.export"]
    assert "--train_file reviews_train.csv" in shell[0] and "--init runs/default" in shell[0]
    python = [cmd for kind, cmd in blocks if kind == "python"]
    assert len(python) == 2 and "imdb/train.tsv.gz" in python[0] and "ElectraClassifier" in python[1]


def make_run_dir(run: Path) -> None:
    """A run directory whose pretrained/ holds the export tests' tiny model, with 128 positions
    (the section's commands use the default --max_seq_length 128) and random weights."""
    from electra_tf.data.vocab import special_token_ids
    from electra_tf.models.saving import save_pretrained
    from electra_tf.pretrain import ElectraPretrainer

    helpers = _load("own_docs_export_helpers", REPO / "tests" / "export" / "export_helpers.py")
    config = helpers.tiny_config(max_position_embeddings=128, max_seq_length=128)
    vocab = helpers.write_vocab(run / "vocab.txt")
    save_pretrained(str(run / "pretrained"), ElectraPretrainer(config, special_token_ids(vocab)), vocab)


@pytest.mark.slow
def test_the_section_runs_verbatim(tmp_path, shared_data):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(shared_data, target_is_directory=True)
    (work / "runs" / "default").mkdir(parents=True)
    make_run_dir(work / "runs" / "default")
    outputs = [proc for _, proc, _ in run_commands(section_blocks(), work, "doc_snippet")]

    rows = list(csv.DictReader(open(work / "reviews_train.csv", encoding="utf-8")))
    assert len(rows) == 2000 and {r["label"] for r in rows} == {"negative", "positive"}
    results = json.load(open(work / "runs" / "reviews" / "results.json"))
    assert results["task"] == "own_data" and results["seeds"][0]["train_examples"] == 2000
    meta = json.load(open(work / "runs" / "reviews" / "seed_1" / "classifier.json"))
    assert meta["labels"] == ["negative", "positive"]
    predictions = [json.loads(l) for l in open(work / "predictions.jsonl", encoding="utf-8")]
    assert len(predictions) == 100
    assert all(p["predicted_label"] in ("negative", "positive") and set(p["probabilities"]) == {"negative", "positive"}
               for p in predictions)
    saved = work / "serving" / "reviews" / "1"
    assert json.load(open(saved / "assets.extra" / "classifier.json"))["labels"] == ["negative", "positive"]
    # The Python example prints two label names and saved a classifier directory.
    printed = outputs[-1].stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\['(negative|positive)', '(negative|positive)'\]", printed), printed
    assert json.load(open(work / "models" / "reviews" / "classifier.json"))["labels"] == ["negative", "positive"]
