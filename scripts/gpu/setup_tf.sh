#!/usr/bin/env bash
# Install the TensorFlow tree staged by scripts/gpu/stage_tf.sh on the lent GPU machine
# (Python 3.12, CUDA 13, no TensorFlow, no network), from the repo root there:
#
#   bash scripts/gpu/setup_tf.sh receive   keep the part(s) carried in this call, checksummed,
#                                          in $ELECTRA_GPU_DIR/parts (a warm machine keeps /tmp)
#   bash scripts/gpu/setup_tf.sh install   receive, then (once all parts are there) join, verify,
#                                          extract, link CUDA 13 libraries under the CUDA 12
#                                          names TF asks for, write env.sh and check the GPU
#   bash scripts/gpu/setup_tf.sh check     run the GPU check again
#   source scripts/gpu/setup_tf.sh install as above, then env.sh is sourced into this shell
#
# A call carries one part folder, e.g. carry [".gpu_stage/tf_part_00"], and runs 'receive';
# the call with the last part runs 'install' (and may go on, in the same command, with
#   source /tmp/electra_gpu/env.sh && python3 -m electra_tf.pretrain ...).
# Later calls on the same warm machine only `source /tmp/electra_gpu/env.sh`. 'install' is
# idempotent: with everything in place it returns at once.
#
# Environment: ELECTRA_GPU_DIR (default /tmp/electra_gpu), ELECTRA_GPU_PYTHON (python3),
# SKIP_GPU_CHECK=1 (install without the check, e.g. a dry run on a machine without a GPU),
# ELECTRA_GPU_LIB_DIRS (colon-separated folders searched first for the CUDA libraries),
# ELECTRA_GPU_CUDA_DIR (the CUDA folder holding bin/ptxas and nvvm/libdevice, for XLA).

# Sourced: run the work in a child bash, so that `set -e` and `exit` never reach the caller's
# shell, then bring env.sh into that shell.
if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    _electra_gpu_rc=0
    bash "${BASH_SOURCE[0]}" "$@" || _electra_gpu_rc=$?
    if [[ $_electra_gpu_rc == 0 && "${1:-}" != receive && -f "${ELECTRA_GPU_DIR:-/tmp/electra_gpu}/env.sh" ]]; then
        # shellcheck source=/dev/null
        source "${ELECTRA_GPU_DIR:-/tmp/electra_gpu}/env.sh"
    fi
    # shellcheck disable=SC2317  # reached when sourced
    return "$_electra_gpu_rc" 2>/dev/null || exit "$_electra_gpu_rc"
fi

set -euo pipefail

