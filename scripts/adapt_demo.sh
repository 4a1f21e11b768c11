#!/usr/bin/env bash
# Continue pre-training a public encoder on your own text with ELECTRA, fine-tune it on your
# labelled file beside the encoder as it is, then label new rows and export the classifier.
#
#   scripts/adapt_demo.sh [ENCODER_DIR] [CORPUS_GLOB] [LABELLED_FILE] [OUT_DIR]
#
# ENCODER_DIR    a Hugging Face BERT or ELECTRA directory (config.json, model.safetensors, vocab.txt).
#                Default: ../shared/data/encoders/all-MiniLM-L6-v2 (English, uncased, 22.7M parameters).
# CORPUS_GLOB    your unlabelled text, one paragraph per line, blank line between documents (.gz too;
#                comma-separated globs). Default: the IMDB review text in ../shared/data/corpus.
# LABELLED_FILE  a CSV / TSV / JSON Lines file (.gz too) with a text column and a label column.
#                Default: ../shared/data/imdb/train.tsv.gz (scored on ../shared/data/imdb/dev.tsv.gz).
# OUT_DIR        where everything goes (default runs/adapt_demo). Re-run the same command after an
#                interruption: every step resumes or is skipped when done.
#
# Environment (optional): STEPS (continued pre-training steps at batch 32, default 360: about 30
# minutes on a 2-core CPU), SEQ (tokens, 128), LABELS (training rows, 500), SEEDS (1,2,3), EPOCHS (3),
# VALIDATION_FILE (default: imdb/dev.tsv.gz for the default data, else a 10% split of LABELLED_FILE),
# MAX_EVAL (2000 scored rows), PREDICT_FILE (rows to label; default: the validation file),
# TEXT_COLUMN, LABEL_COLUMN, PRETRAIN_FLAGS (more pre-training flags).
# The recipe is configs/continue.json (docs/adaptation_study.md): a fresh 1/4-wide generator and
# replaced-token head at peak lr 5e-4, the encoder frozen for the first 10% of the steps and then
# trained at 0.1x that rate. Fine-tuning: lr 5e-5, batch 16, mean pooling, no layer-wise decay.
set -euo pipefail
cd "$(dirname "$0")/.."

SHARED=../shared/data
ENCODER=${1:-$SHARED/encoders/all-MiniLM-L6-v2}
CORPUS=${2:-$SHARED/corpus/imdb.unsup.txt.gz,$SHARED/corpus/imdb.train.txt.gz}
LABELLED=${3:-$SHARED/imdb/train.tsv.gz}
OUT=${4:-runs/adapt_demo}
STEPS=${STEPS:-360}
SEQ=${SEQ:-128}
LABELS=${LABELS:-500}
SEEDS=${SEEDS:-1,2,3}
EPOCHS=${EPOCHS:-3}
MAX_EVAL=${MAX_EVAL:-2000}
if [ -z "${VALIDATION_FILE:-}" ] && [ -z "${3:-}" ]; then
    VALIDATION_FILE=$SHARED/imdb/dev.tsv.gz
fi
for f in "$ENCODER/config.json" "$LABELLED"; do
    if [ ! -f "$f" ]; then
        echo "error: $f does not exist; pass a Hugging Face encoder directory and a labelled CSV, TSV or JSON Lines file" >&2
        exit 2
    fi
done

mkdir -p "$OUT"
started=$(date +%s)
say() { echo "[adapt_demo $(date +%H:%M:%S)] $*"; }

if [ ! -f "$OUT/encoder/conversion.json" ]; then
    say "1/5 importing $ENCODER"
    python -m electra_tf.convert --from hf --input "$ENCODER" --output_dir "$OUT/encoder"
fi
if [ ! -f "$OUT/shards/manifest.json" ]; then
    say "2/5 building pre-training shards ($SEQ tokens) with the encoder's vocabulary"
    python -m electra_tf.data.build_pretraining_data --corpus "$CORPUS" --vocab_file "$OUT/encoder/vocab.txt" \
        --output_dir "$OUT/shards" --max_seq_length "$SEQ" --num_shards 8 --num_processes 2 --progress=false
fi
warm=$(( STEPS / 10 > 0 ? STEPS / 10 : 1 ))
warm_fraction=$(awk -v w="$warm" -v s="$STEPS" 'BEGIN { printf "%.10g", w / s }')  # --warmup_proportion: $warm steps
say "3/5 continuing pre-training with ELECTRA for $STEPS steps (resumes if interrupted)"
python -m electra_tf.pretrain --config configs/continue.json --init "$OUT/encoder" --data_dir "$OUT/shards" \
    --output_dir "$OUT/adapted" --train_steps "$STEPS" --override max_seq_length="$SEQ" \
    --warmup_proportion "$warm_fraction" --override encoder_freeze_steps="$warm" --verbose 0 ${PRETRAIN_FLAGS:-}

eval_args=()
if [ -n "${VALIDATION_FILE:-}" ]; then
    eval_args+=(--validation_file "$VALIDATION_FILE" --max_eval_examples "$MAX_EVAL")
else
    eval_args+=(--validation_split 0.1)
fi
text_args=()
[ -n "${TEXT_COLUMN:-}" ] && text_args+=(--text_column "$TEXT_COLUMN")
col_args=("${text_args[@]}")
[ -n "${LABEL_COLUMN:-}" ] && col_args+=(--label_column "$LABEL_COLUMN")

say "4/5 fine-tuning the adapted encoder and the encoder as it is on $LABELS rows (seeds $SEEDS)"
for init in adapted as_is; do
    dir="$OUT/finetune/$init"
    [ -f "$dir/results.json" ] && continue
    src="$OUT/adapted"
    [ "$init" = as_is ] && src="$OUT/encoder"
    python -m electra_tf.finetune --init "$src" --train_file "$LABELLED" --max_train_examples "$LABELS" \
        "${eval_args[@]}" "${col_args[@]}" --max_seq_length "$SEQ" --seed "$SEEDS" --epochs "$EPOCHS" \
        --learning_rate 5e-5 --batch_size 16 --pooling mean --layerwise_lr_decay 1.0 --warmup_proportion 0.1 \
        --save_every 0 --output_dir "$dir"
done

say "5/5 labelling rows with the adapted classifier and exporting it for TF Serving"
seed=${SEEDS%%,*}
PREDICT_FILE=${PREDICT_FILE:-${VALIDATION_FILE:-$LABELLED}}
python -m electra_tf.predict --model_dir "$OUT/finetune/adapted/seed_$seed" --input_file "$PREDICT_FILE" \
    --output_file "$OUT/predictions.jsonl" --overwrite "${text_args[@]}" --noprogress
python -m electra_tf.export --model_dir "$OUT/finetune/adapted/seed_$seed" --output_dir "$OUT/serving/1" \
    --kind classifier --overwrite

python - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
rows = ["| encoder | median accuracy | seeds |", "|---|---|---|"]
res = {}
for init in ("adapted", "as_is"):
    r = json.load(open(f"{out}/finetune/{init}/results.json"))
    res[init] = round(100 * r["median"]["accuracy"], 2)  # as printed, so the gain is their difference
    seeds = " / ".join("%.2f" % (100 * s["accuracy"]) for s in r["seeds"])
    rows.append(f"| {init.replace('_', ' ')} | {res[init]:.2f} | {seeds} |")
rows.append(f"| gain of the adaptation | {res['adapted'] - res['as_is']:+.2f} | |")
open(f"{out}/results.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
say "done in $(( $(date +%s) - started )) s; table in $OUT/results.md, predictions in $OUT/predictions.jsonl, SavedModel in $OUT/serving/1"
