"""What is compared: the rows of the benchmark and the sides of each row.

A unit is one (model, max length); each is measured on its own and its results written to
`<work_dir>/results/<unit>.json` as soon as it ends, so a run that stops resumes where it was
(results written by an earlier method, another `SCHEMA`, are measured again).

Fine-tuning step, batch 32, IMDB training reviews, the same token ids on every side, each batch
cut to its longest row rounded up to 16 (our `finetune` default), 2 threads, `--steps` steps per
side and round (one round is one sample):
  ours (fused AdamW, no XLA: the default), ours with XLA (opt-in), PyTorch eager with
  `AdamW(fused=True)`, PyTorch `torch.compile` + `AdamW(fused=True)`.

Serving, raw strings to labels, tokenizer included on every side, no side sorts:
  fp32: our SavedModel (default; exported with `--freeze_weights`; exported with `--jit_compile`,
  loaded as is and with its TF Serving warm-up requests replayed at load, the replay's seconds
  reported as that row's load time, outside every timed call), PyTorch eager, PyTorch
  `torch.compile(dynamic=True)`, the same with Inductor's freezing, ONNX Runtime with fused
  Attention (checked), our LiteRT text-in file (`export --format tflite`, tokenizer inside); reduced
  precision: our bf16 opt-in and our LiteRT int8 file against ONNX Runtime int8. Our rows pad
  to multiples of 16 (in the graph); every peer row is served twice, padded like ours and padded to
  the longest row (its natural setting), and the faster counts (`--peer_padding`).
  Texts/s at batch 32 and batch-1 latency (p50 / p99 / p99.9 over the warm calls, >= 1,000 per
  side and data set), on IMDB reviews and on SST-2 sentences, fresh texts every round; a batch-1
  call at a width the side has not served yet is cold: timed with a repeated call at the same
  width, both kept out of the warm calls. Texts whose token ids differ between our tokenizer and
  the peers' are left out of the pools (counted), and every timed text's ids are checked equal again.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from scripts.benchmarks.cpu_peers.timing import interleave
from scripts.benchmarks.cpu_peers.traffic import (FT_ROWS, LONGEST, WIDTH_MULTIPLE, TextStream, cold_calls,
                                                  first_id_mismatch, read_imdb)

# The results' layout and method; a results file of another schema is measured again (3: the rows
# "frozen weights" and "XLA + warm-up at load" added; 4: the LiteRT rows).
SCHEMA = 4
FT_SIDES = [("ours", "default", "ours"), ("ours", "xla", "ours, XLA"),
            ("torch", "eager", "PyTorch eager, fused AdamW"), ("torch", "compile", "PyTorch compile, fused AdamW")]
# (worker, variant, label, precision); each peer also gets a longest-row copy (serve_sides).
SERVE_SIDES = [("ours", "saved_model", "ours, SavedModel", "fp32"),
               ("ours", "frozen", "ours, frozen weights (opt-in)", "fp32"),
               ("ours", "xla", "ours, XLA (opt-in)", "fp32"),
               ("ours", "xla_warm", "ours, XLA + warm-up at load (opt-in)", "fp32"),
               ("torch", "eager", "PyTorch eager", "fp32"),
               ("torch", "compile", "PyTorch compile", "fp32"),
               ("torch", "compile_frozen", "PyTorch compile, frozen", "fp32"),
               ("ours", "litert", "ours, LiteRT fp32 (opt-in)", "fp32"),
               ("ort", "fp32", "ONNX Runtime fp32, fused Attention", "fp32"),
               ("ours", "bf16", "ours, bf16 (opt-in)", "reduced"),
               ("ours", "litert_int8", "ours, LiteRT int8 (opt-in)", "reduced"),
               ("ort", "int8", "ONNX Runtime int8", "reduced")]
LONGEST_SUFFIX = ", pad longest"
PEER_PADDINGS = {"both": (WIDTH_MULTIPLE, LONGEST), "16": (WIDTH_MULTIPLE,), "longest": (LONGEST,)}


def serve_sides(peer_padding="both", skip=()):
    """(worker, variant, label, pad multiple) of every serving row: ours at 16, each peer at the
    paddings `peer_padding` names, in SERVE_SIDES order; labels in `skip` left out."""
    out = []
    for side, variant, label, _ in SERVE_SIDES:
        pads = (WIDTH_MULTIPLE,) if side == "ours" else PEER_PADDINGS[peer_padding]
        for pad in pads:
            name = label + (LONGEST_SUFFIX if pad == LONGEST else "")
            if name not in skip:
                out.append((side, variant, name, pad))
    return out


def skip_labels(text):
    """The serving side labels `--skip_sides` names, separated by ";" (the labels hold commas); raises
    ValueError at the first label no side has, listing the labels, so that a typo never times a side
    it meant to leave out."""
    names = [name.strip() for name in text.split(";") if name.strip()]
    known = [label for *_, label, _ in serve_sides("both")]
    bad = [name for name in names if name not in known]
    if bad:
        raise ValueError(f"--skip_sides: no serving side is labelled {bad[0]!r}; the labels (separate them "
                         f"with ';'): {'; '.join(known)}")
    return names


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
                            ctx.probe, ctx.log, args.max_load, settling_round=True)
    rows = []
    for worker, cid, label in entries:
        runs = res[cid]
        rows.append({"side": label, "rounds_examples_per_s": [r["examples"] / sum(r["walls"]) for r in runs],
                     "cpu_per_wall": sum(r["cpu"] for r in runs) / sum(sum(r["walls"]) for r in runs),
                     "padded_share": 1 - sum(r["real_tokens"] for r in runs) / sum(r["padded_tokens"] for r in runs),
                     "warmup_s": prep[label].get("warmup_s"), "widths": prep[label].get("widths"),
                     "warmup_steps": prep[label].get("warmup_steps")})
        worker.send(cmd="drop", id=cid)
    return {"kind": "finetune", "model": name, "seq": seq, "data": stats, "rows": rows, "loads": loads}


def check_token_ids(ctx, paths, seq, dataset, texts, peers):
    """Stops the run unless every peer worker's tokenizer gives our ids on every text."""
    ours = ctx.workers["ours"].call("token_ids", paths["vocab"], texts, seq)
    for side in peers:
        theirs = ctx.workers[side].call("token_ids", paths["hf_dir"], texts, seq)
        bad = first_id_mismatch(ours, theirs)
        if bad:
            i, j, a, b = bad
            raise RuntimeError(f"{dataset} text {i} ({texts[i][:60]!r}...): our token ids and the {side} side's "
                               f"differ at piece {j} ({a} against {b}); the sides would not serve the same tokens")
    return [len(x) for x in ours]


