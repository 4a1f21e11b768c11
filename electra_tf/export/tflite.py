"""LiteRT (TFLite) export: `python -m electra_tf.export --format tflite`.

Writes, into one folder:

* `model.tflite`: raw UTF-8 text in (`text`, or `text_a` / `text_b` for a pair classifier), tokenized
  inside the file by tensorflow-text's LiteRT kernels (custom ops FastBertNormalize and
  FastWordpieceTokenizeWithOffsets), outputs as the SavedModel's `serving_default`;
* `model_ids.tflite`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] in (the SavedModel's
  `encoded` signature), builtin ops only, for a runtime without tensorflow-text's kernels;
* `model.json`: what a caller needs beside them (labels, text columns, max_seq_length, the file names,
  inputs and outputs, the text normalisation), and `vocab.txt`, to tokenize for the ids-in file.

Both files are converted from the serving graphs with the encoder and head weights frozen into
constants (`ServingModule._frozen_module`). A conversion from the variables writes a file of about
1 MB with no weights in it (VAR_HANDLE ops that start from zeros) and no error; `check_weights`
refuses such a file. `--quantize int8` is LiteRT's dynamic-range quantization: weights stored as int8,
activations in float32.

Before anything is written, `export_tflite` runs both files on `CHECK_TEXTS` and compares them with
the SavedModel's functions (`ServingModule.serve` / `serve_encoded`): float32 outputs within
`FP32_TOLERANCE` (relative to an output's largest magnitude where that is above 1: float32 round-off grows with
the values), the tokens and masks equal, and for int8 the text-in file equal to the ids-in file within the same
tolerance (the tokenizer inside is exact; int8's logits move by up to about 0.1 and are reported, not refused).

`LiteRTModel` runs a file: ai-edge-litert's interpreter when the package is installed, else
TensorFlow's `tf.lite.Interpreter`, with tensorflow-text's kernels registered when the file needs them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tensorflow.lite.python.convert_phase import ConverterError

from electra_tf.errors import ElectraError
from electra_tf.export.serving import CLASSIFIER, ENCODED_INPUTS, ServingModule
from electra_tf.models.model_folder import VOCAB_FILE  # the export carries the model's vocabulary under its name

TEXT_FILE, IDS_FILE, METADATA_FILE = "model.tflite", "model_ids.tflite", "model.json"
FORMAT = "litert"
QUANTIZE = ("none", "int8")
INPUTS = ("text", "ids")
SIGNATURE = "serving_default"
FP32_TOLERANCE = 1e-5  # times max(1, the output's largest magnitude): `allowed`
# tensorflow-text's LiteRT kernels that the text-in file may call (tensorflow_text.tflite_registrar).
TEXT_KERNELS = frozenset({"FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "FastWordpieceTokenize",
                          "RaggedTensorToTensor"})
# A weight file holds at least this share of the encoder + head's bytes (float32, or one byte per
# weight under int8) in float32 / int8 buffers.
MIN_WEIGHT_SHARE = 0.9
# The self-check's texts: short and long (truncated), accents, CJK, an empty one.
CHECK_TEXTS = (
    "The cat sat on the mat.",
    "a",
    "Café über naïve — 猫はマットの上に座った。 Кошка сидела на коврике!",
    "the big dog ran quickly to the old river and the children read books " * 30,
    "",
)


class LiteRTError(ElectraError, ValueError):
    """A LiteRT file that cannot be written or run."""


# ---------------------------------------------------------------------------------------------- runtime
def runtime_name() -> str:
    """"ai-edge-litert" when that package is installed (its interpreter runs the files), else "tf.lite"."""
    try:
        import ai_edge_litert.interpreter  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return "tf.lite"
    return "ai-edge-litert"


class LiteRTModel:
    """One .tflite file's `serving_default` signature, called with numpy arrays.

    Args:
      path: the .tflite file (or pass `content`).
      content: the file's bytes.
      num_threads: the interpreter's threads (None: the runtime's default).
      runtime: "ai-edge-litert" or "tf.lite" (None: `runtime_name()`).

    Attributes:
      inputs, outputs: the signature's input and output names.
      custom_ops: the custom ops the file calls (tensorflow-text's tokenizer for a text-in file).
    """

    def __init__(self, path: Optional[str] = None, content: Optional[bytes] = None,
                 num_threads: Optional[int] = None, runtime: Optional[str] = None):
        if (path is None) == (content is None):
            raise TypeError("LiteRTModel takes path= or content=")
        if content is None:
            with open(path, "rb") as f:
                content = f.read()
        self.name = path or "the LiteRT file"
        self.runtime = runtime or runtime_name()
        self.custom_ops = sorted(inspect_model(content).custom_ops)
        missing = sorted(set(self.custom_ops) - TEXT_KERNELS)
        if missing:
            raise LiteRTError(f"{self.name} calls ops that neither LiteRT nor tensorflow-text has kernels for "
                              f"({', '.join(missing)}); export it again with python -m electra_tf.export --format "
                              f"tflite")
        kwargs = {"model_content": content, "num_threads": num_threads}
        if self.runtime == "ai-edge-litert":
            from ai_edge_litert import interpreter as lite  # pylint: disable=import-outside-toplevel
        elif self.runtime == "tf.lite":
            from tensorflow.lite.python import interpreter as lite  # pylint: disable=import-outside-toplevel
        else:
            raise LiteRTError(f"runtime={self.runtime!r}: use ai-edge-litert or tf.lite")
        try:
            if self.custom_ops:
                from tensorflow_text import tflite_registrar  # pylint: disable=import-outside-toplevel

                self.interpreter = lite.InterpreterWithCustomOps(
                    custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, **kwargs)
            else:
                self.interpreter = lite.Interpreter(**kwargs)
            signatures = self.interpreter.get_signature_list()
            if SIGNATURE not in signatures:
                raise LiteRTError(f"{self.name} has no {SIGNATURE} signature (it has {', '.join(signatures)}); "
                                  f"export it with python -m electra_tf.export --format tflite")
            self._runner = self.interpreter.get_signature_runner(SIGNATURE)
        except (ValueError, RuntimeError) as e:
            if isinstance(e, LiteRTError):
                raise
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise LiteRTError(f"{self.runtime} cannot load {self.name}: {line}") from None
        self.inputs: List[str] = list(signatures[SIGNATURE]["inputs"])
        self.outputs: List[str] = list(signatures[SIGNATURE]["outputs"])

    def __call__(self, **inputs) -> Dict[str, np.ndarray]:
        """The signature's outputs for `inputs` (numpy arrays, tensors or lists; strings as str or bytes)."""
        return {k: np.asarray(v) for k, v in self._runner(**{k: _array(v) for k, v in inputs.items()}).items()}


def _array(value) -> np.ndarray:
    """An input as the interpreter takes it: int32, or an object array of bytes."""
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    if array.dtype == object or array.dtype.kind in "SU":
        flat = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in array.reshape(-1).tolist()]
        return np.array(flat, dtype=object).reshape(array.shape)
    return array.astype(np.int32)


