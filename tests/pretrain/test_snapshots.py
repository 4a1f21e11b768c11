"""`--snapshot_dir`: model directories written every few minutes, whole or not at all, in float16."""

import json
import os

import h5py
import numpy as np
import pytest

from helpers import random_pretrainer, tiny_config, write_vocab

from electra_tf.models.saving import save_pretrained
from electra_tf.pretrain.pretrainer_loading import load_pretrainer
from electra_tf.pretrain.snapshots import ModelSnapshots, cast_weights_file, latest_snapshot, read_snapshot

PARTS = ("discriminator_head", "generator", "mlm_head", "copy_head")


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def h5_dtypes(path):
    found = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: found.append(item.dtype) if isinstance(item, h5py.Dataset) else None)
    return found


def h5_bytes(path):
    found = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: found.append(item.nbytes) if isinstance(item, h5py.Dataset) else None)
    return sum(found)


@pytest.fixture
def model():
    return random_pretrainer(tiny_config(), seed=3)


def snapshots(model, directory, vocab, clock, dtype="fp16", fail=False):
    def save(folder):
        if fail:
            raise OSError("disk full")
        save_pretrained(folder, model, vocab, parts=PARTS)

    writer = ModelSnapshots(str(directory), minutes=2, save=save, dtype=dtype,
                            metrics=lambda: {"train_metrics": {"disc_auc": 0.75}}, log=lambda line: None, clock=clock)
    fake = type("Model", (), {})()
    fake.optimizer = type("Optimizer", (), {})()
    writer.set_model(fake)
    return writer


def advance(writer, clock, step, seconds):
    import tensorflow as tf

    clock.now += seconds
    writer.model.optimizer.iterations = tf.constant(step)
    writer.on_train_batch_end(step)


def test_cast_weights_file_stores_float16_and_loads_back_into_float32(tmp_path, model):
    vocab = write_vocab(tmp_path / "vocab.txt")
    save_pretrained(str(tmp_path / "model"), model, str(vocab), parts=PARTS)
    path = str(tmp_path / "model" / "discriminator.weights.h5")
    data_bytes = h5_bytes(path)
    cast_weights_file(path)
    assert set(h5_dtypes(path)) == {np.dtype("float16")}
    assert h5_bytes(path) == data_bytes // 2
    loaded = load_pretrainer(str(tmp_path / "model"))
    for a, b in zip(model.discriminator.weights, loaded.discriminator.weights):
        assert b.dtype == "float32"
        expected = a.numpy().astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(b.numpy(), expected)
        assert np.abs(b.numpy() - a.numpy()).max() <= 1e-3 * max(1.0, np.abs(a.numpy()).max())


def test_snapshots_every_interval_keep_the_two_newest_and_name_the_latest(tmp_path, model):
    vocab = str(write_vocab(tmp_path / "vocab.txt"))
    clock, directory = FakeClock(), tmp_path / "snapshots"
    writer = snapshots(model, directory, vocab, clock)
    writer.on_train_begin()
    advance(writer, clock, 10, 60)  # 1 minute: not yet
    assert not directory.exists()
    advance(writer, clock, 20, 61)  # 2 minutes and a second
    assert latest_snapshot(str(directory)) == str(directory / "step_0000020")
    for step in (30, 40):
        advance(writer, clock, step, 121)
    assert sorted(os.listdir(directory)) == ["latest", "step_0000030", "step_0000040"]
    newest = latest_snapshot(str(directory))
    assert newest == str(directory / "step_0000040")
    record = read_snapshot(newest)
    assert record["step"] == 40 and record["weights_dtype"] == "fp16"
    assert record["minutes"] == pytest.approx((61 + 60 + 242) / 60, abs=1e-3)
    assert record["train_metrics"] == {"disc_auc": 0.75}
    assert sorted(os.listdir(newest)) == sorted(
        ["config.json", "vocab.txt", "snapshot.json", "discriminator.weights.h5", "discriminator_head.weights.h5",
         "generator.weights.h5", "generator_head.weights.h5"])
    assert set(h5_dtypes(os.path.join(newest, "generator.weights.h5"))) == {np.dtype("float16")}
    # The final write of the same step is not written twice; a new step is.
    assert writer.write(40) == newest
    writer.write(41)
    assert latest_snapshot(str(directory)).endswith("step_0000041")


def test_a_failed_snapshot_leaves_the_last_whole_one_named(tmp_path, model):
    vocab = str(write_vocab(tmp_path / "vocab.txt"))
    clock, directory = FakeClock(), tmp_path / "snapshots"
    writer = snapshots(model, directory, vocab, clock, dtype="fp32")
    writer.on_train_begin()
    advance(writer, clock, 5, 130)
    broken = snapshots(model, directory, vocab, clock, fail=True)
    broken.on_train_begin()
    clock.now += 200
    with pytest.raises(OSError, match="disk full"):
        broken.write(9)
    assert latest_snapshot(str(directory)) == str(directory / "step_0000005")
    assert json.loads((directory / "step_0000005" / "snapshot.json").read_text())["weights_dtype"] == "fp32"
    assert not (directory / "step_0000009").exists()
