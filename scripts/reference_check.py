"""Checks our TF pre-trainer against an independent PyTorch / Hugging Face ELECTRA reference.

Trains `ElectraPretrainer` (TensorFlow) and a reference built from Hugging Face
`ElectraForMaskedLM` (generator) + `ElectraForPreTraining` (discriminator) on
the same batches of the same shards, and prints both side by side every
--log_every steps: loss, MLM loss and accuracy, discriminator loss and AUC
(both over the last window of steps, computed the same way for both), the
share of real tokens the discriminator sees replaced, and the learning rate.

    python scripts/reference_check.py --config configs/tiny.json \
        --data_dir SHARDS --vocab_file VOCAB --steps 300 --log_every 50 \
        --override vocab_size=N --output runs/refcheck/results.json

The reference is independent of our code: its masking (numpy), sampling,
labels, losses and optimizer (torch AdamW + LambdaLR + clip_grad_norm_) follow
the rules of electra_tf/objectives and electra_tf/pretraining/optimization.py
but do not call them; only the batches come from our shard reader. Both models
start from different random weights and draw different masks, so they agree
statistically (curves of the same shape and level), not bit for bit.

What the reference reproduces (objective `electra` only):
- generator: width generator_hidden_dim, generator_num_layers layers,
  generator_num_heads heads, FFN generator_intermediate_size, embedding_size
  E; it uses the discriminator's embeddings module (token, position, segment
  tables and their LayerNorm), and its output layer is the token table plus a
  bias (unless untied_generator_embeddings);
- masking: per row max(1, min(predictions_per_seq, round(n_real * mask_prob)))
  positions (n_real counts [CLS]/[SEP]; rounding half to even, in float32),
  capped by the candidates (real tokens other than [CLS], [SEP], [MASK]),
  drawn without replacement; each chosen slot keeps its token with
  probability mask_token_keep_prob, else becomes [MASK];
- sampling: Gumbel-max from the generator logits / temperature, no gradient;
  every chosen position (masked or kept) receives the sample;
- labels: 1 where the discriminator's input differs from the original token,
  over real tokens (input_mask); a sample equal to the original counts as 0;
- loss: gen_weight * MLM (mean over chosen slots) + disc_weight * BCE (mean
  over real tokens, [CLS]/[SEP] included);
- optimizer: AdamW (betas, epsilon, weight decay from the config; no decay on
  LayerNorm and biases), lr = peak * (1 - step/steps)^power * min(1,
  step/warmup) with the decay horizon --steps, global-norm clipping.

Differences that remain: the reference starts from Hugging Face's normal(0,
initializer_range) weights (ours: truncated normal) with a zero [PAD] row
that gets no lookup gradient (padding_idx); torch's AdamW adds epsilon after
the bias correction, Keras before (--keras_epsilon copies Keras; it matters in
short runs because the generator's clipped gradients are ~eps); and the
reference applies attention_probs_dropout_prob to the attention
probabilities, where ours uses hidden_dropout_prob everywhere (the two are
equal in every shipped config).

Exit status 0 when both ran, 2 with one `error: ...` line for bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODELS = ("tf", "torch")
# Per-window metrics, in the printed order.
COLUMNS = ("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc", "replaced", "lr")


class CheckError(ValueError):
    """Bad flags or inputs; the message names the fix."""


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--config", default="configs/tiny.json", help="model config (JSON)")
    p.add_argument("--data_dir", required=True,
                   help="shard directory written by python -m electra_tf.data.build_pretraining_data")
    p.add_argument("--vocab_file", required=True, help="the vocab.txt the shards were built with")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, repeatable (e.g. vocab_size=7812)")
    p.add_argument("--steps", type=int, default=300,
                   help="training steps of each model; also the learning-rate decay horizon")
    p.add_argument("--log_every", type=int, default=50, help="steps per printed window")
    p.add_argument("--batch_size", type=int, default=0,
                   help="batch size (0: the config's train_batch_size)")
    p.add_argument("--output", default="runs/reference_check.json",
                   help="JSON record of every row, per-step losses and the config ('' for none)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra/inter-op threads of TensorFlow and torch (0: library defaults)")
    p.add_argument("--attn_implementation", default="eager", choices=("eager", "sdpa"),
                   help="Hugging Face attention kernel of the reference")
    p.add_argument("--keras_epsilon", action="store_true",
                   help="give the reference Keras' epsilon placement: Keras adds epsilon to "
                        "sqrt(v) before the bias correction, torch after, so Keras' effective "
                        "epsilon is eps / sqrt(1 - beta_2^t) (10x at step 10, 3.2x at 100, "
                        "1.26x at 1000); it slows our generator, whose clipped gradients are "
                        "~1e-6 per element, in short runs")
    return p.parse_args(argv)


# ------------------------------------------------------------ reference rules
def prediction_counts(input_ids: np.ndarray, input_mask: np.ndarray, max_predictions: int,
                      mask_prob: float, never_masked: Sequence[int]):
    """Positions to choose per row and the candidate mask (numpy).

    count = min(max(1, min(P, round(n_real * mask_prob))), n_candidates), the
    product in float32 and rounded half to even, as in the original ELECTRA;
    n_real counts [CLS]/[SEP] although they are never candidates.
    """
    real = np.asarray(input_mask).astype(bool)
    candidates = real.copy()
    for token in never_masked:
        candidates &= np.asarray(input_ids) != token
    n_real = real.sum(axis=1).astype(np.float32)
    wanted = np.round(n_real * np.float32(mask_prob)).astype(np.int64)
    wanted = np.maximum(1, np.minimum(max_predictions, wanted))
    return np.minimum(wanted, candidates.sum(axis=1)), candidates


def mask_batch(input_ids: np.ndarray, input_mask: np.ndarray, rng: np.random.Generator, *,
               max_predictions: int, mask_prob: float, mask_id: int,
               never_masked: Sequence[int], keep_prob: float) -> Dict[str, np.ndarray]:
    """ELECTRA's masking in numpy: uniform positions without replacement, then
    [MASK] with probability 1 - keep_prob (the rest keep their token).

    Returns masked_ids [B, L], positions [B, P] (0 in unused slots),
    original_ids [B, P] (0 in unused slots), weights [B, P] (1 = used slot).
    """
    input_ids = np.asarray(input_ids).astype(np.int64)
    batch, seq = input_ids.shape
    count, candidates = prediction_counts(input_ids, input_mask, max_predictions, mask_prob,
                                          never_masked)
    scores = np.where(candidates, rng.random((batch, seq)), -1.0)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :max_predictions]
    if top.shape[1] < max_predictions:  # P > L cannot happen for a valid config
        raise CheckError(f"predictions_per_seq={max_predictions} exceeds the sequence length {seq}")
    used = np.arange(max_predictions)[None, :] < count[:, None]
    positions = np.where(used, top, 0)
    rows = np.arange(batch)[:, None]
    original = np.where(used, input_ids[rows, positions], 0)
    to_mask = used & (rng.random((batch, max_predictions)) >= keep_prob)
    masked = input_ids.copy()
    masked[np.broadcast_to(rows, positions.shape)[to_mask], positions[to_mask]] = mask_id
    return {"masked_ids": masked, "positions": positions, "original_ids": original,
            "weights": used.astype(np.float32)}


def rank_auc(labels, scores) -> float:
    """ROC AUC as the Mann-Whitney statistic (ties get average ranks); NaN
    when only one class is present."""
    labels = np.asarray(labels).astype(bool).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def lr_factor(step: int, train_steps: int, warmup_steps: int, power: float) -> float:
    """Multiplier of the peak learning rate at 0-based `step`."""
    progress = min(step, train_steps) / float(train_steps)
    factor = (1.0 - progress) ** power
    if warmup_steps > 0:
        factor *= min(1.0, step / float(warmup_steps))
    return factor


# ------------------------------------------------------------- torch reference
class TorchReference:
    """Generator + discriminator from Hugging Face modules, trained as ELECTRA."""

    def __init__(self, config, special, train_steps: int, attn_implementation: str = "eager",
                 keras_epsilon: bool = False):
        import torch
        import transformers
        from torch import nn

        transformers.logging.set_verbosity_error()
        self.torch = torch
        self.cfg = cfg = config
        self.keras_epsilon = keras_epsilon
        self.updates = 0
        self.special = special
        act = {"gelu": "gelu", "gelu_approximate": "gelu_new"}[cfg.hidden_act]
        common = dict(
            vocab_size=cfg.vocab_size, embedding_size=cfg.embedding_size, hidden_act=act,
            hidden_dropout_prob=cfg.hidden_dropout_prob,
            attention_probs_dropout_prob=cfg.attention_probs_dropout_prob,
            max_position_embeddings=cfg.max_position_embeddings,
            type_vocab_size=cfg.type_vocab_size, initializer_range=cfg.initializer_range,
            layer_norm_eps=cfg.layer_norm_eps, pad_token_id=special.pad)
        disc_cfg = transformers.ElectraConfig(
            hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size, **common)
        gen_cfg = transformers.ElectraConfig(
            hidden_size=cfg.generator_hidden_dim, num_hidden_layers=cfg.generator_num_layers,
            num_attention_heads=cfg.generator_num_heads,
            intermediate_size=cfg.generator_intermediate_size, **common)
        for c in (disc_cfg, gen_cfg):
            c._attn_implementation = attn_implementation

        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.noise = torch.Generator().manual_seed(cfg.seed + 1)
        self.discriminator = transformers.ElectraForPreTraining(disc_cfg)
        self.generator = transformers.ElectraForMaskedLM(gen_cfg)
        if not cfg.untied_generator_embeddings:
            # ELECTRA shares token, position and segment tables and their LayerNorm;
            # the generator's softmax weights stay tied to the (now shared) token table.
            shared = self.discriminator.electra.embeddings
            self.generator.electra.embeddings = shared
            self.generator.generator_lm_head.weight = shared.word_embeddings.weight
        table = self.generator.electra.embeddings.word_embeddings.weight
        if self.generator.generator_lm_head.weight is not table:
            raise CheckError("the reference generator's output layer is not tied to its token "
                             "embeddings (a transformers change?); cannot build the reference")
        self.model = nn.ModuleDict({"generator": self.generator,
                                    "discriminator": self.discriminator})
        self.model.train()

        decay, no_decay = [], []
        for name, param in self.model.named_parameters():  # shared tensors listed once
            (no_decay if ("bias" in name or "LayerNorm" in name) else decay).append(param)
        self.num_params = sum(p.numel() for p in decay + no_decay)
        self.num_decayed = sum(p.numel() for p in decay)
        self.params = decay + no_decay
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay_rate},
             {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.learning_rate, betas=(cfg.adam_beta_1, cfg.adam_beta_2), eps=cfg.adam_epsilon)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, train_steps, cfg.num_warmup_steps,
                                                   cfg.lr_decay_power))

    def step(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        torch, cfg, special = self.torch, self.cfg, self.special
        F = torch.nn.functional
        ids_np = np.asarray(batch["input_ids"]).astype(np.int64)
        mask_np = np.asarray(batch["input_mask"]).astype(np.int64)
        masked = mask_batch(ids_np, mask_np, self.rng, max_predictions=cfg.predictions_per_seq,
                            mask_prob=cfg.mask_prob, mask_id=special.mask,
                            never_masked=special.never_masked, keep_prob=cfg.mask_token_keep_prob)
        ids = torch.from_numpy(ids_np)
        input_mask = torch.from_numpy(mask_np)
        segments = torch.from_numpy(np.asarray(batch["segment_ids"]).astype(np.int64))
        positions = torch.from_numpy(masked["positions"])
        originals = torch.from_numpy(masked["original_ids"])
        weights = torch.from_numpy(masked["weights"])
        rows = torch.arange(ids.shape[0])[:, None].expand_as(positions)

        lr = self.schedule.get_last_lr()[0]
        hidden = self.generator.electra(
            input_ids=torch.from_numpy(masked["masked_ids"]), attention_mask=input_mask,
            token_type_ids=segments).last_hidden_state
        gathered = hidden[rows, positions]  # [B, P, H_gen]: the head runs on chosen slots only
        mlm_logits = self.generator.generator_lm_head(
            self.generator.generator_predictions(gathered)).float()

        with torch.no_grad():
            logits = mlm_logits.detach()
            if cfg.disallow_correct:
                logits = logits - 1000.0 * cfg.temperature * F.one_hot(
                    originals, cfg.vocab_size).float()
            uniform = torch.rand(logits.shape, generator=self.noise)
            gumbel = -torch.log(-torch.log(uniform))
            sampled = torch.argmax(logits / cfg.temperature + gumbel, dim=-1)
            disc_ids = torch.from_numpy(masked["masked_ids"]).clone()
            used = weights > 0
            disc_ids[rows[used], positions[used]] = sampled[used]
            labels = ((disc_ids != ids) & (input_mask > 0)).float()

        disc_logits = self.discriminator(input_ids=disc_ids, attention_mask=input_mask,
                                         token_type_ids=segments).logits.float()
        per_slot = F.cross_entropy(mlm_logits.reshape(-1, cfg.vocab_size), originals.reshape(-1),
                                   reduction="none").reshape(originals.shape)
        mlm_loss = (per_slot * weights).sum() / (weights.sum() + 1e-6)
        real = input_mask.float()
        per_token = F.binary_cross_entropy_with_logits(disc_logits, labels, reduction="none")
        disc_loss = (per_token * real).sum() / (real.sum() + 1e-6)
        loss = cfg.gen_weight * mlm_loss + cfg.disc_weight * disc_loss

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip_norm)
        self.updates += 1
        if self.keras_epsilon:
            for group in self.optimizer.param_groups:
                group["eps"] = cfg.adam_epsilon / math.sqrt(1.0 - cfg.adam_beta_2 ** self.updates)
        self.optimizer.step()
        self.schedule.step()

        with torch.no_grad():
            hits = (mlm_logits.argmax(-1) == originals).float() * weights
            return {
                "loss": float(loss), "mlm_loss": float(mlm_loss), "disc_loss": float(disc_loss),
                "lr": float(lr), "mlm_hits": hits.numpy(), "mlm_weights": weights.numpy(),
                "labels": labels.numpy(), "probs": torch.sigmoid(disc_logits).numpy(),
                "input_mask": mask_np,
            }


# ------------------------------------------------------------------- TF side
class TFPretrainer:
    """Our `ElectraPretrainer`, stepped through its own `train_step`.

    A subclass records the forward outputs `train_step` hands to its metrics
    (labels, logits, masks), so the window metrics use the same numbers as the
    reference's; the update itself is the unmodified `train_step`.
    """

    def __init__(self, config, special, train_steps: int):
        import keras
        import tensorflow as tf

        from electra_tf.pretraining.optimization import create_optimizer
        from electra_tf.pretraining.pretrainer import ElectraPretrainer

        tap = {}

        class RecordingPretrainer(ElectraPretrainer):
            def _update_metrics(self, out):
                tap["out"] = out
                return super()._update_metrics(out)

        keras.mixed_precision.set_global_policy("float32")
        keras.utils.set_random_seed(config.seed)
        self.model = model = RecordingPretrainer(config, special)
        self.optimizer = optimizer = create_optimizer(config, train_steps=train_steps)
        model.compile(optimizer=optimizer)
        optimizer.build(model.trainable_variables)
        variables = model.trainable_variables
        self.num_params = int(sum(np.prod(v.shape) for v in variables))
        try:
            self.num_decayed = int(sum(np.prod(v.shape) for v in variables
                                       if optimizer._use_weight_decay(v)))
        except AttributeError:  # a Keras without the private helper
            self.num_decayed = None

        @tf.function
        def step(batch):
            lr = tf.identity(optimizer.learning_rate)  # this step's rate (read before it)
            model.train_step(batch)
            out = tap["out"]
            hits = tf.cast(tf.equal(tf.argmax(out["mlm_logits"], -1, output_type=tf.int32),
                                    out["masked_original_ids"]), tf.float32)
            return {
                "loss": out["loss"], "mlm_loss": out["mlm_loss"], "disc_loss": out["disc_loss"],
                "lr": lr, "mlm_hits": hits * out["masked_weights"],
                "mlm_weights": out["masked_weights"], "labels": out["disc_labels"],
                "probs": tf.sigmoid(tf.cast(out["disc_logits"], tf.float32)),
                "input_mask": out["input_mask"],
            }

        self._step = step

    def step(self, batch) -> Dict[str, np.ndarray]:
        out = {k: v.numpy() for k, v in self._step(batch).items()}
        for name in ("loss", "mlm_loss", "disc_loss", "lr"):
            out[name] = float(out[name])
        return out


# ------------------------------------------------------------------- metrics
def window_metrics(records: List[Dict[str, np.ndarray]]) -> Dict[str, float]:
    """The window's means: losses over steps, accuracy over chosen slots, AUC
    and replaced share over real tokens."""
    real = np.concatenate([r["input_mask"].ravel() > 0 for r in records])
    labels = np.concatenate([r["labels"].ravel() for r in records])[real]
    probs = np.concatenate([r["probs"].ravel() for r in records])[real]
    weights = sum(float(r["mlm_weights"].sum()) for r in records)
    return {
        "loss": float(np.mean([r["loss"] for r in records])),
        "mlm_loss": float(np.mean([r["mlm_loss"] for r in records])),
        "mlm_accuracy": sum(float(r["mlm_hits"].sum()) for r in records) / max(weights, 1e-9),
        "disc_loss": float(np.mean([r["disc_loss"] for r in records])),
        "disc_auc": rank_auc(labels, probs),
        "replaced": float(labels.mean()) if labels.size else float("nan"),
        "lr": float(records[-1]["lr"]),
    }


def _format(value, width, digits):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return f"{'nan':>{width}}"
    return f"{value:>{width}.{digits}f}"


HEADER = (f"{'step':>6}  {'model':<5} {'loss':>9} {'mlm_loss':>9} {'mlm_acc':>8} "
          f"{'disc_loss':>9} {'disc_auc':>8} {'replaced':>8} {'lr':>9}")


def format_row(row: Dict) -> str:
    return (f"{row['step']:>6}  {row['model']:<5} {_format(row['loss'], 9, 4)} "
            f"{_format(row['mlm_loss'], 9, 4)} {_format(row['mlm_accuracy'], 8, 4)} "
            f"{_format(row['disc_loss'], 9, 4)} {_format(row['disc_auc'], 8, 4)} "
            f"{_format(row['replaced'], 8, 4)} {row['lr']:>9.2e}")


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


# ---------------------------------------------------------------------- main
def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _set_threads(n: int) -> None:
    """Limits both libraries' thread pools (before either runs an op)."""
    if n <= 0:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    import tensorflow as tf
    import torch

    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:  # TF already initialised (e.g. called in-process by a test)
        pass
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # can be set once per process
        pass


