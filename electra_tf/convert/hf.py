"""Hugging Face ELECTRA checkpoints (`config.json` + `model.safetensors`), both ways.

Reading needs neither torch nor transformers: the safetensors format (an 8-byte
little-endian header length, a JSON header, raw little-endian tensors) is parsed
here with numpy. The older `pytorch_model.bin` is read only if torch happens to
be installed (`torch.load(weights_only=True)`).

`ElectraForPreTraining` (discriminator: `electra.*`, `discriminator_predictions.*`)
and `ElectraForMaskedLM` (generator: `electra.*`, `generator_predictions.*`,
`generator_lm_head.*`) are translated into the canonical Google names of
`mapping.py`; Hugging Face `nn.Linear` weights are [out, in] and are transposed.

BERT-family checkpoints (`model_type: bert`: BertModel names `embeddings.*`,
`encoder.layer.N.*`, or BertForMaskedLM / BertForPreTraining names under `bert.`)
import as an ELECTRA discriminator: a BERT encoder is one whose embedding size
equals its hidden size. What ELECTRA has no place for is dropped and reported:
the pooler (`pooler.*`, a tanh layer over [CLS] that ELECTRA lacks) and the
pre-training heads (`cls.*`: BERT's masked-LM and next-sentence heads). The
discriminator head and the generator are then absent: continued pre-training
(`pretrain --init`) starts them fresh.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from typing import Dict, Optional, Tuple

import numpy as np

from electra_tf.config import ElectraConfig
from electra_tf.convert.common import build_config, sizes_from_tensors
from electra_tf.convert.mapping import ConversionError, export_tensors, pretrainer_entries
from electra_tf.convert.tokenizer_files import hf_tokenizer_config, write_hf_tokenizer
from electra_tf.fileio import write_json_atomic
from electra_tf.data.normalization import TextNormalization

# A Hugging Face model folder's files (named as ours are, models/model_folder.py, but holding
# Hugging Face's config; keras-hub's preset_utils keeps the two apart the same way).
HF_CONFIG_FILE = "config.json"
HF_VOCAB_FILE = "vocab.txt"


# --------------------------------------------------------------------------- safetensors
_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], dict]:
    """Returns ({name: array}, metadata) of a .safetensors file (BF16 is widened to float32)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ConversionError(f"{path}: too short to be a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ConversionError(f"{path}: header length {n} exceeds the file; not a safetensors file")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"{path}: unreadable safetensors header ({e})") from None
    body = memoryview(data)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = info["dtype"]
        raw = body[begin:end]
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif dtype in _DTYPES:
            array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<"))
        else:
            raise ConversionError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        out[name] = array.reshape(shape).copy()
    return out, metadata


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], metadata: Optional[dict] = None) -> str:
    """Writes {name: array} as a .safetensors file (float32 stays float32)."""
    rev = {np.dtype(v): k for k, v in _DTYPES.items()}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        if array.dtype not in rev:
            raise ValueError(f"{name}: dtype {array.dtype} cannot be written")
        blob = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": rev[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- names
_BUFFERS = ("electra.embeddings.position_ids", "electra.embeddings.token_type_ids")


def hf_to_canonical(name: str, encoder_prefix: str) -> Tuple[Optional[str], bool]:
    """Maps a Hugging Face name to (canonical name or None, needs transpose).

    `encoder_prefix` is "electra" for the discriminator, "generator" for the
    generator (whose Hugging Face model also calls its encoder `electra`).
    """
    if name.startswith("electra."):
        body = name[len("electra."):]
        m = re.match(r"embeddings\.(word_embeddings|position_embeddings|token_type_embeddings)\.weight$", body)
        if m:
            return f"{encoder_prefix}/embeddings/{m.group(1)}", False
        if body in ("embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"):
            return f"{encoder_prefix}/embeddings/LayerNorm/" + ("gamma" if body.endswith("weight") else "beta"), False
        if body in ("embeddings_project.weight", "embeddings_project.bias"):
            return f"{encoder_prefix}/embeddings_project/" + ("kernel" if body.endswith("weight") else "bias"), \
                body.endswith("weight")
        m = re.match(r"encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$", body)
        if m:
            layer, module, kind = m.groups()
            known = ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                     "output.dense", "output.LayerNorm")
            if module not in known:
                return None, False
            path = f"{encoder_prefix}/encoder/layer_{layer}/" + module.replace(".", "/")
            if module.endswith("LayerNorm"):
                return path + ("/gamma" if kind == "weight" else "/beta"), False
            return path + ("/kernel" if kind == "weight" else "/bias"), kind == "weight"
        return None, False
    return _HEAD_NAMES.get(name, (None, False))


