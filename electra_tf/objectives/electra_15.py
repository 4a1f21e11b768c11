"""objective=electra_15: ELECTRA 15% (the paper's Section 3.2 ablation)."""

from electra_tf.objectives import masking
from electra_tf.objectives.electra import Electra


class Electra15(Electra):
    """ELECTRA whose discriminator learns only from the masked positions.

    Same networks and draws as `electra`; the discriminator loss is the mean
    over the chosen positions instead of over every real token.
    """

    name = "electra_15"

    def discriminator_weights(self, masked, input_mask, denominators):
        weights = masking.position_weights(masked.positions, masked.weights,
                                           input_mask.shape[1])
        return weights, denominators[0]
