"""Batches of one-label-per-text tasks are cut to their longest row: the outputs, the loss and
the training step are those of the full-length batch.

Real text: the first SST-2 training sentences of ../shared/data, in a tiny encoder (dropout off,
so a step is comparable element for element).
"""

import numpy as np
import pytest
import tensorflow as tf

SEQ = 128


def test_trim_to_longest_cuts_the_padding_columns_only():
    from electra_tf.finetune.training_setup import trim_to_longest

    mask = np.zeros((2, 64), np.int32)
    mask[0, :3], mask[1, :21] = 1, 1
    batch = {"input_ids": np.arange(128, dtype=np.int32).reshape(2, 64) * mask, "input_mask": mask,
             "segment_ids": np.zeros((2, 64), np.int32), "label_count": np.array([1, 2])}
    cut = {k: v.numpy() for k, v in trim_to_longest({k: tf.constant(v) for k, v in batch.items()}, 16).items()}
    assert cut["input_ids"].shape == cut["input_mask"].shape == cut["segment_ids"].shape == (2, 32)  # 21 -> 32
    np.testing.assert_array_equal(cut["input_ids"], batch["input_ids"][:, :32])
    np.testing.assert_array_equal(cut["label_count"], [1, 2])  # not a sequence: untouched
    full = {k: tf.constant(v) for k, v in batch.items()}
    full["input_mask"] = tf.ones((2, 64), tf.int32)
    assert trim_to_longest(full, 48)["input_ids"].shape == (2, 64)  # never past the length they have


@pytest.fixture(scope="module")
def sst2_features(sst2_dir, sst2_model_files):
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification

    with open(f"{sst2_dir}/train.tsv", encoding="utf-8") as f:
        rows = [line.split("\t") for line in f.read().splitlines()[1:65]]
    tokenizer = FinetuneTokenizer(f"{sst2_model_files}/vocab.txt", True)
    x = encode_classification(tokenizer, [r[0] for r in rows], None, SEQ)
    y = np.array([int(r[1]) for r in rows], np.int32)
    assert x["input_mask"].sum(1).max() < SEQ // 2  # short sentences: most columns are padding
    return x, y


def _model(sst2_model_files, seed=0):
    import keras

    from electra_tf.config import ElectraConfig
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models import build_encoder

    cfg = ElectraConfig.from_json(f"{sst2_model_files}/config.json").replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    keras.utils.set_random_seed(seed)
    model = build_and_call(ClassifierModel(build_encoder(cfg), 2, dropout=0.0, pooling="mean"), SEQ)
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.large
def test_outputs_and_a_training_step_equal_the_full_length_ones(sst2_features, sst2_model_files):
    from electra_tf.finetune.training_setup import make_dataset

    x, y = sst2_features
    padded, trimmed = make_dataset(x, y, 16), make_dataset(x, y, 16, trim_multiple=16)
    widths = [int(batch[0]["input_ids"].shape[1]) for batch in trimmed]
    assert all(w % 16 == 0 and w < SEQ for w in widths), widths

    a, b = _model(sst2_model_files), _model(sst2_model_files)
    np.testing.assert_allclose(a.predict(make_dataset(x, None, 16, trim_multiple=16), verbose=0),
                               a.predict(make_dataset(x, None, 16), verbose=0), atol=1e-5)
    loss_a = a.fit(padded, epochs=1, verbose=0, shuffle=False).history["loss"][0]
    loss_b = b.fit(trimmed, epochs=1, verbose=0, shuffle=False).history["loss"][0]
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wb, wa, atol=1e-5)


def test_glue_and_own_files_cut_their_batches_and_span_tasks_do_not():
    from electra_tf.finetune.settings import Settings
    from electra_tf.finetune.tasks.task_registry import get_task

    s = Settings(task="sst2", init="random", data_dir=None, output_dir="")
    assert get_task("sst2").trim_multiple(s) == 16 and get_task("own_data").trim_multiple(s) == 16
    assert get_task("sst2").trim_multiple(Settings(**dict(vars(s), jit_compile=True))) == 64  # few XLA shapes
    assert get_task("squad").trim_multiple(s) is None and get_task("ner").trim_multiple(s) is None
