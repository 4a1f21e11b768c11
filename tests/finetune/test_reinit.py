"""--reinit_top_layers: the top blocks are re-drawn, everything below keeps its weights."""

import numpy as np
import pytest

from electra_tf.config import ElectraConfig
from electra_tf.finetune.settings import FinetuneError, Settings, check_reinit
from electra_tf.models.classifier_model import build_and_call
from electra_tf.models.encoder_reinit import reinit_top_layers
from electra_tf.models import build_encoder


def _built(config):
    return build_and_call(build_encoder(config), 4)


def _values(layer):
    return [np.asarray(w).copy() for w in layer.weights]


def test_top_block_is_redrawn_and_the_rest_kept(repo_root):
    config = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    assert config.num_hidden_layers >= 2
    encoder = _built(config)
    drawn = [np.asarray(w).std() > 0 for w in encoder.transformer_layers[-1].weights]
    # Stand-in for loaded pre-trained weights: every value moved away from its initializer.
    encoder.set_weights([w + 0.5 for w in encoder.get_weights()])
    embeddings = _values(encoder.embeddings)
    blocks = [_values(b) for b in encoder.transformer_layers]
    reinit_top_layers(encoder, config, 1)
    for old, new in zip(embeddings, _values(encoder.embeddings)):
        np.testing.assert_array_equal(old, new)
    for old_block, block in zip(blocks[:-1], encoder.transformer_layers[:-1]):
        for old, new in zip(old_block, _values(block)):
            np.testing.assert_array_equal(old, new)
    top = list(zip(blocks[-1], _values(encoder.transformer_layers[-1])))
    assert any(drawn)
    for (old, new), is_drawn in zip(top, drawn):
        if is_drawn:  # a fresh draw around zero at the initializer's scale
            assert abs(new.mean()) < 0.01 and 0.005 < new.std() < 0.05, new.shape
        else:  # LayerNorm gammas and biases are their initial constants again
            assert np.all(new == new.flat[0]) and new.flat[0] in (0.0, 1.0)


def test_zero_layers_changes_nothing(repo_root):
    config = ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))
    encoder = _built(config)
    before = _values(encoder)
    reinit_top_layers(encoder, config, 0)
    for old, new in zip(before, _values(encoder)):
        np.testing.assert_array_equal(old, new)


@pytest.mark.parametrize("n", [-1, 3, True])
def test_out_of_range_is_one_line(n):
    s = Settings(task="sst2", init="random", data_dir=None, output_dir="x", reinit_top_layers=n)
    with pytest.raises(FinetuneError, match=r"--reinit_top_layers=.* between 0 and the encoder's 2 layers"):
        check_reinit(s, 2)


def test_cli_refuses_more_layers_than_the_encoder_has(repo_root, sst2_dir, vocab_file, tmp_path):
    import subprocess
    import sys
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "electra_tf.finetune", "--task", "sst2", "--init", "random",
         "--config", str(repo_root / "configs" / "tiny.json"), "--vocab_file", vocab_file,
         "--data_dir", sst2_dir, "--output_dir", str(out), "--reinit_top_layers", "3"],
        cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: --reinit_top_layers=3 must be between 0 and the encoder's 2 layers"]
    assert not out.exists()
