"""One side of the side-by-side benchmark: a pre-training step of a model.

Two roles, one protocol (JSON lines on stdin/stdout, driven by
scripts/benchmarks/benchmark_pretrain.py):

- `--side model_garden` (run inside the peer venv, see
  scripts/benchmarks/setup_model_garden_peer.sh): the TF Model Garden ELECTRA pre-trainer
  (tf-models-official, TF 2.20, tf_keras), built as its own task builds it
  (`ElectraPretrainTask(config).build_model()`), trained with the task's own
  `train_step` and `build_losses`, masking done in the data as it expects;
  no next-sentence head or loss (the paper has none).
- `--side ours` (run in the project venv): `electra_tf`'s `ElectraPretrainer`
  with its own `train_step` (masking and sampling inside the step).

Protocol: the worker builds its model, compiles and runs `--warmup` steps,
then prints {"ready": ...}. Each stdin line {"cmd": "run", "steps": k} runs k
timed steps and answers {"times": [...seconds...]}; {"cmd": "quit"} (or EOF)
answers {"peak_rss_bytes": ...} and exits. Every step is synchronised by
reading the loss back to the host, so a time is the whole step.

The synthetic batch (`make_batch`) is pure numpy and shared by both sides, so
both train on the same token ids.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

CLS, SEP, MASK = 2, 3, 4  # ids used by the synthetic batch (pad 0, unk 1)


def make_batch(batch_size, seq_length, vocab_size, seed=0):
    """Packed, two-segment sequences with no padding (what the data builder emits).

    Returns int32 numpy arrays input_ids, input_mask, segment_ids [B, L].
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (batch_size, seq_length)).astype(np.int32)
    split = seq_length // 2
    ids[:, 0] = CLS
    ids[:, split] = SEP
    ids[:, -1] = SEP
    segments = np.zeros_like(ids)
    segments[:, split + 1:] = 1
    return ids, np.ones_like(ids), segments


def mask_in_data(ids, num_predictions, seed=0, mask_prob=0.15):
    """ELECTRA/BERT-style masking done on the host, for the Model Garden peer.

    Chooses round(mask_prob * real tokens) positions (at most `num_predictions`)
    among non-special tokens, writes [MASK] at 85% of them (the rest keep the
    original, as ELECTRA's generator input does), and returns the peer's input
    features.
    """
    rng = np.random.default_rng(seed + 1)
    batch, seq = ids.shape
    masked = ids.copy()
    positions = np.zeros((batch, num_predictions), np.int32)
    originals = np.zeros((batch, num_predictions), np.int32)
    weights = np.zeros((batch, num_predictions), np.float32)
    for row in range(batch):
        candidates = np.flatnonzero((ids[row] != CLS) & (ids[row] != SEP))
        count = min(num_predictions, max(1, int(round(seq * mask_prob))), len(candidates))
        chosen = rng.choice(candidates, count, replace=False)
        positions[row, :count] = chosen
        originals[row, :count] = ids[row, chosen]
        weights[row, :count] = 1.0
        to_mask = chosen[rng.random(count) >= 0.15]
        masked[row, to_mask] = MASK
    return masked, positions, originals, weights


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---------------------------------------------------------------- the peer
def build_model_garden(spec):
    import tensorflow as tf
    import tf_keras
    from official.modeling.optimization import legacy_adamw
    from official.nlp.configs import bert, electra, encoders
    from official.nlp.data import pretrain_dataloader
    from official.nlp.tasks import electra_task

    def encoder(hidden, layers, heads, intermediate):
        return encoders.EncoderConfig(type="bert", bert=encoders.BertEncoderConfig(
            vocab_size=spec["vocab_size"], hidden_size=hidden, num_layers=layers,
            num_attention_heads=heads, intermediate_size=intermediate,
            hidden_activation="gelu", dropout_rate=spec["dropout"],
            attention_dropout_rate=spec["attention_dropout"],
            max_position_embeddings=spec["max_position_embeddings"],
            type_vocab_size=spec["type_vocab_size"], initializer_range=0.02,
            embedding_size=spec["embedding_size"]))

    del bert
    config = electra_task.ElectraPretrainConfig(
        model=electra.ElectraPretrainerConfig(
            num_masked_tokens=spec["predictions"], sequence_length=spec["seq_length"],
            discriminator_loss_weight=50.0, tie_embeddings=True, cls_heads=[],
            generator_encoder=encoder(spec["gen_hidden"], spec["gen_layers"],
                                      spec["gen_heads"], spec["gen_intermediate"]),
            discriminator_encoder=encoder(spec["hidden"], spec["layers"], spec["heads"],
                                          spec["intermediate"])),
        train_data=pretrain_dataloader.BertPretrainDataConfig(
            use_next_sentence_label=False, seq_length=spec["seq_length"],
            max_predictions_per_seq=spec["predictions"],
            global_batch_size=spec["batch_size"]))
    if spec.get("mixed_precision"):
        tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    task = electra_task.ElectraPretrainTask(config)
    model = task.build_model()
    metrics = task.build_metrics(training=True)
    optimizer = legacy_adamw.AdamWeightDecay(
        learning_rate=spec["learning_rate"], weight_decay_rate=0.01, epsilon=1e-6,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
        gradient_clip_norm=1.0)

    ids, mask, segments = make_batch(spec["batch_size"], spec["seq_length"],
                                     spec["vocab_size"], spec["data_seed"])
    masked, positions, originals, weights = mask_in_data(ids, spec["predictions"],
                                                         spec["data_seed"])
    inputs = {
        "input_word_ids": tf.constant(masked), "input_mask": tf.constant(mask),
        "input_type_ids": tf.constant(segments),
        "masked_lm_positions": tf.constant(positions),
        "masked_lm_ids": tf.constant(originals),
        "masked_lm_weights": tf.constant(weights),
    }
    step = tf.function(lambda batch: task.train_step(batch, model, optimizer, metrics),
                       jit_compile=bool(spec.get("xla")))
    params = int(sum(np.prod(v.shape) for v in model.trainable_variables))
    return (lambda: float(step(inputs)[task.loss])), params, tf.__version__