def canonical_to_hf(name: str) -> Tuple[str, bool]:
    """Inverse of `hf_to_canonical` (generator names map into the generator's own model)."""
    for p in ("electra/", "generator/"):
        if name.startswith(p):
            body = name[len(p):]
            break
    else:
        inverse = {v[0]: (k, v[1]) for k, v in _HEAD_NAMES.items()}
        return inverse[name]
    m = re.match(r"embeddings/(word_embeddings|position_embeddings|token_type_embeddings)$", body)
    if m:
        return f"electra.embeddings.{m.group(1)}.weight", False
    if body.startswith("embeddings/LayerNorm/"):
        return "electra.embeddings.LayerNorm." + ("weight" if body.endswith("gamma") else "bias"), False
    if body.startswith("embeddings_project/"):
        return "electra.embeddings_project." + ("weight" if body.endswith("kernel") else "bias"), \
            body.endswith("kernel")
    m = re.match(r"encoder/layer_(\d+)/(.+)/(kernel|bias|gamma|beta)$", body)
    if not m:
        raise KeyError(name)
    layer, module, kind = m.groups()
    hf_kind = "weight" if kind in ("kernel", "gamma") else "bias"
    return f"electra.encoder.layer.{layer}.{module.replace('/', '.')}.{hf_kind}", kind == "kernel"


_HEAD_NAMES = {
    "discriminator_predictions.dense.weight": ("discriminator_predictions/dense/kernel", True),
    "discriminator_predictions.dense.bias": ("discriminator_predictions/dense/bias", False),
    "discriminator_predictions.dense_prediction.weight": ("discriminator_predictions/dense_1/kernel", True),
    "discriminator_predictions.dense_prediction.bias": ("discriminator_predictions/dense_1/bias", False),
    "generator_predictions.dense.weight": ("generator_predictions/dense/kernel", True),
    "generator_predictions.dense.bias": ("generator_predictions/dense/bias", False),
    "generator_predictions.LayerNorm.weight": ("generator_predictions/LayerNorm/gamma", False),
    "generator_predictions.LayerNorm.bias": ("generator_predictions/LayerNorm/beta", False),
    "generator_lm_head.bias": ("generator_predictions/output_bias", False),
}


# BERT-family checkpoints: the encoder's names are ELECTRA's under another prefix.
_BERT_DROPPED = (("pooler.", "the pooler (a tanh layer over [CLS]; ELECTRA has none)"),
                 ("cls.predictions.", "BERT's masked-LM head"),
                 ("cls.seq_relationship.", "BERT's next-sentence head"))


def bert_to_electra_names(weights: Dict[str, np.ndarray]) -> Tuple[Dict[str, np.ndarray], list]:
    """BERT names -> Hugging Face ELECTRA discriminator names; returns (weights, dropped parts).

    Accepts BertModel names (`embeddings.*`, `encoder.*`, `pooler.*`) and the
    `bert.`-prefixed names of BertForMaskedLM / BertForPreTraining; `cls.*`
    heads and the pooler are dropped (listed in the second value).
    """
    out, dropped = {}, []
    for name, value in weights.items():
        body = name[len("bert."):] if name.startswith("bert.") else name
        part = next((what for prefix, what in _BERT_DROPPED if body.startswith(prefix)), None)
        if part is not None:
            if part not in dropped:
                dropped.append(part)
            continue
        if body.startswith(("embeddings.", "encoder.")):
            out["electra." + body] = value
        else:
            out[name] = value  # reported as unmapped by to_canonical
    return out, dropped


