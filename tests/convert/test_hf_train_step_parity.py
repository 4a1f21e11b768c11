"""One ELECTRA pre-training step against Hugging Face transformers (PyTorch), exactly.

Our pre-trainer is exported to transformers' `ElectraForPreTraining` /
`ElectraForMaskedLM` (embeddings shared as in the paper). Both sides then take
the same step: the same masked positions and [MASK]ed input (ours), the same
generator samples (ours, written into the discriminator's input by torch
itself), and torch computes its own labels (replaced = differs from the
original, real tokens only) and losses:
L = L_MLM (mean over the masked slots) + 50 L_Disc (mean over the real tokens).
The losses and the gradient of every weight of both networks must agree.

PyTorch comes with the [hf] extra; under CI=true a missing torch fails.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf

import convert_helpers as h
from helpers import require_torch


def _our_step(model, batch):
    seed = tf.constant([5, 0], tf.int64)
    with tf.GradientTape() as tape:
        out = model.forward(batch, seed, training=True)
    grads = tape.gradient(out["loss"], model.trainable_variables)
    return out, {v.path: (np.zeros(v.shape, np.float32) if g is None else tf.convert_to_tensor(g).numpy())
                 for v, g in zip(model.trainable_variables, grads)}


def _as_hf_tensors(model, values_by_path, tmp_path):
    """{Hugging Face name: array} of `values_by_path` laid out like our weights (the exporter's map)."""
    from electra_tf.convert import hf

    twin = h.random_pretrainer(model.config, seed=1)
    for v in twin.weights:
        v.assign(values_by_path.get(v.path, np.zeros(v.shape, np.float32)))
    dirs = hf.export(twin, str(tmp_path))
    tensors = {}
    for kind in ("discriminator", "generator"):
        got, _ = hf.read_safetensors(f"{dirs[kind]}/model.safetensors")
        tensors.update({(kind, name): value for name, value in got.items()})
    return tensors


def test_one_step_losses_and_gradients_equal_transformers(tmp_path):
    torch = require_torch()
    import transformers
    from electra_tf.convert import hf

    config = h.tiny_config()  # shared embeddings, no dropout, exact GELU
    model = h.random_pretrainer(config, seed=3)
    assert config.embedding_sharing == "shared" and config.disc_weight == 50.0 and config.gen_weight == 1.0
    dirs = hf.export(model, str(tmp_path / "hf"), h.write_vocab(tmp_path / "vocab.txt"))
    disc = transformers.ElectraForPreTraining.from_pretrained(dirs["discriminator"]).train()
    gen = transformers.ElectraForMaskedLM.from_pretrained(dirs["generator"]).train()
    # The paper's shared embeddings: one module, and the generator's output layer tied to it.
    gen.electra.embeddings = disc.electra.embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    torch.set_default_dtype(torch.float32)

    batch = {k: tf.constant(v) for k, v in h.encode(h.SENTENCES * 2, config.max_seq_length).items()}
    out, ours = _our_step(model, batch)

    ids = torch.tensor(batch["input_ids"].numpy(), dtype=torch.long)
    mask = torch.tensor(batch["input_mask"].numpy(), dtype=torch.long)
    segments = torch.tensor(batch["segment_ids"].numpy(), dtype=torch.long)
    positions = torch.tensor(out["masked_positions"].numpy(), dtype=torch.long)
    used = torch.tensor(out["masked_weights"].numpy() > 0)
    samples = torch.tensor(out["sampled_ids"].numpy(), dtype=torch.long)
    masked_input = torch.tensor(out["masked_input_ids"].numpy(), dtype=torch.long)
    assert int(used.sum()) >= 6

    # Generator: cross-entropy at the masked slots against the originals.
    gen_logits = gen(input_ids=masked_input, attention_mask=mask, token_type_ids=segments).logits
    slot_logits = torch.gather(gen_logits, 1, positions[..., None].expand(-1, -1, gen_logits.shape[-1]))
    originals = torch.gather(ids, 1, positions)
    mlm_loss = torch.nn.functional.cross_entropy(slot_logits[used], originals[used], reduction="sum") / used.sum()
    # Discriminator: the samples written at the masked slots; labels by the paper's rule.
    disc_input = ids.clone()
    rows = torch.arange(ids.shape[0])[:, None].expand_as(positions)
    disc_input[rows[used], positions[used]] = samples[used]
    labels = ((disc_input != ids) & (mask > 0)).float()
    assert 0 < labels.sum() < used.sum() + 1
    disc_logits = disc(input_ids=disc_input, attention_mask=mask, token_type_ids=segments).logits
    real = mask > 0
    disc_loss = torch.nn.functional.binary_cross_entropy_with_logits(
        disc_logits[real], labels[real], reduction="sum") / real.sum()
    total = mlm_loss + 50.0 * disc_loss
    total.backward()

    np.testing.assert_array_equal(out["disc_input_ids"].numpy(), disc_input.numpy())
    np.testing.assert_array_equal(out["disc_labels"].numpy(), labels.numpy().astype(np.int32))
    assert float(out["mlm_loss"]) == pytest.approx(mlm_loss.item(), rel=1e-5)
    assert float(out["disc_loss"]) == pytest.approx(disc_loss.item(), rel=1e-5)
    assert float(out["loss"]) == pytest.approx(total.item(), rel=1e-5)

    expected = _as_hf_tensors(model, ours, tmp_path / "grads")
    # Some gradients are zero in exact arithmetic (an attention key bias cancels in the
    # softmax) and float noise on both sides: the absolute tolerance is relative to the
    # largest gradient of the step.
    scale = max(float(p.grad.abs().max()) for net in (disc, gen) for p in net.parameters()
                if p.grad is not None)
    compared = 0
    for kind, net in (("discriminator", disc), ("generator", gen)):
        for name, param in net.named_parameters():
            key = (kind, name) if (kind, name) in expected else ("discriminator", name)
            if name == "generator_lm_head.weight":  # tied: the word embeddings' gradient
                continue
            if kind == "generator" and name.startswith("electra.embeddings."):
                continue  # the shared module, compared under the discriminator
            assert key in expected, f"no gradient of ours maps to {kind} {name}"
            theirs = param.grad.numpy()
            np.testing.assert_allclose(expected[key], theirs, rtol=1e-4, atol=1e-6 * scale,
                                       err_msg=f"{kind} {name}")
            compared += 1
    assert compared >= 50


def test_missing_torch_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_torch()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="PyTorch"):
        require_torch()
