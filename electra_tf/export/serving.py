"""The serving graph: raw UTF-8 text in, named outputs out, tokenized in-graph.

`ServingModule` is a `tf.Module` holding a `TextPreprocessor` (vocabulary as
constants, so the SavedModel carries no file path) and our Keras encoder +
head. Its functions need only TensorFlow and tensorflow-text ops, so the saved
graph loads without electra_tf or Keras.

Encoding is fine-tuning's, by construction: both call
`electra_tf.preprocessing.TextPreprocessor` (`[CLS] a [SEP]`, and `b [SEP]` for
pairs, with the reference pair-truncation rule). Batches are padded to their
longest row rounded up to a multiple of `width_multiple` (16; capped at
max_seq_length), not to max_seq_length: a server then meets a few widths, not
one per text length, so the kernels it builds per input shape (oneDNN
primitives, the XLA-compiled loops of the fused encoder) are built for those few
widths and reused. The extra columns are padding, masked out of attention; the
per-token outputs are cut back to the batch's longest row, so the outputs do not
change (tests/export/test_width_buckets.py).

`jit_compile=True` (opt-in, `export --jit_compile`) runs the encoder and head as
one XLA-compiled function, with the batch also padded, to a power of two up to 32
and to a multiple of 32 beyond, so that the compiled shapes stay few. On a 2-core
CPU this serves 1.1-1.3x the batch-32 throughput once a shape is compiled, but each new
batch x width compiles once (1.3-2.2 s for ELECTRA-Small and MiniLM), and TF Serving runs XLA on a
CPU only with `--xla_cpu_compilation_enabled=true`; hence not the default
(docs/serving.md, docs/performance.md).

`freeze_weights=True` (opt-in, `export --freeze_weights`) saves the serving graphs with the encoder and
head weights as constants instead of variables. A variable is read on every call, and oneDNN reorders
each weight into its blocked layout again each time; a constant lets it keep the reordered copy, which
shortens batch-1 calls most on short texts, whose matmuls have few rows (0.75x at 16 pieces, 0.9x at
128 for ELECTRA-Small on a 2-core CPU; docs/serving.md). Both signatures call one frozen function, so each weight is stored once.
"""

from __future__ import annotations

import json
import os
from typing import List, Optional, Sequence

import tensorflow as tf

from electra_tf.models import fused_ops
from electra_tf.preprocessing import TextPreprocessor, pair_lengths

__all__ = ["CLASSIFIER", "DISCRIMINATOR", "ENCODED_INPUTS", "ServingModule", "WIDTH_MULTIPLE", "BATCH_MULTIPLE",
           "padded_batch", "pair_lengths", "padded_width"]

DISCRIMINATOR, CLASSIFIER = "discriminator", "classifier"
# A classifier SavedModel's label names and columns, beside the graph (see `save`).
ASSETS_EXTRA, CLASSIFIER_METADATA = "assets.extra", "classifier.json"
# Served batches are padded to their longest row rounded up to a multiple of this.
WIDTH_MULTIPLE = 16
# The `encoded` signature's inputs, int32 [batch, seq] each.
ENCODED_INPUTS = ("input_ids", "input_mask", "segment_ids")
# Under jit_compile, batches are padded to a power of two up to this, and to a multiple of it beyond.
BATCH_MULTIPLE = 32


def padded_width(width, multiple: int, limit: int):
    """`width` rounded up to a multiple of `multiple`, but not past `limit` (nor below `width`).

    Works on Python ints and on int32 scalar tensors."""
    if multiple <= 1:
        return width
    rounded = (width + multiple - 1) // multiple * multiple
    if isinstance(width, int):
        return max(width, min(rounded, limit))
    return tf.maximum(width, tf.minimum(rounded, limit))