# --------------------------------------------------------------------------- reading a directory
def read_weights(model_dir: str) -> Dict[str, np.ndarray]:
    """{Hugging Face name: array} from model.safetensors (or pytorch_model.bin with torch)."""
    st = os.path.join(model_dir, "model.safetensors")
    if os.path.isfile(st):
        return read_safetensors(st)[0]
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        out = {}
        for name in files:
            out.update(read_safetensors(os.path.join(model_dir, name))[0])
        return out
    binary = os.path.join(model_dir, "pytorch_model.bin")
    if os.path.isfile(binary):
        try:
            # torch is the optional extra [hf] (not installed by default); only pytorch_model.bin needs it.
            import torch  # pylint: disable=import-outside-toplevel
        except ImportError:
            raise ConversionError(f"{model_dir} has only pytorch_model.bin, which needs torch to read; "
                                  f"install torch, or convert it to model.safetensors") from None
        state = torch.load(binary, map_location="cpu", weights_only=True)
        return {k: v.detach().float().numpy() if v.is_floating_point() else v.numpy() for k, v in state.items()}
    raise ConversionError(f"{model_dir} has no model.safetensors (or pytorch_model.bin); pass a Hugging Face "
                          f"ELECTRA or BERT model directory (config.json + model.safetensors)")


def read_config(model_dir: str) -> dict:
    path = os.path.join(model_dir, HF_CONFIG_FILE)
    if not os.path.isfile(path):
        raise ConversionError(f"{model_dir} has no config.json; pass a Hugging Face model directory")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def kind_of(hf_config: dict, weights: Dict[str, np.ndarray], source: str = "the checkpoint") -> str:
    """"discriminator" (ElectraForPreTraining / ElectraModel, or a BERT encoder) or "generator"
    (ElectraForMaskedLM)."""
    if hf_config.get("model_type") == "bert":
        return "discriminator"
    if hf_config.get("model_type") not in (None, "electra"):
        raise ConversionError(f"{source} holds a {hf_config.get('model_type')!r} model, not 'electra' or "
                              f"'bert'; pass an ELECTRA checkpoint (e.g. google/electra-small-discriminator) "
                              f"or a BERT encoder")
    if any(k.startswith("generator_") for k in weights):
        return "generator"
    archs = hf_config.get("architectures") or []
    if "ElectraForMaskedLM" in archs:
        return "generator"
    return "discriminator"


_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_approximate", "gelu_pytorch_tanh": "gelu_approximate",
                "gelu_fast": "gelu_approximate"}


def _act(hf_config, source):
    act = hf_config.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ConversionError(f"{source}: hidden_act={act!r} has no counterpart here (gelu, gelu_new)")
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(f"{source}: position_embedding_type={hf_config['position_embedding_type']!r}; "
                              f"only absolute positions are supported")
    return _ACTIVATIONS[act]


def to_canonical(weights: Dict[str, np.ndarray], encoder_prefix: str, source: str) -> Dict[str, np.ndarray]:
    """Hugging Face names -> canonical names; raises listing names that do not map."""
    out, unmapped = {}, []
    for name, value in weights.items():
        if name in _BUFFERS or name == "generator_lm_head.weight":
            continue
        canon, transpose = hf_to_canonical(name, encoder_prefix)
        if canon is None:
            unmapped.append(f"{name} {tuple(np.shape(value))}")
            continue
        out[canon] = np.asarray(value, np.float32).T if transpose else np.asarray(value, np.float32)
    if unmapped:
        raise ConversionError(f"cannot convert {source}: {len(unmapped)} name(s) map to no weight of ELECTRA:\n  "
                              + "\n  ".join(sorted(unmapped)))
    return out


