"""The pre-training objectives and their building blocks.

One module per objective (`electra.py`, `mlm.py`, ..., `electric.py`), each an
`base.Objective` subclass, found by name through `registry.get_objective`;
the shared pieces are the functions re-exported here: masking, generator
sampling, labels and losses. Nothing here imports the pre-training layer.
"""

from electra_tf.objectives.losses import (
    all_tokens_mlm_loss,
    copy_mechanism_log_probs,
    electra_loss,
    masked_lm_loss,
    reinforce_generator_loss,
    replaced_labels,
    replaced_token_detection_loss,
)
from electra_tf.objectives.masking import (
    MaskedBatch,
    candidate_mask,
    mask_tokens,
    num_to_predict,
    position_weights,
    prediction_counts,
    replace_at_positions,
)
from electra_tf.objectives.sampling import sample_from_logits