def same_tokens_only(ctx, paths, seq, stream, peers):
    """Leaves in `stream` only the texts whose token ids are the same on our side and every peer's;
    returns how many were left out and the first difference (None if none)."""
    ours = ctx.workers["ours"].call("token_ids", paths["vocab"], stream.texts, seq)
    keep = [True] * len(ours)
    first = None
    for side in peers:
        theirs = ctx.workers[side].call("token_ids", paths["hf_dir"], stream.texts, seq)
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b and keep[i]:
                keep[i] = False
                if first is None:
                    _, j, x, y = first_id_mismatch([a], [b])
                    first = f"{stream.texts[i][:60]!r}...: piece {j}, {x} against {y} ({side})"
    stream.keep_only(keep)
    return {"texts": len(keep), "left_out": keep.count(False), "first_difference": first}


def serving_unit(ctx, name, paths, seq):
    args, ours = ctx.args, ctx.workers["ours"]
    datasets = ["imdb"] + (["sst2"] if seq in args.sst2_seqs else [])
    per_round_lat = math.ceil(args.latency_calls / args.rounds)
    need = 64 + 64 + args.rounds * (args.throughput_texts + per_round_lat) + 8
    sides = serve_sides(args.peer_padding, args.skip_sides)
    peers = sorted({side for side, *_ in sides if side != "ours"})
    # 5% more than needed: the texts the tokenizers disagree on are left out of the pools.
    streams = {d: TextStream(d, need + need // 20 + 16) for d in datasets}
    token_check = {d: same_tokens_only(ctx, paths, seq, streams[d], peers) for d in datasets}
    ctx.log(f"serving {name} seq {seq}: texts left out because our token ids and the peers' differ: {token_check}")
    warm_texts = [t for d in datasets for t in streams[d].take(32 if d == "sst2" else 64)]
    singles = [t for d in datasets for t in streams[d].take(4)]
    saved = ours.call("saved_model", name, paths["seed_dir"], seq)
    entries, prep, pad_of = [], {}, {}
    for side, variant, label, pad in sides:
        cid = f"serve/{name}/{seq}/{side}/{variant}/{'longest' if pad == LONGEST else pad}"
        case = dict(paths, id=cid, kind="serve", variant=variant, model=name, seq=seq, batch=32, saved_model=saved,
                    pad_multiple=pad, warmup_texts=singles + warm_texts, warmup_singles=len(singles))
        prep[label] = ctx.workers[side].send(cmd="prepare", case=case)
        ctx.log(f"  prepared {label}: {prep[label]}")
        entries.append((ctx.workers[side], cid, label))
        pad_of[cid] = pad
    # Lengths of the warm-up's batch-1 texts: the widths they met (per padding) are not cold later.
    single_lengths = check_token_ids(ctx, paths, seq, "warm-up", singles, peers)
    agree_texts = streams["imdb"].take(64)
    check_token_ids(ctx, paths, seq, "imdb", agree_texts, peers)
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
           "prepare": prep, "peer_padding": args.peer_padding, "token_check": token_check}
    for d in datasets:
        tp_texts = [streams[d].take(args.throughput_texts) for _ in range(args.rounds)]
        lat_texts = [streams[d].take(per_round_lat) for _ in range(args.rounds)]
        check_token_ids(ctx, paths, seq, d, [t for r in tp_texts for t in r], peers)
        lengths = check_token_ids(ctx, paths, seq, d, [t for r in lat_texts for t in r], peers)
        round_lengths = [lengths[r * per_round_lat:(r + 1) * per_round_lat] for r in range(args.rounds)]
        ctx.log(f"serving {name} seq {seq} {d}: token ids equal on every side's tokenizer; batch 32, "
                f"{len(entries)} sides x {args.rounds} rounds")
        tp, tp_loads = interleave(entries, args.rounds,
                                  lambda cid, r: {"kind": "throughput", "texts": tp_texts[r], "batch": 32},
                                  ctx.probe, ctx.log, args.max_load)
        # Cold calls per padding: a width is new to a side if its warm-up and earlier calls never met it.
        cold = {pad: cold_calls(round_lengths, single_lengths, seq, pad) for pad in set(pad_of.values())}
        ctx.log(f"serving {name} seq {seq} {d}: batch 1, {per_round_lat} calls x {args.rounds} rounds "
                f"(first calls at a new width: " + ", ".join(
                    f"{sum(map(len, c))} padded {'to the longest row' if p == LONGEST else f'to {p}'}"
                    for p, c in sorted(cold.items())) + ")")
        lat, lat_loads = interleave(entries, args.rounds,
                                    lambda cid, r: {"kind": "latency", "texts": lat_texts[r],
                                                    "cold": cold[pad_of[cid]][r]},
                                    ctx.probe, ctx.log, args.max_load)
        rows = []
        for _, cid, label in entries:
            rows.append({
                "side": label,
                "pad_multiple": pad_of[cid],
                "rounds_texts_per_s": [r["texts"] / r["wall"] for r in tp[cid]],
                "throughput_cpu_per_wall": sum(r["cpu"] for r in tp[cid]) / sum(r["wall"] for r in tp[cid]),
                "latencies": [x for r in lat[cid] for x in r["latencies"]],
                "cold": [[first, repeat] for r in lat[cid] for _, first, repeat in r["cold"]],
                "rounds_p50": [_median(r["latencies"]) for r in lat[cid]],
                "latency_cpu_per_wall": sum(r["cpu"] for r in lat[cid]) / sum(r["wall"] for r in lat[cid])})
        out["datasets"][d] = {"rows": rows, "lengths": lengths, "throughput_loads": tp_loads,
                              "latency_loads": lat_loads}
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
            if json.loads(path.read_text()).get("schema") == SCHEMA:
                ctx.log(f"{kind} {name} {seq}: kept from {path}")
                done.append(path)
                continue
            ctx.log(f"{kind} {name} {seq}: {path} was measured by an earlier method; measuring again")
        t = time.time()
        result = (finetune_unit if kind == "finetune" else serving_unit)(ctx, name, paths[name], seq)
        result.update(schema=SCHEMA, date_utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)),
                      wall_s=round(time.time() - t), rounds=args.rounds, steps=args.steps, max_load=args.max_load)
        _save(path, result)
        ctx.log(f"{kind} {name} {seq}: written to {path} ({result['wall_s']} s)")
        done.append(path)
    return [json.loads(p.read_text()) for p in done]
