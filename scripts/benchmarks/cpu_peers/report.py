"""Markdown tables from the unit results: each of our rows against the best peer of its row, with
the verdict against its goal in `BARS` beside each ratio, and one line per export counting the
goals met and missed.

Goals: fine-tuning step >= 1.0x the best PyTorch row; SavedModel batch 32 >= 0.8x the best ONNX
Runtime fp32 row and >= 1.0x the best PyTorch row; batch-1 p50 <= 1.3x and p99 <= 2x the best
peer; a first call at a new width <= 3x a repeated call at that same width.

Best peer: fine-tuning, the faster of PyTorch eager and `torch.compile` (by median); serving in
fp32, the best of every PyTorch and ONNX Runtime fp32 row, each padded like ours or to the longest
row (whichever is faster counts); our bf16 opt-in against the best reduced-precision peer (ONNX
Runtime int8).

Ratios pair rounds: every side ran in every round (interleaved), so each round gives one ratio
(ours / that round's value of the best peer) and a table gives their median with the min-max over
rounds; a slow spell of the machine moves both sides of a round alike. Where the min-max crosses
the bar the verdict says so. The fine-tuning ratio's spread ((max - min) / median) is flagged
above `SPREAD_LIMIT`; on the measured CPU it came from whole rounds that ran slower, as large with
16 steps a sample as with 8, so more steps do not remove it. p99 is read from every warm call pooled (a round's 100 calls
make no p99); cold is each first call over the repeated call at its width (median, max), the
verdict on the median. A side's load time beyond loading the SavedModel (the XLA row whose warm-up
requests are replayed at load, as TF Serving does) has its own table: it is in no timed call.
"""

from __future__ import annotations

import statistics

from scripts.benchmarks.cpu_peers.traffic import percentile

BARS = {"finetune": 1.0, "batch32_ort": 0.8, "batch32_torch": 1.0, "p50": 1.3, "p99": 2.0, "cold": 3.0}
HIGHER_IS_BETTER = {"finetune": True, "batch32_ort": True, "batch32_torch": True, "p50": False, "p99": False,
                    "cold": False}
GOALS = {"finetune": "fine-tuning step >= 1.0x the best PyTorch",
         "batch32_ort": "batch 32 >= 0.8x the best ONNX Runtime",
         "batch32_torch": "batch 32 >= 1.0x the best PyTorch",
         "p50": "batch-1 p50 <= 1.3x the best peer",
         "p99": "batch-1 p99 <= 2x the best peer",
         "cold": "first call at a new width <= 3x a repeated call at that width"}
SPREAD_LIMIT = 0.05

# Our rows -> the export (or fine-tuning setting) whose goals they count towards.
EXPORTS = {"ours": "default", "ours, SavedModel": "default",
           "ours, frozen weights (opt-in)": "`--freeze_weights`",
           "ours, XLA": "`--jit_compile` (XLA)", "ours, XLA (opt-in)": "`--jit_compile` (XLA)",
           "ours, XLA + warm-up at load (opt-in)": "`--jit_compile` (XLA), warm-up requests replayed at load",
           "ours, bf16 (opt-in)": "bf16 (`--precision bf16`, against ONNX Runtime int8)"}


def met(goal, x):
    return x >= BARS[goal] if HIGHER_IS_BETTER[goal] else x <= BARS[goal]


def verdict(goal, x, lo=None, hi=None):
    """'met' / 'missed (bar ...)' for ratio x; notes when the min-max over rounds crosses the bar."""
    bar = BARS[goal]
    text = "**met**" if met(goal, x) else f"missed (bar {'>=' if HIGHER_IS_BETTER[goal] else '<='} {bar:g}x)"
    if lo is not None and hi is not None and lo < bar < hi:
        text += ", rounds cross the bar"
    return text


