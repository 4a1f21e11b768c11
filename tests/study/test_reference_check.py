"""scripts/reference/reference_check.py: the numpy masking rule against ours, and a short
side-by-side run of our pre-trainer and the Hugging Face reference."""

import collections
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from scripts.reference import reference_check

SCRIPT = "scripts/reference/reference_check.py"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HAVE_HF = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


@pytest.fixture(scope="module")
def ref_data(tmp_path_factory, repo_root):
    """A ~300-token vocabulary written directly (not learned) and seq-64 shards
    of the sample corpus: a few seconds."""
    from electra_tf.data.build_pretraining_data import build_pretraining_data

    root = tmp_path_factory.mktemp("refcheck")
    corpus = repo_root / "data" / "sample_corpus.txt"
    tokens = re.findall(r"[a-z0-9]+|[^\sa-z0-9]", corpus.read_text(encoding="utf-8").lower())
    chars = sorted({c for t in tokens for c in t})
    frequent = [w for w, _ in collections.Counter(t for t in tokens if len(t) > 1).most_common(250)]
    vocab = list(dict.fromkeys(SPECIALS + chars + ["##" + c for c in chars if c.isalnum()]
                               + frequent))
    vocab_file = root / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    build_pretraining_data(str(root / "shards"), str(vocab_file), [str(corpus)], max_seq_length=64,
                           num_shards=1, num_processes=1, progress=False, log=lambda *_: None)
    return {"data_dir": str(root / "shards"), "vocab_file": str(vocab_file),
            "vocab_size": len(vocab), "root": root}


def test_numpy_masking_follows_our_rule():
    """Counts equal electra_tf's prediction_counts (float32 half-to-even rounding
    included); chosen positions are distinct candidates; ~85% become [MASK]."""
    import tensorflow as tf

    from electra_tf.objectives.masking import prediction_counts

    ref = reference_check
    rng = np.random.default_rng(0)
    batch, seq, P = 400, 64, 9
    cls_, sep, mask_id = 2, 3, 4
    lengths = np.concatenate([np.arange(2, seq + 1), rng.integers(2, seq + 1, batch - (seq - 1))])
    ids = rng.integers(5, 300, (batch, seq))
    input_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    ids[:, 0] = cls_
    ids[np.arange(batch), lengths - 1] = sep
    ids[rng.random((batch, seq)) < 0.02] = mask_id  # literal [MASK]s are never chosen
    ids = ids * input_mask
    never = (cls_, sep, mask_id)

    count, _ = ref.prediction_counts(ids, input_mask, P, 0.15, never)
    ours, _ = prediction_counts(tf.constant(ids, tf.int32), tf.constant(input_mask, tf.int32),
                                P, 0.15, never)
    np.testing.assert_array_equal(count, ours.numpy())
    # Longer rows: round(190 * 0.15) is 28 in float64 but 29 in float32 (ours).
    long_mask = (np.arange(512)[None, :] < np.arange(2, 513)[:, None]).astype(np.int64)
    long_ids = np.where(long_mask > 0, 7, 0)
    long_count, _ = ref.prediction_counts(long_ids, long_mask, 80, 0.15, never)
    long_ours, _ = prediction_counts(tf.constant(long_ids, tf.int32),
                                     tf.constant(long_mask, tf.int32), 80, 0.15, never)
    np.testing.assert_array_equal(long_count, long_ours.numpy())
    assert long_count[190 - 2] == 29

    out = ref.mask_batch(ids, input_mask, rng, max_predictions=P, mask_prob=0.15,
                         mask_id=mask_id, never_masked=never, keep_prob=0.15)
    np.testing.assert_array_equal(out["weights"].sum(1), count)
    used = out["weights"] > 0
    masked_slots = kept = 0
    for row in range(batch):
        pos = out["positions"][row][used[row]]
        assert len(set(pos.tolist())) == len(pos)
        assert np.all(input_mask[row, pos] == 1)
        assert not np.isin(ids[row, pos], never).any()
        np.testing.assert_array_equal(out["original_ids"][row][used[row]], ids[row, pos])
        changed = out["masked_ids"][row] != ids[row]
        assert set(np.flatnonzero(changed).tolist()) <= set(pos.tolist())
        assert np.all(out["masked_ids"][row][changed] == mask_id)
        masked_slots += int(changed.sum())
        kept += len(pos) - int(changed.sum())
    assert abs(kept / (kept + masked_slots) - 0.15) < 0.03


