"""How far the exported copies of a model directory are from it, on real text.

    python scripts/convert_parity.py --model_dir models/electra-small-imdb \
        --reviews ../shared/data/imdb/dev.tsv.gz --rows 256

Exports the model with `python -m electra_tf.convert --to keras_hub` and `--to hf` into a scratch
directory, loads each export with its own library (keras-hub's `ElectraBackbone.from_preset`,
transformers' `ElectraForPreTraining` / `ElectraForMaskedLM` on torch) and compares, over the real
(unpadded) tokens of the first `--rows` reviews (tokenized as fine-tuning does, `--seq` pieces):

* keras_hub: the backbone's sequence output against our encoder's (keras-hub's blocks use the
  tanh GELU, ours the exact one), also as `electra_tf.convert.keras_hub.gelu_difference` gives it;
* hf: the discriminator's replaced-token logits and the generator's masked-LM logits against ours.

Prints one JSON object (max and mean absolute differences, the largest value compared, and what
it was measured on). `--skip_hf` leaves out the Hugging Face half (no torch needed).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np


def read_reviews(path: str, rows: int):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        texts = [row["sentence"] for _, row in zip(range(rows), reader)]
    if not texts:
        sys.exit(f"error: {path} holds no rows with a 'sentence' column; pass a TSV of reviews")
    return texts


def encode(texts, model_dir: str, seq: int, do_lower_case: bool) -> dict:
    from electra_tf.preprocessing import TextPreprocessor

    pre = TextPreprocessor(os.path.join(model_dir, "vocab.txt"), seq, do_lower_case=do_lower_case)
    out = pre(texts, pad_to_sequence_length=True)
    return {k: out[k].numpy().astype("int32") for k in ("input_ids", "input_mask", "segment_ids")}


def stats(ours, theirs, mask) -> dict:
    diff = np.abs(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64))[mask]
    return {"max_abs": float(f"{diff.max():.3g}"), "mean_abs": float(f"{diff.mean():.3g}"),
            "largest_value": float(f"{np.abs(np.asarray(ours)[mask]).max():.3g}")}


def convert(model_dir: str, target: str, out: str) -> None:
    cmd = [sys.executable, "-m", "electra_tf.convert", "--from", "electra_tf", "--input", model_dir,
           "--to", target, "--output_dir", out]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {' '.join(cmd)} failed:\n{done.stderr.strip()}")


def keras_hub_half(model_dir: str, batch: dict, scratch: str) -> dict:
    import keras_hub

    from electra_tf.convert.keras_hub import gelu_difference
    from electra_tf.models.saving import load_encoder

    encoder, _ = load_encoder(model_dir)
    mask = batch["input_mask"].astype(bool)
    preset = os.path.join(scratch, "keras_hub")
    convert(model_dir, "keras_hub", preset)
    backbone = keras_hub.models.ElectraBackbone.from_preset(preset)
    theirs = backbone({"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
                       "padding_mask": batch["input_mask"]}, training=False)["sequence_output"]
    ours = encoder(batch, training=False)
    helper = gelu_difference(encoder, batch)
    return {"sequence_output_exported_preset": stats(np.asarray(ours), np.asarray(theirs), mask),
            "gelu_difference": {k: float(f"{v:.3g}") for k, v in helper.items()}}


def hf_half(model_dir: str, batch: dict, scratch: str) -> dict:
    import torch
    import transformers

    from electra_tf.pretrain.pretrainer_loading import load_pretrainer

    out = os.path.join(scratch, "hf")
    convert(model_dir, "hf", out)
    model = load_pretrainer(model_dir)
    mask = batch["input_mask"].astype(bool)
    b, t = batch["input_ids"].shape
    positions = np.tile(np.arange(t), (b, 1)).astype("int32")
    ours_disc = np.asarray(model.discriminator_head(model.discriminator(batch, training=False)))
    ours_gen = np.asarray(model.generator_head(model.generator(batch, training=False), mask_positions=positions))
    feed = {"input_ids": torch.tensor(batch["input_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(batch["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(batch["segment_ids"], dtype=torch.long)}
    result = {"torch": torch.__version__, "transformers": transformers.__version__}
    for name, cls, ours in (("discriminator_logits", transformers.ElectraForPreTraining, ours_disc),
                            ("generator_logits", transformers.ElectraForMaskedLM, ours_gen)):
        hf_model = cls.from_pretrained(os.path.join(out, name.split("_")[0])).eval()
        with torch.no_grad():
            theirs = hf_model(**feed).logits.numpy()
        result[name] = stats(ours, theirs, mask)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="one of our model directories")
    parser.add_argument("--reviews", required=True, help="TSV (.gz or not) with a 'sentence' column")
    parser.add_argument("--rows", type=int, default=256, help="the first N rows are compared")
    parser.add_argument("--seq", type=int, default=None, help="pieces per example (default: the config's)")
    parser.add_argument("--skip_hf", action="store_true", help="leave out the Hugging Face comparison")
    args = parser.parse_args(argv)

    from electra_tf.models.model_folder import load_config

    config = load_config(args.model_dir)
    seq = args.seq or config.max_seq_length
    batch = encode(read_reviews(args.reviews, args.rows), args.model_dir, seq, config.do_lower_case)
    report = {"model_dir": args.model_dir, "reviews": f"first {len(batch['input_ids'])} rows of "
              f"{os.path.basename(args.reviews)}", "seq": seq,
              "real_tokens": int(batch["input_mask"].sum()), "machine": f"{platform.machine()}, "
              f"{os.cpu_count()} CPU cores"}
    with tempfile.TemporaryDirectory() as scratch:
        report["keras_hub"] = keras_hub_half(args.model_dir, batch, scratch)
        if not args.skip_hf:
            report["hf"] = hf_half(args.model_dir, batch, scratch)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