def load(disc_dir: str, gen_dir: Optional[str] = None, base: Optional[ElectraConfig] = None,
         tie_tolerance: float = 0.0) -> Tuple[ElectraConfig, Dict[str, np.ndarray], dict]:
    """Reads Hugging Face discriminator (and generator) directories.

    Returns (ElectraConfig, canonical tensors, info). The generator's embeddings
    are shared with the discriminator's (our default) when both copies agree
    within `tie_tolerance`, otherwise the model is marked untied.
    """
    hf_disc = read_config(disc_dir)
    disc_weights = read_weights(disc_dir)
    if kind_of(hf_disc, disc_weights, disc_dir) != "discriminator":
        raise ConversionError(f"{disc_dir} is an ElectraForMaskedLM (generator); pass the discriminator "
                              f"(ElectraForPreTraining) as --input and this one as --generator_input")
    info = {"discriminator": os.path.basename(os.path.normpath(disc_dir))}
    if hf_disc.get("model_type") == "bert":
        if gen_dir is not None:
            raise ConversionError(f"{disc_dir} is a BERT encoder, which has no ELECTRA generator to pair with "
                                  f"--generator_input; drop --generator_input (pre-training starts a fresh one)")
        disc_weights, dropped = bert_to_electra_names(disc_weights)
        info["model_type"] = "bert"
        if dropped:
            info["dropped"] = dropped
    tensors = to_canonical(disc_weights, "electra", disc_dir)
    act = _act(hf_disc, disc_dir)
    if act == "gelu_approximate":
        info["note"] = ("hidden_act is the tanh GELU: the encoders use it, but our discriminator head "
                        "always uses exact GELU (Hugging Face's follows hidden_act); its logits differ slightly")
    gen_heads = None
    untied = False
    if gen_dir is not None:
        hf_gen = read_config(gen_dir)
        gen_weights = read_weights(gen_dir)
        if kind_of(hf_gen, gen_weights, gen_dir) != "generator":
            raise ConversionError(f"{gen_dir} is not an ElectraForMaskedLM (generator)")
        if _act(hf_gen, gen_dir) != act:
            raise ConversionError(f"generator hidden_act {hf_gen.get('hidden_act')!r} differs from the "
                                  f"discriminator's {hf_disc.get('hidden_act')!r}; our config has one")
        gen = to_canonical(gen_weights, "generator", gen_dir)
        table = gen_weights.get("generator_lm_head.weight")
        if table is not None and not np.array_equal(table, gen_weights["electra.embeddings.word_embeddings.weight"]):
            raise ConversionError(f"{gen_dir}: generator_lm_head.weight differs from the word embeddings; "
                                  f"our generator ties its output table to them")
        shared = [k[len("generator/embeddings/"):] for k in gen if k.startswith("generator/embeddings/")]
        untied = any(
            np.shape(gen["generator/embeddings/" + k]) != np.shape(tensors.get("electra/embeddings/" + k))
            or np.max(np.abs(gen["generator/embeddings/" + k] - tensors["electra/embeddings/" + k])) > tie_tolerance
            for k in shared)
        if not untied:
            gen = {k: v for k, v in gen.items() if not k.startswith("generator/embeddings/")}
        tensors.update(gen)
        gen_heads = hf_gen.get("num_attention_heads")
        info["generator"] = os.path.basename(os.path.normpath(gen_dir))
        for key in ("vocab_size", "max_position_embeddings", "type_vocab_size", "embedding_size"):
            if hf_gen.get(key) != hf_disc.get(key):
                raise ConversionError(f"generator {key}={hf_gen.get(key)} but discriminator {key}="
                                      f"{hf_disc.get(key)}; they must agree")
    sizes = sizes_from_tensors(tensors)
    overrides = dict(hidden_act=act, untied_generator_embeddings=untied)
    for ours, theirs in (("layer_norm_eps", "layer_norm_eps"), ("initializer_range", "initializer_range"),
                         ("hidden_dropout_prob", "hidden_dropout_prob"),
                         ("attention_probs_dropout_prob", "attention_probs_dropout_prob")):
        if theirs in hf_disc:
            overrides[ours] = float(hf_disc[theirs])
    sizes["untied_generator_embeddings"] = untied
    if hf_disc.get("model_type") == "bert":
        # Fine-tuning takes the recipe of an imported public encoder and its own read-out
        # (electra_tf/training/size_defaults.py), not the one of an ELECTRA size.
        overrides["model_size"] = "imported"
        overrides["pooling"] = native_pooling(disc_dir)
    config = build_config(sizes, base, num_heads=int(hf_disc["num_attention_heads"]),
                          generator_heads=gen_heads, **overrides)
    return config, tensors, info


def native_pooling(model_dir: str) -> Optional[str]:
    """The sentence read-out a sentence-transformers model was trained with ("mean" or "cls"),
    from its `1_Pooling/config.json`; None where the directory has none or it is another mode
    (max, mean of square-root length), which fine-tuning here does not offer."""
    path = os.path.join(model_dir, "1_Pooling", HF_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        modes = json.load(f)
    chosen = [mode for mode, key in (("mean", "pooling_mode_mean_tokens"), ("cls", "pooling_mode_cls_token"))
              if modes.get(key)]
    others = [k for k, v in modes.items() if k.startswith("pooling_mode_") and v and k not in (
        "pooling_mode_mean_tokens", "pooling_mode_cls_token")]
    return chosen[0] if len(chosen) == 1 and not others else None


def find_vocab(*dirs) -> Optional[str]:
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, HF_VOCAB_FILE)):
            return os.path.join(d, HF_VOCAB_FILE)
    return None


