"""How every figure is timed: worker processes, interleaved rounds, CPU time / wall, load.

- Each side is a long-lived worker process (ours in the project's venv, PyTorch and ONNX Runtime
  each in its own process of the peers' venv) spoken to in JSON lines. A side's case is prepared
  (built, warmed up) once, then run once per round.
- Rounds interleave the cases: every case of a row runs once per round, the order reversed every
  other round, so that a slow spell of the machine hits every side alike.
- Per round and case: wall seconds and the worker's CPU seconds over the timed calls
  (`time.process_time`, all its threads: CPU / wall shows how many cores a side really kept busy),
  the 1-minute load average before and after the round (`os.getloadavg`, which counts the
  benchmark's own busy threads: about 2 on 2 cores), and the CPU share other processes took from
  the machine during the round (/proc/stat minus the benchmark's own processes). A round whose
  load average before it exceeds `--max_load` is marked in the tables.
- Batch-1 rounds: a call at a padded width the side has not served at batch 1 yet (the driver
  says which, per side: widths depend on the side's padding) is cold. It is timed, then the same
  text is sent again and that repeated call timed too: cold = first / repeated call at the SAME
  width. Both stay out of the warm calls that p50 / p99 are read from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from scripts.benchmarks.cpu_peers.traffic import ROOT

# Threads per side (intra-op; inter-op 1). The driver's --threads reaches the workers through this
# variable, read at import, before any side builds its runtime.
THREADS = int(os.environ.get("CPU_PEERS_THREADS", "2"))
SIDES = {"ours": "scripts.benchmarks.cpu_peers.ours:Ours",
         "torch": "scripts.benchmarks.cpu_peers.peers_torch:TorchSide",
         "ort": "scripts.benchmarks.cpu_peers.peers_ort:OrtSide"}


# ---------------------------------------------------------------- inside a worker
def run_case(state, what):
    """One timed round of a prepared case: wall and CPU seconds of its calls.

    state["step"]() runs one fine-tuning step (loss read back); state["call"](texts) serves a
    batch of raw strings and returns labels (tokenizer included)."""
    kind = what["kind"]
    if kind == "ft":
        walls, tokens = [], [0, 0]
        cpu0 = time.process_time()
        for _ in range(what["steps"]):
            t = time.perf_counter()
            real, padded = state["step"]()
            walls.append(time.perf_counter() - t)
            tokens[0] += real
            tokens[1] += padded
        return {"walls": walls, "cpu": time.process_time() - cpu0, "real_tokens": tokens[0],
                "padded_tokens": tokens[1], "examples": state["batch"] * len(walls)}
    texts = what["texts"]
    if kind == "throughput":
        cpu0, t = time.process_time(), time.perf_counter()
        for start in range(0, len(texts), what["batch"]):
            state["call"](texts[start:start + what["batch"]])
        return {"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu0, "texts": len(texts)}
    if kind == "latency":
        lat, cold, first_at = [], [], set(what.get("cold", ()))
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i, text in enumerate(texts):
            t = time.perf_counter()
            state["call"]([text])
            took = time.perf_counter() - t
            if i in first_at:
                # The same text again: the repeated call at this width, which the cold call is read against.
                t = time.perf_counter()
                state["call"]([text])
                cold.append([i, took, time.perf_counter() - t])
            else:
                lat.append(took)
        return {"latencies": lat, "cold": cold, "wall": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}
    if kind == "logits":
        rows = []
        for start in range(0, len(texts), what["batch"]):
            rows.extend(state["logits"](texts[start:start + what["batch"]]).tolist())
        return {"logits": rows}
    raise ValueError(kind)


def warm_up(state, case):
    """The same warm-up on every side: a few batches of 32 and single texts (traces, compiles,
    caches), from texts that are never timed."""
    t0 = time.perf_counter()
    texts = case["warmup_texts"]
    for start in range(0, len(texts), case["batch"]):
        state["call"](texts[start:start + case["batch"]])
    for text in texts[:case["warmup_singles"]]:
        state["call"]([text])
    state["warmup_s"] = time.perf_counter() - t0
    state["report"] = ("warmup_s",)
    return state


FT_WARMUP_STEPS = 2  # more did not help the first timed round (2 or 8: the same ~4 s; see `interleave`'s settling round)


def warm_up_finetuning(state, widths, step, steps=FT_WARMUP_STEPS):
    """The same fine-tuning warm-up on every side: one step at each distinct batch width (traces,
    compiles), then `steps` more. What a worker pays after sitting idle is the settling round's
    business (`interleave`), not this warm-up's.

    `widths`: each batch's width, in order; `step()` trains on batch `state["next"]` and moves it on."""
    t0, seen = time.perf_counter(), set()
    for i, width in enumerate(widths):
        if width not in seen:
            seen.add(width)
            state["next"] = i
            step()
    for _ in range(steps):
        step()
    state.update(step=step, warmup_s=time.perf_counter() - t0, widths=sorted(seen), warmup_steps=steps,
                 report=("warmup_s", "widths", "warmup_steps"))
    return state


def _side_class(side):
    import importlib

    module, name = SIDES[side].split(":")
    return getattr(importlib.import_module(module), name)