def padded_batch(rows, multiple: int = BATCH_MULTIPLE):
    """`rows` rounded up to a power of two up to `multiple` (a power of two), and to a multiple of
    `multiple` beyond: the batch sizes an XLA-compiled server meets are then log2(multiple) + 1 up
    to `multiple`, whatever the traffic.

    Works on Python ints and on int32 scalar tensors (rows >= 1)."""
    if isinstance(rows, int):
        if rows > multiple:
            return -(-rows // multiple) * multiple
        return 1 << max(0, rows - 1).bit_length()
    smear = rows - 1  # the next power of two: set every bit below the highest, add one
    for shift in (1, 2, 4, 8, 16):
        smear = tf.bitwise.bitwise_or(smear, tf.bitwise.right_shift(smear, shift))
    return tf.where(rows > multiple, (rows + multiple - 1) // multiple * multiple, smear + 1)


class ServingModule(tf.Module):
    """Text -> ELECTRA outputs, exportable with `tf.saved_model.save`.

    Args:
      kind: "discriminator" (per-token replaced probabilities) or "classifier".
      encoder: our `ElectraEncoder` (built, weights loaded).
      head: `DiscriminatorHead` for a discriminator; the `ClassifierModel`'s
        head for a classifier.
      vocab: the WordPiece vocabulary (list of tokens).
      max_seq_length: maximum pieces per example, [CLS]/[SEP] included.
      do_lower_case: the model's text normalisation (a `TextNormalization`, as
        `ElectraConfig.normalization` gives it); a bool: the casing of a model
        folder that records none (`TextNormalization.legacy`).
      labels: class names (classifier).
      pair: the classifier takes sentence pairs.
      regression: the classifier outputs one score.
      metadata: a classifier's classifier.json (labels, columns, ...): `save`
        writes it to assets.extra/classifier.json, where `electra_tf.predict`
        finds the label names and text columns (TF Serving ignores the folder).
      width_multiple: batches run padded to their longest row rounded up to a
        multiple of this (capped at max_seq_length; at the model's positions for
        `serve_encoded`); 1: to the longest row. Outputs are the same either way.
      xla_loops: run the fused encoder's element-wise loops XLA-compiled, as
        training does. Off (the default), they are plain TensorFlow ops that
        oneDNN fuses with the matmuls: no XLA compile at request time for each
        new batch x width a server meets (docs/performance.md).
      jit_compile: run the encoder and head as one XLA-compiled function on
        batches padded by `padded_batch` (see the module docstring). Outputs
        equal the default's to float32 round-off.
      freeze_weights: `save` writes the serving graphs with the encoder and
        head weights as constants (see the module docstring); the module's own
        functions keep reading the variables. Not with `jit_compile` or
        `xla_loops`, which compile the encoder with XLA: freezing is a lever for
        the default graph's oneDNN matmuls.
    """

    def __init__(self, kind: str, encoder, head, vocab: Sequence[str], max_seq_length: int,
                 do_lower_case: bool = True, labels: Optional[List[str]] = None, pair: bool = False,
                 regression: bool = False, metadata: Optional[dict] = None,
                 width_multiple: int = WIDTH_MULTIPLE, xla_loops: bool = False, jit_compile: bool = False,
                 freeze_weights: bool = False):
        super().__init__(name=f"electra_{kind}")
        if kind not in (DISCRIMINATOR, CLASSIFIER):
            raise ValueError(f"kind must be discriminator or classifier, not {kind!r}")
        if max_seq_length < (4 if pair else 3):
            raise ValueError(f"max_seq_length={max_seq_length} leaves no room for text")
        if freeze_weights and (jit_compile or xla_loops):
            raise ValueError(f"--freeze_weights does not combine with {'--jit_compile' if jit_compile else 'xla_loops'}"
                             f": freezing keeps oneDNN's reordered weights in the default graph, while XLA compiles "
                             f"the encoder its own way; export with one of the two")
        self.kind = kind
        self.pair = bool(pair)
        self.regression = bool(regression)
        self.max_seq_length = int(max_seq_length)
        self.width_multiple = max(1, int(width_multiple))
        self.xla_loops = bool(xla_loops)
        self.jit_compile = bool(jit_compile)
        self.freeze_weights = bool(freeze_weights)
        self.encoder = encoder
        self.head = head
        self.preprocessor = TextPreprocessor(vocab, self.max_seq_length, normalization=do_lower_case)
        self.labels = list(labels or [])
        # A JSON string, not a dict: tf.Module would track a dict attribute.
        self._metadata_json = json.dumps(dict(metadata or {}, labels=self.labels, pair=self.pair,
                                              regression=self.regression, max_seq_length=self.max_seq_length),
                                         sort_keys=True)
        self._labels = tf.constant(self.labels or [""], tf.string)
        # The pieces' strings and "" (at len(vocab), for padding): a gather, not a select on strings, which
        # LiteRT has no kernel for (electra_tf/export/tflite.py).
        self._pieces_and_blank = tf.constant(list(self.preprocessor.vocabulary) + [""], tf.string)
        self.serve, self.serve_encoded = self._functions()
        # One function for both signatures, so that a shape compiled for one serves the other.
        self._compiled_model = tf.function(self._padded_model, jit_compile=True) if self.jit_compile else None

    def _functions(self, model=None):
        """(serve, serve_encoded) as `tf.function`s; `model` replaces the encoder + head (`_frozen_module`)."""
        text = tf.TensorSpec([None], tf.string)
        ids = tf.TensorSpec([None, None], tf.int32)
        # Closures, not functools.partial: a bound `model` would join the saved input signature.
        if self.pair:
            def serve(text_a, text_b):
                return self._serve_pair(text_a, text_b, model)
        else:
            def serve(text):
                return self._serve_text(text, model)

        def serve_encoded(input_ids, input_mask, segment_ids):
            return self._serve_encoded(input_ids, input_mask, segment_ids, model)

        return (tf.function(serve, input_signature=[text, text] if self.pair else [text]),
                tf.function(serve_encoded, input_signature=[ids, ids, ids]))

    # ------------------------------------------------------------------ encoding
    def encode(self, text_a, text_b=None):
        """Returns dict of int32 input_ids / input_mask / segment_ids [B, T] and truncated [B]."""
        return self.preprocessor(text_a, text_b)

    # ------------------------------------------------------------------ model
    def _padded_model(self, inputs):
        """Encoder + head on padded inputs: [B, T] replaced logits, or [B, C] classifier logits."""
        with fused_ops.xla_loops(self.xla_loops and not self.jit_compile):  # read while tracing
            hidden = self.encoder(inputs, training=False)
        if self.kind == DISCRIMINATOR:
            return tf.cast(self.head(hidden), tf.float32)
        # The mask: a head with pooling="mean" averages over the real tokens only.
        return tf.cast(self.head(hidden, input_mask=inputs["input_mask"], training=False), tf.float32)

    def _model_outputs(self, input_ids, input_mask, segment_ids, limit=None, model=None):
        """The model on [B, T] inputs padded to `padded_width(T, width_multiple, limit)` (and the
        batch to `padded_batch(B)` under jit_compile); outputs come back [B] / [B, T]. `model`: the
        padded inputs' function (default: the encoder + head, XLA-compiled under jit_compile)."""
        shape = tf.shape(input_ids)
        rows, width = shape[0], shape[1]
        target = padded_width(width, self.width_multiple,
                              self.max_seq_length if limit is None else limit)
        extra_rows = padded_batch(rows) - rows if self.jit_compile else 0
        padding = [[0, extra_rows], [0, target - width]]
        inputs = {"input_ids": tf.pad(input_ids, padding), "input_mask": tf.pad(input_mask, padding),
                  "segment_ids": tf.pad(segment_ids, padding)}
        if model is None:
            model = self._compiled_model if self.jit_compile else self._padded_model
        logits = model(inputs)[:rows]
        if self.kind == DISCRIMINATOR:
            logits = logits[:, :width]
            mask = tf.cast(input_mask, tf.float32)
            probs = tf.sigmoid(logits) * mask
            return {"replaced_logits": logits * mask, "replaced_probs": probs}
        if self.regression:
            return {"score": tf.squeeze(logits, -1)}
        probs = tf.nn.softmax(logits, -1)
        label_id = tf.argmax(probs, -1, output_type=tf.int32)
        return {"logits": logits, "probabilities": probs, "label_id": label_id,
                "label": tf.gather(self._labels, label_id)}

    def _text_outputs(self, enc, model=None):
        out = self._model_outputs(enc["input_ids"], enc["input_mask"], enc["segment_ids"], model=model)
        out["truncated"] = enc["truncated"]
        if self.kind == DISCRIMINATOR:
            mask = enc["input_mask"]
            ids = enc["input_ids"]
            real = tf.cast(mask, tf.bool)
            # [CLS]/[SEP] only come from `encode`: typed text never tokenizes to them.
            pre = self.preprocessor
            text_mask = real & tf.not_equal(ids, pre.cls_id) & tf.not_equal(ids, pre.sep_id)
            tm = tf.cast(text_mask, tf.float32)
            blank = len(pre.vocabulary)
            out["tokens"] = tf.gather(self._pieces_and_blank, tf.where(real, ids, blank))
            out["input_mask"] = mask
            out["text_mask"] = tf.cast(text_mask, tf.int32)
            out["sentence_score"] = tf.math.divide_no_nan(
                tf.reduce_sum(out["replaced_probs"] * tm, -1), tf.reduce_sum(tm, -1))
            out["max_replaced_prob"] = tf.reduce_max(out["replaced_probs"] * tm, -1)
        return out

    def _serve_text(self, text, model=None):
        return self._text_outputs(self.encode(text), model)

    def _serve_pair(self, text_a, text_b, model=None):
        check = tf.debugging.assert_equal(
            tf.size(text_a), tf.size(text_b),
            message="text_a and text_b must hold the same number of strings (one pair per row)")
        with tf.control_dependencies([check]):
            text_a = tf.identity(text_a)
        return self._text_outputs(self.encode(text_a, text_b), model)

    def _check_encoded(self, input_ids, input_mask, segment_ids):
        """Assert ops with one-line messages: an out-of-range id would otherwise fail
        with a bare gather error on CPU, and silently read zeros on GPU. (No
        apostrophes: TensorFlow escapes them in the error text.)"""
        emb = self.encoder.embeddings
        shape = tf.shape(input_ids)
        return [
            tf.debugging.assert_equal(
                tf.concat([shape, shape], 0), tf.concat([tf.shape(input_mask), tf.shape(segment_ids)], 0),
                message="input_ids, input_mask and segment_ids must have the same [batch, seq] shape"),
            tf.debugging.assert_less_equal(
                shape[1], emb.max_positions,
                message=f"sequences are longer than the {emb.max_positions} positions of the model; "
                        f"cut them to at most {emb.max_positions} tokens"),
            tf.debugging.assert_greater_equal(
                input_ids, 0, message="input_ids holds a negative id; tokenize with the vocab.txt of the model"),
            tf.debugging.assert_less(
                input_ids, emb.vocab_size,
                message=f"input_ids holds an id >= {emb.vocab_size}, the vocabulary size of the model; tokenize "
                        f"with its vocab.txt (or use the serving_default text signature)"),
            tf.debugging.assert_greater_equal(segment_ids, 0, message="segment_ids must be 0 or 1"),
            tf.debugging.assert_less(segment_ids, emb.num_segments,
                                     message=f"segment_ids must be below {emb.num_segments} (0: first "
                                             f"text, 1: second)"),
        ]

    def _serve_encoded(self, input_ids, input_mask, segment_ids, model=None):
        with tf.control_dependencies(self._check_encoded(input_ids, input_mask, segment_ids)):
            input_ids, input_mask, segment_ids = (tf.identity(t) for t in (input_ids, input_mask, segment_ids))
        return self._model_outputs(input_ids, input_mask, segment_ids, limit=self.encoder.embeddings.max_positions,
                                   model=model)

    def signatures(self, module=None):
        """The SavedModel's signatures, of this module's functions or of `module`'s (`_frozen_module`)."""
        module = module or self
        return {"serving_default": module.serve.get_concrete_function(),
                "encoded": module.serve_encoded.get_concrete_function()}

    def _frozen_module(self) -> tf.Module:
        """A module holding only `serve` and `serve_encoded`, traced against the encoder + head converted to
        one function whose weights are constants (`convert_variables_to_constants_v2`): both signatures call
        that function, so each weight is stored once, and the module tracks no variable."""
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

        spec = tf.TensorSpec([None, None], tf.int32)
        model = tf.function(self._padded_model).get_concrete_function({k: spec for k in ENCODED_INPUTS})
        frozen = convert_variables_to_constants_v2(model)

        def frozen_model(inputs):  # the frozen function takes the flat inputs and returns a flat list
            return tf.nest.pack_sequence_as(model.structured_outputs, frozen(*tf.nest.flatten(inputs)))

        out = tf.Module(name=self.name)
        out.serve, out.serve_encoded = self._functions(frozen_model)
        return out

    def _saved_module(self) -> tf.Module:
        """What `save` writes: `serve` and `serve_encoded` beside one tracked `tf.Variable` per weight, and no
        Keras object.

        A Keras 3 variable wraps a `tf.Variable`, and the traced functions capture that inner variable's
        handle. Saved as a Keras variable (by tracking `encoder` and `head`), it is written as a new
        `tf.Variable` made for the SavedModel, which the saver's restore op fills while the functions
        keep reading the inner one: `tf.saved_model.load` rebinds them by object, but TensorFlow's C++
        loader (TF Serving's) restores by name and then reads an uninitialised variable. Tracking both
        stores every weight twice. Tracking the inner variables only stores each once, restored where
        the functions read it (tests/export/test_cpp_loader.py)."""
        out = tf.Module(name=self.name)
        seen, weights = set(), []
        for v in list(self.encoder.weights) + list(self.head.weights):
            inner = v if isinstance(v, tf.Variable) else v.value  # a Keras variable's tf.Variable
            if not isinstance(inner, tf.Variable):
                raise TypeError(f"weight {v.path} holds a {type(inner).__name__}, not a tf.Variable to save")
            if id(inner) not in seen:
                seen.add(id(inner))
                weights.append(inner)
        out.weights = weights
        out.serve, out.serve_encoded = self.serve, self.serve_encoded
        return out

    def save(self, path: str) -> str:
        module = self._frozen_module() if self.freeze_weights else self._saved_module()
        tf.saved_model.save(module, path, signatures=self.signatures(module),
                            options=tf.saved_model.SaveOptions(save_debug_info=False))
        if self.kind == CLASSIFIER:
            os.makedirs(os.path.join(path, ASSETS_EXTRA), exist_ok=True)
            with open(os.path.join(path, ASSETS_EXTRA, CLASSIFIER_METADATA), "w", encoding="utf-8") as f:
                f.write(self._metadata_json + "\n")
        return path