# ---------------------------------------------------------------------------------------------- files
@dataclasses.dataclass
class ModelFacts:
    """What a .tflite file holds: variable ops (a conversion from variables), the bytes of its float32
    and int8 buffers (the weights), and the custom ops it calls."""
    variable_ops: int
    weight_bytes: int
    custom_ops: List[str]


def inspect_model(content: bytes) -> ModelFacts:
    """The `ModelFacts` of a .tflite file's bytes."""
    from tensorflow.lite.python import schema_py_generated as schema  # pylint: disable=import-outside-toplevel

    model = schema.Model.GetRootAs(bytearray(content), 0)
    variable_codes = {schema.BuiltinOperator.VAR_HANDLE, schema.BuiltinOperator.READ_VARIABLE,
                      schema.BuiltinOperator.ASSIGN_VARIABLE}
    codes, custom = [], []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        codes.append(builtin)
        if builtin == schema.BuiltinOperator.CUSTOM and code.CustomCode():
            custom.append(code.CustomCode().decode("utf-8"))
    variable_ops = 0
    weight_buffers = set()
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for o in range(graph.OperatorsLength()):
            variable_ops += codes[graph.Operators(o).OpcodeIndex()] in variable_codes
        for t in range(graph.TensorsLength()):
            tensor = graph.Tensors(t)
            if tensor.Type() in (schema.TensorType.FLOAT32, schema.TensorType.INT8) and tensor.Buffer() > 0:
                weight_buffers.add(tensor.Buffer())
    weight_bytes = 0
    for b in weight_buffers:
        buffer = model.Buffers(b)
        weight_bytes += buffer.DataLength() or int(buffer.Size())
    return ModelFacts(variable_ops, weight_bytes, sorted(set(custom)))


