"""A model pre-trained with embedding_sharing=gdes, exported with `--to google` and `--to hf`.

Its discriminator's token table is E_gen + E_delta (models/embedding_sharing.py):
the exports hold that merged table for the discriminator and E_gen for the generator
(whose embeddings are its own, as with embedding_sharing=none).
"""

import numpy as np
import pytest

import convert_helpers as h
from helpers import require_torch
from electra_tf.convert import google, hf
from electra_tf.convert.__main__ import main as convert_main
from electra_tf.convert.mapping import check_and_assign, export_tensors, pretrainer_entries
from electra_tf.models.model_folder import load_config
from electra_tf.models.saving import load_encoder, save_pretrained

ATOL = 1e-5


@pytest.fixture(scope="module")
def gdes_model(tmp_path_factory):
    """(pretrainer, model_dir, E_gen, E_delta): every weight moved off its initial value (E_delta != 0)."""
    model = h.random_pretrainer(h.tiny_config(embedding_sharing="gdes"), seed=7)
    d = tmp_path_factory.mktemp("gdes")
    model_dir = save_pretrained(str(d / "model"), model, h.write_vocab(d / "vocab.txt"))
    e_gen = model.generator.embeddings.token_embedding.embeddings.numpy()
    e_delta = model.discriminator.embeddings.token_embedding.embeddings.numpy()
    assert np.abs(e_delta).max() > 0.01
    return model, model_dir, e_gen, e_delta


def test_the_saved_discriminator_holds_the_merged_table(gdes_model):
    _, model_dir, e_gen, e_delta = gdes_model
    encoder, _ = load_encoder(model_dir)
    np.testing.assert_allclose(encoder.embeddings.token_embedding.embeddings.numpy(), e_gen + e_delta, atol=ATOL)


def test_to_google(gdes_model, tmp_path):
    model, model_dir, e_gen, e_delta = gdes_model
    prefix = str(tmp_path / "ckpt" / "model.ckpt")
    assert convert_main(["--from", "electra_tf", "--input", model_dir, "--to", "google", "--output_dir", prefix]) == 0
    tensors, _ = google.read_checkpoint(str(tmp_path / "ckpt"))
    np.testing.assert_allclose(tensors["electra/embeddings/word_embeddings"], e_gen + e_delta, atol=ATOL)
    np.testing.assert_allclose(tensors["generator/embeddings/word_embeddings"], e_gen, atol=ATOL)

    config = model.config
    batch = h.model_batch(config)
    mask = batch["input_mask"].astype(bool)
    want_d = h.ours_discriminator_logits(model_dir, batch)
    want_g = h.ours_generator_logits(model_dir, batch)
    got_d = h.np_discriminator_logits(tensors, batch, config.num_attention_heads)
    got_g = h.np_generator_logits(tensors, batch, config.generator_num_heads)
    np.testing.assert_allclose(got_d[mask], want_d[mask], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got_g[mask], want_g[mask], atol=1e-4, rtol=1e-4)

    # A reference checkpoint cannot say "gdes": it re-imports as separate embeddings, same outputs.
    out = str(tmp_path / "back")
    assert convert_main(["--from", "google", "--input", str(tmp_path / "ckpt"), "--output_dir", out,
                         "--vocab", f"{model_dir}/vocab.txt", "--config", f"{model_dir}/config.json",
                         "--require_all"]) == 0
    assert load_config(out).embedding_sharing == "none"
    np.testing.assert_allclose(h.ours_discriminator_logits(out, batch)[mask], want_d[mask], atol=1e-4)
    np.testing.assert_allclose(h.ours_generator_logits(out, batch)[mask], want_g[mask], atol=1e-4)


def test_to_hf(gdes_model, tmp_path):
    model, model_dir, e_gen, e_delta = gdes_model
    out = tmp_path / "hf"
    assert convert_main(["--from", "electra_tf", "--input", model_dir, "--to", "hf", "--output_dir", str(out)]) == 0
    disc, _ = hf.read_safetensors(str(out / "discriminator" / "model.safetensors"))
    gen, _ = hf.read_safetensors(str(out / "generator" / "model.safetensors"))
    np.testing.assert_allclose(disc["electra.embeddings.word_embeddings.weight"], e_gen + e_delta, atol=ATOL)
    np.testing.assert_allclose(gen["electra.embeddings.word_embeddings.weight"], e_gen, atol=ATOL)
    gen_embeddings = model.generator.embeddings
    np.testing.assert_allclose(gen["electra.embeddings.position_embeddings.weight"],
                               gen_embeddings.position_embedding.position_embeddings.numpy(), atol=ATOL)

    # Back through the importer (no torch needed): same outputs as the gdes model.
    back = str(tmp_path / "back")
    assert convert_main(["--from", "hf", "--input", str(out / "discriminator"), "--generator_input",
                         str(out / "generator"), "--output_dir", back, "--require_all"]) == 0
    batch = h.model_batch(model.config)
    mask = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(h.ours_discriminator_logits(back, batch)[mask],
                               h.ours_discriminator_logits(model_dir, batch)[mask], atol=1e-4)
    np.testing.assert_allclose(h.ours_generator_logits(back, batch)[mask],
                               h.ours_generator_logits(model_dir, batch)[mask], atol=1e-4)


def test_hf_export_loads_in_transformers(gdes_model, tmp_path):
    torch = require_torch()
    import transformers
    model, model_dir, _, _ = gdes_model
    out = tmp_path / "hf"
    assert convert_main(["--from", "electra_tf", "--input", model_dir, "--to", "hf", "--output_dir", str(out)]) == 0
    batch = h.model_batch(model.config)
    mask = batch["input_mask"].astype(bool)
    feed = dict(input_ids=torch.tensor(batch["input_ids"], dtype=torch.long),
                attention_mask=torch.tensor(batch["input_mask"], dtype=torch.long),
                token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long))
    for kind, cls, want in (
            ("discriminator", transformers.ElectraForPreTraining, h.ours_discriminator_logits(model_dir, batch)),
            ("generator", transformers.ElectraForMaskedLM, h.ours_generator_logits(model_dir, batch))):
        theirs = cls.from_pretrained(str(out / kind)).eval()
        with torch.no_grad():
            got = theirs(**feed).logits.numpy()
        assert np.abs(got - want)[mask].max() <= 1e-4, kind


def test_canonical_tensors_load_back_into_a_gdes_pretrainer(gdes_model):
    """E_delta is read back as (merged - E_gen), after E_gen is assigned."""
    model, _, e_gen, e_delta = gdes_model
    tensors = export_tensors(pretrainer_entries(model))
    fresh = h.random_pretrainer(model.config, seed=99)
    status = check_and_assign(pretrainer_entries(fresh), tensors, "test")
    assert set(status.values()) == {"converted"}
    np.testing.assert_allclose(fresh.generator.embeddings.token_embedding.embeddings.numpy(), e_gen, atol=ATOL)
    np.testing.assert_allclose(fresh.discriminator.embeddings.token_embedding.embeddings.numpy(), e_delta,
                               atol=ATOL)
