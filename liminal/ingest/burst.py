"""When the worker steps aside for the proxy (a part of the indexer, in the worker's tail mode).

A worker yields to the proxy while the proxy writes the spool faster than a threshold. Measured
on the 2-core machines (docs/benchmarks.md, "index"): a worker indexing during a flat-out stream
cost the proxy a fifth of its frame rate even at nice 10 (the two compete for the cores and the
caches), against 2-6% for the spool writer alone. A conversation streams (by estimate: a few
hundred tokens a second) tens of kB/s; only a burst (a large tool output, a replayed history, a
benchmark) passes the threshold, and for at most ``max_seconds`` at a time, after which the
worker indexes regardless.
"""

from __future__ import annotations

import time

YIELD_BYTES_PER_SECOND = 1_000_000
YIELD_WINDOW_SECONDS = 0.1
YIELD_MAX_SECONDS = 10.0


class BurstGate:
    """Fed how much the writer has appended so far; says whether to leave the CPU to it now."""

    def __init__(self, bytes_per_second: float = YIELD_BYTES_PER_SECOND,
                 max_seconds: float = YIELD_MAX_SECONDS) -> None:
        self.bytes_per_second = bytes_per_second
        self.max_seconds = max_seconds
        self._mark: tuple[float, int] | None = None  # (when, appended then)
        self._busy = False
        self._since: float | None = None
        self.yielded_seconds = 0.0  # how long the worker has paused for the writer

    def should_yield(self, appended: int) -> bool:
        """The writer appends faster than the threshold, and the worker has not yet paused
        ``max_seconds`` in a row."""
        now = time.monotonic()
        if self._mark is None:  # the first look: what is there already is a backlog
            self._mark = (now, appended)
            return False
        since, before = self._mark
        if now - since >= YIELD_WINDOW_SECONDS:
            self._busy = (appended - before) / (now - since) > self.bytes_per_second
            self._mark = (now, appended)
        if not self._busy:
            self._since = None
            return False
        if self._since is None:
            self._since = now
        return now - self._since < self.max_seconds
