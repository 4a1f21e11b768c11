"""The one exception type the data tools raise for bad input.

Every message is a single line that names the culprit (file, flag, shard) and
says how to fix it, so the CLIs can print it as-is and exit non-zero.
"""

from electra_tf.errors import ElectraError


class DataError(ElectraError, ValueError):
    """Input text, shards or settings that the data pipeline cannot use."""
