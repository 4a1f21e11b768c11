"""scripts/domain_study.py: a rung runs end to end (with fine-tuning in parallel), resumes, refuses typos.

The study itself takes hours; here one made-small rung (tiny, 6 steps, 500 labelled reviews, one
seed, one epoch) goes through the same code: shards, pre-training with extra flags, random-init and
pre-trained fine-tuning at two lengths, TF-IDF baselines and the report.
"""

import gzip
import json

import pytest

from scripts import domain_study
from scripts.study_lib import domain_ladder, domain_report
from scripts.study_lib.cells import load_cells

pytestmark = pytest.mark.large  # runs a study rung end to end: not in the fast tier


@pytest.fixture
def study(shared_data, tmp_path, monkeypatch):
    """The study module, made small: a 600-paragraph corpus, one tiny rung, 40 scored reviews."""
    corpus = tmp_path / "reviews.txt"
    with gzip.open(shared_data / "corpus" / "imdb.unsup.txt.gz", "rt", encoding="utf-8") as f:
        corpus.write_text("".join(line for _, line in zip(range(600), f)), encoding="utf-8")
    monkeypatch.setattr(domain_study, "CORPUS", [corpus])
    monkeypatch.setattr(domain_study, "VOCAB_SIZE", 600)
    monkeypatch.setattr(domain_study, "EVAL_ROWS", 40)
    monkeypatch.setattr(domain_study, "SEEDS", "1")
    # The ladder is read by the study and its report alike.
    monkeypatch.setattr(domain_ladder, "TASKS", {"imdb500": 64})
    monkeypatch.setattr(domain_ladder, "LONG_TASKS", {"imdb500_256": 96})
    monkeypatch.setattr(domain_ladder, "RECIPES", {"r1": dict(domain_ladder.RECIPES["r1"], epochs=1)})
    monkeypatch.setattr(domain_ladder, "RUNGS", [domain_ladder.Rung("tiny_t", "tiny", 64, 6, long_tasks=True)])
    # The probe reads the full-size tasks; it has its own test path (the baselines' tests).
    monkeypatch.setattr(domain_report, "probe", lambda *args, **kwargs: None)
    return domain_study


def test_a_rung_pretrains_fine_tunes_both_inits_at_both_lengths_and_resumes(study, tmp_path):
    work = tmp_path / "work"
    argv = ["--work_dir", str(work), "--rungs", "tiny_t", "--parallel", "2", "--pretrain_flags", "--log_every 3"]
    assert study.main(argv) == 0

    cells = load_cells(work)
    pre = cells["pretrain:tiny_t"]
    assert pre["steps"] == 6 and pre["flags"] == ["--log_every", "3"] and pre["flops"] > 0
    for init in ("random_tiny", "tiny_t"):
        for task in ("imdb500", "imdb500_256"):
            cell = cells[f"ft:{init}:{task}:r1"]
            assert len(cell["seeds"]) == 1 and 0.0 <= cell["median"] <= 100.0
    # The long task reads the same 500 reviews at its own length.
    log = (work / "finetune" / "tiny_t" / "imdb500_256_r1" / "finetune.log").read_text(encoding="utf-8")
    assert "--max_seq_length 96" in log and f"--data_dir {work / 'imdb500'} " in log
    assert f"--init {work / 'rungs' / 'tiny_t' / 'run'} " in log
    assert "--learning_rate 0.001 --epochs 1 " in log
    train_rows = (work / "imdb500" / "train.tsv").read_text(encoding="utf-8").splitlines()
    assert len(train_rows) == 501  # header + the first 500 labelled reviews
    assert "tfidf:imdb500:64" in cells and "tfidf:imdb500:all" in cells
    report = (work / "results.md").read_text(encoding="utf-8")
    assert "| tiny_t | tiny | 64 | 6 |" in report and "IMDB 500, 256 tokens" in report

    # A second run finds every cell done and adds none.
    lines = (work / "cells.jsonl").read_text(encoding="utf-8").splitlines()
    assert study.main(argv) == 0
    assert (work / "cells.jsonl").read_text(encoding="utf-8").splitlines() == lines
    assert len({json.loads(line)["key"] for line in lines}) == len(lines)


