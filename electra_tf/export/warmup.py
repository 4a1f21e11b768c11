"""TF Serving warm-up requests, so that an XLA-compiled SavedModel compiles at load, not on a user's request.

A `--jit_compile` SavedModel (`ServingModule(jit_compile=True)`) compiles its encoder once per padded
batch x width the first time it meets that shape (about 2 s each for ELECTRA-Small on a 2-core CPU).
TF Serving replays the requests in `assets.extra/tf_serving_warmup_requests` (a TFRecord file of
`PredictionLog` protos) when it loads a model, before it serves any: one request per shape moves
every compile there. The shapes are the ones the module runs at: each padded width up to
max_seq_length (`padded_width`: multiples of `width_multiple`, and max_seq_length itself) times
each padded batch size (`padded_batch`) in `batch_sizes`.

The protos come from the `tensorflow-serving-api` package (`pip install "electra_tf[serving]"`).
"""

from __future__ import annotations

import os
from typing import Iterator, List, Sequence, Tuple

from electra_tf.errors import ElectraError
from electra_tf.export.serving import ASSETS_EXTRA, padded_batch, padded_width

WARMUP_FILE = "tf_serving_warmup_requests"
# Every padded batch size up to 32 (powers of two: `padded_batch`).
DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
SIGNATURE = "serving_default"


class WarmupError(ElectraError, ValueError):
    """Warm-up requests that cannot be written for this module."""


def warmup_shapes(max_seq_length: int, width_multiple: int, batch_sizes: Sequence[int]) -> List[Tuple[int, int]]:
    """(padded batch, padded width) pairs a server of this shape meets, batch sizes rounded by `padded_batch`."""
    if width_multiple <= 1:
        raise WarmupError("warm-up requests need widths padded to a multiple (width_multiple > 1); with "
                          "width_multiple 1 every length is its own shape")
    bad = [b for b in batch_sizes if int(b) < 1]
    if bad or not batch_sizes:
        raise WarmupError(f"warm-up batch sizes must be positive integers, not {list(batch_sizes)}")
    widths = sorted({padded_width(n, width_multiple, max_seq_length) for n in range(1, max_seq_length + 1)})
    batches = sorted({padded_batch(int(b)) for b in batch_sizes})
    return [(b, w) for b in batches for w in widths]


def _filler_word(module) -> str:
    """A vocabulary word that tokenizes to exactly one piece on its own and when repeated."""
    import tensorflow as tf

    pre = module.preprocessor
    for token in pre.vocabulary:
        if not token.isalpha() or token.startswith("[") or token.lower() != token:
            continue
        pieces = pre(tf.constant([" ".join([token] * 5)]))["input_mask"].numpy().sum()
        if pieces == 5 + 2:
            return token
    raise WarmupError("the vocabulary has no lowercase word that tokenizes to one piece, which the warm-up "
                      "requests are made of; export without --jit_compile")


def warmup_requests(module, batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES) -> List[bytes]:
    """Serialized `PredictionLog` protos, one per (padded batch, padded width) of `module`, each checked to
    encode to its width."""
    import tensorflow as tf

    try:
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2
    except ImportError:
        raise WarmupError("writing TF Serving warm-up requests needs the tensorflow-serving-api package; "
                          "pip install \"electra_tf[serving]\" (or pass --nowarmup)") from None
    word = _filler_word(module)
    records = []
    for batch, width in warmup_shapes(module.max_seq_length, module.width_multiple, batch_sizes):
        # [CLS] text [SEP] (and [SEP] after an empty second text for a pair model) fill the width.
        text = " ".join([word] * (width - (3 if module.pair else 2)))
        inputs = {"text_a": [text] * batch, "text_b": [""] * batch} if module.pair else {"text": [text] * batch}
        got = module.encode(*(tf.constant(v) for v in inputs.values()))["input_ids"].shape
        if tuple(got) != (batch, width):
            raise WarmupError(f"a warm-up request for batch {batch} x width {width} encoded to {tuple(got)}")
        request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=SIGNATURE))
        for name, values in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string))
        log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
        records.append(log.SerializeToString())
    return records


def write_warmup_requests(records: Sequence[bytes], saved_model_dir: str) -> str:
    """Writes `records` (`warmup_requests`) to `assets.extra/tf_serving_warmup_requests` in `saved_model_dir`;
    returns its path."""
    import tensorflow as tf

    folder = os.path.join(saved_model_dir, ASSETS_EXTRA)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, WARMUP_FILE)
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    return path


def recorded_requests(saved_model_dir: str) -> Iterator[Tuple[int, str, dict, List[str]]]:
    """(index, signature name, inputs as numpy, output filter) of each Predict request in `saved_model_dir`'s
    warm-up file, as TF Serving reads them (no signature name: `serving_default`). A record holding another
    kind of log raises `WarmupError`: the replays here run Predict requests only."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(saved_model_dir, ASSETS_EXTRA, WARMUP_FILE)
    for n, raw in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
        log = prediction_log_pb2.PredictionLog.FromString(raw)
        kind = log.WhichOneof("log_type")
        if kind != "predict_log":
            raise WarmupError(f"warm-up record {n} of {path} is a {kind}; only Predict requests are replayed here")
        request = log.predict_log.request
        yield (n, request.model_spec.signature_name or SIGNATURE,
               {k: tf.make_ndarray(v) for k, v in request.inputs.items()}, list(request.output_filter))


def replay_warmup_requests(saved_model_dir: str, signatures=None) -> int:
    """Runs every warm-up request of `saved_model_dir` through its signature, as TF Serving does at load
    (for a server in Python, e.g. one that loads with `tf.saved_model.load`); returns how many ran."""
    import tensorflow as tf

    signatures = signatures or tf.saved_model.load(saved_model_dir).signatures
    count = 0
    for _, name, inputs, _ in recorded_requests(saved_model_dir):
        signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
        count += 1
    return count
