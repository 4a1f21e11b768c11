"""End-to-end: the CLI on ~200 real SST-2 rows (tiny config, random init), plus
SQuAD 2.0 and tagging quick runs and the CLI's bad-input errors."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.large  # fine-tunes through the CLI on real rows: not in the fast tier


ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _cli(args, timeout=300):
    return subprocess.run([sys.executable, "-m", "electra_tf.finetune"] + args, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_sst2_cli_two_seeds(sst2_model_files, sst2_dir, tmp_path):
    out_dir = str(tmp_path / "out")
    r = _cli(["--task", "sst2", "--init", "random", "--config", f"{sst2_model_files}/config.json",
              "--vocab_file", f"{sst2_model_files}/vocab.txt", "--data_dir", sst2_dir,
              "--output_dir", out_dir, "--seed", "1,2", "--max_train_examples", "200",
              "--max_eval_examples", "120", "--max_seq_length", "48", "--epochs", "1",
              "--learning_rate", "1e-3"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.load(open(os.path.join(out_dir, "results.json")))
    assert res["task"] == "sst2" and res["metrics"] == ["accuracy"]
    assert [s["seed"] for s in res["seeds"]] == [1, 2]
    for s in res["seeds"]:
        assert s["train_examples"] == 200 and s["train_steps"] == 7  # ceil(200 / 32)
        assert 0.0 <= s["accuracy"] <= 1.0
    accs = sorted(s["accuracy"] for s in res["seeds"])
    assert res["median"]["accuracy"] == pytest.approx(sum(accs) / 2)
    # The tiny config is a CPU size: no layer-wise decay and mean pooling by default.
    assert res["settings"]["layerwise_lr_decay"] == 1.0 and res["settings"]["pooling"] == "mean"
    assert "median" in r.stdout and "accuracy" in r.stdout
    pred = open(os.path.join(out_dir, "seed_1", "dev_predictions.tsv")).read().splitlines()
    assert pred[0] == "index\tprediction\tlabel" and len(pred) == 121
    mult = json.load(open(os.path.join(out_dir, "seed_1", "lr_multipliers.json")))
    assert min(mult.values()) == max(mult.values()) == 1.0


@pytest.mark.parametrize("args, message", [
    (["--task", "sst3"], "unknown --task 'sst3'"),
    (["--task", "sst2", "--init", "/nonexistent/run"], "--init '/nonexistent/run' does not exist"),
    (["--task", "sst2", "--data_dir", "/tmp"], "pass the GLUE task directory as --data_dir"),
    (["--task", "sst2", "--seed", "1,x"], "--seed '1,x' must be comma-separated integers"),
])
def test_cli_bad_inputs(sst2_model_files, sst2_dir, tmp_path, args, message):
    base = {"--task": "sst2", "--init": "random", "--config": f"{sst2_model_files}/config.json",
            "--vocab_file": f"{sst2_model_files}/vocab.txt", "--data_dir": sst2_dir,
            "--output_dir": str(tmp_path / "o")}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    r = _cli([x for kv in base.items() for x in kv], timeout=120)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, r.stderr[-2000:]


SQUAD_CONTEXT = "John Smith was born in 1895 in Paris . John Smith went to the store and bought milk ."


def _squad_file(path, with_impossible):
    qas = [{"id": "q1", "question": "what year was john smith born ?",
            "answers": [{"text": "1895", "answer_start": SQUAD_CONTEXT.index("1895")}]},
           {"id": "q2", "question": "where was john smith born ?",
            "answers": [{"text": "Paris", "answer_start": SQUAD_CONTEXT.index("Paris")}]},
           {"id": "q3", "question": "what did john smith buy ?",
            "answers": [{"text": "milk", "answer_start": SQUAD_CONTEXT.index("milk")}]}]
    if with_impossible:
        qas.append({"id": "q4", "question": "who is the leader of france ?", "answers": [],
                    "is_impossible": True})
    with open(path, "w") as f:
        json.dump({"data": [{"title": "t", "paragraphs": [{"context": SQUAD_CONTEXT, "qas": qas}]}]}, f)


def test_squad2_and_tagging_quick_runs(tmp_path, vocab_file):
    from electra_tf.config import ElectraConfig
    from electra_tf.finetune.settings import Settings
    from electra_tf.finetune.finetune_job import run_task

    n = sum(1 for _ in open(vocab_file))
    cfg = ElectraConfig.from_json(os.path.join(ROOT, "configs", "tiny.json")).replace(vocab_size=n)
    cfg.to_json(str(tmp_path / "config.json"))
    sq = tmp_path / "squad"
    sq.mkdir()
    _squad_file(str(sq / "train-v2.0.json"), True)
    _squad_file(str(sq / "dev-v2.0.json"), True)
    common = dict(init="random", config=str(tmp_path / "config.json"), vocab_file=vocab_file,
                  seeds=(3,), batch_size=4, max_seq_length=32, learning_rate=1e-3)
    res = run_task(Settings(task="squad2", data_dir=str(sq), output_dir=str(tmp_path / "sq_out"),
                            epochs=2, n_best_size=5, **common))
    s = res["seeds"][0]
    assert s["total"] == 4 and s["HasAns_total"] == 3 and s["NoAns_total"] == 1
    assert 0.0 <= s["exact"] <= 100.0 and "best_f1" in s
    preds = json.load(open(tmp_path / "sq_out" / "seed_3" / "predictions.json"))
    assert set(preds) == {"q1", "q2", "q3", "q4"}
    assert all(p in SQUAD_CONTEXT for p in preds.values())  # spans cut from the context
    null = json.load(open(tmp_path / "sq_out" / "seed_3" / "null_odds.json"))
    assert set(null) == set(preds)

    tg = tmp_path / "conll"
    tg.mkdir()
    text = "john B-PER\nsmith I-PER\nwent O\nto O\nparis B-LOC\n\ngoogle B-ORG\nis O\nin O\nnew B-LOC\nyork I-LOC\n\n"
    (tg / "train.txt").write_text(text * 4)
    (tg / "dev.txt").write_text(text)
    res = run_task(Settings(task="ner", data_dir=str(tg), output_dir=str(tmp_path / "tg_out"),
                            epochs=3, tagging_scheme="BIOES", **common))
    s = res["seeds"][0]
    assert 0.0 <= s["f1"] <= 1.0 and 0.0 <= s["accuracy"] <= 1.0
    lines = open(tmp_path / "tg_out" / "seed_3" / "dev_predictions.txt").read().split("\n")
    assert lines[0].split()[:2] == ["john", "B-PER"] and lines[1].split()[1] == "E-PER"  # BIOES gold
