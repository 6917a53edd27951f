"""How late the event loop runs: the stall every message and answer waits behind.

A probe request's latency (``fimlsp/serverStatus`` sent by a benchmark) mixes the loop's
own stalls with the time its message spent in the pipe behind megabytes of other
messages.  :class:`LoopLag` measures the loop alone: a callback asks to run every
:data:`PERIOD_S` and records how late it ran.  That lateness is what any callback
ready at the time waited (a message read, an answer to write): the work on the loop
that ran meanwhile, plus the wait for the GIL while the front's other threads held it
(reading stdin, writing stdout, talking to the engine process: all short).

A stall of ``d`` ms shows in full when the callback comes due at its start, and not at
all when it falls between two ticks: the maximum over many stalls approaches the
longest, and every stall longer than the period is caught.  Lateness is kept in a
histogram of 0.1 ms bins (the p99) and exactly (the maximum), in constant memory.
A tick costs a few microseconds: about 0.05 % of a core at the default period.
On a busy machine, most lateness is the OS not running the loop thread at all.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import deque
from itertools import accumulate

__all__ = ["PERIOD_S", "STALL_MS", "LoopLag"]

#: Seconds between the monitor's ticks.
PERIOD_S = 0.01
#: A tick at least this late (ms) is kept, with its number, among the recent stalls.
STALL_MS = 5.0
_RECENT_STALLS = 64
_BINS_PER_MS = 10
_BINS = 10_000  # up to 1 s; later is counted in the last bin (the maximum is exact)


class LoopLag:
    """A periodic callback on one event loop that records how late it ran.

    The last :data:`_RECENT_STALLS` ticks at least :data:`STALL_MS` late are kept as
    (tick number, ms, the loop thread's CPU ms since the tick before): a client that
    reads the figures now and then (``bench.lsp_fuzz`` every 100 ms) tells which of
    them came since its last read by their numbers, and so what it was sending when
    they came.  The CPU time tells work on the loop from waiting: a stall with little
    of it was the loop waiting for the GIL or for the OS to run it (``time.thread_time``
    makes no system call that gives the GIL away)."""

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self.max_ms = 0.0
        self.samples = 0
        self._bins = [0] * _BINS
        self.stalls: deque[tuple[int, float, float]] = deque(maxlen=_RECENT_STALLS)
        self._cpu_s = time.thread_time()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Tick on ``loop`` from now on (again on another loop: it moves there)."""
        if self._loop is loop and self._handle is not None:
            return
        self.stop()
        self._loop = loop
        self._schedule(loop.time())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        self._due = now + self.period_s
        self._handle = self._loop.call_at(self._due, self._run)

    def _run(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.tick(max(0.0, now - self._due))
        self._schedule(now)

    def tick(self, late_s: float) -> None:
        cpu_s, self._cpu_s = self._cpu_s, time.thread_time()
        self.record(late_s * 1e3, (self._cpu_s - cpu_s) * 1e3)

    def record(self, late_ms: float, cpu_ms: float = 0.0) -> None:
        """One tick that ran ``late_ms`` late, the loop thread having run ``cpu_ms`` since
        the tick before."""
        self.samples += 1
        self.max_ms = max(self.max_ms, late_ms)
        self._bins[min(int(late_ms * _BINS_PER_MS), _BINS - 1)] += 1
        if late_ms >= STALL_MS:
            self.stalls.append((self.samples, round(late_ms, 2), round(cpu_ms, 2)))

    def percentile_ms(self, fraction: float) -> float:
        """The lateness that ``fraction`` of the ticks did not exceed (the upper edge of
        its 0.1 ms bin, never above the maximum); 0 before the first tick."""
        if not self.samples:
            return 0.0
        totals = list(accumulate(self._bins))
        index = bisect.bisect_left(totals, fraction * self.samples)
        return min(self.max_ms, (min(index, _BINS - 1) + 1) / _BINS_PER_MS)

    def figures(self) -> dict[str, float | int | list[list[float]]]:
        """The figures ``fimlsp/serverStatus`` reports (milliseconds since the start; the
        recent stalls as [tick number, ms, the loop's CPU ms])."""
        return {
            "loopLagMaxMs": round(self.max_ms, 2),
            "loopLagP99Ms": round(self.percentile_ms(0.99), 2),
            "loopLagTicks": self.samples,
            "loopLagStalls": [list(stall) for stall in self.stalls],
        }
