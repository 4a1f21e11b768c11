#!/usr/bin/env python3
"""ELECTRA-Small pre-trained on the IMDB text on a GPU lent for minutes, kept, and continued.

The GPU only trains; everything else (vocabulary, shards, packing, judging) happens on the CPU
(scripts/gpu/README.md gives the exact calls):

  stage    (CPU)  the vocabulary (a model that continues keeps its own) and the shards built here,
                  packed as tar.xz; the TensorFlow wheels packed (scripts/gpu/stage_tf.sh); both cut
                  into .gpu_stage/ folders that fill one call each (the data in the room the last
                  TensorFlow part leaves), checksummed; the calls printed with what each carries
  receive  (GPU)  each carried part into $ELECTRA_GPU_DIR (default /tmp/electra_gpu), which a warm
                  machine keeps between calls; the data unpacked once all its pieces are there
  run      (GPU)  ELECTRA-Small on the carried shards for a wall-clock budget (bf16, XLA,
                  temperature 2), the compiled step kept in TensorFlow's persistent XLA cache in
                  $ELECTRA_GPU_DIR; every --snapshot_minutes the weights so far (float16) go to
                  --out in parts of at most --out_part_mib, so a call cut off at its limit still
                  returns the latest. When --model_dir already holds weights, the run continues from
                  them (--init: fresh optimizer, warm-up again, decay to 0 at this run's last step).
                  --next_minutes plans the run for this call and a next one on the same machine:
                  this call pauses right after its last checkpoint, the next call's `run` resumes it.
  unpack   (CPU)  the returned parts, checked and joined, into --model_dir with a row in its
                  history.json and README.md (steps, tokens, FLOPs, minutes, held-out AUC measured
                  here on the CPU)
  profile  (any)  the first step cut into its parts (scripts/gpu/step_timing.py)
  bench    (GPU)  seconds to the first execution and examples/s by batch size, in a few minutes

Only the standard library is imported before `unpack`, `profile` and `bench`, so `receive` and
`run` work before TensorFlow is set up.
"""

# One module a verb beside this file (running this file puts its folder first on sys.path):
# imdb_stage.py, imdb_receive.py, imdb_run.py, imdb_timing.py (profile and bench), imdb_unpack.py,
# and imdb_common.py, what they share. Each defines its verb's arguments.

from __future__ import annotations

import argparse
import sys

import imdb_receive
import imdb_run
import imdb_stage
import imdb_timing
import imdb_unpack


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb_module in (imdb_stage, imdb_receive, imdb_run, imdb_timing, imdb_unpack):  # the order --help shows
        verb_module.add_arguments(verbs)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    {"stage": imdb_stage.stage, "receive": imdb_receive.receive, "run": imdb_run.run, "unpack": imdb_unpack.unpack,
     "profile": imdb_timing.timing, "bench": imdb_timing.timing}[args.verb](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