def paired(ours, peer):
    """Per-round ratios ours / peer of two sides' per-round values."""
    if len(ours) != len(peer):
        raise ValueError(f"{len(ours)} rounds against {len(peer)}: the sides were not run in the same rounds")
    return [a / b for a, b in zip(ours, peer)]


def summary(ratios):
    """(median, min, max, spread = (max - min) / median)."""
    m = statistics.median(ratios)
    return m, min(ratios), max(ratios), (max(ratios) - min(ratios)) / m


def _ratio(ratios):
    m, lo, hi, _ = summary(ratios)
    return f"{m:.2f}x ({lo:.2f}-{hi:.2f})"


def _spread(values, digits=1):
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


class Tally:
    """Goals met and missed per export, in the order first seen."""

    def __init__(self):
        self.counts = {}

    def add(self, side, goal, x):
        export = EXPORTS[side]
        counts = self.counts.setdefault(export, {})
        m, n = counts.get(goal, (0, 0))
        counts[goal] = (m + int(met(goal, x)), n + 1)

    def lines(self):
        out = []
        for export, counts in self.counts.items():
            met_n = sum(m for m, _ in counts.values())
            total = sum(n for _, n in counts.values())
            parts = "; ".join(f"{GOALS[g]}: {counts[g][0]} of {counts[g][1]}" for g in GOALS if g in counts)
            out.append(f"- {export}: {met_n} of {total} goals met, {total - met_n} missed ({parts})")
        return out


def _load_row(u, data, timing, loads):
    before = [r["load_before"][0] for r in loads]
    others = [r["others_cpu_share"] for r in loads if "others_cpu_share" in r]
    marked = sum(r["marked"] for r in loads)
    share = f"{min(others):.0%}-{max(others):.0%}" if others else "-"
    return (f"| {u['model']} | {u['seq']} | {data} | {timing} | {len(loads)} | {min(before):.1f}-{max(before):.1f} | "
            f"{share} | {'**' + str(marked) + '**' if marked else 0} |")


def _is_peer(side):
    return not side.startswith("ours")


def _reduced(side):
    return "bf16" in side or "int8" in side


def _best(rows, key, prefix):
    """The row (by median of `key` over rounds, highest) whose side starts with prefix, or None."""
    cands = [r for r in rows if r["side"].startswith(prefix)]
    return max(cands, key=lambda r: statistics.median(r[key]), default=None)


def finetune_table(units, tally):
    lines = ["| model | seq | side | examples/s (median; min-max over rounds) | CPU/wall | vs best PyTorch "
             "(paired rounds: median; min-max) | spread | verdict | padding |",
             "|---|---|---|---|---|---|---|---|---|"]
    for u in units:
        best = _best(u["rows"], "rounds_examples_per_s", "PyTorch")
        if best is None:
            raise ValueError(f"fine-tuning {u['model']} {u['seq']}: no PyTorch row to compare with")
        for r in u["rows"]:
            ratios = paired(r["rounds_examples_per_s"], best["rounds_examples_per_s"])
            m, lo, hi, spread = summary(ratios)
            ours = r["side"] in EXPORTS
            flag = f" (over {SPREAD_LIMIT:.0%})" if ours and spread > SPREAD_LIMIT else ""
            if ours:
                tally.add(r["side"], "finetune", m)
            lines.append(f"| {u['model']} | {u['seq']} | {r['side']} | "
                         f"{statistics.median(r['rounds_examples_per_s']):.2f} ({_spread(r['rounds_examples_per_s'], 2)}) "
                         f"| {r['cpu_per_wall']:.2f} | {_ratio(ratios)} | {spread:.1%}{flag} | "
                         f"{verdict('finetune', m, lo, hi) if ours else '-'} | {r['padded_share']:.0%} |")
    return "\n".join(lines)


