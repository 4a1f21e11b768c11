#!/usr/bin/env bash
# Stage TensorFlow 2.21 (and what electra_tf imports with it) for the lent GPU machine.
#
#   scripts/gpu/stage_tf.sh [PART_MIB]        (here, with PyPI reachable; PART_MIB defaults to 58)
#
# The GPU machine has Python 3.12 and CUDA 13 but no TensorFlow and no network, and each call
# to it carries at most 64 MiB (working tree included). So the cp312 wheels are installed here
# into one tree, packed as tar.xz and split into parts of at most PART_MIB MiB:
#
#   .gpu_stage/wheels/                 downloaded wheels (a cache: re-runs download nothing)
#   .gpu_stage/site/                   the installed tree (what goes first on PYTHONPATH there)
#   .gpu_stage/tf.tar.xz               the packed tree
#   .gpu_stage/tf_part_NN/tf.tar.xz.NN one folder per part, so that one call carries one part
#   .gpu_stage/tf_parts.sha256         sha256 of the archive and of each part; a copy sits in
#                                      every part folder, so a call needs to carry only that folder
#
# scripts/gpu/setup_tf.sh receives the parts there and installs them (see its header for the
# call sequence). Every step is skipped when its output is already there for the same inputs.
# Environment: PYTHON (the interpreter whose pip downloads; default python3), XZ_THREADS (2).
set -euo pipefail

die() { echo "error: $*" >&2; exit 1; }

PART_MIB="${1:-58}"
[[ "$PART_MIB" =~ ^[1-9][0-9]*$ ]] || die "PART_MIB must be a whole number of MiB, got '$PART_MIB'"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STAGE="$ROOT/.gpu_stage"
WHEELS="$STAGE/wheels"
SITE="$STAGE/site"
ARCHIVE="$STAGE/tf.tar.xz"
SHAFILE="$STAGE/tf_parts.sha256"
PY="${PYTHON:-python3}"
XZ_THREADS="${XZ_THREADS:-2}"
START=$(date +%s)

# The versions of the local .venv, so that what runs on the GPU is what the tests here run.
# Travelling: TF, tensorflow-text, keras, keras-hub and everything of theirs that the image
# lacks or holds in another version that matters (numpy/ml_dtypes/protobuf/h5py are ABI-bound
# to TF's C++ code, so they are ours, not the image's numpy 2.5). kagglehub/kagglesdk: keras_hub
# imports them at import time. tensorboard: tf.summary routes through it when installed.
# nvidia-cuda-runtime-cu12: TF's own runtime (libcudart.so.12); the rest of CUDA comes from the
# image's CUDA 13 libraries under CUDA-12 names (setup_tf.sh), since a CUDA 13 cudart is not
# ABI-compatible with what TF was built against, while cuBLAS/cuDNN/... are dlopen'ed by name.
# Left to the image (present there, any recent version does): requests, six, setuptools,
# packaging, grpcio, rich, regex, tokenizers, sentencepiece, pyyaml, tqdm, pillow, markdown,
# werkzeug, tensorboard-data-server, psutil, matplotlib, huggingface_hub (keras imports the last
# two optionally). Left out: libclang (TF needs it only to build ops) and tensorflow-datasets
# (electra_tf imports it lazily, for TFDS corpus sources and GLUE without --data_dir only;
# pretrain, build_vocab and build_pretraining_data do not import it).
PINS=(
    tensorflow==2.21.0
    tensorflow-text==2.21.1
    keras==3.15.1
    keras-hub==0.32.0
    kagglehub==1.0.2
    kagglesdk==0.1.28
    tensorboard==2.21.0
    numpy==2.4.6
    ml_dtypes==0.6.0
    protobuf==7.36.2
    h5py==3.14.0
    optree==0.20.0
    namex==0.1.0
    absl-py==2.5.1
    astunparse==1.6.3
    flatbuffers==25.12.19
    gast==0.7.0
    google-pasta==0.2.0
    opt_einsum==3.4.0
    termcolor==3.3.0
    typing_extensions==4.16.0
    wrapt==2.5.2
    nvidia-cuda-runtime-cu12==12.5.82
)
# What the tree does not need there: console scripts (their shebang names this machine's
# python), C++ headers (only for building custom ops; 430 MB of the 2.2 GB), and nvidia's
# __init__.py, which would make 'nvidia' a regular package that hides the image's CUDA 13
# nvidia.* packages from torch/jax in the same process.
PRUNE=(bin tensorflow/include nvidia/cuda_runtime/include nvidia/__init__.py)
# Bump when the steps below change what they produce, so that old outputs are not reused.
RECIPE=1

