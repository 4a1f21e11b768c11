#!/usr/bin/env bash
# Creates the git-ignored venv of the PyTorch and ONNX Runtime peers for
# scripts/benchmarks/benchmark_cpu_tasks.py (which runs this itself when the venv is
# missing), with every version pinned so that the measured environment can be rebuilt:
#
#   torch 2.13.0+cpu   the CPU build (PyTorch's CPU wheel index, TORCH_INDEX below)
#   transformers 5.24.0, tokenizers 0.23.3, safetensors 0.8.0, numpy 2.4.6
#   onnx 1.23.2, onnxscript 0.7.2 (torch.onnx.export), onnxruntime 1.32.0 (its transformers
#   optimizer fuses BERT attention), all from PyPI.
#
# They get their own venv so that the project's venv (and CI) never installs
# onnxruntime; the benchmark drives them in a worker process.
#
# Usage: bash scripts/benchmarks/setup_cpu_peers.sh [VENV_DIR]
#   VENV_DIR defaults to .venv-peers (ignored by .gitignore's `.venv-*/`).
#   PYTHON selects the interpreter (default: python3.11, else python3).
#   TORCH_INDEX: where torch 2.13.0+cpu comes from when pip's configured sources lack it
#   (default: PyTorch's CPU wheel index).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$ROOT/.venv-peers}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
TORCH_INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
TORCH="torch==2.13.0+cpu"
PINS=(
  "transformers==5.24.0"
  "tokenizers==0.23.3"
  "safetensors==0.8.0"
  "numpy==2.4.6"
  "onnx==1.23.2"
  "onnxscript==0.7.2"
  "onnxruntime==1.32.0"
)
# A venv is reused only if it has exactly these versions (an older, unpinned one is rebuilt).
CHECK='
import torch, transformers, tokenizers, safetensors, numpy, onnx, onnxscript, onnxruntime
import onnxruntime.transformers.optimizer
want = {"torch": "2.13.0+cpu", "transformers": "5.24.0", "tokenizers": "0.23.3", "safetensors": "0.8.0",
        "numpy": "2.4.6", "onnx": "1.23.2", "onnxscript": "0.7.2", "onnxruntime": "1.32.0"}
have = {k: __import__(k).__version__ for k in want}
bad = {k: have[k] for k in want if have[k] != want[k]}
assert not bad, f"versions differ from the pins: {bad}"
'

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$CHECK" 2>/dev/null; then
  echo "peer venv already usable: $VENV"
  exit 0
fi

"$PYTHON" -m venv --clear "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
# torch first, the CPU build by its local version label (+cpu): a plain torch==2.13.0 from PyPI is
# the multi-GB CUDA build. pip's own sources (a local wheel directory, a mirror) are tried before
# TORCH_INDEX. torch.compile (Inductor) needs a C++ compiler on PATH (g++).
if ! "$VENV/bin/pip" install --quiet "$TORCH" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --index-url "$TORCH_INDEX" "$TORCH"
fi
"$VENV/bin/pip" install --quiet "$TORCH" "${PINS[@]}"
"$VENV/bin/python" -c "$CHECK"
"$VENV/bin/python" -c 'import torch, transformers, onnxruntime, onnx
print("peer venv ok: torch", torch.__version__, "transformers", transformers.__version__,
      "onnxruntime", onnxruntime.__version__, "onnx", onnx.__version__)'
echo "peer venv: $VENV"
