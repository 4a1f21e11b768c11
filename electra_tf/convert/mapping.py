"""One canonical name for every weight of an `ElectraPretrainingModel` (the pre-trainer's networks).

The canonical names are those of the original google-research/electra TF1
checkpoints (kernels stored [in, out], attention kernels as 2-D [H, H]):

    electra/embeddings/{word,position,token_type}_embeddings, .../LayerNorm/{gamma,beta}
    electra/embeddings_project/{kernel,bias}                (when E != H)
    electra/encoder/layer_<i>/attention/self/{query,key,value}/{kernel,bias}
    electra/encoder/layer_<i>/attention/output/dense/{kernel,bias}
    electra/encoder/layer_<i>/attention/output/LayerNorm/{gamma,beta}
    electra/encoder/layer_<i>/intermediate/dense/{kernel,bias}
    electra/encoder/layer_<i>/output/dense/{kernel,bias}
    electra/encoder/layer_<i>/output/LayerNorm/{gamma,beta}
    discriminator_predictions/dense/{kernel,bias}, discriminator_predictions/dense_1/{kernel,bias}
    generator/...                       the generator encoder, same layout
                                        (its embeddings are electra/embeddings/ when shared)
    generator_predictions/dense/{kernel,bias}, generator_predictions/LayerNorm/{gamma,beta},
    generator_predictions/output_bias

Every importer (Google, Hugging Face, keras-hub) translates its names into these,
and every exporter translates back, so there is one mapping onto our variables.
`assign` checks everything before writing a single variable: names that map to
nothing, canonical names that nothing provides and shape disagreements are all
listed in one `ConversionError`.

With `embedding_sharing=gdes` the discriminator's token table is a view,
E_gen + E_delta (models/embedding_sharing.py): its canonical value is that
merged table (what `discriminator.weights.h5` holds), and the generator's own
embeddings are listed under `generator/embeddings/`, as for `none`. A reference
checkpoint cannot say "gdes", so such an export re-imports as `none`, with the
same outputs.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterable, List, Optional

import keras
import numpy as np

from electra_tf.errors import ElectraError


class ConversionError(ElectraError, ValueError):
    """Weights that do not fit the target model; the message lists every problem."""


# Parts of the model, converted (or found absent) as a whole.
DISCRIMINATOR, DISCRIMINATOR_HEAD, GENERATOR = "discriminator", "discriminator_head", "generator"
PARTS = (DISCRIMINATOR, DISCRIMINATOR_HEAD, GENERATOR)
# A part's status in conversion.json: converted (its file is written), or absent from the source
# (nothing is written for it; `pretrain --init` makes it fresh).
CONVERTED, ABSENT = "converted", "absent (not in the source; not written)"
# Names in original checkpoints that carry no model weight.
IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum", "/ExponentialMovingAverage")
IGNORED_NAMES = ("global_step", "temperature", "_CHECKPOINTABLE_OBJECT_GRAPH")


def is_ignored(name: str) -> bool:
    """Optimizer slots, step counters and bookkeeping entries of a TF checkpoint."""
    base = name.split(":")[0]
    if base in IGNORED_NAMES or base.startswith("AdamWeightDecayOptimizer"):
        return True
    if any(base.endswith(s) for s in IGNORED_SUFFIXES):
        return True
    return "/.OPTIMIZER_SLOT/" in base or base.startswith("optimizer/")


@dataclasses.dataclass
class Entry:
    """One canonical weight: where it lives in our model and how its layout differs."""
    name: str
    variable: object  # a keras Variable
    part: str  # DISCRIMINATOR or GENERATOR
    # our layout -> canonical layout, and back
    to_canonical: Callable[[np.ndarray], np.ndarray]
    from_canonical: Callable[[np.ndarray], np.ndarray]

    @property
    def canonical_shape(self):
        return tuple(self.to_canonical(np.zeros(tuple(self.variable.shape), np.float32)).shape)


def _same(x):
    return x


def _reshape_to(shape):
    return lambda x: np.reshape(x, shape)


def _plain(name, var, part):
    return Entry(name, var, part, _same, _same)


def _reshaped(name, var, part, canonical_shape):
    ours = tuple(var.shape)
    return Entry(name, var, part, _reshape_to(canonical_shape), _reshape_to(ours))


def _merged_table(name, delta, base, part):
    """gdes: `delta` (E_delta) seen as the canonical table E_gen + E_delta, `base` being E_gen.

    Reading back subtracts E_gen's value at that moment, so it must be assigned
    after the generator's table (`check_and_assign` follows the entries' order).
    """
    def base_value():
        return np.asarray(keras.ops.convert_to_numpy(base.value), np.float32)

    return Entry(name, delta, part, lambda x: x + base_value(), lambda x: x - base_value())


def _dense(prefix, layer, part):
    return [_plain(prefix + "/kernel", layer.kernel, part), _plain(prefix + "/bias", layer.bias, part)]


def _layer_norm(prefix, layer, part):
    return [_plain(prefix + "/gamma", layer.gamma, part), _plain(prefix + "/beta", layer.beta, part)]


def embedding_entries(embeddings, prefix: str, part: str) -> List[Entry]:
    return [
        _plain(prefix + "/word_embeddings", embeddings.token_embedding.embeddings, part),
        _plain(prefix + "/position_embeddings", embeddings.position_embedding.position_embeddings, part),
        _plain(prefix + "/token_type_embeddings", embeddings.segment_embedding.embeddings, part),
    ] + _layer_norm(prefix + "/LayerNorm", embeddings.layer_norm, part)


def transformer_entries(layers, prefix: str, hidden: int, part: str) -> List[Entry]:
    """Entries of `TransformerBlock`s under `<prefix>/encoder/layer_<i>`."""
    out = []
    for i, layer in enumerate(layers):
        p = f"{prefix}/encoder/layer_{i}"
        for proj, dense in (("query", layer.query_dense), ("key", layer.key_dense),
                            ("value", layer.value_dense)):
            out.append(_reshaped(f"{p}/attention/self/{proj}/kernel", dense.kernel, part, (hidden, hidden)))
            out.append(_reshaped(f"{p}/attention/self/{proj}/bias", dense.bias, part, (hidden,)))
        out.append(_reshaped(f"{p}/attention/output/dense/kernel", layer.attention_output_dense.kernel,
                             part, (hidden, hidden)))
        out.append(_plain(f"{p}/attention/output/dense/bias", layer.attention_output_dense.bias, part))
        out += _layer_norm(f"{p}/attention/output/LayerNorm", layer.attention_layer_norm, part)
        out += _dense(f"{p}/intermediate/dense", layer.feedforward_intermediate_dense, part)
        out += _dense(f"{p}/output/dense", layer.feedforward_output_dense, part)
        out += _layer_norm(f"{p}/output/LayerNorm", layer.feedforward_layer_norm, part)
    return out


def encoder_entries(encoder, prefix: str, part: str, embeddings_prefix: Optional[str]) -> List[Entry]:
    """An `ElectraEncoder` under `prefix` (Google names); embeddings under
    `embeddings_prefix` (None: not listed, e.g. shared and listed elsewhere)."""
    out = []
    if embeddings_prefix is not None:
        out += embedding_entries(encoder.embeddings, embeddings_prefix, part)
    if encoder.embeddings_projection is not None:
        out += _dense(prefix + "/embeddings_project", encoder.embeddings_projection, part)
    out += transformer_entries(encoder.transformer_layers, prefix, encoder.hidden_dim, part)
    return out


def discriminator_head_entries(head) -> List[Entry]:
    return (_dense("discriminator_predictions/dense", head.dense, DISCRIMINATOR_HEAD)
            + _dense("discriminator_predictions/dense_1", head.dense_prediction, DISCRIMINATOR_HEAD))


def generator_head_entries(head) -> List[Entry]:
    return (_dense("generator_predictions/dense", head.intermediate_dense, GENERATOR)
            + _layer_norm("generator_predictions/LayerNorm", head.intermediate_layer_norm, GENERATOR)
            + [_plain("generator_predictions/output_bias", head.bias, GENERATOR)])


def pretrainer_entries(pretrainer) -> List[Entry]:
    """Every weight of an `ElectraPretrainingModel`, once, under its canonical name."""
    sharing = pretrainer.config.embedding_sharing  # shared | none | gdes (config.py)
    out = encoder_entries(pretrainer.discriminator, "electra", DISCRIMINATOR, "electra/embeddings")
    out += discriminator_head_entries(pretrainer.discriminator_head)
    out += encoder_entries(pretrainer.generator, "generator", GENERATOR,
                           None if sharing == "shared" else "generator/embeddings")
    out += generator_head_entries(pretrainer.generator_head)
    if sharing == "gdes":
        # The discriminator's table is E_gen + E_delta: listed last, after E_gen.
        name = "electra/embeddings/word_embeddings"
        plain = next(e for e in out if e.name == name)
        out.remove(plain)
        out.append(_merged_table(name, plain.variable,
                                 pretrainer.generator.embeddings.token_embedding.embeddings, DISCRIMINATOR))
    seen = set()
    for e in out:  # every variable exactly once
        key = id(e.variable)
        if key in seen:
            raise AssertionError(f"variable behind {e.name} mapped twice")
        seen.add(key)
    n_vars = len({id(v) for v in pretrainer.weights})
    if len(out) != n_vars:
        raise AssertionError(f"mapping covers {len(out)} of {n_vars} pretrainer variables")
    return out


def export_tensors(entries: Iterable[Entry], parts=PARTS) -> Dict[str, np.ndarray]:
    """{canonical name: array in the canonical layout} of our weights."""
    return {e.name: np.asarray(e.to_canonical(keras.ops.convert_to_numpy(e.variable.value)), np.float32)
            for e in entries if e.part in parts}


def check_and_assign(entries: List[Entry], tensors: Dict[str, np.ndarray], source: str,
                     optional_parts=()) -> Dict[str, str]:
    """Assigns canonical `tensors` to our variables, or raises listing every problem.

    Args:
      entries: from `pretrainer_entries`.
      tensors: {canonical name: array}; names that are not canonical are errors.
      source: what the tensors came from, for messages.
      optional_parts: parts (e.g. GENERATOR) that may be absent as a whole;
        they are reported in the return value (and not written).

    Returns:
      {part: CONVERTED | ABSENT}.
    """
    by_name = {e.name: e for e in entries}
    unmapped = sorted(n for n in tensors if n not in by_name)
    present_parts = {by_name[n].part for n in tensors if n in by_name}
    status = {}
    missing = []
    for part in sorted({e.part for e in entries}):
        names = [e.name for e in entries if e.part == part]
        absent = [n for n in names if n not in tensors]
        if part in optional_parts and part not in present_parts:
            status[part] = ABSENT
            continue
        missing += absent
        status[part] = CONVERTED
    mismatched = []
    for name, value in tensors.items():
        e = by_name.get(name)
        if e is not None and tuple(np.shape(value)) != e.canonical_shape:
            mismatched.append(f"{name}: {source} has {tuple(np.shape(value))}, model needs {e.canonical_shape}")
    problems = []
    if unmapped:
        problems.append(f"{len(unmapped)} name(s) in {source} map to no weight of the model:\n  "
                        + "\n  ".join(unmapped))
    if missing:
        problems.append(f"{len(missing)} weight(s) of the model are missing from {source}:\n  "
                        + "\n  ".join(missing))
    if mismatched:
        problems.append(f"{len(mismatched)} shape mismatch(es):\n  " + "\n  ".join(mismatched))
    if problems:
        raise ConversionError("cannot convert " + source + ":\n" + "\n".join(problems))
    for e in entries:  # in the entries' order (see _merged_table)
        if e.name in tensors:
            e.variable.assign(e.from_canonical(np.asarray(tensors[e.name], np.float32)))
    return status
