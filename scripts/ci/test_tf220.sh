#!/usr/bin/env bash
# Builds a TensorFlow 2.20 virtualenv (tensorflow 2.20 + tensorflow-text 2.20 +
# keras-hub) with this package installed, and runs the test suite there.
#
#   bash scripts/ci/test_tf220.sh [VENV_DIR] [pytest args...]
#   (default VENV_DIR: .venv-tf220; default pytest args: tests -q -n 2)
#
# The 2.20 line is the one tensorflow-tpu exists for (Colab TPU runtime).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${1:-.venv-tf220}"
shift || true
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "tensorflow==2.20.*" "tensorflow-text==2.20.*" "keras-hub" "tensorboard" \
  -e ".[test]"
"$VENV/bin/python" - <<'PY'
import tensorflow as tf, tensorflow_text, keras, keras_hub
print("tensorflow", tf.__version__, "| tensorflow-text", tensorflow_text.__version__,
      "| keras", keras.__version__, "| keras-hub", keras_hub.__version__)
assert tf.__version__.startswith("2.20."), tf.__version__
import electra_tf.pretrain  # noqa: F401  (the package imports on 2.20)
PY
if [ "$#" -eq 0 ]; then set -- tests -q -n 2; fi
exec "$VENV/bin/python" -m pytest "$@"