PIP_TAGS=(--only-binary=:all: --python-version 3.12 --implementation cp
          --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
          --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
          --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)

mkdir -p "$WHEELS"
LOG="$STAGE/pip.log"

# pip prints a lot (and config warnings); show it only when it fails, then one error line.
run_pip() {
    local what="$1"; shift
    if ! "$PY" -m pip "$@" >"$LOG" 2>&1; then
        grep -v 'is ignored: it is neither a file nor a directory' "$LOG" | tail -n 15 >&2 || true
        die "pip $what failed (full output: ${LOG#"$ROOT"/})"
    fi
}

# The wheel file of NAME==VERSION in $WHEELS, by the normalised name that wheel files carry.
wheel_of() {
    local name="${1%%==*}" ver="${1##*==}" f base
    name="${name,,}"; name="${name//[-.]/_}"
    for f in "$WHEELS"/*.whl; do
        base="${f##*/}"; base="${base%%-*}"; base="${base,,}"; base="${base//[-.]/_}"
        if [[ "$base" == "$name" && "${f##*/}" == *"-$ver-"* ]]; then
            echo "$f"; return 0
        fi
    done
    return 1
}

# 1. Download the pinned wheels not yet in the cache (no index query at all when none is missing).
missing=()
for pin in "${PINS[@]}"; do
    wheel_of "$pin" >/dev/null || missing+=("$pin")
done
if ((${#missing[@]})); then
    echo "stage: downloading ${#missing[@]} wheel(s): ${missing[*]}"
    run_pip download download --no-deps "${PIP_TAGS[@]}" -d "$WHEELS" "${missing[@]}"
    for pin in "${missing[@]}"; do
        wheel_of "$pin" >/dev/null || die "pip downloaded no wheel for $pin (see ${LOG#"$ROOT"/})"
    done
else
    echo "stage: all ${#PINS[@]} wheels already in ${WHEELS#"$ROOT"/}"
fi
WHEEL_FILES=()
for pin in "${PINS[@]}"; do WHEEL_FILES+=("$(wheel_of "$pin")"); done

# Each step's key names its inputs; a step whose key matches its stamp is done already.
site_key="recipe=$RECIPE wheels=$(for f in "${WHEEL_FILES[@]}"; do basename "$f"; done | sort | tr '\n' ' ')prune=${PRUNE[*]}"

# 2. Install into the tree (only the pinned wheel files, so stale cache entries never travel).
if [[ -f "$SITE/.stage_key" && "$(cat "$SITE/.stage_key")" == "$site_key" ]]; then
    echo "stage: ${SITE#"$ROOT"/} is up to date"
else
    echo "stage: installing ${#WHEEL_FILES[@]} wheels into ${SITE#"$ROOT"/}"
    rm -rf "$SITE.tmp" "$SITE"
    run_pip install install --no-deps --no-index --no-compile --disable-pip-version-check \
        "${PIP_TAGS[@]}" --target "$SITE.tmp" "${WHEEL_FILES[@]}"
    for p in "${PRUNE[@]}"; do rm -rf "${SITE:?}.tmp/$p"; done
    find "$SITE.tmp" -name __pycache__ -type d -prune -exec rm -rf {} +
    printf '%s' "$site_key" >"$SITE.tmp/.stage_key"
    mv "$SITE.tmp" "$SITE"
fi

# 3. Pack. Fixed owner, order and mtime make the archive depend on the tree alone. The 192 MiB
# dictionary catches what the ~20 tensorflow_text op libraries and TF's own libraries share
# (326 instead of 359 MiB: one call fewer); the fixed block size makes the archive the same for
# any thread count and still gives xz there ~9 blocks to decompress in parallel.
XZ_FILTER=(--block-size=192MiB '--lzma2=preset=6,dict=192MiB')
archive_key="$site_key archive=xz ${XZ_FILTER[*]}"
if [[ -f "$ARCHIVE" && -f "$ARCHIVE.key" && "$(cat "$ARCHIVE.key")" == "$archive_key" ]]; then
    echo "stage: ${ARCHIVE#"$ROOT"/} is up to date"
else
    echo "stage: packing $(du -sh "$SITE" | cut -f1) into ${ARCHIVE#"$ROOT"/} (about 13 minutes on 2 cores)"
    rm -f "$ARCHIVE" "$ARCHIVE.key"
    tar_cmd=(tar -C "$SITE" --sort=name --owner=0 --group=0 --numeric-owner
             --mtime=@1735689600 --exclude=./.stage_key -cf - .)
    if command -v xz >/dev/null; then
        "${tar_cmd[@]}" | xz -T"$XZ_THREADS" "${XZ_FILTER[@]}" -c >"$ARCHIVE.tmp" \
            || die "packing with tar | xz failed"
    else
        "${tar_cmd[@]}" | "$PY" -c 'import lzma, shutil, sys
filters = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 192 << 20}]
with lzma.open(sys.stdout.buffer, "wb", filters=filters) as out:
    shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)' >"$ARCHIVE.tmp" \
            || die "packing with tar | python lzma failed"
    fi
    mv "$ARCHIVE.tmp" "$ARCHIVE"
    printf '%s' "$archive_key" >"$ARCHIVE.key"
