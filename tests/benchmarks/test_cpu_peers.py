"""The CPU benchmark's bookkeeping (scripts/benchmarks/cpu_peers), without models or peers: which
batch-1 calls are cold, the token-id check, the latency round's cold / repeated calls, the
serving rows, the paired-round ratios with their verdicts and goal counts, and the peers' pins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scripts.benchmarks.cpu_peers import cases, report
from scripts.benchmarks.cpu_peers.timing import interleave, run_case, warm_up_finetuning
from scripts.benchmarks.cpu_peers.traffic import LONGEST, TextStream, cold_calls, first_id_mismatch

REPO = Path(__file__).resolve().parents[2]


def test_cold_calls_per_padding():
    rounds = [[20, 30, 18], [40, 35, 128]]
    # Padded to 16: the warm-up met width 32 (length 20); 48 first in round 2, 128 next.
    assert cold_calls(rounds, [20], 128, 16) == [[], [0, 2]]
    # Padded to the longest row every new length is a new width.
    assert cold_calls(rounds, [20], 128, LONGEST) == [[1, 2], [0, 1, 2]]
    # Capped at the maximum length: 200 pieces are served at 128, already met.
    assert cold_calls([[200]], [128], 128, LONGEST) == [[]]


def test_first_id_mismatch():
    assert first_id_mismatch([[101, 7, 102], [101, 102]], [[101, 7, 102], [101, 102]]) is None
    assert first_id_mismatch([[101, 7, 102]], [[101, 8, 102]]) == (0, 1, 7, 8)
    assert first_id_mismatch([[1], [101, 7]], [[1], [101, 7, 102]]) == (1, 2, None, 102)
    with pytest.raises(ValueError, match="2 texts against 1"):
        first_id_mismatch([[1], [2]], [[1]])


def test_pool_keeps_only_agreeing_texts():
    stream = TextStream.__new__(TextStream)
    stream.dataset, stream.texts, stream.next = "sst2", ["a", "b", "c"], 0
    stream.keep_only([True, False, True])
    assert stream.take(2) == ["a", "c"]
    with pytest.raises(RuntimeError, match="before any text"):
        stream.keep_only([True])


def test_latency_round_keeps_cold_calls_apart():
    sent = []
    state = {"call": lambda texts: sent.append(texts[0])}
    out = run_case(state, {"kind": "latency", "texts": ["a", "b", "c"], "cold": [1]})
    assert sent == ["a", "b", "b", "c"]  # the cold text is sent again at once: same width
    assert len(out["latencies"]) == 2  # neither the cold call nor its repeat is a warm call
    assert [c[0] for c in out["cold"]] == [1] and len(out["cold"][0]) == 3


def test_finetuning_warm_up_meets_each_width_once_then_runs_the_same_steps_on_every_side():
    trained = []
    state = {"next": 0}

    def step():
        trained.append(state["next"])
        state["next"] += 1

    state = warm_up_finetuning(state, [128, 128, 96, 128, 96, 64], step, steps=3)
    # The first batch of each width (0, 2, 5), each followed by the warm-up's own steps from there on.
    assert trained == [0, 2, 5, 6, 7, 8]
    assert state["widths"] == [64, 96, 128] and state["warmup_steps"] == 3 and state["step"] is step
    assert state["warmup_s"] >= 0 and set(state["report"]) == {"warmup_s", "widths", "warmup_steps"}


def test_a_settling_round_runs_every_case_once_untimed_before_the_rounds():
    sent = []

    class Worker:
        def send(self, cmd, id, what):
            sent.append((id, what["round"]))
            return {"round": what["round"]}

    class Probe:
        def start(self):
            pass

        def stop(self):
            return {"load_before": [1.0], "load_after": [1.0], "others_cpu_share": 0.0}

    entries = [(Worker(), "a", "A"), (Worker(), "b", "B")]
    results, loads = interleave(entries, 2, lambda cid, r: {"round": r}, Probe(), lambda msg: None, 3.0,
                                settling_round=True)
    # The untimed round (round 0's parameters) first; its results are in no case's list.
    assert sent == [("a", 0), ("b", 0), ("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    assert results == {"a": [{"round": 0}, {"round": 1}], "b": [{"round": 0}, {"round": 1}]} and len(loads) == 2


def test_serve_sides_pad_peers_both_ways():
    sides = cases.serve_sides("both")
    labels = [label for _, _, label, _ in sides]
    assert "PyTorch compile, frozen" in labels and "PyTorch compile, frozen, pad longest" in labels
    assert all(pad == 16 for side, _, _, pad in sides if side == "ours")
    assert sum(pad == LONGEST for *_, pad in sides) == sum(side != "ours" for side, *_ in cases.SERVE_SIDES)
    only16 = cases.serve_sides("16", skip=["PyTorch eager"])
    assert not any(pad == LONGEST for *_, pad in only16) and "PyTorch eager" not in [s[2] for s in only16]


def test_our_opt_in_rows_and_skipping_them():
    labels = [label for _, _, label, _ in cases.serve_sides("both")]
    ours = {"ours, frozen weights (opt-in)", "ours, XLA (opt-in)", "ours, XLA + warm-up at load (opt-in)"}
    assert ours <= set(labels)
    # Labels hold commas, so --skip_sides separates them with ';'.
    skip = cases.skip_labels(" ours, XLA + warm-up at load (opt-in); ours, frozen weights (opt-in);")
    assert skip == ["ours, XLA + warm-up at load (opt-in)", "ours, frozen weights (opt-in)"]
    left = [label for _, _, label, _ in cases.serve_sides("both", skip)]
    assert "ours, XLA (opt-in)" in left and not set(skip) & set(left)
    assert cases.skip_labels("") == []
    with pytest.raises(ValueError, match=re.escape("is labelled 'ours, XLA (opt-in),PyTorch eager'")):
        cases.skip_labels("ours, XLA (opt-in),PyTorch eager")  # commas do not separate labels


def _ft_unit():
    return {"kind": "finetune", "model": "small", "seq": 128, "steps": 4, "date_utc": "d", "wall_s": 1,
            "loads": [{"load_before": [2.0], "marked": False}],
            "rows": [{"side": "ours", "rounds_examples_per_s": [5.0, 5.2, 6.0], "cpu_per_wall": 1.9, "padded_share": 0.05},
                     {"side": "ours, XLA", "rounds_examples_per_s": [6.0, 6.3, 6.6], "cpu_per_wall": 1.9,
                      "padded_share": 0.05},
                     {"side": "PyTorch eager, fused AdamW", "rounds_examples_per_s": [5.5, 5.6, 6.0],
                      "cpu_per_wall": 1.9, "padded_share": 0.05},
                     {"side": "PyTorch compile, fused AdamW", "rounds_examples_per_s": [5.0, 5.0, 5.0],
                      "cpu_per_wall": 1.9, "padded_share": 0.05}]}


def _row(side, tps, p50s, cold=()):
    calls = [p for p in p50s for _ in range(3)]
    return {"side": side, "rounds_texts_per_s": tps, "throughput_cpu_per_wall": 2.0, "latencies": calls,
            "rounds_p50": list(p50s), "cold": [list(c) for c in cold], "latency_cpu_per_wall": 1.0}


def _serving_unit():
    rows = [_row("ours, SavedModel", [8.0, 8.0], [0.080, 0.080], [(0.050, 0.040)]),
            _row("ours, frozen weights (opt-in)", [8.0, 8.0], [0.070, 0.070], [(0.050, 0.040)]),
            _row("ours, XLA (opt-in)", [10.0, 10.0], [0.050, 0.050], [(2.0, 0.050)]),
            _row("ours, XLA + warm-up at load (opt-in)", [10.0, 10.0], [0.050, 0.050], [(0.051, 0.050)]),
            _row("PyTorch compile", [10.0, 10.0], [0.060, 0.060]),
            _row("PyTorch compile, pad longest", [9.0, 9.0], [0.058, 0.058]),
            _row("ONNX Runtime fp32, fused Attention", [9.5, 9.5], [0.045, 0.045]),
            _row("ONNX Runtime fp32, fused Attention, pad longest", [10.5, 10.5], [0.040, 0.040]),
            _row("ours, bf16 (opt-in)", [6.0, 6.0], [0.100, 0.100]),
            _row("ONNX Runtime int8", [10.0, 10.0], [0.045, 0.045])]
    loads = [{"load_before": [2.0], "marked": False}]
    return {"kind": "serving", "model": "small", "seq": 128, "date_utc": "d", "wall_s": 1, "agreement": [],
            "token_check": {"imdb": {"texts": 100, "left_out": 1, "first_difference": "'8 ½'...: piece 5"}},
            "prepare": {"ours, SavedModel": {"prepare_s": 3.0, "warmup_s": 2.0},
                        "ours, XLA + warm-up at load (opt-in)": {"prepare_s": 140.0, "warmup_s": 2.0,
                                                                 "load_s": 133.4, "warmup_requests": 48}},
            "datasets": {"imdb": {"rows": rows, "throughput_loads": loads, "latency_loads": loads}}}


def test_paired_ratios_and_spread():
    assert report.paired([2.0, 3.0], [1.0, 3.0]) == [2.0, 1.0]
    m, lo, hi, spread = report.summary([0.9, 1.0, 1.1])
    assert (m, lo, hi) == (1.0, 0.9, 1.1) and spread == pytest.approx(0.2)
    with pytest.raises(ValueError, match="same rounds"):
        report.paired([1.0], [1.0, 2.0])


def test_verdicts_and_cold_bar():
    assert report.BARS["cold"] == 3.0
    assert report.verdict("finetune", 1.02) == "**met**"
    assert report.verdict("p50", 1.5).startswith("missed (bar <= 1.3x")
    assert report.verdict("finetune", 0.98, 0.95, 1.03).endswith("rounds cross the bar")


def test_report_counts_goals_per_export():
    meta = {"machine": {}, "versions": {}, "max_load": 3.0, "threads": 2}
    text = report.report(meta, [_ft_unit(), _serving_unit()])
    # Fine-tuning against the faster PyTorch row (eager), round by round: 5.0/5.5, 5.2/5.6, 6.0/6.0.
    assert "0.93x (0.91-1.00)" in text
    # The peer padded to the longest row is the faster ONNX Runtime row, so it is the one compared with.
    assert "| ours, SavedModel | 8.0 (8.0-8.0) | 2.00 | 0.80x (0.80-0.80) missed (bar >= 1x) | 0.76x (0.76-0.76) " \
           "missed (bar >= 0.8x) |" in text
    lines = [line for line in text.splitlines() if "goals met" in line]
    assert len(lines) == 5
    default = next(line for line in lines if line.startswith("- default"))
    # met: cold (1.25x); missed: fine-tuning, both batch-32 goals, p50 (2.0x), p99 (2.0x is met: <= 2x).
    assert "2 of 6 goals met, 4 missed" in default
    assert "first call at a new width <= 3x a repeated call at that width: 1 of 1" in default
    xla = next(line for line in lines if "XLA" in line)
    assert "first call at a new width <= 3x a repeated call at that width: 0 of 1" in xla
    assert re.search(r"\| \d+\.\d% \(over 5%\) \|", text)  # ours' rounds spread over 5%
    assert "imdb: 1 of 100 texts left out of the pool" in text
    # The warm-up replayed at load: its own goals (its first call at a new width is no compile) and load time.
    warm = next(line for line in lines if "replayed at load" in line)
    assert "first call at a new width <= 3x a repeated call at that width: 1 of 1" in warm
    assert "| small | 128 | ours, XLA + warm-up at load (opt-in) | 48 | 133.4 |" in text
    assert sum("| ours, SavedModel |" in line for line in text.split("### Load time")[1].splitlines()) == 0
    assert any(line.startswith("- `--freeze_weights`: ") for line in lines)


def test_peer_pins_are_exact_and_agree():
    script = (REPO / "scripts" / "benchmarks" / "setup_cpu_peers.sh").read_text()
    pins = dict(re.findall(r'"([a-z]+)==([\w.+]+)"', script))
    want = dict(re.findall(r'"([a-z]+)": "([\w.+]+)"', script))
    assert pins["torch"] == "2.13.0+cpu"  # the CPU build, never PyPI's CUDA one
    assert {"transformers", "onnxruntime", "onnx", "tokenizers"} <= set(pins)
    assert pins == want
