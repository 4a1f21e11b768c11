"""scripts/efficiency_study.py end to end at a toy size: outputs, their contents, the cache."""

import json
import os
import subprocess
import sys

import pytest

from scripts import efficiency_study

pytestmark = pytest.mark.large  # runs the efficiency study at a toy size: not in the fast tier

SCRIPT = "scripts/efficiency_study.py"


def _glue_subset(shared_data, target, train_rows=200, dev_rows=100):
    """A GLUE-format SST-2 directory with the first rows of the real one."""
    target.mkdir()
    for name, rows in (("train.tsv", train_rows), ("dev.tsv", dev_rows)):
        with open(shared_data / "glue" / "SST-2" / name, encoding="utf-8") as f:
            lines = [line for _, line in zip(range(rows + 1), f)]  # + the header
        (target / name).write_text("".join(lines), encoding="utf-8")
    return target


def _run(repo_root, args, timeout=240):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=repo_root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_toy_study_writes_table_json_and_plot_and_resumes(repo_root, shared_data, tmp_path, capsys):
    work = tmp_path / "study"
    args = ["--work_dir", str(work), "--corpus", str(shared_data / "corpus" / "wikitext2.valid.txt"),
            "--corpus_max_lines", "300", "--vocab_size", "600", "--seq_length", "32",
            "--batch_size", "16", "--budget_steps", "6", "--objectives", "electra,mlm",
            "--seeds", "1", "--glue_dir", str(_glue_subset(shared_data, tmp_path / "sst2")),
            "--ft_seq_length", "32", "--ft_batch_size", "32"]
    proc = _run(repo_root, args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((work / "results.json").read_text())
    rows = {r["objective"]: r for r in result["rows"]}
    assert set(rows) == {"random_init", "electra", "mlm"}
    budget = result["budgets"][0]
    assert budget == pytest.approx(6 * result["electra_step_flops"])
    assert rows["electra"]["steps"] == 6
    # mlm has no generator: cheaper steps, so more of them for the same FLOPs.
    assert rows["mlm"]["steps"] > 6 and rows["mlm"]["flops"] <= budget
    for name in ("electra", "mlm"):
        row = rows[name]
        assert len(row["accuracies"]) == 1 and 0 < row["median"] < 100
        assert row["flops"] <= budget < row["flops"] * (1 + 1 / row["steps"]) + 1
    # mlm reports only MLM metrics (no discriminator).
    assert "disc_auc" not in rows["mlm"]["final_train_metrics"]
    assert "disc_auc" in rows["electra"]["final_train_metrics"]
    md = (work / "results.md").read_text()
    assert "| electra |" in md and "| mlm |" in md and "Random initialisation" in md
    png = (work / "sst2_vs_flops.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    # The fine-tuned encoder of mlm is its full-size MLM network.
    pretrained = work / "pretrain" / f"mlm-{budget:.3e}" / "pretrained"
    assert (pretrained / "discriminator.weights.h5").is_file()
    assert not (pretrained / "generator.weights.h5").exists()

    # Re-running continues from the cache: nothing is trained again (in-process,
    # to keep the test short; the first run above went through the real CLI).
    before = {p: p.stat().st_mtime_ns for p in work.rglob("*.weights.h5")}
    assert efficiency_study.main(args) == 0
    assert {p: p.stat().st_mtime_ns for p in work.rglob("*.weights.h5")} == before
    assert "pre-training electra" not in capsys.readouterr().out
    # A flag that defines the study cannot change in the same work directory.
    assert efficiency_study.main(args + ["--seq_length", "48"]) == 2
    err = capsys.readouterr().err
    assert "other seq_length" in err and "new --work_dir" in err and err.count("\n") == 1