def _tokenizer_config(model_dir: str) -> dict:
    path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
        return value if isinstance(value, dict) else {}
    return {}


def do_lower_case(model_dir: str) -> Optional[bool]:
    value = _tokenizer_config(model_dir).get("do_lower_case")
    return None if value is None else bool(value)


def normalization(model_dir: str, default_lower_case: bool) -> TextNormalization:
    """The text normalisation of a Hugging Face BERT-family model: BERT's rules (the bert mode) with the
    casing and accent stripping its tokenizer_config.json states (strip_accents null follows the casing)."""
    settings = _tokenizer_config(model_dir)
    lower = settings.get("do_lower_case")
    lower = default_lower_case if lower is None else bool(lower)
    strip = settings.get("strip_accents")
    return TextNormalization.create(lower, None if strip is None else bool(strip))


# --------------------------------------------------------------------------- writing
def hf_config(config: ElectraConfig, kind: str) -> dict:
    """The Hugging Face config.json of our discriminator or generator."""
    generator = kind == "generator"
    hidden = config.generator_hidden_dim if generator else config.hidden_size
    return {
        "architectures": ["ElectraForMaskedLM" if generator else "ElectraForPreTraining"],
        "model_type": "electra",
        "vocab_size": config.vocab_size,
        "embedding_size": config.embedding_size,
        "hidden_size": hidden,
        "num_hidden_layers": config.generator_num_layers if generator else config.num_hidden_layers,
        "num_attention_heads": config.generator_num_heads if generator else config.num_attention_heads,
        "intermediate_size": config.generator_intermediate_size if generator else config.intermediate_size,
        "hidden_act": "gelu_new" if config.hidden_act == "gelu_approximate" else "gelu",
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
    }


def export(pretrainer, output_dir: str, vocab_file: Optional[str] = None) -> Dict[str, str]:
    """Writes `<output_dir>/discriminator` and `<output_dir>/generator` as Hugging Face
    directories (config.json + model.safetensors [+ vocab.txt]); returns their paths."""
    config = pretrainer.config
    tensors = export_tensors(pretrainer_entries(pretrainer))
    out = {}
    for kind in ("discriminator", "generator"):
        d = os.path.join(output_dir, kind)
        os.makedirs(d, exist_ok=True)
        hf = {}
        for name, value in tensors.items():
            is_gen = name.startswith("generator")
            if kind == "discriminator" and is_gen:
                continue
            if kind == "generator" and not is_gen:
                continue
            hf_name, transpose = canonical_to_hf(name)
            hf[hf_name] = np.ascontiguousarray(value.T if transpose else value)
        if kind == "generator" and "generator/embeddings/word_embeddings" not in tensors:
            # Shared embeddings: the generator's are the discriminator's (not so for none / gdes).
            for key in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
                hf[f"electra.embeddings.{key}.weight"] = tensors[f"electra/embeddings/{key}"]
            hf["electra.embeddings.LayerNorm.weight"] = tensors["electra/embeddings/LayerNorm/gamma"]
            hf["electra.embeddings.LayerNorm.bias"] = tensors["electra/embeddings/LayerNorm/beta"]
        write_json_atomic(os.path.join(d, HF_CONFIG_FILE), hf_config(config, kind), sort_keys=True)
        write_safetensors(os.path.join(d, "model.safetensors"), hf, {"format": "pt"})
        if vocab_file:
            shutil.copyfile(vocab_file, os.path.join(d, HF_VOCAB_FILE))
            # The model's text normalisation as tokenizer.json + tokenizer_config.json (tokenizer_files.py).
            write_hf_tokenizer(d, vocab_file, config.normalization, config.max_position_embeddings)
        else:
            write_json_atomic(os.path.join(d, "tokenizer_config.json"),
                              hf_tokenizer_config(config.normalization, config.max_position_embeddings),
                              sort_keys=True)
        out[kind] = d
    return out
