"""Step 7 of a pre-training job: the final model directory, summary.json and the closing log lines."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Callable

import keras
import tensorflow as tf

from electra_tf.fileio import write_json_atomic
from electra_tf.errors import error_line
from electra_tf.models.saving import save_pretrained
from electra_tf.paths import is_remote
from electra_tf.training.trainer import latest_text
from electra_tf.models.model_folder import RUN_MODEL_SUBDIR
from electra_tf.pretrain.options import SAMPLE_CORPUS, SUMMARY_FILE, TENSORBOARD_DIR, RunPlan, fail


def summary_line(values: dict, keys=("loss", "mlm_loss", "mlm_accuracy", "disc_loss", "disc_auc",
                                     "disc_accuracy")) -> str:
    return ", ".join(f"{k}={values[k]:.4f}" for k in keys if k in values)


def save_pretrained_remote(final_dir, model, vocab_file, save_pretrained):
    """save_pretrained to a local temp dir, then copy every file to a gs:// (or other) path."""
    scratch = tempfile.mkdtemp(prefix="electra_final_")
    local_vocab = None
    try:
        if vocab_file and is_remote(vocab_file):
            local_vocab = os.path.join(scratch, "vocab_src.txt")
            tf.io.gfile.copy(vocab_file, local_vocab, overwrite=True)
        save_pretrained(os.path.join(scratch, "out"), model, local_vocab or vocab_file)
        tf.io.gfile.makedirs(final_dir)
        for name in os.listdir(os.path.join(scratch, "out")):
            tf.io.gfile.copy(os.path.join(scratch, "out", name), os.path.join(final_dir, name), overwrite=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_summary(plan: RunPlan, *, final_step: int, start_step: int, checkpoints, strategy_text: str,
                  replicas: int, policy: str, fit_seconds: float, callback, skipped) -> dict:
    """The dict `run_pretraining` returns and the chief writes as summary.json."""
    model_dir = plan.model_dir
    return {
        "model_dir": model_dir, "final_model_dir": os.path.join(model_dir, RUN_MODEL_SUBDIR), "step": final_step,
        "train_steps": plan.train_steps, "resumed_from_step": start_step,
        "checkpoints": checkpoints.directory,
        "tensorboard": os.path.join(model_dir, TENSORBOARD_DIR),
        "data_dir": plan.data_dir, "eval_data_dir": plan.eval_dir, "vocab_file": plan.vocab_file,
        "strategy": strategy_text, "replicas": replicas, "precision": policy,
        "fit_seconds": round(fit_seconds, 2), "total_seconds": None,
        "examples_per_second": round(callback.steady_examples_per_second, 2),
        "train_metrics": callback.last_train, "eval_metrics": callback.last_eval,
        "skipped_corrupt_shards": [p for p, _ in skipped],
    }


def write_final_model(plan: RunPlan, model, summary: dict, checkpoints, callback, run_path: str,
                      started: float, fit_seconds: float, log: Callable[[str], None]) -> None:
    """The chief's last step: <model_dir>/pretrained/, summary.json, and where everything is."""
    model_dir, final_dir = plan.model_dir, summary["final_model_dir"]
    keras.mixed_precision.set_global_policy("float32")
    try:
        if plan.remote:
            save_pretrained_remote(final_dir, model, plan.vocab_file, save_pretrained)
        else:
            save_pretrained(final_dir, model, plan.vocab_file)
    except (OSError, RuntimeError, tf.errors.OpError) as e:
        fail(f"cannot write the final model to {final_dir} ({error_line(e)}); training is "
             f"done and saved{latest_text(checkpoints, ' in {}')}: free disk space or make "
             f"{model_dir} writable, then re-run the same command to write the model")
    summary["total_seconds"] = round(time.time() - started, 2)
    write_json_atomic(os.path.join(model_dir, SUMMARY_FILE), summary, sort_keys=True)
    final_step, train_steps = summary["step"], plan.train_steps
    log(f"done: step {final_step}/{train_steps} in {fit_seconds:.1f}s of training "
        f"({summary['examples_per_second']:.1f} examples/s after the first step), "
        f"{summary['total_seconds']:.1f}s in all")
    if callback.last_train:
        log(f"  final train metrics (last {plan.log_every}-step window): {summary_line(callback.last_train)}")
    if callback.last_eval:
        log(f"  held-out eval ({plan.eval_dir}): {summary_line(callback.last_eval)}")
    log(f"  model (fine-tune with --init):  {final_dir}/  "
        f"(config.json, vocab.txt, discriminator/generator .weights.h5)")
    log(f"  checkpoints (resume: re-run the same command): {checkpoints.directory}/")
    log(f"  TensorBoard:  tensorboard --logdir {os.path.join(model_dir, TENSORBOARD_DIR)}")
    if plan.embedded:
        log(f"  data built from {SAMPLE_CORPUS}: vocab {plan.vocab_file}, shards {plan.data_dir}, "
            f"eval {plan.eval_dir}")
    log(f"  run settings: {run_path}; summary: {os.path.join(model_dir, SUMMARY_FILE)}")
