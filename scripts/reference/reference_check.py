"""Checks our TF pre-trainer against an independent PyTorch / Hugging Face ELECTRA reference.

Trains `ElectraPretrainer` (TensorFlow) and a reference built from Hugging Face
`ElectraForMaskedLM` (generator) + `ElectraForPreTraining` (discriminator) on
the same batches of the same shards, and prints both side by side every
--log_every steps: loss, MLM loss and accuracy, discriminator loss and AUC
(both over the last window of steps, computed the same way for both), the
share of real tokens the discriminator sees replaced, and the learning rate.

    python scripts/reference/reference_check.py --config configs/tiny.json \
        --data_dir SHARDS --vocab_file VOCAB --steps 300 --log_every 50 \
        --override vocab_size=N --output runs/refcheck/results.json

The reference is independent of our code: its masking (numpy), sampling,
labels, losses and optimizer (torch AdamW + LambdaLR + clip_grad_norm_) follow
the rules of electra_tf/objectives and electra_tf/training/optimization.py
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
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

from electra_tf.config import ConfigError, ElectraConfig
from electra_tf.data import manifest as mf
from electra_tf.data.data_errors import DataError
from electra_tf.data.vocab import VocabError, load_vocab, special_token_ids
# The numpy rules are imported from here by tests/study/test_reference_check.py.
from scripts.reference.reference_lib.rules import CheckError, mask_batch, prediction_counts, rank_auc  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


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


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_inputs(args):
    """The config, special-token ids and validated data flags (raises CheckError)."""
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


def _limit_native_threads(n: int) -> None:
    """OpenMP / MKL / OpenBLAS pools of n threads (0: library defaults); set before TF is imported."""
    if n <= 0:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)


def run_check(args) -> Dict:
    config, special = load_inputs(args)
    try:
        # Optional `hf` extra: checked only once the inputs are valid, with the install command.
        import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        import transformers  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError as e:
        raise CheckError(f"the reference needs torch and transformers ({e}); install them with "
                         f"pip install -e '.[hf]'") from None
    _limit_native_threads(args.threads)
    # Needs torch, and TensorFlow (seconds to import): only after the checks above.
    from scripts.reference.reference_lib.run import train_both  # pylint: disable=import-outside-toplevel

    return train_both(args, config, special)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    try:
        run_check(args)
    except (CheckError, ConfigError, DataError, VocabError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
