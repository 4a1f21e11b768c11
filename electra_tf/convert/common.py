"""Shared by every importer: sizes from tensor shapes, and writing our model directory."""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

import numpy as np

from electra_tf.config import ElectraConfig
from electra_tf.convert.mapping import (CONVERTED, DISCRIMINATOR_HEAD, GENERATOR, ConversionError, check_and_assign,
                                        pretrainer_entries)
from electra_tf.fileio import write_json_atomic
from electra_tf.data.vocab import special_token_ids
from electra_tf.models.pretraining_model import ElectraPretrainingModel
from electra_tf.models.model_folder import CONVERSION_FILE, load_config, pretraining_vocab
from electra_tf.models.saving import load_pretraining_weights, save_pretrained
from electra_tf.objectives.objective_registry import get_objective


def _layers(tensors, prefix):
    found = set()
    pattern = re.compile(re.escape(prefix) + r"/encoder/layer_(\d+)/")
    for name in tensors:
        m = pattern.match(name)
        if m:
            found.add(int(m.group(1)))
    if found and found != set(range(len(found))):
        raise ConversionError(f"{prefix}/encoder has layers {sorted(found)}; expected 0..{max(found)} without gaps")
    return len(found)


def sizes_from_tensors(tensors: Dict[str, np.ndarray]) -> dict:
    """Reads the model sizes off canonical (Google-named) tensors.

    Returns a dict with the shape fields of `ElectraConfig` plus `generator`
    ({hidden, layers, intermediate} or None).
    """
    def need(name):
        if name not in tensors:
            raise ConversionError(f"{name} is missing; cannot tell the model size without it")
        return np.shape(tensors[name])

    vocab, emb = need("electra/embeddings/word_embeddings")
    positions = need("electra/embeddings/position_embeddings")[0]
    segments = need("electra/embeddings/token_type_embeddings")[0]
    layers = _layers(tensors, "electra")
    if layers == 0:
        raise ConversionError("no electra/encoder/layer_<i>/ weights: this is not an ELECTRA discriminator")
    hidden = need("electra/encoder/layer_0/attention/self/query/kernel")[1]
    inter = need("electra/encoder/layer_0/intermediate/dense/kernel")[1]
    out = dict(vocab_size=int(vocab), embedding_size=int(emb), hidden_size=int(hidden),
               num_hidden_layers=layers, intermediate_size=int(inter),
               max_position_embeddings=int(positions), type_vocab_size=int(segments),
               untied_generator_embeddings="generator/embeddings/word_embeddings" in tensors,
               generator=None)
    g_layers = _layers(tensors, "generator")
    if g_layers:
        out["generator"] = dict(
            hidden=int(need("generator/encoder/layer_0/attention/self/query/kernel")[1]),
            layers=g_layers,
            intermediate=int(need("generator/encoder/layer_0/intermediate/dense/kernel")[1]))
    return out


