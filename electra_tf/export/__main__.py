"""`python -m electra_tf.export`: a SavedModel for TF Serving from a model directory.

    python -m electra_tf.export --model_dir models/small --output_dir serving/electra/1 --kind discriminator
    python -m electra_tf.export --model_dir runs/sst2/seed_1 --output_dir serving/sst2/1 --kind classifier
    python -m electra_tf.export --model_dir runs/sst2/seed_1 --output_dir litert/sst2 --kind classifier \
        --format tflite [--quantize int8]

--format tflite writes a LiteRT folder instead (electra_tf/export/tflite.py): model.tflite (text in,
tokenized by tensorflow-text's LiteRT kernels), model_ids.tflite (the `encoded` inputs, plain LiteRT),
model.json (labels, max_seq_length, inputs) and vocab.txt.

Signatures:
  serving_default  raw UTF-8 strings: `text` (or `text_a`, `text_b` for a pair
                   classifier); tokenized in-graph, truncated to max_seq_length.
                   discriminator -> replaced_probs, replaced_logits, tokens,
                   input_mask, text_mask, sentence_score, max_replaced_prob, truncated;
                   classifier -> probabilities, logits, label_id, label, truncated
                   (regression: score, truncated).
  encoded          int32 input_ids, input_mask, segment_ids [batch, seq].

The SavedModel needs only tensorflow + tensorflow_text to load. TF Serving
expects a numbered version directory: pass --output_dir <base>/<name>/1.
"""

from __future__ import annotations

import json
import os
import shutil

from absl import flags

from electra_tf.cli import parse_flags, report_error, require_flags, run_absl
from electra_tf.config import ConfigError
from electra_tf.data.vocab import VocabError
from electra_tf.export import ExportError, build_module
from electra_tf.export.warmup import DEFAULT_BATCH_SIZES, WarmupError, warmup_requests, write_warmup_requests
from electra_tf.models.model_folder import ModelDirError
from electra_tf.paths import output_dir_problem

RENAMED = {"output": "output_dir"}  # old spelling -> new (electra_tf/cli.py refuses the old one)


