"""Rebuilding the whole `ElectraPretrainer` from a model directory.

The directory's files are `electra_tf.models.model_folder`'s, its weights loaded by
`electra_tf.models.saving.load_pretraining_weights`; this one piece needs the
pre-trainer class (objective, train step), which lives in this layer, so it lives
here (models/ never imports pretrain/; `convert.common.load_pretraining_model`
rebuilds the forward-only networks).
"""

from __future__ import annotations

from electra_tf.data.vocab import special_token_ids
from electra_tf.models.model_folder import load_config, pretraining_vocab
from electra_tf.models.saving import load_pretraining_weights
from electra_tf.pretrain.pretrainer import ElectraPretrainer


def load_pretrainer(model_dir: str) -> ElectraPretrainer:
    """Rebuilds the `ElectraPretrainer` of `model_dir` (needs vocab.txt for the special ids)."""
    config = load_config(model_dir)
    model = ElectraPretrainer(config, special_token_ids(pretraining_vocab(model_dir)))
    load_pretraining_weights(model, model_dir)
    return model