def test_rank_auc():
    ref = reference_check
    assert ref.rank_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert ref.rank_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert ref.rank_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert ref.rank_auc([0, 1, 1, 0], [0.1, 0.4, 0.35, 0.8]) == 0.5
    assert math.isnan(ref.rank_auc([1, 1], [0.1, 0.2]))


def _run(repo_root, args, timeout=240):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=repo_root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_bad_inputs_exit_2_with_one_line(ref_data):
    common = ["--config", "configs/tiny.json", "--steps", "2"]
    # The tiny config's vocab_size (4000) differs from the ~300-token vocabulary.
    ref = reference_check
    cases = [
        (["--data_dir", ref_data["data_dir"], "--vocab_file", ref_data["vocab_file"]],
         f"--override vocab_size={ref_data['vocab_size']}"),
        (["--data_dir", str(ref_data["root"] / "nope"), "--vocab_file", ref_data["vocab_file"]],
         "is not a directory"),
        (["--data_dir", ref_data["data_dir"], "--vocab_file", ref_data["vocab_file"],
          "--override", f"vocab_size={ref_data['vocab_size']}", "--override", "objective=mlm"],
         "objective=electra"),
    ]
    for extra, needle in cases:
        err = _capture_error(ref, common + extra)
        assert needle in err and err.count("\n") == 1, err


def _capture_error(module, argv):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        assert module.main(argv) == 2
    return buf.getvalue()


@pytest.mark.large
@pytest.mark.skipif(not HAVE_HF, reason="the reference needs torch and transformers")
def test_short_run_both_models_learn(repo_root, ref_data, tmp_path):
    out = tmp_path / "results.json"
    proc = _run(repo_root, [
        "--config", "configs/tiny.json", "--data_dir", ref_data["data_dir"],
        "--vocab_file", ref_data["vocab_file"], "--override", f"vocab_size={ref_data['vocab_size']}",
        "--override", "num_warmup_steps=2", "--override", "learning_rate=0.002",
        "--batch_size", "16", "--steps", "20", "--log_every", "10", "--output", str(out)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    cfg = result["config"]
    rows = {(r["step"], r["model"]): r for r in result["rows"]}
    assert set(rows) == {(s, m) for s in (10, 20) for m in ("tf", "torch")}
    for row in rows.values():
        for key in ("loss", "mlm_loss", "disc_loss", "mlm_accuracy"):
            assert math.isfinite(row[key]), row
        assert 0.0 <= row["disc_auc"] <= 1.0, row
    # Same architecture, same sharing: same parameter and weight-decay counts.
    assert result["parameters"]["tf"] == result["parameters"]["torch"]
    assert result["decayed_parameters"]["tf"] == result["decayed_parameters"]["torch"]

    for model in ("tf", "torch"):
        steps = result["per_step"][model]
        first = steps[0]
        # The first step, from random init: near-uniform generator, disc at 1/2.
        assert first["mlm_loss"] == pytest.approx(math.log(cfg["vocab_size"]), abs=0.5), model
        assert first["disc_loss"] == pytest.approx(math.log(2.0), abs=0.05), model
        # The weighting: loss = gen_weight * MLM + disc_weight * disc, every step.
        for s in steps:
            assert s["loss"] == pytest.approx(
                cfg["gen_weight"] * s["mlm_loss"] + cfg["disc_weight"] * s["disc_loss"], rel=1e-4)
        # A near-uniform generator replaces almost every chosen token: the replaced
        # share starts at the chosen share (labels over real tokens only).
        assert first["replaced"] == pytest.approx(first["masked"], rel=0.05), model
        assert 0.08 < first["masked"] < 0.17
        # Both learn: the second window's losses are below the first's.
        assert rows[(20, model)]["loss"] < rows[(10, model)]["loss"], model
        assert rows[(20, model)]["mlm_loss"] < rows[(10, model)]["mlm_loss"], model
    # Same schedule on both sides.
    lrs = [[s["lr"] for s in result["per_step"][m]] for m in ("tf", "torch")]
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-5, atol=1e-9)
    assert lrs[0][0] == 0.0 and max(lrs[0]) > 0
    # The two agree statistically: first-step losses within a few percent.
    tf_first, torch_first = (result["per_step"][m][0]["loss"] for m in ("tf", "torch"))
    assert tf_first == pytest.approx(torch_first, rel=0.05)
    assert "step  model" in proc.stdout and proc.stdout.count("\n    20  ") == 2
