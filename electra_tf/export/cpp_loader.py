"""A SavedModel loaded and run by TensorFlow's C++ loader, the one TF Serving runs, from Python.

TF Serving's `SavedModelBundle` comes from `tensorflow::LoadSavedModel`: it imports the MetaGraph
tagged `serve`, runs the saver's restore op on `variables/` (the TF1 path: variables are restored
by the names in the graph's SaverDef), runs the init ops, and then runs each request's signature
tensors in that session. `tf.saved_model.load` is another loader: it rebuilds the Python objects
and restores each variable by its place in the object graph, so an export can work there and fail
in TF Serving (a function reading a variable the saver never restores).

TensorFlow's wheel exports that C++ loader through its C API (`TF_LoadSessionFromSavedModel`, in
`libtensorflow_cc.so.2`); this module calls it with `ctypes`, in the process that imported
`tensorflow` (and `tensorflow_text`, whose kernels the in-graph tokenizer needs, exactly as TF
Serving is built with them). Strings go in and out as `TF_TString`.

Example:

    with CppSavedModel("serving/sst2/1") as model:
        print(model.signatures["serving_default"].inputs)          # {'text': 'serving_default_text:0'}
        out = model.run("serving_default", {"text": np.array([b"a fine film"], object)})
        replayed = model.replay_warmup()                            # as TF Serving does at load
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from electra_tf.errors import ElectraError
from electra_tf.export.serving import ASSETS_EXTRA
from electra_tf.export.warmup import WARMUP_FILE

SERVE_TAG = "serve"
_TSTRING_BYTES = 24  # sizeof(TF_TString)
_TF_STRING = 7


class CppLoaderError(ElectraError, RuntimeError):
    """TensorFlow's C++ loader refused a SavedModel, or a signature failed to run in its session."""


class _Output(ctypes.Structure):
    _fields_ = [("oper", ctypes.c_void_p), ("index", ctypes.c_int)]


class _Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t), ("deallocator", ctypes.c_void_p)]


@dataclasses.dataclass(frozen=True)
class Signature:
    """A signature's inputs and outputs: key -> graph tensor name ("op:index"), dtype name, shape."""

    name: str
    inputs: Dict[str, str]
    outputs: Dict[str, str]
    input_types: Dict[str, str]
    output_types: Dict[str, str]

    def describe(self) -> str:
        """One line per input and output, as `saved_model_cli show` lists them."""
        lines = [f"signature {self.name!r}:"]
        lines += [f"  input  {k}: {self.input_types[k]} ({v})" for k, v in sorted(self.inputs.items())]
        lines += [f"  output {k}: {self.output_types[k]} ({v})" for k, v in sorted(self.outputs.items())]
        return "\n".join(lines)