def weight_count(module: ServingModule) -> int:
    """The encoder and head's weights (each variable once)."""
    seen, total = set(), 0
    for v in list(module.encoder.weights) + list(module.head.weights):
        if id(v) not in seen:
            seen.add(id(v))
            total += int(np.prod(v.shape))
    return total


def check_weights(content: bytes, weights: int, quantize: str, name: str) -> ModelFacts:
    """Refuses (LiteRTError) a file converted from variables, or one whose weight buffers are too small to
    hold `weights` weights (float32; int8: one byte each); returns its `ModelFacts`."""
    facts = inspect_model(content)
    need = int(MIN_WEIGHT_SHARE * weights * (1 if quantize == "int8" else 4))
    if facts.variable_ops or facts.weight_bytes < need:
        raise LiteRTError(f"{name} holds no weights ({facts.variable_ops} variable ops, {facts.weight_bytes:,} bytes "
                          f"of weight buffers for {weights:,} weights): it was converted from variables, not from "
                          f"the frozen serving graph; convert ServingModule._frozen_module()'s functions")
    return facts


def convert(function, trackable, quantize: str = "none") -> bytes:
    """A concrete function -> .tflite bytes: LiteRT's builtin ops, tensorflow-text's ops as custom ops,
    `quantize` "int8": dynamic-range quantization."""
    if quantize not in QUANTIZE:
        raise LiteRTError(f"quantize={quantize!r}: use one of {', '.join(QUANTIZE)}")
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], trackable)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's tokenizer ops, run by its LiteRT kernels
    if quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def _text_problem(module: ServingModule) -> Optional[str]:
    """Why the text-in file cannot be made for `module`'s tokenizer, or None."""
    normalization = getattr(module.preprocessor, "normalization", None)
    if normalization is not None and getattr(normalization, "is_bert", False):
        return (f"the model's text normalisation ({normalization.describe()}) runs regular-expression and "
                f"Unicode ops that no LiteRT kernel implements, so the tokenizer cannot go inside the file; "
                f"pass --tflite_inputs ids to write model_ids.tflite alone (tokenize with its vocab.txt and "
                f"model.json's text_normalization, e.g. electra_tf.preprocessing.TextPreprocessor)")
    return None


# ---------------------------------------------------------------------------------------------- check
def check_texts(module: ServingModule):
    """The self-check's inputs as the text signature takes them."""
    texts = list(CHECK_TEXTS)
    if module.pair:
        return {"text_a": texts, "text_b": texts[1:] + texts[:1]}
    return {"text": texts}


def allowed(reference: np.ndarray, tolerance: float = FP32_TOLERANCE) -> float:
    """The largest difference the self-check lets an output have from `reference`: `tolerance`, times the
    reference's largest magnitude where that is above 1."""
    return tolerance * max(1.0, float(np.max(np.abs(reference)))) if reference.size else tolerance


