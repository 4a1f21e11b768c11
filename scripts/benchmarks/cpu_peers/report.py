"""Markdown tables from the unit results: each of our rows against the best peer of its row, the
spread over rounds, CPU / wall, the load, and each ratio read against its level in `BARS`
(fine-tuning >= 1.0x the best PyTorch; batch 32 >= 0.8x ONNX Runtime fp32 and >= 1.0x the best
PyTorch; batch-1 p50 <= 1.3x and p99 <= 2x the best peer; a cold call <= 5x our own p50).

Best peer: fine-tuning, the faster of PyTorch eager and `torch.compile`; serving in fp32, the
best of PyTorch eager, `torch.compile` and ONNX Runtime fp32 (batch 32 is also quoted against
ONNX Runtime fp32 alone, as the bar asks); our bf16 opt-in against the best reduced-precision
peer (ONNX Runtime int8).
"""

from __future__ import annotations

import statistics

from scripts.benchmarks.cpu_peers.traffic import percentile

BARS = {"finetune": 1.0, "batch32_ort": 0.8, "batch32_torch": 1.0, "p50": 1.3, "p99": 2.0, "cold": 5.0}


def _fmt_ratio(x, bar, higher_is_better=True):
    ok = x >= bar if higher_is_better else x <= bar
    return f"**{x:.2f}x**" if ok else f"{x:.2f}x (bar {bar:g}x: {'short' if higher_is_better else 'over'} by {abs(x / bar - 1):.0%})"


def _spread(values, digits=1):
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def _load_row(u, data, timing, loads):
    before = [r["load_before"][0] for r in loads]
    others = [r["others_cpu_share"] for r in loads if "others_cpu_share" in r]
    marked = sum(r["marked"] for r in loads)
    share = f"{min(others):.0%}-{max(others):.0%}" if others else "-"
    return (f"| {u['model']} | {u['seq']} | {data} | {timing} | {len(loads)} | {min(before):.1f}-{max(before):.1f} | "
            f"{share} | {'**' + str(marked) + '**' if marked else 0} |")


def finetune_table(units):
    lines = ["| model | seq | side | examples/s (median; min-max over rounds) | CPU/wall | vs best PyTorch | "
             "padding |", "|---|---|---|---|---|---|---|"]
    for u in units:
        med = {r["side"]: statistics.median(r["rounds_examples_per_s"]) for r in u["rows"]}
        best = max(v for k, v in med.items() if k.startswith("PyTorch"))
        for r in u["rows"]:
            m = med[r["side"]]
            ratio = _fmt_ratio(m / best, BARS["finetune"]) if r["side"].startswith("ours") else f"{m / best:.2f}x"
            lines.append(f"| {u['model']} | {u['seq']} | {r['side']} | {m:.2f} ({_spread(r['rounds_examples_per_s'], 2)}) "
                         f"| {r['cpu_per_wall']:.2f} | {ratio} | {r['padded_share']:.0%} |")
    return "\n".join(lines)


def _is_peer(side):
    return not side.startswith("ours")


def _reduced(side):
    return "bf16" in side or "int8" in side