def test_unknown_rung_recipe_or_task_is_one_error(study, tmp_path, capsys):
    for argv, message in ((["--rungs", "tiny_x"], "unknown rung or recipe"), (["--recipes", "r9"], "unknown rung or recipe"),
                          (["--tasks", "imdb9"], "unknown task: ['imdb9']")):
        with pytest.raises(SystemExit) as exit_info:
            study.main(["--work_dir", str(tmp_path / "w")] + argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    # A task the rung does not fine-tune on would leave it with no cell: refused before any work.
    domain_ladder.RUNGS.append(domain_ladder.Rung("tiny_short", "tiny", 64, 6))
    with pytest.raises(SystemExit):
        study.main(["--work_dir", str(tmp_path / "w"), "--rungs", "tiny_short", "--tasks", "imdb500_256"])
    assert "none of --tasks ['imdb500_256'] is fine-tuned on rung tiny_short" in capsys.readouterr().err
    assert not (tmp_path / "w" / "rungs").exists()


def test_long_tasks_read_their_base_set():
    assert domain_ladder.task_data("imdb2000_256") == "imdb2000" and domain_ladder.task_seq("imdb2000_256") == 256
    assert domain_ladder.task_data("sst2_2000") == "sst2_2000" and domain_ladder.task_seq("sst2_2000") == 64
    gpu = [r for r in domain_ladder.RUNGS if "gpu" in r.name]
    assert gpu and all(r.long_tasks for r in gpu)


def test_fine_tuning_levers_change_one_setting_of_r1():
    r1 = domain_ladder.RECIPES["r1"]
    levers = {name: recipe for name, recipe in domain_ladder.RECIPES.items()
              if name.startswith("r1_") and recipe["reinit_top_layers"] == 0}
    assert len(levers) == 7
    for name, recipe in levers.items():
        changed = {k for k in r1 if recipe[k] != r1[k]}
        assert len(changed) == 1 and set(recipe) == set(r1), (name, changed)
    assert levers["r1_lr3e-3"]["learning_rate"] == 3e-3 and levers["r1_warmup0"]["warmup_proportion"] == 0.0


def test_a_kept_model_is_fine_tuned_beside_a_random_one_of_its_shape_and_vocabulary(study, tmp_path):
    from helpers import make_model_dir

    model = tmp_path / "kept"
    make_model_dir(model, seed=1)
    history = [{"cumulative_steps": 1200, "cumulative_flops": 3.5e15, "minutes_trained": 4.0,
                "heldout_disc_auc": 0.81}]
    domain_ladder.RUNGS.append(domain_ladder.Rung("kept_t", "small", 64, 0, model_dir=str(model)))
    work = tmp_path / "work"
    argv = ["--work_dir", str(work), "--rungs", "kept_t"]
    with pytest.raises(SystemExit, match="holds no pre-trained model yet"):
        study.main(argv)
    (model / "history.json").write_text(json.dumps(history))
    assert study.main(argv) == 0

    cells = load_cells(work)
    pre = cells["pretrain:kept_t"]
    assert (pre["steps"], pre["flops"], pre["seconds"]) == (1200, 3.5e15, 240.0)
    # Its vocabulary is not the study's, so its random twin is its own.
    assert pre["random_init"] == "random_kept_t"
    for init in ("kept_t", "random_kept_t"):
        log = (work / "finetune" / init / "imdb500_r1" / "finetune.log").read_text(encoding="utf-8")
        assert f"--vocab_file {model / 'vocab.txt'} " in log
        assert len(cells[f"ft:{init}:imdb500:r1"]["seeds"]) == 1
    assert f"--init {model} " in (work / "finetune" / "kept_t" / "imdb500_r1" / "finetune.log").read_text()
    assert "| kept_t | small | 64 | 1,200 | 3.50e+15 |" in (work / "results.md").read_text(encoding="utf-8")

    # The model moved on (a later GPU run): its old cells are not mixed with new ones.
    (model / "history.json").write_text(json.dumps(history + [dict(history[0], cumulative_steps=2400)]))
    with pytest.raises(SystemExit, match="now at step 2400.*pass a new --work_dir"):
        study.main(argv)


def test_every_recipe_but_defaults_sets_everything_a_model_folder_recipe_could_change():
    """A study recipe runs the same on the kept folder (which ships a finetune_recipe.json: 12 blocks
    re-drawn, a 320-step floor), an earlier snapshot and random init: it passes a flag for every
    setting such a recipe may set (batch_size through recipe_flags' --batch_size 32, Small's default),
    with Small's size defaults where the recipe names none. Only `defaults` is left to the folder."""
    from electra_tf.models.model_folder import RECIPE_SETTINGS
    from electra_tf.training.size_defaults import for_size

    small = for_size("small")
    assert domain_ladder.RECIPES["defaults"] == {} and domain_study.recipe_flags({}) == []
    for name, recipe in domain_ladder.RECIPES.items():
        if name == "defaults":
            continue
        flags = domain_study.recipe_flags(recipe)
        assert set(RECIPE_SETTINGS) <= {f[2:] for f in flags[::2]}, name
        assert flags[:2] == ["--batch_size", str(small.batch_size)], name
    size = domain_ladder.RECIPES["size_defaults"]
    assert (size["learning_rate"], size["pooling"], size["layerwise_lr_decay"]) == (
        small.learning_rate, small.pooling, small.layerwise_lr_decay)
    assert size["reinit_top_layers"] == 0 and size["min_train_steps"] == 160
    assert domain_ladder.RECIPES["size_defaults_steps320"] == dict(size, min_train_steps=320)
    # The paper's recipe: its own epochs, so no floor, and no block re-drawn, even on the kept folder.
    paper = domain_ladder.RECIPES["paper"]
    assert (paper["reinit_top_layers"], paper["min_train_steps"], paper["pooling"], paper["layerwise_lr_decay"]) == (
        0, 0, "cls", 0.8)
    assert domain_ladder.RECIPES["fewlabel"]["reinit_top_layers"] == 3
    assert domain_ladder.RECIPES["defaults_reinit12"]["pooling"] == small.pooling


