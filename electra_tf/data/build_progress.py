"""The progress line of a data build: tokens/s and an ETA, from counters every process adds to."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    """Shared counters plus a thread that prints tokens/s and an ETA to stderr."""

    def __init__(self, ctx, total_bytes: int, total_shards: int, enabled: bool,
                 stream=None, interval: float = 1.0):
        # "next_shard" is the work queue itself: every process claims the next unbuilt shard from it.
        self.counters = {name: ctx.Value("q", 0) for name in ("bytes", "tokens", "shards", "next_shard")}
        self.total_bytes = max(1, total_bytes)
        self.total_shards = total_shards
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.interval = interval if self.tty else max(interval, 10.0)
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self._thread.join()
            self._print(final=True)

    def line(self) -> str:
        elapsed = max(1e-6, time.time() - self.started)
        done_bytes = self.counters["bytes"].value
        tokens = self.counters["tokens"].value
        frac = min(1.0, done_bytes / self.total_bytes)
        eta = (elapsed / frac - elapsed) if frac > 0 else float("nan")
        eta_s = f"{eta:5.0f}s" if eta == eta else "    ?"
        width = 24
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        return (f"[{bar}] {100 * frac:5.1f}% shards {self.counters['shards'].value}/{self.total_shards} "
                f"{tokens:,} tokens {tokens / elapsed / 1000:7.1f}k tokens/s ETA {eta_s}")

    def _print(self, final=False):
        end = "\n" if (final or not self.tty) else ""
        prefix = "\r" if self.tty else ""
        print(prefix + self.line(), end=end, file=self.stream, flush=True)

    def _run(self):
        while not self._stop.wait(self.interval):
            self._print()
