"""`pretrain --init`: a new run whose networks start from a model directory's weights.

The discriminator's encoder (embeddings included) always comes from the directory: that is the
point of continuing to pre-train a public or earlier encoder on your own text. The other parts
come from it when it has them trained and of the job's shape, and start fresh otherwise:

- the replaced-token head: absent from a converted BERT encoder (conversion.json says so);
- the generator and its masked-LM head: a converted BERT encoder has none; an earlier ELECTRA
  run's is reused when its width and depth are the job's. A fresh generator shares the
  discriminator's (trained) embeddings as ELECTRA does, through a projection when its width
  differs from the embedding size.
"""

from __future__ import annotations

import os
from typing import Callable, Dict

from electra_tf.config import ElectraConfig
from electra_tf.models.model_folder import (CONFIG_FILE, DISCRIMINATOR_FILE, DISCRIMINATOR_HEAD_FILE, GENERATOR_FILE,
                                            GENERATOR_HEAD_FILE, MLM_HEAD_FILE, absent_parts)
from electra_tf.models.saving import load_layer

# (model attribute, file, conversion part name, the config fields its shape depends on)
_OPTIONAL_PARTS = (
    ("discriminator_head", DISCRIMINATOR_HEAD_FILE, "discriminator_head", ()),
    ("generator", GENERATOR_FILE, "generator",
     ("generator_hidden_size", "generator_layers", "embedding_sharing", "untied_generator_embeddings")),
    ("generator_head", GENERATOR_HEAD_FILE, "generator", ("generator_hidden_size", "embedding_sharing")),
    ("mlm_head", MLM_HEAD_FILE, "mlm_head", ()),
)


def load_initial_weights(model, init_dir: str, log: Callable[[str], None]) -> Dict[str, str]:
    """Loads what `init_dir` has for `model` (an `ElectraPretrainer`); returns {part: "loaded" | why fresh}."""
    source = ElectraConfig.from_json(os.path.join(init_dir, CONFIG_FILE))
    absent = set(absent_parts(init_dir))
    status = {}
    for attribute, file_name, part, shape_fields in _OPTIONAL_PARTS:
        layer = getattr(model, attribute, None)
        if layer is None:
            continue
        path = os.path.join(init_dir, file_name)
        differs = [f for f in shape_fields if getattr(source, f) != getattr(model.config, f)]
        if part in absent:
            status[attribute] = "fresh (the model directory has none trained)"
        elif not os.path.isfile(path):
            status[attribute] = f"fresh (no {file_name})"
        elif differs:
            status[attribute] = "fresh (" + ", ".join(
                f"{f} {getattr(source, f)} there, {getattr(model.config, f)} here" for f in differs) + ")"
        else:
            load_layer(layer, path)
            status[attribute] = "loaded"
    # Last: with shared embeddings a generator file holds the table too; the encoder's copy wins.
    load_layer(model.discriminator, os.path.join(init_dir, DISCRIMINATOR_FILE))
    status["discriminator"] = "loaded"
    for part, state in sorted(status.items()):
        log(f"--init: {part} {state}")
    return status
