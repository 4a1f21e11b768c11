"""The CPU benchmark's own serving rows on a tiny classifier, through the benchmark's worker process:
the XLA export with its warm-up requests replayed at load compiles nothing more once it serves (counted
by XLA's dumps, one per compile), its replay is reported as load time, and it and the frozen-weights
export give the default export's logits, and the LiteRT rows (fp32, int8) its labels."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import helpers as h
from scripts.benchmarks.cpu_peers.timing import Worker

pytestmark = pytest.mark.large  # exports and serves a classifier in the benchmark's worker process: not in the fast tier

SEQ = 20  # padded widths 16 and 20
SHORT = ["the cat sat", "a dog ran to the river"]  # width 16
LONG = ["the big dog ran to the river and the cat sat on the mat " * 3]  # cut at 20 pieces: width 20


@pytest.fixture(scope="module")
def seed_dir(tmp_path_factory):
    from electra_tf.models.model_folder import save_classifier
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call

    from electra_tf.models.saving import load_encoder

    path = h.make_model_dir(tmp_path_factory.mktemp("m") / "model")[0]
    encoder, config = load_encoder(path)
    model = ClassifierModel(encoder, 2)
    build_and_call(model, SEQ)
    rng = np.random.default_rng(2)
    for v in model.head.weights:  # logits that move with the text
        v.assign(rng.normal(0, 0.5, v.shape).astype("float32"))
    out = str(tmp_path_factory.mktemp("clf") / "seed_1")
    save_classifier(out, model, config, os.path.join(path, "vocab.txt"), ["negative", "positive"], "sst2", False, SEQ)
    return out


def _compiles(dump: Path) -> int:
    """XLA programs compiled so far: XLA_FLAGS=--xla_dump_to writes one *before_optimizations.txt each."""
    return len(list(dump.glob("*before_optimizations.txt")))


def _case(variant, seed_dir, saved):
    return {"id": f"serve/tiny/{SEQ}/ours/{variant}/16", "kind": "serve", "variant": variant, "model": "tiny",
            "seed_dir": seed_dir, "seq": SEQ, "batch": 32, "saved_model": saved, "pad_multiple": 16,
            "warmup_texts": SHORT[:1] + SHORT, "warmup_singles": 1}


def test_xla_row_replayed_at_load_compiles_nothing_when_serving(seed_dir, tmp_path, monkeypatch):
    dump = tmp_path / "xla_dump"
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={dump}")
    with open(tmp_path / "ours.log", "w") as log:
        worker = Worker("ours", sys.executable, tmp_path, log, threads=1)
        try:
            saved = worker.call("saved_model", "tiny", seed_dir, SEQ)
            cases = {v: _case(v, seed_dir, saved) for v in ("saved_model", "frozen", "xla", "xla_warm")}
            prep = {v: worker.send(cmd="prepare", case=c) for v, c in cases.items()}
            # The replay is the row's load time: 6 batch sizes (1-32) x widths 16 and 20, none for the others.
            assert prep["xla_warm"]["warmup_requests"] == 12 and prep["xla_warm"]["load_s"] > 0
            assert "load_s" not in prep["xla"] and "load_s" not in prep["saved_model"]

            def serve(variant, what):
                before = _compiles(dump)
                out = worker.send(cmd="run", id=cases[variant]["id"], what=what)
                return out, _compiles(dump) - before

            # Width 20 is new to both XLA rows' traffic (their warm-up met width 16 only); the call is cold.
            latency = {"kind": "latency", "texts": LONG + SHORT, "cold": [0]}
            warm, compiled = serve("xla_warm", latency)
            assert compiled == 0  # the replay compiled batch 1 x width 20 at load
            assert len(warm["cold"]) == 1 and len(warm["latencies"]) == 2
            assert serve("xla_warm", {"kind": "throughput", "texts": SHORT + LONG, "batch": 3})[1] == 0
            # The row without the replay compiles at the same first call: the count above would have seen it.
            assert serve("xla", latency)[1] >= 1

            texts = SHORT + LONG
            logits = {v: np.array(serve(v, {"kind": "logits", "texts": texts, "batch": 32})[0]["logits"])
                      for v in cases}
            assert np.abs(logits["saved_model"]).max() > 0.1 and np.ptp(logits["saved_model"][:, 0]) > 1e-3
            for v in ("frozen", "xla", "xla_warm"):
                np.testing.assert_allclose(logits[v], logits["saved_model"], atol=1e-5, err_msg=v)
        finally:
            worker.close()


def test_litert_rows_serve_the_saved_model_labels(seed_dir, tmp_path):
    with open(tmp_path / "ours.log", "w") as log:
        worker = Worker("ours", sys.executable, tmp_path, log, threads=1)
        try:
            saved = worker.call("saved_model", "tiny", seed_dir, SEQ)
            cases = {v: _case(v, seed_dir, saved) for v in ("saved_model", "litert", "litert_int8")}
            prep = {v: worker.send(cmd="prepare", case=c) for v, c in cases.items()}
            assert prep["litert"]["runtime"] in ("ai-edge-litert", "tf.lite")
            texts = SHORT + LONG
            logits = {v: np.array(worker.send(cmd="run", id=cases[v]["id"],
                                              what={"kind": "logits", "texts": texts, "batch": 32})["logits"])
                      for v in cases}
            np.testing.assert_allclose(logits["litert"], logits["saved_model"], atol=1e-5)
            np.testing.assert_array_equal(logits["litert_int8"].argmax(1), logits["saved_model"].argmax(1))
            assert 0 < np.abs(logits["litert_int8"] - logits["saved_model"]).max() < 0.2
            out = worker.send(cmd="run", id=cases["litert"]["id"], what={"kind": "latency", "texts": SHORT, "cold": []})
            assert len(out["latencies"]) == 2
        finally:
            worker.close()
