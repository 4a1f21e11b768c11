"""`profile` (any machine): the first step cut into its parts; `bench` (GPU): seconds to the first
execution and examples/s by batch size, in a few minutes. Both time the step `run` trains, with
scripts/gpu/step_timing.py on the staged data."""

from __future__ import annotations

import json
import os
from pathlib import Path

from imdb_common import DATA_RECORD, RECIPE, STAGE, device_dir, die, gpu_name, say, write_json


def timing(args) -> None:
    """`profile` and `bench` (scripts/gpu/step_timing.py) on the staged data."""
    if args.xla_flags:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + args.xla_flags).strip()
    if args.xla_cache:
        os.environ["TF_XLA_FLAGS"] = (os.environ.get("TF_XLA_FLAGS", "")
                                      + f" --tf_xla_persistent_cache_directory={args.xla_cache}").strip()
    candidates = [Path(args.data)] if args.data else [device_dir() / "data", STAGE / "data"]
    data = next((d for d in candidates if (d / DATA_RECORD).is_file()), None)
    if data is None:
        die(f"no staged data in {' or '.join(map(str, candidates))}; run `stage` (and `receive` on the GPU "
            f"machine), or pass --data")
    import step_timing  # beside this file, which puts it on the path; it imports TensorFlow when called

    record = json.loads((data / DATA_RECORD).read_text())
    config = step_timing.load_config(args.config, data / "vocab.txt", record["seq"], RECIPE,
                                     RECIPE["num_warmup_steps"])
    say(f"{args.verb} on {gpu_name()}: config {args.config}, {record['vocab_size']:,}-piece vocabulary, seq "
        f"{record['seq']}, {args.precision}, XLA {'off' if args.no_jit else 'on'}; XLA_FLAGS="
        f"{os.environ.get('XLA_FLAGS', '')!r} TF_XLA_FLAGS={os.environ.get('TF_XLA_FLAGS', '')!r}")
    if args.verb == "profile":
        result = step_timing.breakdown(data / "shards", data / "vocab.txt", config, args.batch, args.precision,
                                       jit=not args.no_jit, log=say)
    else:
        try:
            batches = [int(b) for b in args.batches.split(",")]
        except ValueError:
            die(f"--batches {args.batches!r}: pass whole numbers separated by commas, e.g. 128,256")
        result = step_timing.bench(data / "shards", data / "vocab.txt", config, batches, args.precision,
                                   not args.no_jit, args.steps_per_execution, args.measure_seconds,
                                   args.budget_minutes * 60.0, log=say)
    if args.json:
        write_json(Path(args.json), result)


def add_arguments(verbs) -> None:
    for verb, text in (("profile", "the first step cut into its parts (tracing, XLA compile, data, sampling)"),
                       ("bench", "first-execution seconds and examples/s by batch size, within a budget")):
        p = verbs.add_parser(verb, help=text)
        p.add_argument("--data", default=None, help="staged data (default $ELECTRA_GPU_DIR/data, else "
                                                    ".gpu_stage/data)")
        p.add_argument("--config", default="small")
        p.add_argument("--precision", default="bf16", choices=["none", "bf16", "fp16"])
        p.add_argument("--no_jit", action="store_true", help="without XLA")
        p.add_argument("--xla_flags", default="--xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false"
                       if verb == "bench" else "", help="added to XLA_FLAGS (read once, when TensorFlow starts)")
        p.add_argument("--xla_cache", default="", help="TensorFlow's persistent XLA cache folder ('' for none)")
        p.add_argument("--json", default=None, help="also write the numbers to this file")
        if verb == "profile":
            p.add_argument("--batch", type=int, default=128)
        else:
            p.add_argument("--batches", default="128,256,512,1024")
            p.add_argument("--steps_per_execution", type=int, default=8)
            p.add_argument("--measure_seconds", type=float, default=15.0, help="timed after the first execution")
            p.add_argument("--budget_minutes", type=float, default=3.5, help="variants that do not fit are skipped")