fi

# 4. Split into one folder per part and write the checksums (into each part folder as well).
archive_bytes=$(stat -c %s "$ARCHIVE")
part_bytes=$((PART_MIB * 1024 * 1024))
nparts=$(((archive_bytes + part_bytes - 1) / part_bytes))
((nparts <= 100)) || die "PART_MIB=$PART_MIB gives $nparts parts; at most 100 are supported"
parts_key="$archive_key part_mib=$PART_MIB bytes=$archive_bytes"
if [[ -f "$SHAFILE" && -f "$STAGE/tf_parts.key" && "$(cat "$STAGE/tf_parts.key")" == "$parts_key" ]] \
        && (cd "$STAGE" && for d in tf_part_*/; do [[ -f "$d/tf_parts.sha256" ]] || exit 1; done); then
    echo "stage: parts are up to date"
else
    echo "stage: splitting into $nparts part(s) of at most $PART_MIB MiB"
    rm -rf "$STAGE"/tf_part_* "$STAGE/split.tmp" "$SHAFILE" "$STAGE/tf_parts.key"
    mkdir "$STAGE/split.tmp"
    split -b "$part_bytes" -d -a 2 "$ARCHIVE" "$STAGE/split.tmp/tf.tar.xz."
    {
        (cd "$STAGE" && sha256sum tf.tar.xz)
        (cd "$STAGE/split.tmp" && sha256sum tf.tar.xz.*)
    } >"$SHAFILE.tmp"
    for f in "$STAGE"/split.tmp/tf.tar.xz.*; do
        nn="${f##*.}"
        mkdir "$STAGE/tf_part_$nn"
        mv "$f" "$STAGE/tf_part_$nn/"
        cp "$SHAFILE.tmp" "$STAGE/tf_part_$nn/tf_parts.sha256"
    done
    rmdir "$STAGE/split.tmp"
    mv "$SHAFILE.tmp" "$SHAFILE"
    printf '%s' "$parts_key" >"$STAGE/tf_parts.key"
fi

# Summary: what a GPU call carries, one part per call.
echo "stage: done in $(($(date +%s) - START)) s"
echo "wheels: ${#WHEEL_FILES[@]} ($(du -cb "${WHEEL_FILES[@]}" | tail -n 1 | awk '{printf "%.1f MiB", $1 / 1048576}'))," \
     "tree: $(du -sb "$SITE" | awk '{printf "%.1f MiB", $1 / 1048576}')," \
     "archive: $(awk -v b="$archive_bytes" 'BEGIN{printf "%.1f MiB", b / 1048576}')"
count=0
for d in "$STAGE"/tf_part_*/; do
    f=("$d"tf.tar.xz.*)
    printf '  %s  %6.1f MiB\n' "${f[0]#"$ROOT"/}" "$(awk -v b="$(stat -c %s "${f[0]}")" 'BEGIN{print b / 1048576}')"
    count=$((count + 1))
done
echo "parts: $count (checksums: ${SHAFILE#"$ROOT"/}, copied into each part folder)"
echo "next, on the GPU machine, one call per part: carry [\".gpu_stage/tf_part_NN\"] and run" \
     "'bash scripts/gpu/setup_tf.sh receive'; with the last part run 'install' instead."
