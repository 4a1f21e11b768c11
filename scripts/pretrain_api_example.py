"""Pre-trains ELECTRA through the Python API (no CLI): shards in, model directory out.

    python scripts/pretrain_api_example.py --config configs/mini.json \
        --data_dir runs/sst2study/shards --vocab_file runs/sst2study/vocab.txt \
        --model_dir runs/sst2study/model --steps 6000

Used for the SST-2 "does pre-training help" check (docs/finetune.md); the
full-featured job (checkpoints, resume, strategies) is `python -m electra_tf.pretrain`.
"""

import argparse
import json
import os
import time

import keras

from electra_tf.config import ElectraConfig
from electra_tf.data.reader import pretraining_dataset
from electra_tf.data.vocab import load_vocab, special_token_ids
from electra_tf.models import saving
from electra_tf.pretrain import ElectraPretrainer, create_optimizer


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--data_dir", required=True)
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--model_dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--steps_per_epoch", type=int, default=500)
    args = p.parse_args()

    vocab = load_vocab(args.vocab_file)
    config = ElectraConfig.from_json(args.config).replace(
        vocab_size=len(vocab), num_train_steps=args.steps)
    model = ElectraPretrainer(config, special_token_ids(vocab))
    model.compile(optimizer=create_optimizer(config))
    data = pretraining_dataset(args.data_dir, config, config.train_batch_size)
    start = time.time()
    history = model.fit(data, epochs=args.steps // args.steps_per_epoch,
                        steps_per_epoch=args.steps_per_epoch, verbose=2, shuffle=False)
    seconds = time.time() - start
    saving.save_pretrained(args.model_dir, model, args.vocab_file)
    with open(os.path.join(args.model_dir, "pretrain_history.json"), "w") as f:
        json.dump({"seconds": seconds, "steps": args.steps, "batch_size": config.train_batch_size,
                   "history": history.history}, f, indent=1)
    print(f"saved {args.model_dir} after {args.steps} steps in {seconds:.0f}s")


if __name__ == "__main__":
    keras.utils.set_random_seed(0)
    main()
