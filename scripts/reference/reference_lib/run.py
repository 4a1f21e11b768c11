"""The check itself: both models on the same batches, printed side by side, recorded as JSON."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Dict

import tensorflow as tf
import torch
import transformers

from electra_tf.data.reader import pretraining_dataset

from .report import COLUMNS, HEADER, MODELS, format_row, json_safe, window_metrics
from .rules import CheckError
from .tf_pretrainer import TFPretrainer
from .torch_reference import TorchReference


def set_threads(n: int) -> None:
    """Limits both libraries' thread pools (before either runs an op; 0: library defaults).

    The OpenMP / MKL / OpenBLAS variables are set by reference_check.py before
    TensorFlow is imported.
    """
    if n <= 0:
        return
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


def train_both(args, config, special) -> Dict:
    """Trains both models for args.steps steps; prints the windows; writes and returns the record."""
    set_threads(args.threads)
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
        "command": "python scripts/reference/reference_check.py " + " ".join(sys.argv[1:]),
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
        tmp.write_text(json.dumps(json_safe(result), indent=2, sort_keys=True) + "\n",
                       encoding="utf-8")
        os.replace(tmp, out)
        print(f"wrote {out}", flush=True)
    return result
