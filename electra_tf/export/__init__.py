"""SavedModel export for TF Serving: raw text in, tokenized in-graph. See docs/serving.md."""

from electra_tf.export.serving_loader import ExportError, build_module, load_classifier
from electra_tf.export.serving import ServingModule, pair_lengths

__all__ = ["ExportError", "ServingModule", "build_module", "load_classifier",
           "pair_lengths", "export"]


def export(model_dir, output, kind="discriminator", max_seq_length=None, allow_untrained_head=False,
           jit_compile=False):
    """Writes a SavedModel of `model_dir` to `output`; returns `output`. `jit_compile`: the opt-in
    XLA-compiled encoder (`ServingModule`)."""
    return build_module(model_dir, kind, max_seq_length, allow_untrained_head,
                        jit_compile=jit_compile).save(output)
