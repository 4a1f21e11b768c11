"""FLOPs per pre-training objective, by hand on the tiny config and against the paper's BERT-Small."""

import pytest

from electra_tf.config import ElectraConfig
from electra_tf.flops import (
    TransformerShape,
    electra_train_flops,
    total_train_flops,
    train_flops_per_step,
)

# Per-token forward FLOPs of the tiny config's pieces, derived by hand in
# tests/test_flops.py: discriminator block, input embeddings, binary head.
BLOCK, EMBED, BINARY_HEAD = 119557, 264736, 8896
# The full-size network's MLM head per predicted token (H=64, E=32, V=4000):
# vocab projection 2*32*4000 + dense 2*64*32 + bias 32 + gelu 8*32 + LN 5*32
# + softmax 5*4000 + target pick 2*4000.
MLM_HEAD = 256000 + 4096 + 32 + 256 + 160 + 20000 + 8000


@pytest.fixture(scope="module")
def tiny(repo_root):
    return ElectraConfig.from_json(str(repo_root / "configs" / "tiny.json"))


def _flops(cfg, objective, **kw):
    return train_flops_per_step(cfg.replace(objective=objective, **kw), batch_size=32)


def test_mlm_is_one_full_size_model_with_the_softmax_on_masked_positions(tiny):
    got = _flops(tiny, "mlm")
    # 2 (fwd+bwd) * 32 examples * (64 tokens * (2 blocks + embeddings) + 9 predictions * head)
    assert got["total"] == got["discriminator"] == 2 * 32 * (64 * (2 * BLOCK + EMBED) + 9 * MLM_HEAD)
    assert got["generator"] == 0
    assert got["attention"] == 2 * 32 * 64 * 64 * 4 * (2 * 64)


def test_replace_and_all_tokens_mlm_by_hand(tiny):
    generator = electra_train_flops(tiny, 32)["generator"]
    replace = _flops(tiny, "replace_mlm")
    assert replace["generator"] == generator
    assert replace["discriminator"] == _flops(tiny, "mlm")["discriminator"]
    every = _flops(tiny, "all_tokens_mlm")
    # MLM head on all 64 positions plus the copy gate (binary-head sized) on every token.
    assert every["discriminator"] == 2 * 32 * 64 * (2 * BLOCK + EMBED + MLM_HEAD + BINARY_HEAD)
    assert every["total"] == generator + every["discriminator"]


def test_electra_variants_cost_what_electra_costs(tiny):
    electra = electra_train_flops(tiny, 32)
    assert _flops(tiny, "electra") == electra
    assert _flops(tiny, "electra_15") == electra  # same networks, loss on fewer tokens
    assert _flops(tiny, "adversarial") == electra
    # The tiny ordering the study relies on.
    assert (_flops(tiny, "all_tokens_mlm")["total"] > _flops(tiny, "replace_mlm")["total"]
            > electra["total"] > _flops(tiny, "mlm")["total"])


def test_two_stage_is_weighted_by_steps(tiny):
    cfg = tiny.replace(objective="two_stage", two_stage_mlm_steps=30)
    mlm = _flops(tiny, "mlm")["total"]
    electra = electra_train_flops(tiny, 32)["total"]
    assert train_flops_per_step(cfg, 32, step=29)["total"] == mlm
    assert train_flops_per_step(cfg, 32, step=30)["total"] == electra
    assert total_train_flops(cfg, 32, 100) == 30 * mlm + 70 * electra
    assert total_train_flops(cfg, 32, 20) == 20 * mlm  # never reaches the switch
    with pytest.raises(ValueError, match="step="):
        train_flops_per_step(cfg, 32)
    assert total_train_flops(tiny.replace(objective="mlm"), 32, 7) == 7 * mlm


def test_executed_convention_per_objective(tiny):
    ref = _flops(tiny, "mlm")
    exe = train_flops_per_step(tiny.replace(objective="mlm"), 32, convention="executed")
    # 3 x forward, without the one-hot lookup (2*E*V = 256000 per token).
    assert exe["total"] == 3 * 32 * (64 * (2 * BLOCK + EMBED - 256000) + 9 * MLM_HEAD)
    assert exe["total"] < ref["total"]
    with pytest.raises(ValueError, match="convention"):
        train_flops_per_step(tiny.replace(objective="mlm"), 32, convention="6N")


def test_mlm_matches_the_papers_bert_small():
    # flops_computation.py: bert_small = TransformerHparams(256, 12, e=128, s=128)
    # .get_train_flops(128, 1.45e6), with output_frac 0.15625 = 20/128.
    cfg = ElectraConfig(objective="mlm", max_predictions_per_seq=20)
    total = total_train_flops(cfg, 128, int(1.45e6))
    shape = TransformerShape(hidden=256, layers=12, seq=128, embedding=128)
    assert total == pytest.approx(2 * 128 * 1.45e6 * shape.forward_flops(False), rel=1e-12)
    # The script prints 1.419e18 for it (the paper rounds to 1.4e18).
    assert total == pytest.approx(1.419e18, rel=5e-4)


# The tiny generator's MLM head per predicted token (its H=32, E=32, V=4000):
# vocab projection 2*32*4000 + dense 2*32*32 + bias 32 + gelu 8*32 + LN 5*32
# + softmax 5*4000 + target pick 2*4000.
GEN_HEAD = 256000 + 2048 + 32 + 256 + 160 + 20000 + 8000


def test_electric_adds_the_generator_softmax_on_every_position(tiny):
    electra = electra_train_flops(tiny, 32)
    got = _flops(tiny, "electric")
    assert got["discriminator"] == electra["discriminator"]
    assert got["attention"] == electra["attention"]
    # 2 (fwd+bwd) * 32 examples * (64 - 9) more positions through the generator's head.
    assert got["generator"] == electra["generator"] + 2 * 32 * (64 - 9) * GEN_HEAD
    assert got["total"] == got["generator"] + got["discriminator"]


def test_gdes_adds_one_table_merge_per_step(tiny):
    electra = electra_train_flops(tiny, 32)
    got = _flops(tiny, "electra", embedding_sharing="gdes")
    assert got["generator"] == electra["generator"]
    assert got["discriminator"] == electra["discriminator"] + 4000 * 32  # V x E additions
    assert got["total"] == electra["total"] + 4000 * 32
    assert total_train_flops(tiny.replace(embedding_sharing="gdes"), 32, 10) == 10 * got["total"]