# ---------------------------------------------------------------- ours
def build_ours(spec):
    import keras
    import tensorflow as tf

    from electra_tf.config import ElectraConfig
    from electra_tf.data.vocab import SpecialTokenIds
    from electra_tf.pretrain import ElectraPretrainer, create_optimizer

    if spec.get("mixed_precision"):
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    config = ElectraConfig.from_dict(spec["config"])
    model = ElectraPretrainer(config, SpecialTokenIds(pad=0, unk=1, cls=CLS, sep=SEP, mask=MASK))
    model.compile(optimizer=create_optimizer(config))
    model.optimizer.build(model.trainable_variables)
    ids, mask, segments = make_batch(spec["batch_size"], spec["seq_length"],
                                     spec["vocab_size"], spec["data_seed"])
    inputs = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
              "segment_ids": tf.constant(segments)}
    # What `fit` runs per step (its one_step_on_data), without the Python loop around it.
    step = tf.function(model.train_step, jit_compile=bool(spec.get("xla")))
    params = int(sum(np.prod(v.shape) for v in model.trainable_variables))
    return (lambda: float(step(inputs)["loss"])), params, tf.__version__


def _send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=("model_garden", "ours"), required=True)
    parser.add_argument("--spec", required=True, help="JSON model/batch spec from benchmark_pretrain.py")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    spec = json.loads(args.spec)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    build = build_model_garden if args.side == "model_garden" else build_ours
    start = time.perf_counter()
    run_step, params, tf_version = build(spec)
    built = time.perf_counter()
    loss = run_step()
    first = time.perf_counter() - built
    for _ in range(max(0, args.warmup - 1)):
        loss = run_step()
    _send({"ready": True, "side": args.side, "params": params, "tf_version": tf_version,
           "build_s": built - start, "first_step_s": first, "warmup_loss": loss})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("cmd") == "run":
            times = []
            for _ in range(int(cmd["steps"])):
                t0 = time.perf_counter()
                loss = run_step()
                times.append(time.perf_counter() - t0)
            _send({"times": times, "loss": loss, "peak_rss_bytes": peak_rss_bytes()})
        else:
            break
    _send({"peak_rss_bytes": peak_rss_bytes()})


if __name__ == "__main__":
    main()
