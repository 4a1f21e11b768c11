"""SavedModel export for TF Serving: raw text in, tokenized in-graph. See docs/serving.md."""

from electra_tf.export.serving_loader import ExportError, build_module, load_classifier
from electra_tf.export.serving import ServingModule, pair_lengths
from electra_tf.export.warmup import DEFAULT_BATCH_SIZES, warmup_requests, write_warmup_requests

__all__ = ["ExportError", "ServingModule", "build_module", "load_classifier",
           "pair_lengths", "export"]


def export(model_dir, output, kind="discriminator", max_seq_length=None, allow_untrained_head=False,
           jit_compile=False, warmup_batch_sizes=DEFAULT_BATCH_SIZES, freeze_weights=False):
    """Writes a SavedModel of `model_dir` to `output`; returns `output`.

    `jit_compile`: the opt-in XLA-compiled encoder (`ServingModule`), with TF Serving warm-up requests
    for `warmup_batch_sizes` (none when empty; `electra_tf.export.warmup`). `freeze_weights`: the opt-in
    graphs with the weights as constants (`ServingModule`; not with `jit_compile`)."""
    module = build_module(model_dir, kind, max_seq_length, allow_untrained_head, jit_compile=jit_compile,
                          freeze_weights=freeze_weights)
    records = warmup_requests(module, warmup_batch_sizes) if jit_compile and warmup_batch_sizes else None
    module.save(output)
    if records:
        write_warmup_requests(records, output)
    return output
