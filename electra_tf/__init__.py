"""electra_tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow 2 / Keras 3.

The Python API (imported on first use, so `import electra_tf` stays cheap):

    from electra_tf import ElectraClassifier, ElectraPreprocessor, load_encoder, Predictor, Scorer
"""

import importlib as _importlib

from electra_tf import quiet_tf as _quiet_tf  # the standard library only: cheap



def _version() -> str:
    """The installed distribution's version (setup.cfg's, through the package metadata)."""
    from importlib import metadata

    try:
        return metadata.version("electra_tf")
    except metadata.PackageNotFoundError:  # a checkout on sys.path that was never installed
        return "0+unknown"


__version__ = _version()

# Quiet TensorFlow's start-up log lines before anything imports it, for the
# command-line tools (`python -m electra_tf.<tool>`, and the worker processes
# they spawn) and for Python programs alike (see electra_tf/quiet_tf.py;
# TF_CPP_MIN_LOG_LEVEL=0 shows every line again). Nothing happens when
# TensorFlow is already imported.
_quiet_tf.install()

# name -> module that defines it (imported on first access: PEP 562).
_LAZY = {"ElectraClassifier": "electra_tf.api", "ElectraPreprocessor": "electra_tf.api",
         "load_encoder": "electra_tf.api", "Predictor": "electra_tf.predict", "Scorer": "electra_tf.scoring"}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'electra_tf' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
