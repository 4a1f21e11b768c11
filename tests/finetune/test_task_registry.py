"""Task-object dispatch: every --task name finds its family's `FinetuneTask`, and
an unknown name is one clear error line, raised before anything is written."""

import keras
import pytest

from electra_tf.finetune.readers import glue_data
from electra_tf.finetune.tasks.base_task import FinetuneTask
from electra_tf.finetune.tasks.glue_task import GlueFinetuneTask
from electra_tf.finetune.tasks.own_data_task import OwnDataFinetuneTask
from electra_tf.finetune.tasks.task_registry import ALL_TASKS, get_task
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.finetune.finetune_job import run_task
from electra_tf.finetune.tasks.squad_task import SquadFinetuneTask
from electra_tf.finetune.tasks.tagging_task import TaggingFinetuneTask, conll_files


@pytest.mark.parametrize("name, family", [
    ("cola", GlueFinetuneTask), ("sst2", GlueFinetuneTask), ("stsb", GlueFinetuneTask),
    ("mnli", GlueFinetuneTask), ("squad", SquadFinetuneTask), ("squad1", SquadFinetuneTask),
    ("squad2", SquadFinetuneTask), ("tagging", TaggingFinetuneTask), ("ner", TaggingFinetuneTask),
    ("chunk", TaggingFinetuneTask), ("pos", TaggingFinetuneTask), ("own_data", OwnDataFinetuneTask),
])
def test_each_family_is_found_by_name(name, family):
    task = get_task(name)
    assert isinstance(task, family) and isinstance(task, FinetuneTask)
    assert task.name == name


def test_every_task_name_is_registered_once():
    assert set(glue_data.GLUE_TASKS) <= set(ALL_TASKS)
    assert len(ALL_TASKS) == len(set(ALL_TASKS)) == len(glue_data.GLUE_TASKS) + 3 + 4 + 1  # + own_data
    assert all(get_task(name).name == name for name in ALL_TASKS)


def test_unknown_task_is_one_clear_line():
    with pytest.raises(FinetuneError) as e:
        get_task("sst3")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("unknown --task 'sst3'; choose one of cola, sst2, ")
    assert message.endswith("squad, squad1, squad2, tagging, ner, chunk, pos, own_data")


def test_run_task_refuses_an_unknown_task_before_writing(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FinetuneError, match="unknown --task 'nope'"):
        run_task(Settings(task="nope", init="random", data_dir=None, output_dir=str(out)))
    assert not out.exists()


@pytest.mark.parametrize("name, size, expected", [
    # ELECTRA-Small: the paper's lr for it, mean pooling, no decay, the few-label floor.
    ("sst2", "small", {"learning_rate": 3e-4, "layerwise_lr_decay": 1.0, "epochs": 3.0, "max_seq_length": 128,
                       "pooling": "mean", "batch_size": 32, "min_train_steps": 160}),
    ("rte", "base", {"learning_rate": 1e-4, "layerwise_lr_decay": 0.8, "epochs": 10.0, "max_seq_length": 128, "pooling": "cls", "batch_size": 32, "min_train_steps": 160}),
    ("stsb", "large", {"learning_rate": 5e-5, "layerwise_lr_decay": 0.9, "epochs": 10.0, "max_seq_length": 128, "pooling": "cls", "batch_size": 32, "min_train_steps": 160}),
    ("squad2", "base", {"learning_rate": 1e-4, "layerwise_lr_decay": 0.8, "epochs": 2.0, "max_seq_length": 512, "pooling": "cls", "batch_size": 32, "min_train_steps": 160}),
    ("ner", "large", {"learning_rate": 5e-5, "layerwise_lr_decay": 0.9, "epochs": 3.0, "max_seq_length": 256, "pooling": "cls", "batch_size": 32, "min_train_steps": 160}),
    # The CPU sizes: the recipe of docs/domain_study.md (at least 10 epochs on GLUE).
    ("sst2", "tiny", {"learning_rate": 1e-3, "layerwise_lr_decay": 1.0, "epochs": 10.0, "max_seq_length": 128,
                      "pooling": "mean", "batch_size": 32, "min_train_steps": 0}),
    ("rte", "mini", {"learning_rate": 1e-3, "layerwise_lr_decay": 1.0, "epochs": 10.0, "max_seq_length": 128,
                     "pooling": "mean", "batch_size": 32, "min_train_steps": 0}),
    ("squad2", "cpu_demo", {"learning_rate": 1e-3, "layerwise_lr_decay": 1.0, "epochs": 2.0, "max_seq_length": 512,
                            "pooling": "mean", "batch_size": 32, "min_train_steps": 0}),
    # An imported BERT-family encoder: the usual recipe of a public encoder (its own pooling: below).
    ("sst2", "imported", {"learning_rate": 5e-5, "layerwise_lr_decay": 1.0, "epochs": 3.0, "max_seq_length": 128,
                          "pooling": "cls", "batch_size": 16, "min_train_steps": 0}),
])
def test_reference_hparams_come_from_the_task(name, size, expected):
    assert get_task(name).reference_hparams(size) == expected


@pytest.mark.parametrize("size", ["imported", "small", "tiny"])
def test_the_encoders_own_pooling_wins_over_the_sizes(size):
    assert get_task("own_data").reference_hparams(size, "mean")["pooling"] == "mean"
    assert get_task("sst2").reference_hparams(size, "cls")["pooling"] == "cls"


def test_losses_metrics_and_table_scale():
    assert isinstance(get_task("sst2").loss(), keras.losses.SparseCategoricalCrossentropy)
    assert isinstance(get_task("stsb").loss(), keras.losses.MeanSquaredError)
    assert get_task("squad2").loss() is None and get_task("ner").loss() is None  # compute_loss
    assert get_task("mnli").metric_keys(
        {"seed": 1, "matched_accuracy": 0.5, "mismatched_accuracy": 0.4, "train_steps": 3}
    ) == ["matched_accuracy", "mismatched_accuracy"]
    assert get_task("squad1").metric_keys({}) == ["exact_match", "f1"]
    assert get_task("squad2").metric_keys({}) == ["exact", "f1"]
    assert get_task("pos").metric_keys({}) == ["f1", "precision", "recall"]
    assert get_task("squad").table_scale == 1.0 and get_task("cola").table_scale == 100.0


def test_a_family_must_implement_the_interface():
    class Partial(FinetuneTask):
        def prepare_data(self, s, tokenizer):
            return None

    with pytest.raises(TypeError):
        Partial("partial")


def test_tagging_files_missing_is_one_line(tmp_path):
    with pytest.raises(FinetuneError, match=r"no train.txt / train.conll under --data_dir"):
        conll_files(str(tmp_path))
    (tmp_path / "train.conll").write_text("a O\n")
    assert conll_files(str(tmp_path)) == (str(tmp_path / "train.conll"), str(tmp_path / "dev.conll"))
