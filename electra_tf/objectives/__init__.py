"""The pre-training objective: masking, generator sampling, labels and losses."""

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