def build_config(sizes: dict, base: Optional[ElectraConfig], num_heads: int,
                 generator_heads: Optional[int] = None, **overrides) -> ElectraConfig:
    """An `ElectraConfig` with the sizes of the checkpoint.

    Args:
      sizes: `sizes_from_tensors` of the checkpoint.
      base: the non-shape fields (dropout, max_seq_length, optimisation...);
        default ElectraConfig().
      num_heads: the discriminator's attention heads, which no shape shows (the
        caller knows them from the checkpoint's own config, or refuses).
      generator_heads: the generator's, when its checkpoint states them.
      **overrides: fields the checkpoint's own config states (they win over `base`).

    Raises ConversionError if the generator's shape is one our config cannot
    express (it derives generator heads = width // 64 and FFN = 4 * width).
    """
    base = base or ElectraConfig()
    hidden = sizes["hidden_size"]
    values = base.to_dict()
    values.update({k: sizes[k] for k in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                                         "intermediate_size", "max_position_embeddings", "type_vocab_size",
                                         "untied_generator_embeddings")})
    # How the weights share embeddings is read off the checkpoint, not taken from `base`: a
    # reference checkpoint holds one table (shared) or two (none); gdes exports as two.
    values["embedding_sharing"] = "none" if sizes["untied_generator_embeddings"] else "shared"
    values["num_attention_heads"] = int(num_heads)
    values["max_seq_length"] = min(values["max_seq_length"], sizes["max_position_embeddings"])
    gen = sizes.get("generator")
    if gen is not None:
        values["generator_hidden_size"] = gen["hidden"] / hidden
        values["generator_layers"] = gen["layers"] / sizes["num_hidden_layers"]
    values.update(overrides)
    try:
        config = ElectraConfig.from_dict(values, source="converted checkpoint")
    except ValueError as e:
        raise ConversionError(f"the checkpoint's sizes do not make a valid config: {e}") from None
    if gen is not None:
        problems = []
        if config.generator_hidden_dim != gen["hidden"]:
            problems.append(f"generator width {gen['hidden']} (config derives {config.generator_hidden_dim})")
        if config.generator_num_layers != gen["layers"]:
            problems.append(f"generator layers {gen['layers']} (config derives {config.generator_num_layers})")
        if config.generator_intermediate_size != gen["intermediate"]:
            problems.append(f"generator FFN width {gen['intermediate']} (config derives 4 x width = "
                            f"{config.generator_intermediate_size})")
        if generator_heads is not None and generator_heads != config.generator_num_heads:
            problems.append(f"generator heads {generator_heads} (config derives width // 64 = "
                            f"{config.generator_num_heads})")
        if problems:
            raise ConversionError("the generator cannot be expressed by ElectraConfig: " + "; ".join(problems))
    return config


def new_pretrainer(config: ElectraConfig, vocab: List[str]) -> ElectraPretrainingModel:
    """The networks pre-training with `config` would train, fresh, for `vocab` (its size and
    special tokens checked as the pre-trainer checks them)."""
    if len(vocab) != config.vocab_size:
        raise ConversionError(f"the vocabulary has {len(vocab)} tokens but the weights have vocab_size="
                              f"{config.vocab_size}; pass the vocab.txt that belongs to the checkpoint")
    special_token_ids(vocab)  # a vocabulary without [PAD] [UNK] [CLS] [SEP] [MASK] is refused here
    return pretraining_networks(config)


def pretraining_networks(config: ElectraConfig) -> ElectraPretrainingModel:
    """The forward-only networks `config.objective` trains (those its `Objective` class declares),
    fresh: the variables, names and saved layout of the pre-trainer's."""
    objective = get_objective(config.objective)
    return ElectraPretrainingModel(config, objective.networks, objective.mlm_head_on_every_position)


def load_pretraining_model(model_dir: str) -> ElectraPretrainingModel:
    """The pre-training networks of our model directory `model_dir`, with its weights (needs
    vocab.txt, as pre-training does, for the special-token ids)."""
    config = load_config(model_dir)
    special_token_ids(pretraining_vocab(model_dir))  # a vocabulary without the special tokens is refused here
    model = pretraining_networks(config)
    load_pretraining_weights(model, model_dir)
    return model


def load_canonical(config: ElectraConfig, vocab: List[str], tensors: Dict[str, np.ndarray], source: str,
                   optional_parts=(DISCRIMINATOR_HEAD, GENERATOR)):
    """A new pre-trainer holding `tensors`; returns (pretrainer, {part: status})."""
    pretrainer = new_pretrainer(config, vocab)
    status = check_and_assign(pretrainer_entries(pretrainer), tensors, source, optional_parts)
    return pretrainer, status


def write_model_dir(output: str, pretrainer, vocab_file: str, source: dict, status: dict) -> str:
    """Writes our model directory (`saving.save_pretrained`) plus conversion.json.

    Only the parts the source has are written, each weight once (no untrained generator or
    head, no second copy of the encoder): the directory is about the size of the source's weights.
    """
    save_pretrained(output, pretrainer, vocab_file,
                    parts=sorted(part for part, state in status.items() if state == CONVERTED))
    write_json_atomic(os.path.join(output, CONVERSION_FILE), dict(source, parts=status), sort_keys=True)
    return output

