"""scripts/domain_demo.sh runs the whole recipe on a user's text and labelled file, and resumes."""

import csv
import gzip
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.large  # runs scripts/domain_demo.sh end to end: not in the fast tier

REPO = Path(__file__).resolve().parents[2]


def _inputs(tmp_path, shared_data):
    """A few hundred review paragraphs as the corpus, 60 labelled reviews as a CSV with label names."""
    corpus = tmp_path / "reviews.txt"
    with gzip.open(shared_data / "corpus" / "imdb.unsup.txt.gz", "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(600), f)]
    corpus.write_text("".join(lines), encoding="utf-8")
    labelled = tmp_path / "labelled.csv"
    with gzip.open(shared_data / "imdb" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[:60]
    with open(labelled, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["text", "label"])
        writer.writerows((r["sentence"], {"0": "negative", "1": "positive"}[r["label"]]) for r in rows)
    return corpus, labelled


def test_domain_demo_pretrains_fine_tunes_both_inits_and_tabulates(tmp_path, shared_data):
    corpus, labelled = _inputs(tmp_path, shared_data)
    out = tmp_path / "demo"
    env = dict(os.environ, CONFIG="configs/tiny.json", STEPS="20", SEQ="64", VOCAB_SIZE="600", LABELS="40",
               SEEDS="1")
    cmd = ["bash", str(REPO / "scripts" / "domain_demo.sh"), str(corpus), str(labelled), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "pretrain" / "pretrained" / "discriminator.weights.h5").is_file()
    rows = (out / "results.md").read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("| labelled rows | pre-trained") and len(rows) == 3
    cells = [c.strip() for c in rows[2].strip("|").split("|")]
    assert cells[0] == "40"
    pretrained, random_init = (float(c.split()[0]) for c in cells[1:3])
    assert 0 <= pretrained <= 100 and 0 <= random_init <= 100
    assert cells[3] == f"{pretrained - random_init:+.2f}"
    # Both fine-tunings read the labelled file's label names.
    for init in ("pretrained", "random"):
        assert '"negative"' in (out / "finetune" / f"{init}_40" / "seed_1" / "classifier.json").read_text()
    # A second run finds every step done and only re-tabulates.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1/4" not in again.stdout and "4/4" in again.stdout


def test_domain_demo_refuses_a_missing_labelled_file(tmp_path):
    proc = subprocess.run(["bash", str(REPO / "scripts" / "domain_demo.sh"), "x.txt", str(tmp_path / "nope.csv"),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: labelled file {tmp_path / 'nope.csv'} does not exist; pass a CSV, TSV or JSON Lines file"]
    assert not (tmp_path / "out").exists()