def worker_main(side: str, work: str) -> int:
    """JSON lines on stdin -> JSON lines on stdout; library output goes to stderr (the log)."""
    out = sys.stdout
    sys.stdout = sys.stderr  # library prints must not corrupt the protocol
    impl = _side_class(side)(Path(work))
    out.write(json.dumps({"ready": True, "versions": impl.versions(), "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.pop("cmd")
        try:
            if cmd == "quit":
                import resource

                reply = {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
            elif cmd == "call":
                reply = {"result": getattr(impl, msg["method"])(*msg.get("args", []))}
            elif cmd == "prepare":
                t = time.perf_counter()
                state = impl.prepare(msg["case"])
                impl.cases[msg["case"]["id"]] = state
                reply = {"prepare_s": time.perf_counter() - t,
                         **{k: state[k] for k in state.get("report", ())}}
            elif cmd == "drop":
                impl.cases.pop(msg["id"], None)
                import gc

                gc.collect()
                reply = {"dropped": msg["id"]}
            elif cmd == "run":
                reply = run_case(impl.cases[msg["id"]], msg["what"])
            else:
                reply = {"error": f"unknown command {cmd}"}
        except Exception as e:  # noqa: BLE001  (reported to the driver, which stops)
            traceback.print_exc()
            reply = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if cmd == "quit":
            return 0
    return 0


# ---------------------------------------------------------------- in the driver
class Worker:
    """A side's worker process (`python -m scripts.benchmarks.cpu_peers.timing SIDE WORK`)."""

    def __init__(self, side, python, work, log, threads=THREADS):
        # Inductor's compile workers are held to the same thread count (compiles are not timed, but a
        # smoke run with --threads 1 should not take more of a shared machine than it asked for).
        env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), CPU_PEERS_THREADS=str(threads),
                   TORCHINDUCTOR_COMPILE_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
        self.side = side
        self.proc = subprocess.Popen([python, "-m", "scripts.benchmarks.cpu_peers.timing", side, str(work)],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True)
        self.info = self._read()
        self.pid = self.info["pid"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.side} worker died; see {self.side}.log in the work directory")
        return json.loads(line)

    def send(self, **msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(f"{self.side} worker, {msg.get('cmd')} {msg.get('id') or msg.get('method') or ''}: "
                               f"{reply['error']}")
        return reply

    def call(self, method, *args):
        return self.send(cmd="call", method=method, args=list(args))["result"]

    def close(self):
        try:
            reply = self.send(cmd="quit")
        except (RuntimeError, BrokenPipeError):
            reply = {}
        self.proc.wait(timeout=120)
        return reply


def load():
    return [round(x, 2) for x in os.getloadavg()]


def _busy_jiffies():
    """Machine-wide busy CPU time (jiffies) from /proc/stat; None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle


def _own_jiffies(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            total += int(parts[11]) + int(parts[12])  # utime, stime
        except (OSError, ValueError, IndexError):
            pass
    return total


class LoadProbe:
    """Load average and the CPU share that processes other than ours took, over one round."""

    def __init__(self, pids):
        self.pids = list(pids) + [os.getpid()]

    def start(self):
        self.t, self.before = time.time(), load()
        self.busy, self.own = _busy_jiffies(), _own_jiffies(self.pids)

    def stop(self):
        wall = time.time() - self.t
        out = {"load_before": self.before, "load_after": load()}
        busy = _busy_jiffies()
        if busy is not None and self.busy is not None and wall > 0:
            hz = os.sysconf("SC_CLK_TCK")
            others = (busy - self.busy) - (_own_jiffies(self.pids) - self.own)
            out["others_cpu_share"] = round(max(0.0, others / hz) / (wall * (os.cpu_count() or 1)), 3)
        return out


def interleave(entries, rounds, make_what, probe, log, max_load, settling_round=False):
    """Runs every (worker, case id, label) once per round, the order reversed every other round.

    make_what(case id, round) -> the run's parameters (texts differ every round). `settling_round`:
    first one untimed round of every case (with round 0's parameters), whose results are dropped: a
    worker that sat idle through the other sides' preparation (a minute or more) paid about 4 s in
    its first fine-tuning round on the measured VM, whose kernel pages out memory left untouched for
    60 s (DAMON), the same whatever the warm-up. Returns ({case id: [run results]}, [per-round load records])."""
    results = {cid: [] for _, cid, _ in entries}
    loads = []
    if settling_round:
        t = time.perf_counter()
        for worker, cid, _label in entries:
            worker.send(cmd="run", id=cid, what=make_what(cid, 0))
        log(f"    settling round (untimed): {time.perf_counter() - t:.0f} s")
    for r in range(rounds):
        order = entries if r % 2 == 0 else list(reversed(entries))
        probe.start()
        for worker, cid, _label in order:
            results[cid].append(worker.send(cmd="run", id=cid, what=make_what(cid, r)))
        rec = dict(probe.stop(), round=r)
        rec["marked"] = rec["load_before"][0] > max_load
        loads.append(rec)
        log(f"    round {r + 1}/{rounds}: load {rec['load_before'][0]} -> {rec['load_after'][0]}, others' CPU "
            f"{rec.get('others_cpu_share', float('nan')):.0%}{'  (MARKED: load above ' + str(max_load) + ')' if rec['marked'] else ''}")
    return results, loads


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1], sys.argv[2]))