def define_flags(fv=None) -> None:
    """Defines this tool's absl flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    flags.DEFINE_string("model_dir", None, "Our model directory, or a classifier directory (required).",
                        flag_values=fv)
    flags.DEFINE_string("output_dir", None, "SavedModel directory to write (required).", flag_values=fv)
    flags.DEFINE_enum("kind", "discriminator", ["discriminator", "classifier"], "What to serve.", flag_values=fv)
    flags.DEFINE_integer("max_seq_length", None, "Default: the model's (config / classifier.json).",
                         flag_values=fv)
    flags.DEFINE_bool("allow_untrained_head", False, "Export a converted model whose discriminator head was "
                      "absent from the checkpoint.", flag_values=fv)
    flags.DEFINE_bool("overwrite", False, "Replace an existing --output_dir.", flag_values=fv)
    flags.DEFINE_enum("precision", "none", ["none", "bf16"], "bf16: the encoder runs in bfloat16 (about 1.6-1.8x "
                      "the reviews/s on a CPU with AVX512_BF16; labels agreed on real reviews, probabilities "
                      "move by up to ~0.2 in logits; docs/performance.md).", flag_values=fv)
    flags.DEFINE_bool("jit_compile", False, "Run the encoder XLA-compiled, per padded batch x width: 1.1-1.3x the "
                      "batch-32 throughput on a 2-core CPU once each shape is compiled (1.3-2.2 s each on first use); TF "
                      "Serving needs --xla_cpu_compilation_enabled=true for it (docs/serving.md).", flag_values=fv)
    flags.DEFINE_bool("freeze_weights", False, "Save the encoder and head weights as constants in the serving "
                      "graphs instead of variables, so that oneDNN keeps its reordered copy of each weight: batch-1 "
                      "calls 0.75x as long at 16 pieces, 0.9x at 128 (docs/serving.md). Not with --jit_compile.",
                      flag_values=fv)
    flags.DEFINE_bool("warmup", True, "With --jit_compile: write assets.extra/tf_serving_warmup_requests, one "
                      "request per padded batch x width, so that TF Serving compiles every shape at load "
                      "(needs tensorflow-serving-api: pip install \"electra_tf[serving]\").", flag_values=fv)
    flags.DEFINE_list("warmup_batch_sizes", [str(b) for b in DEFAULT_BATCH_SIZES], "With --jit_compile: the batch "
                      "sizes the warm-up requests cover (rounded up to a power of two up to 32, multiples of 32 "
                      "beyond, as the server pads them).", flag_values=fv)
    flags.DEFINE_enum("format", "saved_model", ["saved_model", "tflite"], "saved_model: a SavedModel for TF "
                      "Serving; tflite: a LiteRT folder (model.tflite with the tokenizer inside, model_ids.tflite without it, "
                      "model.json, vocab.txt; docs/serving.md), checked against the SavedModel before it is written.",
                      flag_values=fv)
    flags.DEFINE_enum("quantize", "none", ["none", "int8"], "With --format tflite: int8 stores the weights as int8 "
                      "(dynamic-range quantization: about a quarter of the size, faster on a CPU; logits move by "
                      "a few 1e-3).", flag_values=fv)
    flags.DEFINE_list("tflite_inputs", ["text", "ids"], "With --format tflite: which files to write: text "
                      "(model.tflite, needs tensorflow-text's LiteRT kernels), ids (model_ids.tflite, plain LiteRT).",
                      flag_values=fv)


def run(values) -> int:
    """The export, from the parsed flags; returns the exit code."""
    require_flags(values, "model_dir", "output_dir")
    output = values.output_dir
    problem = output_dir_problem(output)
    if problem:
        return report_error(f"cannot write to --output_dir '{output}' ({problem}); choose a writable directory")
    if os.path.exists(output) and os.listdir(output) and not values.overwrite:
        return report_error(f"{output} exists and is not empty; pass --overwrite or a new version directory")
    if values.format == "tflite":
        return _run_tflite(values)
    if values.quantize != "none":
        return report_error(f"--quantize {values.quantize} applies to --format tflite (a SavedModel keeps float32 "
                            f"weights); pass --format tflite, or leave --quantize out")
    try:
        module = build_module(values.model_dir, values.kind, values.max_seq_length, values.allow_untrained_head,
                              values.precision, values.jit_compile, values.freeze_weights)
        records = None
        if values.jit_compile and values.warmup:
            sizes = _batch_sizes(values.warmup_batch_sizes)
            records = warmup_requests(module, sizes)
    except (ExportError, ModelDirError, ConfigError, VocabError, WarmupError, ValueError) as e:
        return report_error(str(e))
    if os.path.exists(output):
        shutil.rmtree(output)
    module.save(output)
    if records:
        write_warmup_requests(records, output)
    print(json.dumps({"output": output, "kind": values.kind, "max_seq_length": module.max_seq_length,
                      "inputs": ["text_a", "text_b"] if module.pair else ["text"],
                      "jit_compile": module.jit_compile, "freeze_weights": module.freeze_weights,
                      "warmup_requests": len(records or [])}))
    return 0


def _run_tflite(values) -> int:
    """--format tflite: the LiteRT folder (electra_tf/export/tflite.py), written only once checked."""
    from electra_tf.export.tflite import LiteRTError, export_tflite  # pylint: disable=import-outside-toplevel

    if values.jit_compile or values.precision != "none":
        flag = "--jit_compile" if values.jit_compile else f"--precision {values.precision}"
        return report_error(f"--format tflite does not take {flag}: LiteRT runs its own float32 kernels (or int8 "
                            f"weights with --quantize int8); leave {flag} out")
    try:
        module = build_module(values.model_dir, values.kind, values.max_seq_length, values.allow_untrained_head)
        meta = export_tflite(module, values.output_dir, values.quantize, values.tflite_inputs, values.overwrite)
    except (ExportError, LiteRTError, ModelDirError, ConfigError, VocabError, ValueError) as e:
        return report_error(str(e))
    print(json.dumps({"output": values.output_dir, "format": "tflite", "kind": values.kind,
                      "quantize": values.quantize, "max_seq_length": module.max_seq_length, "files": meta["bytes"],
                      "inputs": meta["inputs"], "max_abs_difference": meta["check"]["max_abs_difference"]}))
    return 0


def _batch_sizes(items):
    try:
        sizes = [int(x) for x in items]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise WarmupError(f"--warmup_batch_sizes {','.join(items)}: give positive integers, e.g. 1,2,4,8,16,32")
    return sizes


def main(argv=None) -> int:
    """`python -m electra_tf.export` in-process: argv holds the flags only; returns the exit code."""
    return run(parse_flags(define_flags, argv, prog="electra_tf.export", renamed=RENAMED))


if __name__ == "__main__":
    run_absl(run, define_flags, renamed=RENAMED)
