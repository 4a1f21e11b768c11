#!/usr/bin/env bash
# Does pre-training help SST-2? Pre-trains configs/cpu_demo.json on Brown + WikiText-2 plus the
# unlabelled sentences of the SST-2 training set (task-adaptive pre-training: labels are never
# read, the dev set is never seen), then fine-tunes the pre-trained and a randomly initialised
# encoder with the same recipe, 3 seeds each, on 2,000 training rows and on the full set.
#
#   scripts/sst2_transfer.sh [OUT_DIR] [SST2_DIR] [CORPUS_DIR]
#
# Defaults: runs/sst2_transfer, ../shared/data/glue/SST-2, ../shared/data/corpus. Re-running
# skips finished steps. About 3 hours on 2 cores (pre-training ~1 h, fine-tuning the rest).
# Results: OUT_DIR/ft_{pretrained,random}_{2k,full}/results.json (median over seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/sst2_transfer}
sst2=${2:-../shared/data/glue/SST-2}
corpus=${3:-../shared/data/corpus}
if [ ! -f "$sst2/train.tsv" ] || [ ! -f "$sst2/dev.tsv" ]; then
    echo "error: $sst2 has no train.tsv/dev.tsv; pass the GLUE SST-2 folder" >&2
    exit 2
fi
mkdir -p "$out"

# Unlabelled in-domain text: the sentence column of train.tsv, one per line.
if [ ! -f "$out/sst2_train_sentences.txt" ]; then
    tail -n +2 "$sst2/train.tsv" | cut -f1 > "$out/sst2_train_sentences.txt.tmp"
    mv "$out/sst2_train_sentences.txt.tmp" "$out/sst2_train_sentences.txt"
fi

vocab_only=${VOCAB_ONLY:-0}
if [ "$vocab_only" = 1 ]; then
    # Build only the vocabulary (lets the random-init rows start before pre-training ends).
    [ -f "$out/vocab.txt" ] || python -m electra_tf.data.build_vocab \
        --corpus "$corpus/*.txt,$out/sst2_train_sentences.txt" --vocab_size 8000 --sample_lines 0 \
        --output_file "$out/vocab.txt"
    exit 0
fi

finetune() {  # finetune NAME INIT_FLAGS... ; recipe shared by both rows
    local name=$1; shift
    for proto in 2k full; do
        [ -f "$out/ft_${name}_$proto/results.json" ] && continue
        if [ $proto = 2k ]; then p="--max_train_examples 2000 --epochs 5"; else p="--epochs 2"; fi
        python -m electra_tf.finetune --task sst2 --data_dir "$sst2" --seed 1,2,3 \
            --max_seq_length 64 --batch_size 32 --learning_rate 1e-3 --layerwise_lr_decay 1.0 \
            $p "$@" --output_dir "$out/ft_${name}_$proto" --log_every 1000
    done
}

case "${ROWS:-both}" in
  random)
    finetune random --init random --config configs/cpu_demo.json --vocab_file "$out/vocab.txt" ;;
  pretrained|both)
    EXTRA_CORPUS="$out/sst2_train_sentences.txt" scripts/cpu_demo.sh "$corpus" "$out"
    finetune pretrained --init "$out/run"
    [ "${ROWS:-both}" = both ] && finetune random --init random --config configs/cpu_demo.json \
        --vocab_file "$out/vocab.txt" ;;
esac
for f in "$out"/ft_*/results.json; do
    python -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[1], r['median'])" "$f"
done
