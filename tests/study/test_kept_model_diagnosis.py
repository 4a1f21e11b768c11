"""scripts/kept_model_diagnosis.py measures what it says, on tiny models with known answers."""

import json

import numpy as np

from helpers import make_model_dir


def test_positions_and_tokens(tmp_path):
    from scripts import kept_model_diagnosis as diag
    from electra_tf.keras_compat import save_weights_only
    from electra_tf.models.saving import load_encoder

    kept, _, _ = make_model_dir(tmp_path / "kept", seed=1)
    early, _, _ = make_model_dir(tmp_path / "early", seed=2)
    # A kept model whose first 24 position rows (its pre-training length) grew 3x, the rest as drawn.
    encoder, config = load_encoder(kept)
    table = encoder.embeddings.position_embedding.position_embeddings
    values = table.numpy()
    values[:24] *= 3.0
    table.assign(values)
    save_weights_only(encoder, f"{kept}/discriminator.weights.h5")
    work = tmp_path / "work"
    argv = ["--kept", kept, "--early", early, "--work_dir", str(work)]
    assert diag.main(["positions"] + argv) == 0
    out = json.loads((work / "positions.json").read_text())
    kept_rows = out["kept"]
    assert kept_rows["pretrained_length"] == 24
    assert np.isclose(kept_rows["rows_trained"] / kept_rows["rows_next"], 3.0, rtol=0.25)
    assert np.isclose(out["random"]["rows_trained"] / out["random"]["rows_next"], 1.0, rtol=0.25)

    # The pre-training builder's tokenizer and fine-tuning's agree on every held-out review.
    assert diag.main(["tokens"] + argv) == 0
    tokens = json.loads((work / "tokens.json").read_text())
    assert tokens["texts"] == 2000 and tokens["identical"] == 2000
    assert tokens["unk_share"] > 0  # the tiny vocabulary lacks most words: [UNK] is counted
