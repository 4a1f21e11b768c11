"""Rebuilding the whole `ElectraPretrainer` from a model directory.

The directory layout and the per-part loaders are `electra_tf.models.saving`;
this one piece needs the pre-trainer class, which lives in this layer, so it
lives here (models/ never imports pretrain/).
"""

from __future__ import annotations

import os

from electra_tf.data.vocab import special_token_ids
from electra_tf.models.model_folder import PRETRAINER_FILE, VOCAB_FILE, ModelDirError, load_config
from electra_tf.models.saving import load_layer, load_parts
from electra_tf.pretrain.pretrainer import ElectraPretrainer


def load_pretrainer(model_dir: str) -> ElectraPretrainer:
    """Rebuilds the `ElectraPretrainer` of `model_dir` (needs vocab.txt for the special ids)."""
    config = load_config(model_dir)
    vocab = os.path.join(model_dir, VOCAB_FILE)
    if not os.path.isfile(vocab):
        raise ModelDirError(f"{model_dir} has no {VOCAB_FILE}; the pre-trainer needs it for the special-token ids")
    model = ElectraPretrainer(config, special_token_ids(vocab))
    whole = os.path.join(model_dir, PRETRAINER_FILE)
    if os.path.isfile(whole):
        load_layer(model, whole)
    else:  # a converted directory holds each part once (the parts its source lacked stay fresh)
        load_parts(model, model_dir)
    return model
