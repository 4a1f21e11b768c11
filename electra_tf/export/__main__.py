"""`python -m electra_tf.export`: a SavedModel for TF Serving from a model directory.

    python -m electra_tf.export --model_dir models/small --output serving/electra/1 --kind discriminator
    python -m electra_tf.export --model_dir runs/sst2/seed_1 --output serving/sst2/1 --kind classifier

Signatures:
  serving_default  raw UTF-8 strings: `text` (or `text_a`, `text_b` for a pair
                   classifier); tokenized in-graph, truncated to max_seq_length.
                   discriminator -> replaced_probs, replaced_logits, tokens,
                   input_mask, text_mask, sentence_score, max_replaced_prob, truncated;
                   classifier -> probabilities, logits, label_id, label, truncated
                   (regression: score, truncated).
  encoded          int32 input_ids, input_mask, segment_ids [batch, seq].

The SavedModel needs only tensorflow + tensorflow_text to load. TF Serving
expects a numbered version directory: pass --output <base>/<name>/1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

from electra_tf.cli import ArgumentParser, report_error
from electra_tf.config import ConfigError
from electra_tf.data.vocab import VocabError
from electra_tf.export import ExportError, build_module
from electra_tf.models.saving import ModelDirError
from electra_tf.paths import output_dir_problem


def parse_args(argv=None):
    p = ArgumentParser(prog="python -m electra_tf.export", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_dir", required=True, help="our model directory, or a classifier directory")
    p.add_argument("--output", required=True, help="SavedModel directory to write")
    p.add_argument("--kind", default="discriminator", choices=("discriminator", "classifier"))
    p.add_argument("--max_seq_length", type=int, help="default: the model's (config / classifier.json)")
    p.add_argument("--allow_untrained_head", action="store_true",
                   help="export a converted model whose discriminator head was absent from the checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = output_dir_problem(args.output)
    if problem:
        return report_error(f"cannot write to --output '{args.output}' ({problem}); choose a writable directory")
    if os.path.exists(args.output) and os.listdir(args.output) and not args.overwrite:
        return report_error(f"{args.output} exists and is not empty; pass --overwrite or a new version directory")
    try:
        module = build_module(args.model_dir, args.kind, args.max_seq_length, args.allow_untrained_head)
    except (ExportError, ModelDirError, ConfigError, VocabError, ValueError) as e:
        return report_error(str(e))
    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    module.save(args.output)
    print(json.dumps({"output": args.output, "kind": args.kind, "max_seq_length": module.max_seq_length,
                      "inputs": ["text_a", "text_b"] if module.pair else ["text"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