def _throughput_rows(u, d, rows, tally):
    out = []
    best_torch = _best(rows, "rounds_texts_per_s", "PyTorch")
    best_ort = _best(rows, "rounds_texts_per_s", "ONNX Runtime fp32")
    best_int8 = _best(rows, "rounds_texts_per_s", "ONNX Runtime int8")
    for r in rows:
        s, tps = r["side"], r["rounds_texts_per_s"]
        cells = []
        for goal, peer in (("batch32_torch", best_torch), ("batch32_ort", best_ort), (None, best_int8)):
            if peer is None:
                cells.append("-")
                continue
            ratios = paired(tps, peer["rounds_texts_per_s"])
            cell = _ratio(ratios)
            if goal and s in EXPORTS and not _reduced(s):
                m, lo, hi, _ = summary(ratios)
                cell += " " + verdict(goal, m, lo, hi)
                tally.add(s, goal, m)
            cells.append(cell)
        out.append(f"| {u['model']} | {u['seq']} | {d} | {s} | {statistics.median(tps):.1f} ({_spread(tps)}) | "
                   f"{r['throughput_cpu_per_wall']:.2f} | " + " | ".join(cells) + " |")
    return out


def _latency_rows(u, d, rows, tally):
    out = []
    stats = {}
    for r in rows:
        calls = [1000 * x for x in r["latencies"]]
        stats[r["side"]] = {"p50": percentile(calls, 50), "p99": percentile(calls, 99),
                            "p999": percentile(calls, 99.9), "n": len(calls), "rounds": r["rounds_p50"],
                            "cold": [(1000 * a, 1000 * b) for a, b in r.get("cold", [])]}
    for r in rows:
        s, st = r["side"], stats[r["side"]]
        peers = {k: v for k, v in stats.items() if _is_peer(k) and _reduced(k) == _reduced(s)}
        scored = s in EXPORTS
        if peers:
            p50_peer = min(peers.values(), key=lambda p: p["p50"])
            p50_ratios = paired(st["rounds"], p50_peer["rounds"])
            m50, lo, hi, _ = summary(p50_ratios)
            r50 = _ratio(p50_ratios) + (" " + verdict("p50", m50, lo, hi) if scored else "")
            r99v = st["p99"] / min(p["p99"] for p in peers.values())
            r99 = f"{r99v:.2f}x" + (" " + verdict("p99", r99v) if scored else "")
            if scored:
                tally.add(s, "p50", m50)
                tally.add(s, "p99", r99v)
        else:
            r50 = r99 = "-"
        if st["cold"]:
            firsts = [a for a, _ in st["cold"]]
            repeats = [b for _, b in st["cold"]]
            ratios = [a / b for a, b in st["cold"]]
            cold_ms = (f"{statistics.median(firsts):.0f} / {statistics.median(repeats):.0f}, "
                       f"max {max(firsts):.0f}; {len(firsts)}")
            mc = statistics.median(ratios)
            rc = f"{mc:.2f}x, max {max(ratios):.2f}x" + (" " + verdict("cold", mc) if scored else "")
            if scored:
                tally.add(s, "cold", mc)
        else:
            cold_ms, rc = "none", "-"
        out.append(f"| {u['model']} | {u['seq']} | {d} | {s} | {st['n']} | {st['p50']:.1f} "
                   f"({_spread([1000 * x for x in st['rounds']])}) | {st['p99']:.1f} | {st['p999']:.1f} | {cold_ms} | "
                   f"{r50} | {r99} | {rc} |")
    return out


