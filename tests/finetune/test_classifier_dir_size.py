"""A fine-tuned classifier's saved weights are the model's: no optimizer state (Adam's two slots
per weight would triple the file), and they load back into a fresh, uncompiled model."""

import os

import h5py
import keras
import numpy as np
import pytest

from electra_tf.config import ElectraConfig
from electra_tf.export.serving_loader import load_classifier
from electra_tf.models.model_folder import CLASSIFIER_WEIGHTS, save_classifier
from electra_tf.models.classifier_model import ClassifierModel, build_and_call
from electra_tf.models import build_encoder

SEQ = 8


@pytest.mark.large
def test_a_trained_classifier_is_saved_without_its_optimizer(tmp_path):
    config = ElectraConfig.load("tiny")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                               [f"w{i}" for i in range(config.vocab_size - 5)]) + "\n", encoding="utf-8")
    model = ClassifierModel(build_encoder(config), 2, False, 0.0, config.initializer_range, False)
    build_and_call(model, SEQ)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    batch = {"input_ids": np.full((4, SEQ), 7, "int32"), "input_mask": np.ones((4, SEQ), "int32"),
             "segment_ids": np.zeros((4, SEQ), "int32")}
    model.fit(batch, np.array([0, 1, 0, 1]), epochs=1, verbose=0)
    assert model.optimizer.variables  # Adam's slots exist: the model was trained with them

    out = tmp_path / "seed_1"
    save_classifier(str(out), model, config, str(vocab), ["a", "b"], "own", pair=False, max_seq_length=SEQ)
    with h5py.File(out / CLASSIFIER_WEIGHTS, "r") as f:
        assert "optimizer" not in f
    weights_bytes = sum(int(np.prod(w.shape)) * 4 for w in model.weights)
    size = os.path.getsize(out / CLASSIFIER_WEIGHTS)
    assert size <= 1.1 * weights_bytes + 200_000, (size, weights_bytes)  # + HDF5 headers

    loaded, _, _ = load_classifier(str(out))
    for ours, theirs in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