def serving_tables(units):
    tp = ["| model | seq | data | side | texts/s, batch 32 (median; min-max) | CPU/wall | vs best PyTorch | "
          "vs ONNX Runtime fp32 | vs ONNX Runtime int8 |", "|---|---|---|---|---|---|---|---|---|"]
    lat = ["| model | seq | data | side | calls | p50 ms (rounds' p50 min-max) | p99 ms | p99.9 ms | cold ms "
           "(median, max; n) | p50 vs best peer | p99 vs best peer | cold / our p50 |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    loads = ["| model | seq | data | timing | rounds | load before a round | others' CPU share | marked |",
             "|---|---|---|---|---|---|---|---|"]
    for u in units:
        for d, block in u["datasets"].items():
            rows = block["rows"]
            tps = {r["side"]: statistics.median(r["rounds_texts_per_s"]) for r in rows}
            best_torch = max((v for k, v in tps.items() if k.startswith("PyTorch")), default=float("nan"))
            ort = next((v for k, v in tps.items() if k.startswith("ONNX Runtime fp32")), float("nan"))
            int8 = next((v for k, v in tps.items() if k.startswith("ONNX Runtime int8")), float("nan"))
            for r in rows:
                s, m = r["side"], tps[r["side"]]
                if s.startswith("ours") and not _reduced(s):
                    vs_t, vs_o = _fmt_ratio(m / best_torch, BARS["batch32_torch"]), _fmt_ratio(m / ort, BARS["batch32_ort"])
                else:
                    vs_t, vs_o = f"{m / best_torch:.2f}x", f"{m / ort:.2f}x"
                tp.append(f"| {u['model']} | {u['seq']} | {d} | {s} | {m:.1f} ({_spread(r['rounds_texts_per_s'])}) | "
                          f"{r['throughput_cpu_per_wall']:.2f} | {vs_t} | {vs_o} | {m / int8:.2f}x |")
            for timing, key in (("batch 32", "throughput_loads"), ("batch 1", "latency_loads")):
                loads.append(_load_row(u, d, timing, block[key]))
            stats = {}
            for r in rows:
                calls = [1000 * x for x in r["latencies"]]
                cold = [calls[i] for i in block["cold_calls"]]
                stats[r["side"]] = {"p50": percentile(calls, 50), "p99": percentile(calls, 99),
                                    "p999": percentile(calls, 99.9), "n": len(calls), "cold": cold,
                                    "rounds": [1000 * x for x in r["rounds_p50"]]}
            ours_p50 = stats.get("ours, SavedModel", {}).get("p50", float("nan"))
            for r in rows:
                s, st = r["side"], stats[r["side"]]
                peers = [v for k, v in stats.items() if _is_peer(k) and _reduced(k) == _reduced(s)]
                bp50, bp99 = min(p["p50"] for p in peers), min(p["p99"] for p in peers)
                cold = (f"{statistics.median(st['cold']):.0f}, {max(st['cold']):.0f}; {len(st['cold'])}"
                        if st["cold"] else "none")
                own_p50 = ours_p50 if s.startswith("ours, SavedModel") else st["p50"]
                cold_ratio = statistics.median(st["cold"]) / own_p50 if st["cold"] else float("nan")
                if s.startswith("ours"):
                    r50, r99 = _fmt_ratio(st["p50"] / bp50, BARS["p50"], False), _fmt_ratio(st["p99"] / bp99, BARS["p99"], False)
                    rc = _fmt_ratio(cold_ratio, BARS["cold"], False) if st["cold"] else "-"
                else:
                    r50, r99, rc = f"{st['p50'] / bp50:.2f}x", f"{st['p99'] / bp99:.2f}x", (
                        f"{cold_ratio:.2f}x" if st["cold"] else "-")
                lat.append(f"| {u['model']} | {u['seq']} | {d} | {s} | {st['n']} | {st['p50']:.1f} "
                           f"({_spread(st['rounds'])}) | {st['p99']:.1f} | {st['p999']:.1f} | {cold} | {r50} | {r99} | "
                           f"{rc} |")
    return "\n".join(tp), "\n".join(lat), "\n".join(loads)


def agreement_table(units):
    lines = ["| model | seq | side | max abs logit difference to our SavedModel | same label |", "|---|---|---|---|---|"]
    for u in units:
        for a in u["agreement"]:
            lines.append(f"| {u['model']} | {u['seq']} | {a['side']} | {a['max_abs_logit_diff']:.2g} | "
                         f"{a['same_label']}/{a['of']} |")
    return "\n".join(lines)


def report(meta, units):
    ft = [u for u in units if u["kind"] == "finetune"]
    sv = [u for u in units if u["kind"] == "serving"]
    out = [f"Machine: {meta['machine']}; versions: {meta['versions']}; 2 threads per side; "
           f"rounds above a 1-minute load of {meta['max_load']} are marked (the benchmark's own busy threads "
           f"count about 2)."]
    for u in units:
        out.append(f"- {u['kind']} {u['model']} {u['seq']}: measured {u['date_utc']}, {u['wall_s']} s")
    load_rows = []
    if ft:
        out += ["", "### Fine-tuning step, batch 32, IMDB", "", finetune_table(ft)]
        load_rows = [_load_row(u, "imdb", "fine-tuning", u["loads"]) for u in ft]
    if sv:
        tp, lat, loads = serving_tables(sv)
        out += ["", "### Serving at batch 32, raw strings to labels", "", tp,
                "", "### Serving at batch 1 (every call; cold: the first call at a width the server had not seen)",
                "", lat, "", "### Agreement (64 IMDB reviews)", "", agreement_table(sv)]
        load_rows += loads.splitlines()[2:]
    out += ["", f"### Rounds and load (marked: the 1-minute load average above {meta['max_load']} before the round)",
            "", "| model | seq | data | timing | rounds | load before a round | others' CPU share | marked |",
            "|---|---|---|---|---|---|---|---|"] + load_rows
    return "\n".join(out) + "\n"
