"""A fine-tuning re-run knows its inputs by content, and a run says its recipe.

- unchanged files: the finished seed is skipped (as before);
- a changed training file: one error line naming it and the fixes, exit 2, the folder untouched;
- `--overwrite`: starts over on the new rows;
- the opening lines give each recipe setting with where it came from (flag or which default);
- a tie for the commonest label is reported as a tie.
"""

import csv
import hashlib
import json
import os

import pytest

from finetune.cli_helpers import error_lines, finetune_main


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def _rows(n, offset=0):
    # Separable made-up reviews; the words are in the fixture's vocabulary.
    return [("a great good film" if i % 2 else "a bad bad movie", "positive" if i % 2 else "negative")
            for i in range(offset, offset + n)]


def _tree_digest(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.mark.large
def test_rerun_skips_unchanged_refuses_changed_and_overwrite_starts_over(tmp_path, capsys, sst2_model_files):
    train, dev, out = tmp_path / "train.csv", tmp_path / "dev.csv", tmp_path / "run"
    _write(train, _rows(24))
    _write(dev, _rows(10))  # 5 negative, 5 positive: a tie for the commonest label
    args = ["--init", "random", "--config", os.path.join(sst2_model_files, "config.json"),
            "--vocab_file", os.path.join(sst2_model_files, "vocab.txt"), "--train_file", train,
            "--validation_file", dev, "--output_dir", out, "--max_seq_length", "16", "--train_steps", "2",
            "--learning_rate", "3e-3"]
    code, stdout, _ = finetune_main(capsys, args)
    assert code == 0
    lines = stdout.splitlines()
    # The recipe: a flag is named as such, the rest by the default they came from.
    assert "recipe (model_size 'tiny'; a flag overrides each):" in lines
    assert "  --learning_rate=0.003  [flag]" in lines
    assert "  --batch_size=32  [tiny default]" in lines
    assert "  --pooling=mean (of the token vectors)  [tiny default]" in lines
    assert "  --layerwise_lr_decay=1 (none)  [tiny default]" in lines
    assert "  --epochs=10 (10 steps, 1 an epoch; --train_steps stops at 2)  [tiny default for own_data]" in lines
    assert "  --max_seq_length=16  [flag]" in lines
    assert "  --warmup_proportion=0.1 (0 steps), --weight_decay=0.01, --clip_norm=1  [default, default, default]" \
        in lines
    # The tied baseline says so instead of naming one class.
    assert "(validation: a tie of 'negative', 'positive', each as good)" in stdout
    with open(out / "settings.json", encoding="utf-8") as f:
        recorded = json.load(f)["inputs"]
    assert set(recorded) == {"--train_file", "--validation_file", "--config", "--vocab_file"}
    with open(train, "rb") as f:
        assert recorded["--train_file"]["sha256"] == hashlib.sha256(f.read()).hexdigest()

    # Unchanged: the seed is skipped, as before.
    code, stdout, _ = finetune_main(capsys, args)
    assert code == 0 and "seed 1: already done" in stdout

    # Changed rows: refused in one line naming the file, nothing in the folder touched.
    _write(train, _rows(12))
    before = _tree_digest(out)
    code, stdout, stderr = finetune_main(capsys, args)
    assert code == 2 and "already done" not in stdout
    assert error_lines(stderr) == [
        f"error: --train_file {train} changed since the run in --output_dir {out} began (the content differs "
        f"from what {out / 'settings.json'} records); pass a new --output_dir, or --overwrite to start over there"]
    assert _tree_digest(out) == before

    # --overwrite: the old seed is gone and the new rows are trained on.
    code, stdout, _ = finetune_main(capsys, args + ["--overwrite"])
    assert code == 0 and "already done" not in stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["data"]["train_rows"] == 12 and results["seeds"][0]["train_examples"] == 12
    # ...and the re-run without the flag now resumes that run (the flag is not a setting to match).
    code, stdout, _ = finetune_main(capsys, args)
    assert code == 0 and "seed 1: already done" in stdout


def test_only_the_files_a_task_reads_under_data_dir_are_fingerprinted(tmp_path):
    # A --data_dir may be a GLUE root or a busy folder: only the task's own files are hashed, so an
    # unrelated file neither slows the check nor counts as a change; a folder without them is
    # refused before anything is hashed.
    import pytest

    from electra_tf.data.fingerprints import changed_inputs, fingerprints
    from electra_tf.finetune.readers.glue_data import GlueDataError
    from electra_tf.finetune.settings import Settings
    from electra_tf.finetune.tasks.task_registry import get_task

    task_dir = tmp_path / "glue" / "SST-2"
    task_dir.mkdir(parents=True)
    for split in ("train", "dev"):
        (task_dir / f"{split}.tsv").write_text("sentence\tlabel\ngood\t1\n", encoding="utf-8")
    (tmp_path / "glue" / "unrelated.bin").write_bytes(b"x" * 1000)
    s = Settings(task="sst2", init="random", data_dir=str(tmp_path / "glue"), output_dir=str(tmp_path / "o"))
    files = get_task("sst2").data_files(s)
    assert files == {"--data_dir:train.tsv": str(task_dir / "train.tsv"),
                     "--data_dir:dev.tsv": str(task_dir / "dev.tsv")}
    before = fingerprints(files)
    (tmp_path / "glue" / "unrelated.bin").write_bytes(b"y")
    assert changed_inputs(before, fingerprints(get_task("sst2").data_files(s))) == []
    (task_dir / "dev.tsv").write_text("sentence\tlabel\nbad\t0\n", encoding="utf-8")
    assert changed_inputs(before, fingerprints(get_task("sst2").data_files(s))) == ["--data_dir:dev.tsv"]
    with pytest.raises(GlueDataError, match="pass the GLUE task directory as --data_dir"):
        get_task("sst2").data_files(Settings(task="sst2", init="random", data_dir=str(tmp_path / "o"),
                                             output_dir=str(tmp_path / "o")))
