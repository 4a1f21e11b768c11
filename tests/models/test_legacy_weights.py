"""Model directories written while the blocks were keras-hub layers still load."""

import re

import h5py
import numpy as np
import pytest

from electra_tf.config import ElectraConfig
from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.models import legacy_weights, saving
from electra_tf.pretrain import ElectraPretrainer

SPECIAL = SpecialTokenIds(pad=0, unk=1, cls=2, sep=3, mask=4)

# How electra_tf 0.1 named these variables (keras-hub TransformerEncoder / MaskedLMHead privates).
OLD_NAMES = (
    (r"transformer_block(_\d+)?/attention_output_dense/", r"transformer_encoder\1/_self_attention_layer/output_dense/"),
    (r"transformer_block(_\d+)?/(query|key|value)_dense/", r"transformer_encoder\1/_self_attention_layer/\2_dense/"),
    (r"transformer_block(_\d+)?/attention_layer_norm/", r"transformer_encoder\1/_self_attention_layer_norm/"),
    (r"transformer_block(_\d+)?/feedforward_", r"transformer_encoder\1/_feedforward_"),
    (r"^intermediate_(dense|layer_norm)/", r"_intermediate_\1/"),
)


def _to_old_layout(path):
    with h5py.File(path, "r") as f:
        items = []
        f.visititems(lambda n, o: items.append((n, o[()])) if isinstance(o, h5py.Dataset) else None)
    renamed = 0
    with h5py.File(path, "w") as f:
        for name, value in items:
            old = name
            for pattern, replacement in OLD_NAMES:
                old = re.sub(pattern, replacement, old)
            renamed += old != name
            f.create_dataset(old, data=value)
    return renamed


def test_rename_maps_every_old_name_to_todays():
    assert legacy_weights.rename(
        "transformer_layers/transformer_encoder_1/_self_attention_layer/output_dense/vars/0"
    ) == "transformer_layers/transformer_block_1/attention_output_dense/vars/0"
    assert legacy_weights.rename("_intermediate_layer_norm/vars/1") == "intermediate_layer_norm/vars/1"
    current = "transformer_layers/transformer_block/feedforward_output_dense/vars/0"
    assert legacy_weights.rename(current) == current


def test_old_model_directory_loads_with_the_same_weights(tmp_path, repo_root):
    config = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    pretrainer = ElectraPretrainer(config, SPECIAL)
    pretrainer.build()
    model_dir = str(tmp_path / "model")
    saving.save_pretrained(model_dir, pretrainer)
    assert _to_old_layout(f"{model_dir}/{saving.DISCRIMINATOR_FILE}") == 16 * config.num_hidden_layers
    assert _to_old_layout(f"{model_dir}/{saving.GENERATOR_HEAD_FILE}") == 4
    assert legacy_weights.is_legacy(f"{model_dir}/{saving.DISCRIMINATOR_FILE}")

    encoder, _, _ = saving.load_discriminator(model_dir)
    for ours, theirs in zip(pretrainer.discriminator.weights, encoder.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)
    _, head, _ = saving.load_generator(model_dir)
    for ours, theirs in zip(pretrainer.generator_head.weights, head.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)


def test_a_file_that_is_not_hdf5_is_one_line(tmp_path, repo_root):
    config = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    saving.save_pretrained(str(tmp_path), _built(config))
    (tmp_path / saving.DISCRIMINATOR_FILE).write_text("not weights")
    with pytest.raises(saving.ModelDirError, match="does not fit the model"):
        saving.load_discriminator(str(tmp_path))


def _built(config):
    pretrainer = ElectraPretrainer(config, SPECIAL)
    pretrainer.build()
    return pretrainer


def test_finetune_init_reads_an_old_discriminator_file(tmp_path, repo_root):
    # `finetune --init <old run>` reads the file directly, not through load_discriminator.
    from electra_tf.finetune.encoder_init import load_encoder_weights
    from electra_tf.models import build_encoder

    config = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    pretrainer = _built(config)
    saving.save_pretrained(str(tmp_path), pretrainer)
    path = f"{tmp_path}/{saving.DISCRIMINATOR_FILE}"
    assert _to_old_layout(path) == 16 * config.num_hidden_layers
    encoder = build_encoder(config)
    ones = np.ones((1, 8), "int32")
    encoder({"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones})
    load_encoder_weights(encoder, path)
    for ours, theirs in zip(pretrainer.discriminator.weights, encoder.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)


def test_an_old_training_checkpoint_resumes(tmp_path, repo_root):
    # `pretrain` resuming a run saved before the block rewrite reads its checkpoint renamed.
    from electra_tf.pretrain.callbacks import CheckpointManager
    from electra_tf.pretrain.optimization import create_optimizer

    config = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    saved = _built(config)
    saved.compile(optimizer=create_optimizer(config, train_steps=100))
    saved.optimizer.build(saved.trainable_variables)
    saved.optimizer.iterations.assign(40)
    path = CheckpointManager(str(tmp_path)).save(saved, step=40)
    assert _to_old_layout(path) >= 16 * config.num_hidden_layers

    fresh = _built(config)
    fresh.compile(optimizer=create_optimizer(config, train_steps=100))
    assert CheckpointManager(str(tmp_path)).restore_latest(fresh) == (40, path)
    for ours, theirs in zip(saved.weights, fresh.weights):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)
