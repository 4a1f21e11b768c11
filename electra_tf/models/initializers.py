"""Weight initialisation shared by every ELECTRA layer."""

import keras


def electra_initializer(stddev: float = 0.02) -> keras.initializers.Initializer:
    """Truncated normal with stddev 0.02, as in BERT and ELECTRA."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