def _compare(got: Dict[str, np.ndarray], want: Dict[str, np.ndarray], what: str, tolerance: Optional[float],
             exact_labels: bool = True) -> float:
    """Largest float difference of `got` against `want`; LiteRTError when a float differs beyond `tolerance`
    (None: any difference is reported, not refused) or another output (ids, masks, tokens; the labels when
    `exact_labels`) differs."""
    worst = 0.0
    for key, ref in want.items():
        if key not in got:
            raise LiteRTError(f"{what} has no output {key!r} (it has {', '.join(sorted(got))})")
        value = got[key]
        if value.shape != ref.shape:
            raise LiteRTError(f"{what}: output {key!r} has shape {value.shape}, the SavedModel's {ref.shape}")
        if ref.dtype.kind == "f":
            diff = float(np.max(np.abs(value.astype(np.float64) - ref))) if ref.size else 0.0
            worst = max(worst, diff)
            limit = None if tolerance is None else allowed(ref, tolerance)
            if limit is not None and not diff <= limit:
                raise LiteRTError(f"{what}: output {key!r} differs from the SavedModel's by {diff:.3g}, more than "
                                  f"{limit:.3g} ({tolerance:g} of its largest value, at least {tolerance:g}); the "
                                  f"file does not compute what the SavedModel does")
        elif key in ("label", "label_id") and not exact_labels:
            continue  # int8: a label may flip where two classes are close
        elif not np.array_equal(value if ref.dtype == object else value.astype(ref.dtype), ref):
            raise LiteRTError(f"{what}: output {key!r} differs from the SavedModel's")
    return worst


def _numpy(outputs) -> Dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in outputs.items()}


def self_check(module: ServingModule, files: Dict[str, bytes], quantize: str) -> dict:
    """Runs the converted files (name -> bytes) on `CHECK_TEXTS` against the SavedModel's functions; returns
    {"max_abs_difference": ...} (int8: against float32, not refused); LiteRTError on a difference."""
    inputs = check_texts(module)
    text_ref = _numpy(module.serve(*(tf.constant(v) for v in inputs.values())))
    encoded = module.encode(*(tf.constant(v) for v in inputs.values()))
    ids = {k: encoded[k] for k in ENCODED_INPUTS}
    ids_ref = _numpy(module.serve_encoded(**ids))
    fp32 = quantize == "none"
    tolerance = FP32_TOLERANCE if fp32 else None
    worst, outputs = 0.0, {}
    for name, content in files.items():
        model = LiteRTModel(content=content)
        model.name = name
        text_in = name == TEXT_FILE
        got = model(**inputs) if text_in else model(**ids)
        worst = max(worst, _compare(got, text_ref if text_in else ids_ref, name, tolerance, fp32))
        outputs[name] = got
        if text_in:  # one text alone: the file resizes its inputs between calls
            one = {k: v[:1] for k, v in inputs.items()}
            one_ref = _numpy(module.serve(*(tf.constant(v) for v in one.values())))
            worst = max(worst, _compare(model(**one), one_ref, name + " (one text)", tolerance, fp32))
    if not fp32 and len(outputs) == 2:  # the same int8 weights: the tokenizer inside is exact
        text_out, ids_out = outputs[TEXT_FILE], outputs[IDS_FILE]
        for key in ("logits", "score", "replaced_logits"):
            if key in ids_out:
                diff = float(np.max(np.abs(text_out[key] - ids_out[key]))) if ids_out[key].size else 0.0
                if not diff <= allowed(ids_out[key]):
                    raise LiteRTError(f"{TEXT_FILE}: output {key!r} differs from {IDS_FILE}'s on the same texts "
                                      f"by {diff:.3g}; the tokenizer inside the file does not match the SavedModel's")
    return {"max_abs_difference": worst, "texts": len(CHECK_TEXTS)}


# ---------------------------------------------------------------------------------------------- export
def metadata(module: ServingModule, files: Dict[str, str], quantize: str, check: dict,
             facts: Dict[str, ModelFacts]) -> dict:
    """model.json's content."""
    meta = json.loads(module._metadata_json)  # pylint: disable=protected-access
    meta.update(format=FORMAT, kind=module.kind, quantize=quantize, files=files, vocab=VOCAB_FILE,
                width_multiple=module.width_multiple, max_positions=int(module.encoder.embeddings.max_positions),
                do_lower_case=bool(module.preprocessor.do_lower_case), check=check)
    normalization = getattr(module.preprocessor, "normalization", None)
    if normalization is not None and hasattr(normalization, "to_json"):
        meta["text_normalization"] = normalization.to_json()
    meta["inputs"] = {}
    if TEXT_FILE in files.values():
        meta["inputs"]["text"] = ["text_a", "text_b"] if module.pair else ["text"]
    if IDS_FILE in files.values():
        meta["inputs"]["ids"] = list(ENCODED_INPUTS)
    meta["custom_ops"] = {name: facts[name].custom_ops for name in files.values()}
    if module.kind != CLASSIFIER:
        for key in ("labels", "pair", "regression"):
            meta.pop(key, None)
    return meta