die() { echo "error: $*" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STAGE="$ROOT/.gpu_stage"
DIR="${ELECTRA_GPU_DIR:-/tmp/electra_gpu}"
PARTS="$DIR/parts"
SITE="$DIR/site"
CUDA12="$DIR/cuda12"
ENVSH="$DIR/env.sh"
PY="${ELECTRA_GPU_PYTHON:-python3}"
T0=$(date +%s%N)

elapsed() { awk -v a="$T0" -v b="$(date +%s%N)" 'BEGIN{printf "%.1f", (b - a) / 1e9}'; }

# The checksum list of the staging the carried parts belong to (stage_tf.sh puts a copy into
# every part folder, and one beside them that a call may carry by path).
carried_shafile() {
    local f first=""
    for f in "$STAGE"/tf_parts.sha256 "$STAGE"/tf_part_*/tf_parts.sha256; do
        [[ -f "$f" ]] || continue
        if [[ -z "$first" ]]; then
            first="$f"
        elif ! cmp -s "$first" "$f"; then
            die "the carried parts come from different stagings (${first#"$ROOT"/} != ${f#"$ROOT"/}); run stage_tf.sh again and carry its parts"
        fi
    done
    echo "$first"
}

part_names() { awk '$2 ~ /^tf\.tar\.xz\.[0-9]+$/ {print $2}' "$1" | sort; }
sha_of_name() { awk -v n="$2" '$2 == n {print $1}' "$1"; }

# Copies the carried parts into $PARTS, each checked against its sha256. Parts of an older
# staging are dropped, since they can never join with the new ones.
receive() {
    local strict="$1" shafile f name want got n have missing=()
    shafile="$(carried_shafile)"
    local carried=("$STAGE"/tf_part_*/tf.tar.xz.[0-9]*)
    if [[ ! -e "${carried[0]}" ]]; then
        if [[ "$strict" == strict ]]; then
            die "no .gpu_stage/tf_part_NN/ was carried in this call; name one in carry, e.g. [\".gpu_stage/tf_part_00\"]"
        fi
        return 0
    fi
    [[ -n "$shafile" ]] || die "no tf_parts.sha256 was carried with the parts (it sits in each .gpu_stage/tf_part_NN/); run stage_tf.sh again"
    mkdir -p "$PARTS"
    if [[ -f "$PARTS/tf_parts.sha256" ]] && ! cmp -s "$shafile" "$PARTS/tf_parts.sha256"; then
        echo "receive: these parts belong to a new staging; dropping the $(find "$PARTS" -name 'tf.tar.xz.*' | wc -l) part(s) of the old one"
        rm -f "$PARTS"/tf.tar.xz.*
    fi
    cp "$shafile" "$PARTS/tf_parts.sha256.tmp" && mv "$PARTS/tf_parts.sha256.tmp" "$PARTS/tf_parts.sha256"
    for f in "${carried[@]}"; do
        name="${f##*/}"
        want="$(sha_of_name "$PARTS/tf_parts.sha256" "$name")"
        [[ -n "$want" ]] || die "${f#"$ROOT"/} is not listed in tf_parts.sha256; run stage_tf.sh again"
        if [[ -f "$PARTS/$name" && "$(sha256sum <"$PARTS/$name" | cut -d' ' -f1)" == "$want" ]]; then
            continue
        fi
        cp "$f" "$PARTS/$name.tmp"
        got="$(sha256sum <"$PARTS/$name.tmp" | cut -d' ' -f1)"
        if [[ "$got" != "$want" ]]; then
            rm -f "$PARTS/$name.tmp"
            die "${f#"$ROOT"/} is damaged (sha256 $got, expected $want); carry it again"
        fi
        mv "$PARTS/$name.tmp" "$PARTS/$name"
        echo "receive: got $name ($(du -m "$PARTS/$name" | cut -f1) MiB, sha256 ok)"
    done
    have=0; n=0
    while read -r name; do
        n=$((n + 1))
        if [[ -f "$PARTS/$name" ]]; then have=$((have + 1)); else missing+=("${name##*.}"); fi
    done < <(part_names "$PARTS/tf_parts.sha256")
    echo "receive: $have of $n part(s) here${missing[*]:+; still missing: ${missing[*]}}"
}

# Joins the parts, checks the whole archive and unpacks it into $SITE (via a temporary folder,
# so that an interrupted unpack never looks finished).
extract() {
    local shafile="$PARTS/tf_parts.sha256" want got name files=() missing=()
    want="$(sha_of_name "$shafile" tf.tar.xz)"
    [[ -n "$want" ]] || die "$shafile names no tf.tar.xz; run stage_tf.sh again"
    if [[ -f "$SITE/.archive_sha256" && "$(cat "$SITE/.archive_sha256")" == "$want" ]]; then
        echo "install: ${SITE} already holds this archive"
        return 0
    fi
    while read -r name; do
        if [[ -f "$PARTS/$name" ]]; then files+=("$PARTS/$name"); else missing+=("${name##*.}"); fi
    done < <(part_names "$shafile")
    if ((${#missing[@]})); then
        die "part(s) ${missing[*]} of $((${#files[@]} + ${#missing[@]})) not received yet; carry .gpu_stage/tf_part_NN for each and run 'receive' (or 'install') with it"
    fi
    got="$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)"
    [[ "$got" == "$want" ]] || die "the joined archive's sha256 is $got, expected $want; carry the parts again"
    rm -rf "$SITE.tmp"
    mkdir -p "$SITE.tmp"
    if command -v xz >/dev/null; then
        cat "${files[@]}" | xz -dc -T0 | tar -xf - -C "$SITE.tmp" || die "unpacking the archive failed"
    else
        cat "${files[@]}" | "$PY" -c 'import lzma, shutil, sys
with lzma.open(sys.stdin.buffer) as src:
    shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)' | tar -xf - -C "$SITE.tmp" \
            || die "unpacking the archive failed"
    fi
    echo "$want" >"$SITE.tmp/.archive_sha256"
    rm -rf "$SITE"
    mv "$SITE.tmp" "$SITE"
    echo "install: unpacked $(du -sm "$SITE" | cut -f1) MiB into $SITE ($(elapsed) s so far)"
}

# Folders that may hold the CUDA libraries, best first: the image python's nvidia pip
# packages (the set its torch/jax use, so known to match each other and the driver), then
# the toolkit's and the system's folders.
lib_dirs() {
    local d
    if [[ -n "${ELECTRA_GPU_LIB_DIRS:-}" ]]; then tr ':' '\n' <<<"$ELECTRA_GPU_LIB_DIRS"; fi
    # PYTHONPATH is dropped so that this asks the image's own site-packages.
    env -u PYTHONPATH "$PY" -c 'import nvidia, sys; sys.stdout.write("\n".join(nvidia.__path__) + "\n")' 2>/dev/null \
        | while read -r d; do
            [[ -d "$d" ]] && find "$d" -name 'lib*.so*' \( -type f -o -type l \) -printf '%h\n' 2>/dev/null | sort -u
        done || true
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        [[ -d "$d" ]] && echo "$d"
    done
    return 0
}

# Prints the library `base.so.MAJOR` with the highest MAJOR >= min from the first folder that
# has one (its soname link when there is one, else the file with the longest version).
find_lib() {
    local base="$1" min="$2" d f major best="" bestmajor=-1
    while read -r d; do
        [[ -d "$d" ]] || continue
        for f in "$d/$base".so.[0-9]*; do
            [[ -e "$f" ]] || continue
            major="${f##*.so.}"; major="${major%%.*}"
            if [[ ! "$major" =~ ^[0-9]+$ ]] || ((major < min)); then continue; fi
            if ((major > bestmajor)) || { ((major == bestmajor)) && ((${#f} < ${#best})); }; then
                best="$f"; bestmajor=$major
            fi
        done
        if [[ -n "$best" ]]; then echo "$best"; return 0; fi
    done <<<"$LIB_DIRS"
    return 1
}

# TF 2.21 was built for CUDA 12.5 and dlopens its libraries by their CUDA 12 sonames; the image
# has CUDA 13. cudart is TF's own (carried, CUDA 12); for the rest, links with the CUDA 12
# names point at the CUDA 13 builds (dlopen + dlsym, so only the API matters, and that held).
link_cuda12() {
    local spec tfname base min need target dirs=() d
    LIB_DIRS="$(lib_dirs | awk '!seen[$0]++')"
    rm -rf "$CUDA12.tmp"
    mkdir -p "$CUDA12.tmp"
    local cudart="$SITE/nvidia/cuda_runtime/lib/libcudart.so.12"
    [[ -f "$cudart" ]] || die "the unpacked tree has no nvidia/cuda_runtime/lib/libcudart.so.12; run stage_tf.sh again"
    ln -s "$cudart" "$CUDA12.tmp/libcudart.so.12"
    # tf name : image library : lowest major accepted : required (TF registers no GPU without it)
    for spec in libcublas.so.12:libcublas:12:y libcublasLt.so.12:libcublasLt:12:y \
                libcufft.so.11:libcufft:11:y libcusolver.so.11:libcusolver:11:y \
                libcusparse.so.12:libcusparse:12:y libcudnn.so.9:libcudnn:9:y \
                libnvJitLink.so.12:libnvJitLink:12:n libcupti.so.12:libcupti:12:n \
                libnvrtc.so.12:libnvrtc:12:n libcurand.so.10:libcurand:10:n libnccl.so.2:libnccl:2:n; do
        IFS=: read -r tfname base min need <<<"$spec"
        if ! target="$(find_lib "$base" "$min")"; then
            [[ "$need" == y ]] && die "found no $base.so.N (N >= $min) for $tfname in: $(tr '\n' ' ' <<<"$LIB_DIRS")(set ELECTRA_GPU_LIB_DIRS)"
            echo "install: note: no $base.so.N found for $tfname (optional)"
            continue
        fi
        ln -s "$(readlink -f "$target")" "$CUDA12.tmp/$tfname"
        dirs+=("$(dirname "$target")")
        echo "install: $tfname -> $target"
    done
    # cuDNN 9 loads its sub-libraries (libcudnn_ops.so.9, ...) by name: link them all beside it.
    for f in "$(dirname "$(find_lib libcudnn 9)")"/libcudnn_*.so.9; do
        if [[ -e "$f" ]]; then ln -sf "$(readlink -f "$f")" "$CUDA12.tmp/${f##*/}"; fi
    done
    rm -rf "$CUDA12"
    mv "$CUDA12.tmp" "$CUDA12"
    # The real folders follow the link folder, so the CUDA 13 libraries find their own peers.
    LIB_PATH="$CUDA12$(printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++ {printf ":%s", $0}')"
}

# The CUDA folder XLA compiles with: it needs bin/ptxas and nvvm/libdevice/libdevice.10.bc.
find_cuda_dir() {
    local d ptxas cands=()
    if [[ -n "${ELECTRA_GPU_CUDA_DIR:-}" ]]; then cands+=("$ELECTRA_GPU_CUDA_DIR"); fi
    cands+=(/usr/local/cuda)
    for d in /usr/local/cuda-*; do cands+=("$d"); done
    ptxas="$(command -v ptxas || true)"
    if [[ -n "$ptxas" ]]; then cands+=("$(dirname "$(dirname "$(readlink -f "$ptxas")")")"); fi
    while read -r d; do
        if [[ -n "$d" ]]; then cands+=("$d"); fi
    done < <(env -u PYTHONPATH "$PY" -c 'import nvidia, sys; sys.stdout.write("\n".join(nvidia.__path__) + "\n")' 2>/dev/null \
                 | while read -r d; do find "$d" -maxdepth 3 -name ptxas -path '*/bin/*' -printf '%h/..\n' 2>/dev/null; done || true)
    for d in "${cands[@]}"; do
        if [[ -x "$d/bin/ptxas" && -f "$d/nvvm/libdevice/libdevice.10.bc" ]]; then
            readlink -f "$d"
            return 0
        fi
    done
    return 0
}

write_env() {
    local cuda_dir
    cuda_dir="$(find_cuda_dir)"
    if [[ -z "$cuda_dir" ]]; then
        echo "install: warning: found no CUDA folder with bin/ptxas and nvvm/libdevice (set ELECTRA_GPU_CUDA_DIR); XLA (jit_compile) will fail" >&2
    else
        echo "install: XLA uses $cuda_dir ($("$cuda_dir/bin/ptxas" --version 2>/dev/null | tail -n 1))"
    fi
    {
        echo "# Written by scripts/gpu/setup_tf.sh install: TensorFlow 2.21 on this machine."
        echo "# Source it (again in every call): . $(printf '%q' "$ENVSH")"
        echo "if [ \"\${ELECTRA_GPU_ENV:-}\" != $(printf '%q' "$DIR") ]; then"
        echo "  export ELECTRA_GPU_ENV=$(printf '%q' "$DIR")"
        # The tree first, so its numpy/protobuf/... win over the image's; then the repo.
        echo "  export PYTHONPATH=$(printf '%q' "$SITE:$ROOT")\${PYTHONPATH:+:\$PYTHONPATH}"
        echo "  export LD_LIBRARY_PATH=$(printf '%q' "$LIB_PATH")\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
        if [[ -n "$cuda_dir" ]]; then
            echo "  export XLA_FLAGS=$(printf '%q' "--xla_gpu_cuda_data_dir=$cuda_dir")\${XLA_FLAGS:+ \$XLA_FLAGS}"
            echo "  export PATH=$(printf '%q' "$cuda_dir/bin"):\$PATH"
        fi
        echo "fi"
        echo "export TF_FORCE_GPU_ALLOW_GROWTH=\${TF_FORCE_GPU_ALLOW_GROWTH:-true}"
        echo "export TF_CPP_MIN_LOG_LEVEL=\${TF_CPP_MIN_LOG_LEVEL:-1}"
    } >"$ENVSH.tmp"
    mv "$ENVSH.tmp" "$ENVSH"
    echo "install: wrote $ENVSH"
}

# Imports the stack, then one matmul on the GPU and one XLA-compiled function. Exit codes of
# the python part: 2 import failed, 3 no GPU, 4 a GPU op failed.
CHECK_PY='
import sys
try:
    import tensorflow as tf, tensorflow_text, keras, keras_hub, numpy as np
except Exception as e:
    import traceback; traceback.print_exc(); sys.exit(2)
print("check: python %s, tensorflow %s, tensorflow_text %s, keras %s, keras_hub %s, numpy %s"
      % (sys.version.split()[0], tf.__version__, tensorflow_text.__version__, keras.__version__,
         keras_hub.__version__, np.__version__))
gpus = tf.config.list_physical_devices("GPU")
print("check: GPUs:", gpus)
if not gpus:
    sys.exit(3)
try:
    with tf.device("/GPU:0"):
        a = tf.random.normal((1024, 1024))
        c = tf.matmul(a, a)
    print("check: matmul on", c.device, "sum %.3f" % float(tf.reduce_sum(c)))
    @tf.function(jit_compile=True)
    def f(x):
        return tf.nn.gelu(tf.matmul(x, x)) * 2.0 + 1.0
    y = f(a)
    ref = tf.nn.gelu(tf.matmul(a, a)) * 2.0 + 1.0
    err = float(tf.reduce_max(tf.abs(y - ref)))
    print("check: XLA jit_compile on", y.device, "max |diff| vs eager %.2e" % err)
    assert err < 1e-2 * (1 + float(tf.reduce_max(tf.abs(ref)))), err
except Exception as e:
    import traceback; traceback.print_exc(); sys.exit(4)
print("check: ok")
'

check() {
    [[ -f "$ENVSH" ]] || die "$ENVSH is missing; run 'install' first"
    local ver rc=0
    ver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)"
    [[ "$ver" == 3.12 ]] || die "the tree is built for CPython 3.12, but $PY is ${ver}; set ELECTRA_GPU_PYTHON (or SKIP_GPU_CHECK=1 for a dry run)"
    # shellcheck source=/dev/null
    (source "$ENVSH" && "$PY" -c "$CHECK_PY") || rc=$?
    case $rc in
        0) return 0 ;;
        2) die "importing tensorflow/tensorflow_text/keras_hub from $SITE failed (traceback above)" ;;
        3)
            echo "check: TensorFlow's messages about GPU libraries (TF_CPP_MIN_LOG_LEVEL=0):" >&2
            # shellcheck source=/dev/null
            # dso_loader logs the failed dlopen calls at VLOG(1) only.
            (source "$ENVSH" && TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=dso_loader=1 \
                "$PY" -c 'import tensorflow as tf; tf.config.list_physical_devices("GPU")' 2>&1) \
                | grep -E 'Could not load|dlopen|dlerror|cuInit|Could not find cuda|Skipping registering' | head -n 40 >&2 || true
            die "TensorFlow sees no GPU (lines above name the libraries it could not load; links in $CUDA12)" ;;
        4) die "a GPU op (matmul or XLA jit_compile) failed (traceback above)" ;;
        *) die "the GPU check exited with $rc" ;;
    esac
}

mode="${1:-}"
case "$mode" in
    receive)
        receive strict
        ;;
    install)
        receive lenient
        archive_sha=""
        if [[ -f "$PARTS/tf_parts.sha256" ]]; then archive_sha="$(sha_of_name "$PARTS/tf_parts.sha256" tf.tar.xz)"; fi
        [[ -n "$archive_sha" ]] || die "no parts received yet; carry .gpu_stage/tf_part_NN in each call and run 'receive' (see stage_tf.sh)"
        if [[ -f "$ENVSH" && -f "$DIR/.checked" && "$(cat "$DIR/.checked")" == "$archive_sha" \
              && -f "$SITE/.archive_sha256" && "$(cat "$SITE/.archive_sha256")" == "$archive_sha" ]]; then
            echo "install: already installed and checked ($(elapsed) s); source $ENVSH"
            exit 0
        fi
        rm -f "$DIR/.checked"
        extract
        link_cuda12
        write_env
        if [[ "${SKIP_GPU_CHECK:-0}" == 1 ]]; then
            echo "install: GPU check skipped (SKIP_GPU_CHECK=1)"
        else
            check
            echo "$archive_sha" >"$DIR/.checked"
        fi
        echo "install: done in $(elapsed) s; source $ENVSH"
        ;;
    check)
        check
        ;;
    *)
        die "usage: setup_tf.sh receive|install|check (see the header of scripts/gpu/setup_tf.sh)"
        ;;
esac