def load_inputs(args):
    """The config, special-token ids and validated data flags (raises CheckError)."""
    from electra_tf.config import ElectraConfig
    from electra_tf.data import manifest as mf
    from electra_tf.data.vocab import load_vocab, special_token_ids

    path = args.config if os.path.isfile(args.config) else str(REPO / args.config)
    if not os.path.isfile(path):
        raise CheckError(f"--config {args.config!r} does not exist; pass e.g. configs/tiny.json")
    config = ElectraConfig.from_json(path).with_overrides(args.override)
    if args.batch_size < 0:
        raise CheckError(f"--batch_size={args.batch_size} must be positive (0: the config's)")
    if args.batch_size:
        config = config.replace(train_batch_size=args.batch_size)
    if config.objective != "electra":
        raise CheckError(f"the reference implements objective 'electra' only (config has "
                         f"{config.objective!r}); pass --override objective=electra")
    if args.steps < 1:
        raise CheckError(f"--steps={args.steps} must be >= 1")
    if args.log_every < 1:
        raise CheckError(f"--log_every={args.log_every} must be >= 1")
    if args.threads < 0:
        raise CheckError(f"--threads={args.threads} must be >= 0 (0: library defaults)")
    if not os.path.isdir(args.data_dir):
        raise CheckError(f"--data_dir {args.data_dir!r} is not a directory; pass the --output_dir of "
                         f"python -m electra_tf.data.build_pretraining_data")
    manifest = mf.load_manifest(args.data_dir)
    if manifest is None:
        raise CheckError(f"--data_dir {args.data_dir!r} has no {mf.MANIFEST_NAME}; build shards with "
                         f"python -m electra_tf.data.build_pretraining_data")
    vocab = load_vocab(args.vocab_file)
    want = manifest.get("vocab_sha256")
    if want and _sha256(args.vocab_file) != want:
        raise CheckError(f"--vocab_file {args.vocab_file} is not the vocabulary the shards in "
                         f"{args.data_dir} were built with (sha256 differs from their manifest); "
                         f"pass that vocab.txt")
    if len(vocab) != config.vocab_size:
        raise CheckError(f"--vocab_file has {len(vocab)} tokens but the config has vocab_size="
                         f"{config.vocab_size}; pass --override vocab_size={len(vocab)}")
    if config.max_seq_length != manifest.get("max_seq_length"):
        raise CheckError(f"the shards in {args.data_dir} have max_seq_length="
                         f"{manifest.get('max_seq_length')} but the config has "
                         f"{config.max_seq_length}; pass --override "
                         f"max_seq_length={manifest.get('max_seq_length')}")
    return config, special_token_ids(vocab)


