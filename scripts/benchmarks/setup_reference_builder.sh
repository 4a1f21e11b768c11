#!/usr/bin/env bash
# Fetches google-research/electra's pre-training data builder into a git-ignored folder, so that
# scripts/benchmarks/benchmark_data.py can run it beside ours on the same corpus.
#
# Copies build_pretraining_dataset.py and the two modules it imports (model/tokenization.py,
# util/utils.py), unmodified, at a pinned commit. They run in the project's venv
# (tensorflow.compat.v1 and six are there). Needs network access (or a local clone), once.
#
# Usage: bash scripts/benchmarks/setup_reference_builder.sh [DIR]
#   DIR defaults to .reference/electra (ignored by .gitignore's `/.reference/`).
#   ELECTRA_GIT_URL  where to clone from (default https://github.com/google-research/electra.git;
#                    a path to a local clone works too).
#   ELECTRA_COMMIT   commit to copy (default: 8a46635f, the repository's latest, June 2021).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/.reference/electra}"
URL="${ELECTRA_GIT_URL:-https://github.com/google-research/electra.git}"
COMMIT="${ELECTRA_COMMIT:-8a46635f32083ada044d7e9ad09604742600ee7b}"
FILES=(build_pretraining_dataset.py model/__init__.py model/tokenization.py util/__init__.py util/utils.py)

complete=1
for f in "${FILES[@]}"; do [ -f "$DEST/$f" ] || complete=0; done
if [ "$complete" = 1 ]; then
  echo "reference builder already set up: $DEST"
  exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
if ! git clone --quiet --no-checkout "$URL" "$TMP/electra"; then
  echo "error: cannot clone $URL; check the network, or set ELECTRA_GIT_URL to a local clone" >&2
  exit 1
fi
if ! git -C "$TMP/electra" checkout --quiet "$COMMIT" -- "${FILES[@]}"; then
  echo "error: commit $COMMIT of $URL lacks the builder files; set ELECTRA_COMMIT" >&2
  exit 1
fi
for f in "${FILES[@]}"; do
  mkdir -p "$(dirname "$DEST/$f")"
  cp "$TMP/electra/$f" "$DEST/$f"
done
printf '%s %s\n' "$URL" "$COMMIT" > "$DEST/SOURCE"
echo "reference builder: $DEST (google-research/electra $COMMIT)"
echo "run: python $DEST/build_pretraining_dataset.py --corpus-dir DIR --vocab-file VOCAB --output-dir OUT"
