#!/usr/bin/env bash
# Pre-train ELECTRA on your own domain's text, then fine-tune it and a randomly initialised
# encoder on your labelled rows, and compare them.
#
#   scripts/domain_demo.sh [CORPUS_GLOB] [LABELLED_FILE] [OUT_DIR]
#
# CORPUS_GLOB    unlabelled text, one paragraph per line, blank line between documents (.gz too;
#                comma-separated globs). Default: the IMDB review text in ../shared/data/corpus.
# LABELLED_FILE  a CSV / TSV / JSON Lines file (.gz too) with a text column and a label column.
#                Default: ../shared/data/imdb/train.tsv.gz (scored on ../shared/data/imdb/dev.tsv.gz).
# OUT_DIR        where everything goes (default runs/domain_demo). Re-run the same command after an
#                interruption: every step resumes or is skipped when done.
#
# Environment (optional): CONFIG (configs/mini.json), STEPS (pre-training steps, default 3000: with
# mini, the rung of docs/domain_study.md closest to random init on IMDB with 500 labels),
# SEQ (tokens, 128), VOCAB_SIZE (8000), LABELS ("500 2000": training rows per comparison),
# SEEDS (1,2,3), VALIDATION_FILE (default: imdb/dev.tsv.gz for the default data, else a 10%
# split of LABELLED_FILE), TEXT_COLUMN, LABEL_COLUMN, MAX_EVAL (2000 scored rows),
# PRETRAIN_FLAGS (more pre-training flags, e.g. "--mixed_precision bf16 --jit_compile" on a GPU).
# Fine-tuning uses `finetune`'s defaults for the config's size.
set -euo pipefail
cd "$(dirname "$0")/.."

SHARED=../shared/data
CORPUS=${1:-$SHARED/corpus/imdb.unsup.txt.gz,$SHARED/corpus/imdb.train.txt.gz}
LABELLED=${2:-$SHARED/imdb/train.tsv.gz}
OUT=${3:-runs/domain_demo}
CONFIG=${CONFIG:-configs/mini.json}
STEPS=${STEPS:-3000}
SEQ=${SEQ:-128}
VOCAB_SIZE=${VOCAB_SIZE:-8000}
LABELS=${LABELS:-500 2000}
SEEDS=${SEEDS:-1,2,3}
MAX_EVAL=${MAX_EVAL:-2000}
if [ -z "${VALIDATION_FILE:-}" ] && [ -z "${2:-}" ]; then
    VALIDATION_FILE=$SHARED/imdb/dev.tsv.gz
fi
if [ ! -f "$LABELLED" ]; then
    echo "error: labelled file $LABELLED does not exist; pass a CSV, TSV or JSON Lines file" >&2
    exit 2
fi

mkdir -p "$OUT"
started=$(date +%s)
say() { echo "[domain_demo $(date +%H:%M:%S)] $*"; }

if [ ! -f "$OUT/vocab.txt" ]; then
    say "1/4 learning a $VOCAB_SIZE-piece WordPiece vocabulary from $CORPUS"
    python -m electra_tf.data.build_vocab --corpus "$CORPUS" --vocab_size "$VOCAB_SIZE" --output_file "$OUT/vocab.txt"
fi
if [ ! -f "$OUT/shards/manifest.json" ]; then
    say "2/4 building pre-training shards ($SEQ tokens)"
    python -m electra_tf.data.build_pretraining_data --corpus "$CORPUS" --vocab_file "$OUT/vocab.txt" \
        --output_dir "$OUT/shards" --max_seq_length "$SEQ" --num_shards 8 --num_processes 2 --progress=false
fi
say "3/4 pre-training $CONFIG for $STEPS steps (resumes if interrupted)"
python -m electra_tf.pretrain --config "$CONFIG" --data_dir "$OUT/shards" --vocab_file "$OUT/vocab.txt" \
    --output_dir "$OUT/pretrain" --train_steps "$STEPS" --override max_seq_length="$SEQ" \
    --warmup_proportion "$(awk -v s="$STEPS" 'BEGIN { printf "%.10g", int(s / 10) / s }')" \
    --override vocab_size="$(wc -l < "$OUT/vocab.txt")" --verbose 0 \
    ${PRETRAIN_FLAGS:-}

eval_args=()
if [ -n "${VALIDATION_FILE:-}" ]; then
    eval_args+=(--validation_file "$VALIDATION_FILE" --max_eval_examples "$MAX_EVAL")
else
    eval_args+=(--validation_split 0.1)
fi
[ -n "${TEXT_COLUMN:-}" ] && eval_args+=(--text_column "$TEXT_COLUMN")
[ -n "${LABEL_COLUMN:-}" ] && eval_args+=(--label_column "$LABEL_COLUMN")

say "4/4 fine-tuning the pre-trained and a randomly initialised encoder (seeds $SEEDS)"
for n in $LABELS; do
    for init in pretrained random; do
        dir="$OUT/finetune/${init}_$n"
        [ -f "$dir/results.json" ] && continue
        if [ "$init" = pretrained ]; then
            init_args=(--init "$OUT/pretrain")
        else
            init_args=(--init random --config "$OUT/pretrain/pretrained/config.json" --vocab_file "$OUT/vocab.txt")
        fi
        python -m electra_tf.finetune "${init_args[@]}" --train_file "$LABELLED" --max_train_examples "$n" \
            "${eval_args[@]}" --max_seq_length "$SEQ" --seed "$SEEDS" --save_every 0 --output_dir "$dir"
    done
done

python - "$OUT" "$LABELS" <<'EOF'
import json, sys
out, labels = sys.argv[1], sys.argv[2].split()
rows = ["| labelled rows | pre-trained (median, seeds) | random init (median, seeds) | gain |", "|---|---|---|---|"]
for n in labels:
    res = {}
    for init in ("pretrained", "random"):
        r = json.load(open(f"{out}/finetune/{init}_{n}/results.json"))
        res[init] = (100 * r["median"]["accuracy"], [100 * s["accuracy"] for s in r["seeds"]])
    cells = [f"{m:.2f} ({'/'.join(f'{a:.2f}' for a in seeds)})" for m, seeds in res.values()]
    rows.append(f"| {n} | {cells[0]} | {cells[1]} | {res['pretrained'][0] - res['random'][0]:+.2f} |")
open(f"{out}/results.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
say "done in $(( $(date +%s) - started )) s; table in $OUT/results.md"
