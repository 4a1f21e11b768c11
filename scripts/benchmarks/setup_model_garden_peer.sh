#!/usr/bin/env bash
# Creates the git-ignored venv holding the TF Model Garden peer for
# scripts/benchmarks/benchmark_pretrain.py (its --peer_python default; --no_peer runs without it).
#
# tf-models-official 2.20 pins tensorflow~=2.20.0 and runs on tf_keras (Keras 2),
# so it cannot share the project's TF 2.21 / Keras 3 venv: it gets its own.
#
# Usage: bash scripts/benchmarks/setup_model_garden_peer.sh [VENV_DIR]
#   VENV_DIR defaults to .venv-model-garden (ignored by .gitignore's `.venv-*/`).
#   PYTHON selects the interpreter (default: python3.11, else python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$ROOT/.venv-model-garden}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import official.nlp.tasks.electra_task, tf_keras" 2>/dev/null; then
  echo "peer venv already usable: $VENV"
  exit 0
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
# Pins: tf-models-official 2.20 requires tensorflow~=2.20 and Keras 2 (tf_keras), so it
# cannot share a venv with TF 2.21; these versions install and import together.
"$VENV/bin/pip" install --quiet \
  "tf-models-official==2.20.0" \
  "tensorflow==2.20.*" \
  "tf-keras==2.20.*"
"$VENV/bin/python" - <<'PY'
import tensorflow as tf, tf_keras, official
from official.nlp.tasks import electra_task  # noqa: F401
print("peer venv ok: tensorflow", tf.__version__, "tf_keras", tf_keras.__version__)
PY
echo "peer venv: $VENV"
