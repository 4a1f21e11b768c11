"""electra_tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow 2 / Keras 3."""

import os as _os
import sys as _sys

from electra_tf import quiet_tf as _quiet_tf  # the standard library only: cheap

__version__ = "0.1.0"

# `python -m electra_tf.<tool>` imports this package first (sys.argv[0] is "-m"
# meanwhile), and spawned workers inherit the marker: quiet TensorFlow's start-up
# log lines before anything imports it (see electra_tf/quiet_tf.py).
if _sys.argv[:1] == ["-m"] or _os.environ.get("ELECTRA_TF_QUIET_TF"):
    _quiet_tf.install()
