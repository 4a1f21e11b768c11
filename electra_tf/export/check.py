"""`python -m electra_tf.export.check`: will TF Serving serve this SavedModel? Run it before deploying.

    python -m electra_tf.export.check --model_dir serving/sst2/1
    python -m electra_tf.export.check --model_dir serving/sst2/1 --text "a fine film" --text "dull"

It loads the SavedModel with TensorFlow's C++ loader, the one TF Serving runs (`electra_tf.export.cpp_loader`),
prints each signature's inputs and outputs, replays the warm-up requests of
`assets.extra/tf_serving_warmup_requests` as TF Serving does at load, runs a few texts (yours or a built-in
set) through `serving_default` and a short id batch through `encoded`, checks that the outputs equal those of
`tf.saved_model.load` on the same texts, and ends with one line: `ok: TF Serving will serve ...` (exit 0), or
`error: TF Serving would not serve ...: <why>` (exit 2).
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional

import numpy as np
from absl import flags

from electra_tf.cli import parse_flags, report_error, require_flags, run_absl

# Texts run when none are given: a sentence, an empty string, punctuation only, non-Latin scripts, a long text.
SAMPLE_TEXTS = ("The film was a pleasant surprise.", "", "?!", "猫はマットの上に座った。 Кошка сидела.",
                "the story keeps going " * 200)
TOLERANCE = 1e-5
XLA_ATTRIBUTE = "_XlaMustCompile"
# How TensorFlow words a read of a variable that no restore op filled.
UNRESTORED_VARIABLE = ("Could not find variable", "Read variable failure", "uninitialized")


def define_flags(fv=None) -> None:
    """Defines this tool's absl flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    flags.DEFINE_string("model_dir", None, "The SavedModel directory (a TF Serving version folder, e.g. "
                        "serving/sst2/1) (required).", flag_values=fv)
    flags.DEFINE_multi_string("text", None, "A text to run (repeat the flag for more); default: a built-in set "
                              "(a sentence, an empty string, non-Latin scripts, a long text).", flag_values=fv)
    flags.DEFINE_multi_string("text_b", None, "For a sentence-pair classifier: the second texts, one per --text "
                              "(default: the --text list reversed).", flag_values=fv)


def _float_diff(got: Dict[str, np.ndarray], want: Dict[str, np.ndarray]) -> float:
    """The largest absolute difference over the float outputs; +inf when another output differs."""
    worst = 0.0
    for key, value in got.items():
        other = np.asarray(want[key])
        if value.shape != other.shape:
            return float("inf")
        if value.dtype.kind == "f":
            if value.size:
                worst = max(worst, float(np.max(np.abs(value.astype(np.float64) - other.astype(np.float64)))))
        elif not np.array_equal(value.astype(other.dtype) if value.dtype == object else value, other):
            return float("inf")
    return worst


def _tf2_outputs(model_dir: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    import tensorflow as tf

    fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v.tolist(), tf.string) for k, v in inputs.items()}).items()}


def _summary(out: Dict[str, np.ndarray], row: int) -> str:
    """One text's outputs in a few words."""
    if "label" in out:
        label = out["label"][row]
        label = label.decode("utf-8") if isinstance(label, bytes) else str(label)
        return f"label {label!r} (p={float(np.max(out['probabilities'][row])):.3f})"
    if "score" in out:
        return f"score {float(out['score'][row]):.4f}"
    pieces = int(np.sum(out["text_mask"][row]))
    return f"sentence_score {float(out['sentence_score'][row]):.4f} over {pieces} pieces"


def _uses_xla(meta_graph) -> bool:
    return any(XLA_ATTRIBUTE in fn.attr and fn.attr[XLA_ATTRIBUTE].b for fn in meta_graph.graph_def.library.function)


def check(model_dir: str, texts: Optional[List[str]] = None, texts_b: Optional[List[str]] = None,
          print_fn=print) -> str:
    """Loads `model_dir` as TF Serving will and runs it (see the module docstring); returns the `ok:` line and
    raises `CppLoaderError` with the reason it would not serve."""
    from electra_tf.export.cpp_loader import CppLoaderError, CppSavedModel, text_feed

    texts = list(texts or SAMPLE_TEXTS)
    start = time.perf_counter()
    with CppSavedModel(model_dir) as model:
        load_s = time.perf_counter() - start
        print_fn(f"loaded {model_dir} with TensorFlow's C++ loader (TF Serving's) in {load_s:.2f} s")
        for name in sorted(model.signatures):
            print_fn(model.signatures[name].describe())
        if "serving_default" not in model.signatures:
            raise CppLoaderError(f"{model_dir} has no serving_default signature, which TF Serving calls when a "
                                 f"request names none")
        start = time.perf_counter()
        replayed = model.replay_warmup()
        if replayed:
            print_fn(f"replayed {replayed} warm-up requests in {time.perf_counter() - start:.2f} s")
        feed = text_feed(model.signatures["serving_default"], texts, texts_b)
        out = model.run("serving_default", feed)
        for row, text in enumerate(texts):
            shown = text if len(text) <= 60 else text[:57] + "..."
            print_fn(f"  {shown!r}: {_summary(out, row)}")
        if "encoded" in model.signatures:
            ids = np.array([[0, 1, 0, 0]], np.int32)
            model.run("encoded", {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": ids * 0})
        xla = _uses_xla(model.meta_graph)
    diff = _float_diff(out, _tf2_outputs(model_dir, feed))
    if not diff <= TOLERANCE:
        raise CppLoaderError(f"its outputs in the C++ loader differ from tf.saved_model.load's by {diff:.3g} "
                             f"(more than {TOLERANCE:g}); the served model would not be the exported one")
    if xla:
        print_fn("note: the encoder is XLA-compiled (export --jit_compile): on a CPU, start TF Serving with "
                 "--xla_cpu_compilation_enabled=true")
    return (f"ok: TF Serving will serve {model_dir}: loaded by its C++ loader in {load_s:.2f} s, "
            f"{replayed} warm-up requests replayed, {len(texts)} texts run with outputs equal to "
            f"tf.saved_model.load's (max difference {diff:.1g})")


def _hint(message: str) -> str:
    """The fix for a failure a reader of the message would not guess."""
    if any(m in message for m in UNRESTORED_VARIABLE):
        return ("; its signatures read variables that the loader does not restore (a Keras 3 layer saved inside a "
                "tf.Module does this): if electra_tf wrote it, export it again with this version")
    if "Op type not registered" in message:
        return "; the graph needs ops this TensorFlow lacks: install the tensorflow-text that matches tensorflow"
    return ""


def run(values) -> int:
    """The check, from the parsed flags; returns the exit code."""
    require_flags(values, "model_dir")
    model_dir = values.model_dir
    if not os.path.isfile(os.path.join(model_dir, "saved_model.pb")):
        return report_error(f"--model_dir {model_dir!r} holds no saved_model.pb; pass a SavedModel version folder "
                            f"written by python -m electra_tf.export (e.g. serving/sst2/1)")
    from electra_tf.export.cpp_loader import CppLoaderError

    try:
        line = check(model_dir, values.text, values.text_b)
    except CppLoaderError as e:
        return report_error(f"TF Serving would not serve {model_dir}: {e}{_hint(str(e))}")
    print(line, flush=True)
    return 0


def main(argv=None) -> int:
    """`python -m electra_tf.export.check` in-process: argv holds the flags only; returns the exit code."""
    return run(parse_flags(define_flags, argv, prog="electra_tf.export.check"))


if __name__ == "__main__":
    run_absl(run, define_flags)
