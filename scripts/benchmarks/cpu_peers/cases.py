"""What is compared: the rows of the benchmark and the sides of each row.

A unit is one (model, max length); each is measured on its own and its results written to
`<work_dir>/results/<unit>.json` as soon as it ends, so a run that stops resumes where it was.

Fine-tuning step, batch 32, IMDB training reviews, the same token ids on every side, each batch
cut to its longest row rounded up to 16 (our `finetune` default), 2 threads:
  ours (fused AdamW, no XLA: the default), ours with XLA (opt-in), PyTorch eager with
  `AdamW(fused=True)`, PyTorch `torch.compile` + `AdamW(fused=True)`.

Serving, raw strings to labels, tokenizer included on every side, widths rounded up to 16 on
every side, no side sorts:
  fp32: our SavedModel (default, and exported with `--jit_compile`), PyTorch eager, PyTorch `torch.compile(dynamic=True)`, ONNX Runtime with
  fused Attention (checked); reduced precision: our bf16 opt-in against ONNX Runtime int8.
  Texts/s at batch 32 and batch-1 latency (p50 / p99 / p99.9 over every call, >= 1,000 per side
  and data set), on IMDB reviews and on SST-2 sentences, fresh texts every
  round; the first batch-1 call at a width the server has not seen yet is counted apart (cold).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from scripts.benchmarks.cpu_peers.timing import interleave
from scripts.benchmarks.cpu_peers.traffic import FT_ROWS, TextStream, read_imdb, rounded_width

FT_SIDES = [("ours", "default", "ours"), ("ours", "xla", "ours, XLA"),
            ("torch", "eager", "PyTorch eager, fused AdamW"), ("torch", "compile", "PyTorch compile, fused AdamW")]
SERVE_SIDES = [("ours", "saved_model", "ours, SavedModel", "fp32"),
               ("ours", "xla", "ours, XLA (opt-in)", "fp32"),
               ("torch", "eager", "PyTorch eager", "fp32"),
               ("torch", "compile", "PyTorch compile", "fp32"),
               ("ort", "fp32", "ONNX Runtime fp32, fused Attention", "fp32"),
               ("ours", "bf16", "ours, bf16 (opt-in)", "reduced"),
               ("ort", "int8", "ONNX Runtime int8", "reduced")]


def _save(path: Path, result):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(path)


def finetune_unit(ctx, name, paths, seq):
    args, ours = ctx.args, ctx.workers["ours"]
    texts, labels = read_imdb("train", FT_ROWS)
    batches = ctx.work / f"{name}_ft_{seq}.npz"
    stats = ours.call("tokenize_to", paths["vocab"], texts, seq, str(batches), labels)
    ctx.log(f"fine-tuning {name} seq {seq}: {stats}")
    sides = [s for s in FT_SIDES if s[1] != "xla" or seq in args.ft_xla_seqs]
    entries, prep = [], {}
    for side, variant, label in sides:
        cid = f"ft/{name}/{seq}/{side}/{variant}"
        case = dict(paths, id=cid, kind="ft", variant=variant, seq=seq, batch=32, batches=str(batches))
        prep[label] = ctx.workers[side].send(cmd="prepare", case=case)
        ctx.log(f"  prepared {label}: {prep[label]}")
        entries.append((ctx.workers[side], cid, label))
    res, loads = interleave(entries, args.rounds, lambda cid, r: {"kind": "ft", "steps": args.steps},
                            ctx.probe, ctx.log, args.max_load)
    rows = []
    for worker, cid, label in entries:
        runs = res[cid]
        rows.append({"side": label, "rounds_examples_per_s": [r["examples"] / sum(r["walls"]) for r in runs],
                     "cpu_per_wall": sum(r["cpu"] for r in runs) / sum(sum(r["walls"]) for r in runs),
                     "padded_share": 1 - sum(r["real_tokens"] for r in runs) / sum(r["padded_tokens"] for r in runs),
                     "warmup_s": prep[label].get("warmup_s"), "widths": prep[label].get("widths")})
        worker.send(cmd="drop", id=cid)
    return {"kind": "finetune", "model": name, "seq": seq, "data": stats, "rows": rows, "loads": loads}


def serving_unit(ctx, name, paths, seq):
    args, ours = ctx.args, ctx.workers["ours"]
    datasets = ["imdb"] + (["sst2"] if seq in args.sst2_seqs else [])
    per_round_lat = math.ceil(args.latency_calls / args.rounds)
    need = 64 + 64 + args.rounds * (args.throughput_texts + per_round_lat) + 8
    streams = {d: TextStream(d, need) for d in datasets}
    warm_texts = [t for d in datasets for t in streams[d].take(32 if d == "sst2" else 64)]
    singles = [t for d in datasets for t in streams[d].take(4)]
    saved = ours.call("saved_model", name, paths["seed_dir"], seq)
    sides = [s for s in SERVE_SIDES if s[2] not in args.skip_sides]
    entries, prep = [], {}
    for side, variant, label, _ in sides:
        cid = f"serve/{name}/{seq}/{side}/{variant}"
        case = dict(paths, id=cid, kind="serve", variant=variant, model=name, seq=seq, batch=32, saved_model=saved,
                    warmup_texts=singles + warm_texts, warmup_singles=len(singles))
        prep[label] = ctx.workers[side].send(cmd="prepare", case=case)
        ctx.log(f"  prepared {label}: {prep[label]}")
        entries.append((ctx.workers[side], cid, label))
    # Widths (rounded like every side pads) of the batch-1 calls the warm-up made: not cold later.
    seen = {rounded_width(n, seq) for n in ours.call("lengths", paths["vocab"], singles, seq)}
    agree_texts = streams["imdb"].take(64)
    ref, agreement = None, []
    for worker, cid, label in entries:
        logits = worker.send(cmd="run", id=cid, what={"kind": "logits", "texts": agree_texts, "batch": 32})["logits"]
        if ref is None:
            ref = logits
            continue
        diff = max(abs(a - b) for ra, rb in zip(ref, logits) for a, b in zip(ra, rb))
        same = sum(int(ra.index(max(ra)) == rb.index(max(rb))) for ra, rb in zip(ref, logits))
        agreement.append({"side": label, "max_abs_logit_diff": diff, "same_label": same, "of": len(ref)})
    out = {"kind": "serving", "model": name, "seq": seq, "agreement": agreement, "datasets": {},
           "prepare": prep}
    for d in datasets:
        tp_texts = [streams[d].take(args.throughput_texts) for _ in range(args.rounds)]
        ctx.log(f"serving {name} seq {seq} {d}: batch 32, {len(entries)} sides x {args.rounds} rounds")
        tp, tp_loads = interleave(entries, args.rounds,
                                  lambda cid, r: {"kind": "throughput", "texts": tp_texts[r], "batch": 32},
                                  ctx.probe, ctx.log, args.max_load)
        lat_texts = [streams[d].take(per_round_lat) for _ in range(args.rounds)]
        widths = [rounded_width(n, seq) for n in ours.call("lengths", paths["vocab"],
                                                              [t for r in lat_texts for t in r], seq)]
        cold = []
        for i, w in enumerate(widths):
            if w not in seen:
                seen.add(w)
                cold.append(i)
        ctx.log(f"serving {name} seq {seq} {d}: batch 1, {per_round_lat} calls x {args.rounds} rounds "
                f"({len(cold)} first calls at a new width)")
        lat, lat_loads = interleave(entries, args.rounds, lambda cid, r: {"kind": "latency", "texts": lat_texts[r]},
                                    ctx.probe, ctx.log, args.max_load)
        rows = []
        for _, cid, label in entries:
            calls = [x for r in lat[cid] for x in r["latencies"]]
            rows.append({
                "side": label,
                "rounds_texts_per_s": [r["texts"] / r["wall"] for r in tp[cid]],
                "throughput_cpu_per_wall": sum(r["cpu"] for r in tp[cid]) / sum(r["wall"] for r in tp[cid]),
                "latencies": calls,
                "rounds_p50": [_median(r["latencies"]) for r in lat[cid]],
                "latency_cpu_per_wall": sum(r["cpu"] for r in lat[cid]) / sum(r["wall"] for r in lat[cid])})
        out["datasets"][d] = {"rows": rows, "cold_calls": cold, "widths": widths,
                              "throughput_loads": tp_loads, "latency_loads": lat_loads}
    for worker, cid, _ in entries:
        worker.send(cmd="drop", id=cid)
    return out


def _median(values):
    values = sorted(values)
    n = len(values)
    return (values[n // 2] + values[(n - 1) // 2]) / 2 if n else float("nan")


def run_units(ctx, models, paths):
    """Every unit not already in results/ (or all with --redo), results written as they come."""
    args = ctx.args
    # Shorter lengths first (whole tables for one length before the next), serving before fine-tuning.
    units = []
    for seq in sorted(set(args.ft_seqs) | set(args.serve_seqs)):
        for kind, wanted, seqs in (("serving", args.serving, args.serve_seqs), ("finetune", args.finetune, args.ft_seqs)):
            units += [(kind, name, seq) for name in models if wanted and seq in seqs]
    done = []
    for kind, name, seq in units:
        path = ctx.work / "results" / f"{kind}_{name}_{seq}.json"
        if path.exists() and not args.redo:
            ctx.log(f"{kind} {name} {seq}: kept from {path}")
            done.append(path)
            continue
        t = time.time()
        result = (finetune_unit if kind == "finetune" else serving_unit)(ctx, name, paths[name], seq)
        result.update(date_utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)), wall_s=round(time.time() - t),
                      rounds=args.rounds, max_load=args.max_load)
        _save(path, result)
        ctx.log(f"{kind} {name} {seq}: written to {path} ({result['wall_s']} s)")
        done.append(path)
    return [json.loads(p.read_text()) for p in done]