def _library() -> ctypes.CDLL:
    """The C API of the TensorFlow this process imported (the same library object, not a second copy)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizer's ops and kernels, as in TF Serving's build

    folder = os.path.dirname(tf.__file__)
    candidates = sorted(glob.glob(os.path.join(folder, "libtensorflow_cc.so*")) +
                        glob.glob(os.path.join(folder, "libtensorflow_cc*.dylib")))
    if not candidates:
        raise CppLoaderError(f"this TensorFlow ({tf.__version__}) has no libtensorflow_cc library in {folder}; "
                             f"the C++ loader check needs the tensorflow wheel from PyPI (Linux or macOS)")
    lib = ctypes.CDLL(candidates[0], mode=getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 2))
    p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    signatures = {
        "TF_NewStatus": (p, []), "TF_DeleteStatus": (None, [p]), "TF_GetCode": (i, [p]),
        "TF_Message": (ctypes.c_char_p, [p]),
        "TF_NewGraph": (p, []), "TF_DeleteGraph": (None, [p]),
        "TF_NewSessionOptions": (p, []), "TF_DeleteSessionOptions": (None, [p]),
        "TF_NewBuffer": (ctypes.POINTER(_Buffer), []), "TF_DeleteBuffer": (None, [ctypes.POINTER(_Buffer)]),
        "TF_LoadSessionFromSavedModel": (p, [p, p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), i, p,
                                             ctypes.POINTER(_Buffer), p]),
        "TF_CloseSession": (None, [p, p]), "TF_DeleteSession": (None, [p, p]),
        "TF_GraphOperationByName": (p, [p, ctypes.c_char_p]),
        "TF_SessionRun": (None, [p, p, ctypes.POINTER(_Output), ctypes.POINTER(p), i,
                                 ctypes.POINTER(_Output), ctypes.POINTER(p), i, ctypes.POINTER(p), i, p, p]),
        "TF_AllocateTensor": (p, [i, ctypes.POINTER(ctypes.c_int64), i, sz]),
        "TF_DeleteTensor": (None, [p]), "TF_TensorData": (p, [p]), "TF_TensorByteSize": (sz, [p]),
        "TF_TensorType": (i, [p]), "TF_NumDims": (i, [p]), "TF_Dim": (ctypes.c_int64, [p, i]),
        "TF_StringInit": (None, [p]), "TF_StringCopy": (None, [p, ctypes.c_char_p, sz]),
        "TF_StringGetDataPointer": (p, [p]), "TF_StringGetSize": (sz, [p]), "TF_StringDealloc": (None, [p]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class CppSavedModel:
    """A SavedModel loaded by `tensorflow::LoadSavedModel` (TF Serving's loader), run through its C API.

    Args:
      export_dir: the SavedModel directory (a TF Serving version folder, `<base>/<name>/<n>`).
      tags: the MetaGraph tags TF Serving loads (`serve`).

    Raises `CppLoaderError` with the loader's own message when it refuses the SavedModel.
    """

    def __init__(self, export_dir: str, tags: Sequence[str] = (SERVE_TAG,)):
        from tensorflow.core.protobuf import meta_graph_pb2

        self.export_dir = export_dir
        self._lib = lib = _library()
        self._status = lib.TF_NewStatus()
        self._graph = lib.TF_NewGraph()
        self._session = None
        options = lib.TF_NewSessionOptions()
        meta = lib.TF_NewBuffer()
        tag_array = (ctypes.c_char_p * len(tags))(*[t.encode() for t in tags])
        try:
            self._session = lib.TF_LoadSessionFromSavedModel(options, None, os.fsencode(export_dir), tag_array,
                                                             len(tags), self._graph, meta, self._status)
            self._check(f"TensorFlow's C++ loader (TF Serving's) could not load {export_dir}")
            self.meta_graph = meta_graph_pb2.MetaGraphDef.FromString(ctypes.string_at(meta.contents.data,
                                                                                      meta.contents.length))
        except BaseException:
            self.close()
            raise
        finally:
            lib.TF_DeleteBuffer(meta)
            lib.TF_DeleteSessionOptions(options)
        self.signatures = {name: _signature(name, sig) for name, sig in self.meta_graph.signature_def.items()
                           if name != "__saved_model_init_op"}

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        lib = self._lib
        if self._session:
            lib.TF_CloseSession(self._session, self._status)
            lib.TF_DeleteSession(self._session, self._status)
            self._session = None
        if self._graph:
            lib.TF_DeleteGraph(self._graph)
            self._graph = None
        if self._status:
            lib.TF_DeleteStatus(self._status)
            self._status = None

    def __enter__(self) -> "CppSavedModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check(self, what: str) -> None:
        lib = self._lib
        if lib.TF_GetCode(self._status) != 0:
            message = (lib.TF_Message(self._status) or b"").decode("utf-8", "replace").strip()
            raise CppLoaderError(f"{what}: {' '.join(message.split())}")

    # ------------------------------------------------------------------ running
    def _output(self, tensor_name: str) -> _Output:
        op, _, index = tensor_name.partition(":")
        oper = self._lib.TF_GraphOperationByName(self._graph, op.encode())
        if not oper:
            raise CppLoaderError(f"the loaded graph has no operation {op!r} (tensor {tensor_name})")
        return _Output(oper, int(index or 0))

    def run(self, signature: str, inputs: Mapping[str, np.ndarray],
            output_keys: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Runs `signature` on `inputs` (key -> numpy array; strings as bytes / object arrays) in the loaded
        session, as TF Serving's Predict does; returns its outputs (all, or `output_keys`) as numpy."""
        if signature not in self.signatures:
            raise CppLoaderError(f"{self.export_dir} has no signature {signature!r}; it has "
                                 f"{', '.join(sorted(self.signatures))}")
        sig = self.signatures[signature]
        unknown = sorted(set(inputs) - set(sig.inputs))
        missing = sorted(set(sig.inputs) - set(inputs))
        if unknown or missing:
            raise CppLoaderError(f"signature {signature!r} takes inputs {', '.join(sorted(sig.inputs))}; got "
                                 f"{', '.join(sorted(inputs)) or 'none'}")
        keys = list(output_keys or sorted(sig.outputs))
        lib = self._lib
        in_keys = sorted(inputs)
        in_ops = (_Output * len(in_keys))(*[self._output(sig.inputs[k]) for k in in_keys])
        out_ops = (_Output * len(keys))(*[self._output(sig.outputs[k]) for k in keys])
        tensors = [_to_tensor(lib, inputs[k], sig.input_types[k]) for k in in_keys]
        in_values = (ctypes.c_void_p * len(tensors))(*[t for t, _ in tensors])
        out_values = (ctypes.c_void_p * len(keys))()
        try:
            lib.TF_SessionRun(self._session, None, in_ops, in_values, len(in_keys), out_ops, out_values, len(keys),
                              None, 0, None, self._status)
            self._check(f"signature {signature!r} failed in the C++ loader's session ({self.export_dir})")
            return {k: _from_tensor(lib, out_values[n]) for n, k in enumerate(keys)}
        finally:
            for tensor, strings in tensors:
                for address in strings:
                    lib.TF_StringDealloc(address)
                lib.TF_DeleteTensor(tensor)
            for n in range(len(keys)):
                if out_values[n]:
                    lib.TF_DeleteTensor(out_values[n])

    def replay_warmup(self) -> int:
        """Replays `assets.extra/tf_serving_warmup_requests` as TF Serving does after loading: every
        `PredictionLog`'s Predict request run through the session, its named signature (default
        `serving_default`), inputs and output filter. Returns how many ran (0 without the file); the first
        failure raises, as it makes TF Serving refuse the model."""
        from electra_tf.export.warmup import WarmupError, recorded_requests

        path = os.path.join(self.export_dir, ASSETS_EXTRA, WARMUP_FILE)
        if not os.path.exists(path):
            return 0
        count = 0
        try:
            for n, signature, inputs, output_filter in recorded_requests(self.export_dir):
                try:
                    self.run(signature, inputs, output_filter or None)
                except CppLoaderError as e:
                    raise CppLoaderError(f"warm-up request {n} of {path} failed, so TF Serving would not load "
                                         f"the model: {e}") from None
                count += 1
        except WarmupError as e:
            raise CppLoaderError(str(e)) from None
        return count


def _signature(name, sig) -> Signature:
    import tensorflow as tf

    def dtype(info):
        return tf.dtypes.as_dtype(info.dtype).name

    return Signature(name, {k: v.name for k, v in sig.inputs.items()}, {k: v.name for k, v in sig.outputs.items()},
                     {k: dtype(v) for k, v in sig.inputs.items()}, {k: dtype(v) for k, v in sig.outputs.items()})


def _to_tensor(lib, value, dtype_name: str):
    """(TF_Tensor*, addresses of its TF_TStrings to free) holding `value` as `dtype_name`."""
    import tensorflow as tf

    dtype = tf.dtypes.as_dtype(dtype_name)
    array = np.asarray(value)
    dims = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    if dtype == tf.string:
        flat = [x if isinstance(x, bytes) else str(x).encode("utf-8") for x in array.reshape(-1).tolist()]
        tensor = lib.TF_AllocateTensor(_TF_STRING, dims, array.ndim, _TSTRING_BYTES * len(flat))
        base = lib.TF_TensorData(tensor)
        strings = []
        for n, item in enumerate(flat):
            address = base + n * _TSTRING_BYTES
            lib.TF_StringInit(address)
            lib.TF_StringCopy(address, item, len(item))
            strings.append(address)
        return tensor, strings
    array = np.ascontiguousarray(array, dtype=dtype.as_numpy_dtype)
    tensor = lib.TF_AllocateTensor(dtype.as_datatype_enum, dims, array.ndim, array.nbytes)
    ctypes.memmove(lib.TF_TensorData(tensor), array.ctypes.data, array.nbytes)
    return tensor, []


def _from_tensor(lib, tensor) -> np.ndarray:
    import tensorflow as tf

    shape = tuple(lib.TF_Dim(tensor, d) for d in range(lib.TF_NumDims(tensor)))
    dtype = tf.dtypes.as_dtype(lib.TF_TensorType(tensor))
    base = lib.TF_TensorData(tensor)
    if dtype == tf.string:
        count = int(np.prod(shape, dtype=np.int64))
        items = [ctypes.string_at(lib.TF_StringGetDataPointer(base + n * _TSTRING_BYTES),
                                  lib.TF_StringGetSize(base + n * _TSTRING_BYTES)) for n in range(count)]
        return np.array(items, dtype=object).reshape(shape)
    raw = ctypes.string_at(base, lib.TF_TensorByteSize(tensor))
    return np.frombuffer(raw, dtype=dtype.as_numpy_dtype).reshape(shape).copy()


def text_feed(signature: Signature, texts: Sequence[str], texts_b: Optional[Sequence[str]] = None
              ) -> Dict[str, np.ndarray]:
    """`serving_default`'s inputs for raw texts: `text`, or `text_a` and `text_b` for a pair model (`texts_b`,
    default: `texts` reversed)."""
    def as_array(items):
        return np.array([t.encode("utf-8") for t in items], dtype=object)

    if "text" in signature.inputs:
        return {"text": as_array(texts)}
    second = list(texts_b) if texts_b else list(texts)[::-1]
    if len(second) != len(texts):
        raise CppLoaderError(f"--text_b gives {len(second)} texts for {len(texts)} --text; give one each")
    return {"text_a": as_array(texts), "text_b": as_array(second)}
