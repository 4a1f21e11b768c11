"""Analytic training FLOPs of ELECTRA pre-training.

Counted the way the ELECTRA paper's `flops_computation.py` counts them, so
that our numbers can be set beside the paper's (ELECTRA-Small: 1.4e18 FLOPs
for 1M steps of batch 128 at seq 128; ELECTRA-Base: 6.4e19):

- an operation is a mathematical operation; a matmul of [m, k] x [k, n] is
  2*m*k*n; element-wise extras use the reference's constants (dropout 4,
  LayerNorm 5, activation 8, softmax 5 per element);
- the backward pass costs as much as the forward pass ("train = 2 x forward");
- embedding lookups are counted as dense one-hot matmuls (2*E*V per token);
- the generator's output softmax runs on a fraction `output_frac` of the
  tokens (P / seq: only masked positions are projected onto the vocabulary).

That convention is what `convention="reference"` returns. It is not what the
hardware executes: a matmul's backward pass computes two products (the input
gradient and the weight gradient), i.e. 2x its forward, and our embeddings are
gathers, not matmuls. `convention="executed"` therefore returns
3 x forward FLOPs with sparse embedding lookups, the usual "6 N" count used for
model-FLOPs utilisation. The benchmark reports both.

Every pre-training objective is covered by `train_flops_per_step` (per step)
and `total_train_flops` (a whole run; two_stage weights its two phases by
their steps), so runs of different objectives can be compared at equal compute.

Example:

>>> from electra_tf.config import ElectraConfig
>>> f = electra_train_flops(ElectraConfig(), batch_size=128)
>>> round(f["total"] / 1e9)  # reference convention, per step
1292
>>> mlm = ElectraConfig(objective="mlm", max_predictions_per_seq=20)
>>> round(train_flops_per_step(mlm, 128)["total"] * 1.45e6 / 1e15)  # the paper's BERT-Small
1419
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

from electra_tf.objectives.objective_registry import get_objective

# Per-element constants of the reference counting (see module docstring).
DROPOUT_FLOPS = 4  # random number, compare, mask multiply, 1/(1-p) multiply
LAYER_NORM_FLOPS = 5  # mean, variance (square + sum), shift, scale
ACTIVATION_FLOPS = 8  # the tanh form of GELU
SOFTMAX_FLOPS = 5  # max, subtract, exp, sum, divide

CONVENTIONS = ("reference", "executed")


@dataclasses.dataclass(frozen=True)
class TransformerShape:
    """The sizes that determine one Transformer encoder's FLOPs.

    Args:
        hidden: H.
        layers: number of blocks.
        seq: sequence length.
        vocab: V.
        embedding: E (defaults to H); a dense E->H projection is counted when E != H.
        intermediate: FFN width (defaults to 4H).
        heads: attention heads (defaults to max(1, H // 64)).
        output_frac: fraction of tokens that go through the vocabulary softmax.
        sparse_embed_lookup: False counts input lookups as one-hot matmuls (reference).
    """

    hidden: int
    layers: int
    seq: int = 512
    vocab: int = 30522
    embedding: Optional[int] = None
    intermediate: Optional[int] = None
    heads: Optional[int] = None
    output_frac: float = 0.15625
    sparse_embed_lookup: bool = False

    @property
    def e(self) -> int:
        return self.hidden if self.embedding is None else self.embedding

    @property
    def i(self) -> int:
        return 4 * self.hidden if self.intermediate is None else self.intermediate

    @property
    def num_heads(self) -> int:
        return max(self.hidden // 64, 1) if self.heads is None else self.heads

    # ------------------------------------------------------- forward, per sequence
    def block_flops(self) -> int:
        """Forward FLOPs of one Transformer block on one sequence."""
        h, s, i, n = self.hidden, self.seq, self.i, self.num_heads
        per_token = (
            3 * 2 * h * h  # Q, K, V projections
            + 3 * h  # their biases
            + 2 * h * s  # Q K^T
            + SOFTMAX_FLOPS * s * n
            + DROPOUT_FLOPS * s * n  # attention-probability dropout
            + s * n  # 1/sqrt(d) scaling
            + 2 * h * s  # probabilities x V
            + 2 * h * h  # attention output projection
            + h  # its bias
            + DROPOUT_FLOPS * h
            + h  # residual
            # The reference counts this LayerNorm as 5 per *token*, not per
            # element (a slip worth < 0.01%); kept so totals match the paper.
            + LAYER_NORM_FLOPS
            + 2 * h * i  # FFN in
            + ACTIVATION_FLOPS * i
            + i  # its bias
            + 2 * h * i  # FFN out
            + h  # its bias
            + DROPOUT_FLOPS * h
            + h  # residual
            + LAYER_NORM_FLOPS * h
        )
        return per_token * s

    def input_embedding_flops(self) -> int:
        """Forward FLOPs of the embeddings (+ E->H projection) on one sequence."""
        e, h, s = self.e, self.hidden, self.seq
        per_token = 0 if self.sparse_embed_lookup else 2 * e * self.vocab
        per_token += (
            2 * e * (s + 2)  # position and token-type "lookups", as the reference counts them
            + 2 * e  # adding them
            + LAYER_NORM_FLOPS * e
            + DROPOUT_FLOPS * e
        )
        if e != h:
            per_token += 2 * h * e + h  # projection and bias
        return per_token * s

    def mlm_head_flops(self) -> float:
        """Forward FLOPs of the masked-LM head (dense H->E, LN, tied softmax) on one sequence."""
        e, h, v = self.e, self.hidden, self.vocab
        per_token = (
            2 * e * v  # vocabulary projection
            + 2 * h * e  # dense H->E
            + e  # bias
            + ACTIVATION_FLOPS * e
            + LAYER_NORM_FLOPS * e
            + SOFTMAX_FLOPS * v
            + 2 * v  # picking the target word's log-probability
        )
        return self.output_frac * per_token * self.seq

    def discriminator_head_flops(self) -> int:
        """Forward FLOPs of the replaced-token head (dense H->H, gelu, H->1) on one sequence."""
        h = self.hidden
        return (2 * h * h + h + ACTIVATION_FLOPS * h + 2 * h) * self.seq

    def forward_flops(self, discriminator: bool) -> float:
        head = self.discriminator_head_flops() if discriminator else self.mlm_head_flops()
        return self.layers * self.block_flops() + self.input_embedding_flops() + head


def _shapes(config, seq: int, sparse: bool):
    """(discriminator, generator) `TransformerShape`s of an `ElectraConfig`."""
    output_frac = _predictions(config, seq) / seq
    disc = TransformerShape(
        hidden=config.hidden_size, layers=config.num_hidden_layers, seq=seq,
        vocab=config.vocab_size, embedding=config.embedding_size,
        intermediate=config.intermediate_size, heads=config.num_attention_heads,
        output_frac=output_frac, sparse_embed_lookup=sparse,
    )
    gen = TransformerShape(
        hidden=config.generator_hidden_dim, layers=config.generator_num_layers, seq=seq,
        vocab=config.vocab_size,
        # Tied embeddings: the generator reads the discriminator's E-wide tables.
        # Untied, the reference sizes the generator's own tables at its width.
        embedding=None if config.untied_generator_embeddings else config.embedding_size,
        intermediate=config.generator_intermediate_size, heads=config.generator_num_heads,
        output_frac=output_frac, sparse_embed_lookup=sparse,
    )
    return disc, gen


def _predictions(config, seq: int) -> int:
    if config.max_predictions_per_seq is not None:
        return int(config.max_predictions_per_seq)
    return int((config.mask_prob + 0.005) * seq)


def electra_train_flops(config, batch_size: int, seq_length: Optional[int] = None,
                        convention: str = "reference") -> Dict[str, float]:
    """Training FLOPs of one ELECTRA pre-training step.

    Args:
        config: an `ElectraConfig`.
        batch_size: global batch size.
        seq_length: defaults to `config.max_seq_length`.
        convention: "reference" (the paper's count: train = 2 x forward, dense
            embedding lookups) or "executed" (train = 3 x forward, sparse lookups).

    Returns a dict with "generator", "discriminator" and "total" FLOPs per step,
    and "attention" (the part of the total spent in Q K^T and probs x V).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention={convention!r}: use one of {', '.join(CONVENTIONS)}")
    seq = int(seq_length or config.max_seq_length)
    sparse = convention == "executed"
    factor = 2 if convention == "reference" else 3
    disc, gen = _shapes(config, seq, sparse)
    d = factor * batch_size * disc.forward_flops(discriminator=True)
    g = factor * batch_size * gen.forward_flops(discriminator=False)
    attention = factor * batch_size * seq * seq * 4 * (
        disc.layers * disc.hidden + gen.layers * gen.hidden)
    return {"generator": g, "discriminator": d, "total": g + d, "attention": attention}


def train_flops_per_step(config, batch_size: int, seq_length: Optional[int] = None,
                         convention: str = "reference", step: Optional[int] = None
                         ) -> Dict[str, float]:
    """Training FLOPs of one pre-training step of `config.objective`.

    What each objective runs (forward and backward):
    - electra, electra_15, adversarial: generator (MLM head on the P masked
      positions) + discriminator (binary head on every token). ELECTRA 15%
      computes its loss on fewer tokens but runs the same networks; the
      REINFORCE term of adversarial reuses logits already computed.
    - mlm: the full-size network with the MLM head on the P masked positions
      (BERT; the paper's `bert_small` count).
    - replace_mlm: generator + the full-size network with the MLM head on the
      P masked positions.
    - all_tokens_mlm: generator + the full-size network with the MLM head on
      every position (output_frac 1) + the copy gate (a binary-head-sized
      dense -> gelu -> dense(1) on every token).
    - two_stage: mlm for steps < `two_stage_mlm_steps`, electra after; pass
      `step`, or use `total_train_flops`.
    - electric: electra's networks, with the generator's softmax on every
      position (the noise log-probabilities of every token, output_frac 1).
    - embedding_sharing=gdes adds, once per step, the V x E additions that
      merge stop_gradient(E_gen) + E_delta (counted in "discriminator").

    Args:
        config: an `ElectraConfig`.
        batch_size: global batch size.
        seq_length: defaults to `config.max_seq_length`.
        convention: "reference" or "executed" (see the module docstring).
        step: 0-based step index; only two_stage needs it.

    Returns a dict with "generator", "discriminator" (the full-size network,
    whatever its head), "total" and "attention" FLOPs per step.
    """
    objective = get_objective(get_objective(config.objective).trained_at(config, step))
    flops = _objective_flops(config, objective, batch_size, seq_length, convention)
    if config.embedding_sharing == "gdes":
        merge = config.vocab_size * config.embedding_size
        flops = dict(flops, discriminator=flops["discriminator"] + merge,
                     total=flops["total"] + merge)
    return flops


def _objective_flops(config, objective, batch_size, seq_length, convention):
    """`train_flops_per_step` of one one-phase objective class, without GDES: what runs is
    what the class declares (`networks`, `mlm_head_on_every_position`,
    `generator_on_every_position`)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention={convention!r}: use one of {', '.join(CONVENTIONS)}")
    seq = int(seq_length or config.max_seq_length)
    factor = 2 if convention == "reference" else 3
    disc, gen = _shapes(config, seq, convention == "executed")
    if "discriminator_head" in objective.networks:
        per_seq = disc.forward_flops(discriminator=True)
    elif objective.mlm_head_on_every_position:
        full = dataclasses.replace(disc, output_frac=1.0)
        per_seq = full.forward_flops(discriminator=False)
        if "copy_head" in objective.networks:  # the copy gate: a binary-head-sized layer per token
            per_seq += full.discriminator_head_flops()
    else:
        per_seq = disc.forward_flops(discriminator=False)
    d = factor * batch_size * per_seq
    g = 0.0
    attention_width = disc.layers * disc.hidden
    if "generator" in objective.networks:
        if objective.generator_on_every_position:
            gen = dataclasses.replace(gen, output_frac=1.0)
        g = factor * batch_size * gen.forward_flops(discriminator=False)
        attention_width += gen.layers * gen.hidden
    attention = factor * batch_size * seq * seq * 4 * attention_width
    return {"generator": g, "discriminator": d, "total": g + d, "attention": attention}


def total_train_flops(config, batch_size: int, train_steps: int, seq_length: Optional[int] = None,
                      convention: str = "reference") -> float:
    """FLOPs of a whole run of `train_steps` steps (two_stage: each phase's steps at its cost).

    Args: as `train_flops_per_step`, plus `train_steps`.
    """
    def per_step(step):
        return train_flops_per_step(config, batch_size, seq_length, convention, step)["total"]

    phases = get_objective(config.objective).phase_steps(config, train_steps)
    return sum(steps * per_step(step) for step, steps in phases if steps)


def paper_electra_train_flops(h_d, l_d, h_g, l_g, batch_size, train_steps,
                              embedding=None, seq=512, output_frac=0.15625) -> float:
    """The paper's total pre-training FLOPs for tied-embedding ELECTRA runs.

    `paper_electra_train_flops(256, 12, 64, 12, 128, 1e6, embedding=128, seq=128)`
    is ELECTRA-Small (Table 1: 1.4e18).
    """
    e = h_d if embedding is None else embedding
    disc = TransformerShape(h_d, l_d, seq=seq, embedding=e, output_frac=output_frac)
    gen = TransformerShape(h_g, l_g, seq=seq, embedding=e, output_frac=output_frac)
    per_example = disc.forward_flops(True) + gen.forward_flops(False)
    return 2 * batch_size * train_steps * per_example