def serving_tables(units, tally):
    tp = ["| model | seq | data | side | texts/s, batch 32 (median; min-max) | CPU/wall | vs best PyTorch "
          "(paired rounds) | vs best ONNX Runtime fp32 (paired rounds) | vs best ONNX Runtime int8 |",
          "|---|---|---|---|---|---|---|---|---|"]
    lat = ["| model | seq | data | side | warm calls | p50 ms (rounds' p50 min-max) | p99 ms | p99.9 ms | "
           "cold: first / repeated call ms (medians, max first; n) | p50 vs best peer (paired rounds) | "
           "p99 vs best peer | cold: first / repeated call at that width (median, max) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    loads = []
    for u in units:
        for d, block in u["datasets"].items():
            tp += _throughput_rows(u, d, block["rows"], tally)
            lat += _latency_rows(u, d, block["rows"], tally)
            for timing, key in (("batch 32", "throughput_loads"), ("batch 1", "latency_loads")):
                loads.append(_load_row(u, d, timing, block[key]))
    return "\n".join(tp), "\n".join(lat), loads


def agreement_table(units):
    lines = ["| model | seq | side | max abs logit difference to our SavedModel | same label |", "|---|---|---|---|---|"]
    for u in units:
        for a in u["agreement"]:
            lines.append(f"| {u['model']} | {u['seq']} | {a['side']} | {a['max_abs_logit_diff']:.2g} | "
                         f"{a['same_label']}/{a['of']} |")
    return "\n".join(lines)


def load_table(units):
    """Seconds a side spent at load beyond `tf.saved_model.load` (the XLA row's warm-up requests replayed, as
    TF Serving runs them before it serves), which no timed call includes; None if no side did."""
    lines = ["| model | seq | side | warm-up requests replayed | load time s |", "|---|---|---|---|---|"]
    for u in units:
        for side, prep in u.get("prepare", {}).items():
            if "load_s" in prep:
                lines.append(f"| {u['model']} | {u['seq']} | {side} | {prep['warmup_requests']} | "
                             f"{prep['load_s']:.1f} |")
    return "\n".join(lines) if len(lines) > 2 else None


def report(meta, units):
    ft = [u for u in units if u["kind"] == "finetune"]
    sv = [u for u in units if u["kind"] == "serving"]
    tally = Tally()
    out = [f"Machine: {meta['machine']}; versions: {meta['versions']}; {meta.get('threads', 2)} thread(s) per side; "
           f"rounds above a 1-minute load of {meta['max_load']} are marked (the benchmark's own busy threads "
           f"count about 2)."]
    for u in units:
        steps = (f", {u['steps']} step{'s' if u['steps'] != 1 else ''} per round"
                 if u["kind"] == "finetune" and "steps" in u else "")
        left = "; ".join(f"{d}: {c['left_out']} of {c['texts']} texts left out of the pool, their token ids differing"
                         + (f" (first: {c['first_difference']})" if c["first_difference"] else "")
                         for d, c in u.get("token_check", {}).items())
        out.append(f"- {u['kind']} {u['model']} {u['seq']}: measured {u['date_utc']}, {u['wall_s']} s{steps}"
                   + (f"; {left}" if left else ""))
    load_rows = []
    body = []
    if ft:
        body += ["", "### Fine-tuning step, batch 32, IMDB", "", finetune_table(ft, tally)]
        load_rows = [_load_row(u, "imdb", "fine-tuning", u["loads"]) for u in ft]
    if sv:
        tp, lat, loads = serving_tables(sv, tally)
        body += ["", "### Serving at batch 32, raw strings to labels", "", tp,
                 "", "### Serving at batch 1 (warm calls; cold: the first call at a width the side had not served, "
                 "over the same text sent again)", "", lat, "", "### Agreement (64 IMDB reviews)", "",
                 agreement_table(sv)]
        loading = load_table(sv)
        if loading:
            body += ["", "### Load time (warm-up requests replayed before the first call; in no timed call)", "",
                     loading]
        load_rows += loads
    out += ["", "### Goals met and missed, per export", ""] + tally.lines() + body
    out += ["", f"### Rounds and load (marked: the 1-minute load average above {meta['max_load']} before the round)",
            "", "| model | seq | data | timing | rounds | load before a round | others' CPU share | marked |",
            "|---|---|---|---|---|---|---|---|"] + load_rows
    return "\n".join(out) + "\n"