def run_check(args) -> Dict:
    config, special = load_inputs(args)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        raise CheckError(f"the reference needs torch and transformers ({e}); install them with "
                         f"pip install -e '.[hf]'") from None
    _set_threads(args.threads)
    import tensorflow as tf
    import torch
    import transformers

    from electra_tf.data.reader import pretraining_dataset

    started = time.time()
    batch_size = config.train_batch_size
    dataset = pretraining_dataset(args.data_dir, config, batch_size, training=True,
                                  deterministic=True, seed=config.seed)
    tf_side = TFPretrainer(config, special, train_steps=args.steps)
    torch_side = TorchReference(config, special, train_steps=args.steps,
                                attn_implementation=args.attn_implementation,
                                keras_epsilon=args.keras_epsilon)
    print(f"reference check: {config.model_size} config (H {config.hidden_size}, "
          f"{config.num_hidden_layers} layers; generator H {config.generator_hidden_dim}, "
          f"{config.generator_num_layers} layers, {config.generator_num_heads} heads), vocab "
          f"{config.vocab_size}, seq {config.max_seq_length}, batch {batch_size}, {args.steps} steps",
          flush=True)
    print(f"trainable parameters: tf {tf_side.num_params:,}, torch {torch_side.num_params:,}; "
          f"weight-decayed: tf "
          f"{format(tf_side.num_decayed, ',') if tf_side.num_decayed is not None else '?'}, "
          f"torch {torch_side.num_decayed:,}", flush=True)
    if tf_side.num_params != torch_side.num_params:
        print("warning: the two models have different parameter counts: their architectures "
              "differ", flush=True)
    print(HEADER, flush=True)

    sides = {"tf": tf_side, "torch": torch_side}
    window = {name: [] for name in MODELS}
    per_step = {name: [] for name in MODELS}
    seconds = {name: 0.0 for name in MODELS}
    rows = []
    iterator = iter(dataset)
    for step in range(1, args.steps + 1):
        batch = next(iterator)
        numpy_batch = {k: v.numpy() for k, v in batch.items()}
        for name in MODELS:
            t0 = time.perf_counter()
            record = sides[name].step(batch if name == "tf" else numpy_batch)
            seconds[name] += time.perf_counter() - t0
            window[name].append(record)
            per_step[name].append({
                "step": step, "loss": record["loss"], "mlm_loss": record["mlm_loss"],
                "disc_loss": record["disc_loss"], "lr": record["lr"],
                "replaced": float(record["labels"][record["input_mask"] > 0].mean()),
                "masked": float(record["mlm_weights"].sum() / max(record["input_mask"].sum(), 1)),
            })
            if not math.isfinite(record["loss"]):
                raise CheckError(f"the {name} model's loss is {record['loss']} at step {step}; "
                                 f"lower the learning rate (--override learning_rate=...)")
        if step % args.log_every == 0 or step == args.steps:
            for name in MODELS:
                row = {"step": step, "model": name, "window_steps": len(window[name]),
                       **window_metrics(window[name])}
                rows.append(row)
                print(format_row(row), flush=True)
                window[name] = []

    timing = {name: round(seconds[name] / args.steps, 4) for name in MODELS}
    last = {row["model"]: row for row in rows[-2:]}
    difference = {key: last["tf"][key] - last["torch"][key] for key in COLUMNS if key != "lr"}
    print("last window, tf - torch: " + ", ".join(f"{k} {v:+.4f}" for k, v in difference.items()),
          flush=True)
    print(f"seconds per step: tf {timing['tf']:.3f}, torch {timing['torch']:.3f}", flush=True)
    result = {
        "command": "python scripts/reference_check.py " + " ".join(sys.argv[1:]),
        "settings": vars(args),
        "config": config.to_dict(),
        "special_token_ids": dict(zip(("pad", "unk", "cls", "sep", "mask"),
                                      (special.pad, special.unk, special.cls, special.sep,
                                       special.mask))),
        "derived": {"predictions_per_seq": config.predictions_per_seq,
                    "generator_hidden_dim": config.generator_hidden_dim,
                    "generator_num_layers": config.generator_num_layers,
                    "generator_num_heads": config.generator_num_heads,
                    "generator_intermediate_size": config.generator_intermediate_size,
                    "batch_size": batch_size, "decay_steps": args.steps},
        "parameters": {"tf": tf_side.num_params, "torch": torch_side.num_params},
        "decayed_parameters": {"tf": tf_side.num_decayed, "torch": torch_side.num_decayed},
        "versions": {"tensorflow": tf.__version__, "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "rows": rows,
        "last_window_difference": difference,
        "per_step": per_step,
        "seconds_per_step": timing,
        "seconds": round(time.time() - started, 1),
    }
    if args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(_json_safe(result), indent=2, sort_keys=True) + "\n",
                       encoding="utf-8")
        os.replace(tmp, out)
        print(f"wrote {out}", flush=True)
    return result


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    from electra_tf.config import ConfigError
    from electra_tf.data.errors import DataError
    from electra_tf.data.vocab import VocabError

    try:
        run_check(args)
    except (CheckError, ConfigError, DataError, VocabError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
