"""Fine-tuning runs through the one training loop (electra_tf.training.trainer): it gets the
NaN stop, TensorBoard and evaluation during training with no code of its own.

Real data: the first 200 rows of GLUE SST-2 from ../shared/data; a tiny random encoder.
"""

import os
from pathlib import Path

import pytest


@pytest.fixture()
def model_files(sst2_model_files):
    return Path(sst2_model_files)


def _settings(model_files, sst2_dir, out, **kw):
    from electra_tf.finetune.settings import Settings

    base = dict(task="sst2", init="random", data_dir=sst2_dir, output_dir=str(out),
                config=str(model_files / "config.json"), vocab_file=str(model_files / "vocab.txt"), seeds=(1,),
                max_train_examples=200, max_eval_examples=100, max_seq_length=32, batch_size=16, epochs=1,
                learning_rate=1e-3, log_every=4)
    base.update(kw)
    return Settings(**base)


def _event_tags(directory):
    import tensorflow as tf

    tags = set()
    for name in os.listdir(directory):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            tags.update(v.tag for v in event.summary.value)
    return tags


@pytest.mark.large
def test_eval_every_and_tensorboard(model_files, sst2_dir, tmp_path, capsys):
    from electra_tf.finetune.finetune_job import run_task

    res = run_task(_settings(model_files, sst2_dir, tmp_path / "out", eval_every=5))
    out = capsys.readouterr().out
    # 200 rows / 16 = 13 steps: evaluations at 5, 10 and the last step, with the task's own metric.
    evals = [line for line in out.splitlines() if line.startswith("eval at step ")]
    assert [line.split(":")[0] for line in evals] == ["eval at step 5", "eval at step 10", "eval at step 13"], out
    assert all("accuracy=" in line for line in evals)
    # The last evaluation during training is the seed's final dev result.
    last = float(evals[-1].split("accuracy=")[1].split()[0])
    assert last == pytest.approx(res["seeds"][0]["accuracy"], abs=1e-4)
    assert [line.split()[1] for line in out.splitlines() if line.startswith("step ")] == ["4/13", "8/13", "12/13",
                                                                                         "13/13"]
    tb = tmp_path / "out" / "seed_1" / "tensorboard"
    assert {"loss", "learning_rate", "examples_per_second"} <= _event_tags(tb / "train")
    assert "accuracy" in _event_tags(tb / "eval")
    # Its scratch predictions are not left behind; the final ones are written as before.
    assert sorted(p.name for p in (tmp_path / "out" / "seed_1").glob("*predictions*")) == ["dev_predictions.tsv"]


@pytest.mark.large
def test_nan_loss_stops_the_seed_with_one_line(model_files, sst2_dir, tmp_path):
    from electra_tf.finetune.finetune_job import run_task
    from electra_tf.finetune.settings import FinetuneError

    with pytest.raises(FinetuneError) as e:
        run_task(_settings(model_files, sst2_dir, tmp_path / "out", learning_rate=1e30, clip_norm=0.0,
                           save_every=2))
    message = str(e.value)
    assert message.startswith("the training loss became nan at step ") and "\n" not in message
    assert message.endswith("lower --learning_rate or check the data, and start again in a new --output_dir")
    bad_step = int(message.split("at step ")[1].split(";")[0])
    assert bad_step >= 2
    # Nothing was saved at or after the bad step, and no result was written.
    ckpts = sorted(os.listdir(tmp_path / "out" / "seed_1" / "checkpoints"))
    assert all(int(n[5:13]) < bad_step for n in ckpts if n.startswith("ckpt-"))
    assert not (tmp_path / "out" / "results.json").exists()
    assert not (tmp_path / "out" / "seed_1" / "result.json").exists()
