#!/usr/bin/env bash
# Pre-train configs/cpu_demo.json (ELECTRA whose discriminator keeps learning on a 2-core CPU)
# on the shared Brown + WikiText-2 corpus, with a held-out set, in about 40-75 minutes.
# Re-run the same command after an interruption: finished steps are skipped and pre-training
# resumes from its last checkpoint.
#
#   scripts/cpu_demo.sh [CORPUS_DIR] [OUT_DIR] [-- extra pretrain flags, e.g. --override objective=mlm]
#
# CORPUS_DIR defaults to ../shared/data/corpus (brown.txt, wikitext2.valid.txt,
# wikitext2.test.txt); OUT_DIR to runs/cpu_demo. The last 8 articles of wikitext2.test.txt are
# held out for evaluation. Results: OUT_DIR/run/ (pretrained/, summary.json, TensorBoard).
# EXTRA_CORPUS (environment, comma-separated text files) adds in-domain text to the vocabulary
# and the training shards, e.g. the unlabelled sentences of a task's training set.
set -euo pipefail
cd "$(dirname "$0")/.."

corpus=${1:-../shared/data/corpus}
out=${2:-runs/cpu_demo}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
for f in brown.txt wikitext2.valid.txt wikitext2.test.txt; do
    if [ ! -f "$corpus/$f" ]; then
        echo "error: $corpus/$f is missing; pass the folder that holds brown.txt and wikitext2.*.txt" >&2
        exit 2
    fi
done
mkdir -p "$out"

# 1. Held-out split: the last 8 WikiText-2 test articles (~24k words) are never trained on.
if [ ! -f "$out/heldout.txt" ]; then
    python - "$corpus/wikitext2.test.txt" "$out" <<'EOF'
import os, sys
docs = open(sys.argv[1], encoding="utf-8").read().rstrip("\n").split("\n\n")
out = sys.argv[2]
for name, part in (("wt_test_train.txt", docs[:-8]), ("heldout.txt", docs[-8:])):
    with open(os.path.join(out, name + ".tmp"), "w", encoding="utf-8") as f:
        f.write("\n\n".join(part) + "\n")
    os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
EOF
fi

# 2. WordPiece vocabulary (8,000 pieces).
extra=${EXTRA_CORPUS:+,$EXTRA_CORPUS}
[ -f "$out/vocab.txt" ] || python -m electra_tf.data.build_vocab --corpus "$corpus/*.txt$extra" \
    --vocab_size 8000 --sample_lines 0 --output_file "$out/vocab.txt"

# 3. Shards: ~21,000 training sequences (without EXTRA_CORPUS) of 64 tokens, 207 held out (a re-run repairs or skips).
python -m electra_tf.data.build_pretraining_data \
    --corpus "$corpus/brown.txt,$corpus/wikitext2.valid.txt,$out/wt_test_train.txt$extra" \
    --vocab_file "$out/vocab.txt" --output_dir "$out/shards" --max_seq_length 64 --num_shards 4 \
    --noprogress
python -m electra_tf.data.build_pretraining_data --corpus "$out/heldout.txt" \
    --vocab_file "$out/vocab.txt" --output_dir "$out/heldout_shards" --max_seq_length 64 \
    --num_shards 1 --noprogress

# 4. Pre-training: 20,000 steps of batch 32, held-out evaluation every 1,000 steps.
python -m electra_tf.pretrain --config configs/cpu_demo.json --data_dir "$out/shards" \
    --vocab_file "$out/vocab.txt" --eval_data_dir "$out/heldout_shards" --output_dir "$out/run" \
    --save_every 1000 --eval_every 1000 --eval_steps 20 --log_every 250 "$@"