def tflite_files(module: ServingModule, quantize: str = "none", inputs: Sequence[str] = INPUTS):
    """The checked files of `module`: ({file name: bytes}, model.json dict). LiteRTError when one cannot be
    made, holds no weights or does not answer as the SavedModel does."""
    inputs = list(dict.fromkeys(inputs))
    bad = [i for i in inputs if i not in INPUTS]
    if bad or not inputs:
        raise LiteRTError(f"--tflite_inputs {','.join(inputs)}: use text, ids or text,ids")
    if module.jit_compile or module.xla_loops:
        raise LiteRTError("--format tflite does not take --jit_compile: LiteRT runs its own kernels; leave it out")
    if "text" in inputs:
        problem = _text_problem(module)
        if problem:
            raise LiteRTError(problem)
    frozen = module._frozen_module()  # pylint: disable=protected-access
    functions = {}
    if "text" in inputs:
        functions[TEXT_FILE] = frozen.serve.get_concrete_function()
    if "ids" in inputs:
        functions[IDS_FILE] = frozen.serve_encoded.get_concrete_function()
    weights = weight_count(module)
    files, facts = {}, {}
    for name, function in functions.items():
        try:
            content = convert(function, frozen, quantize)
        except ConverterError as e:
            first = next((line for line in str(e).splitlines() if "error" in line.lower()), str(e).splitlines()[0])
            raise LiteRTError(f"LiteRT's converter failed on {name}: {first.strip()}") from None
        facts[name] = check_weights(content, weights, quantize, name)
        missing = sorted(set(facts[name].custom_ops) - TEXT_KERNELS)
        if missing:
            raise LiteRTError(f"{name} would call ops no LiteRT kernel implements ({', '.join(missing)}); export "
                              f"with --tflite_inputs ids and tokenize outside the file")
        files[name] = content
    check = self_check(module, files, quantize)
    names = {kind: name for kind, name in (("text", TEXT_FILE), ("ids", IDS_FILE)) if name in files}
    return files, metadata(module, names, quantize, check, facts)


def export_tflite(module: ServingModule, output: str, quantize: str = "none", inputs: Sequence[str] = INPUTS,
                  overwrite: bool = False) -> dict:
    """Writes `module`'s LiteRT files, model.json and vocab.txt to the folder `output` (replaced when
    `overwrite`), only once they passed `tflite_files`' checks; returns model.json's content with the
    file sizes. Nothing is left behind when a check fails."""
    files, meta = tflite_files(module, quantize, inputs)
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".tflite-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp's folder is private; the export's is not
    try:
        for name, content in files.items():
            with open(os.path.join(staging, name), "wb") as f:
                f.write(content)
        with open(os.path.join(staging, VOCAB_FILE), "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in module.preprocessor.vocabulary))
        with open(os.path.join(staging, METADATA_FILE), "w", encoding="utf-8") as f:
            f.write(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if os.path.exists(output):
            if not overwrite and os.listdir(output):
                raise LiteRTError(f"{output} exists and is not empty; pass --overwrite or a new directory")
            shutil.rmtree(output)
        os.replace(staging, output)
    finally:
        if os.path.exists(staging):
            shutil.rmtree(staging)
    meta["bytes"] = {name: len(content) for name, content in files.items()}
    return meta


def read_metadata(folder: str) -> dict:
    """model.json of a folder `export --format tflite` wrote; LiteRTError if it is absent or not ours."""
    path = os.path.join(folder, METADATA_FILE)
    if not os.path.isfile(path):
        raise LiteRTError(f"{folder} has no {METADATA_FILE} beside its .tflite file; it holds the labels and the "
                          f"sequence length: export again with python -m electra_tf.export --format tflite, or copy "
                          f"the {METADATA_FILE} written with the file")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except ValueError as e:
        raise LiteRTError(f"{path} is not readable JSON ({e}); export again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise LiteRTError(f"{path} was not written by python -m electra_tf.export --format tflite; export again")
    return meta
