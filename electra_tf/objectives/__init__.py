"""The pre-training objective: masking, generator sampling, labels and losses."""

from electra_tf.objectives.losses import (
    electra_loss,
    masked_lm_loss,
    replaced_labels,
    replaced_token_detection_loss,
)
from electra_tf.objectives.masking import (
    MaskedBatch,
    candidate_mask,
    mask_tokens,
    num_to_predict,
    prediction_counts,
    replace_at_positions,
)
from electra_tf.objectives.sampling import sample_from_logits
