#!/usr/bin/env bash
# Creates the git-ignored venv of the PyTorch and ONNX Runtime peers for
# scripts/benchmarks/benchmark_cpu_tasks.py (which runs this itself when the venv is
# missing): torch 2.13.0 (the CPU build, pinned), transformers, tokenizers, onnx +
# onnxscript (torch.onnx.export) and onnxruntime (its transformers optimizer fuses
# BERT attention), from PyPI.
#
# They get their own venv so that the project's venv (and CI) never installs
# onnxruntime; the benchmark drives them in a worker process.
#
# Usage: bash scripts/benchmarks/setup_cpu_peers.sh [VENV_DIR]
#   VENV_DIR defaults to .venv-peers (ignored by .gitignore's `.venv-*/`).
#   PYTHON selects the interpreter (default: python3.11, else python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$ROOT/.venv-peers}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
CHECK='import torch, transformers, tokenizers, onnx, onnxscript, onnxruntime, onnxruntime.transformers.optimizer'

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  echo "peer venv already usable: $VENV"
  exit 0
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
# torch pinned to 2.13.0, the CPU build: an open range pulls a multi-GB CUDA build. torch.compile
# (Inductor) needs a C++ compiler on PATH (g++).
"$VENV/bin/pip" install --quiet \
  "torch==2.13.0" \
  "transformers>=5,<6" \
  "tokenizers>=0.22" \
  "safetensors" \
  "numpy" \
  "onnx>=1.18" \
  "onnxscript>=0.5" \
  "onnxruntime>=1.22"
"$VENV/bin/python" - <<PY
$CHECK
print("peer venv ok: torch", torch.__version__, "transformers", transformers.__version__,
      "onnxruntime", onnxruntime.__version__, "onnx", onnx.__version__)
PY
echo "peer venv: $VENV"
