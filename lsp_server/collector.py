"""The cyclic garbage collector in the engine process: paced, and clocked.

The engine keeps large, long-lived object graphs alive (each open document's parser
charts, the planner's builders), so a full collection, which walks everything it
tracks with the GIL held, stops a request for as long as the heap is big: on the
cold-open case of ``bench.lsp_latency`` (30 files of 300 to 5,000 lines) 24 full passes
of about 150 ms each.  What the engine keeps is almost never cyclic garbage (the parser's
states and the model's arrays are built without reference cycles;
``tests/test_memory_bounds.py``), so those passes find next to nothing.

So what has survived is set aside from the collector's reach, often: every
:data:`FREEZE_PERIOD_S` whatever is alive is frozen (``gc.freeze``, O(1)), and a pass
walks only what was made since.  Frozen objects are still freed by reference counting;
cyclic garbage among them waits for the full pass over everything that
:meth:`Collector.tick` makes every :data:`RECLAIM_PERIOD_S`, when no request waits (at
twice that period whatever waits).
The time collections take is counted (``gcMs``, ``gcFullMs``, ``gcFullCollections``)
for the status, so that it is seen rather than hidden in parser times.

What is freed goes back to glibc's allocator, which keeps most of it: after rounds of
``bench.lsp_fuzz``'s documents cases the engine held 364 MB resident with 96 MB of it
free inside the heap.  When the engine falls idle after work, at most every
:data:`TRIM_PERIOD_S`, :meth:`Collector.tick` returns those pages to the system
(``heap.trim``; ``heapTrims`` in the status).
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from quotient_parser import heap

__all__ = ["FREEZE_PERIOD_S", "RECLAIM_PERIOD_S", "TRIM_PERIOD_S", "Collector"]

#: Seconds between two freezes of what is alive (the caller's tick period).
FREEZE_PERIOD_S = 0.1
#: Seconds between two full passes over everything, frozen objects included.
RECLAIM_PERIOD_S = 600.0
#: Seconds at least between two trims of the allocator's heaps (each when idle after work).
TRIM_PERIOD_S = 30.0


class Collector:
    """Freezes survivors on each :meth:`tick`, reclaims rarely, and clocks passes."""

    def __init__(self, reclaim_s: float = RECLAIM_PERIOD_S, trim_s: float = TRIM_PERIOD_S) -> None:
        self.reclaim_s = reclaim_s
        self.trim_s = trim_s
        self._lock = threading.Lock()
        self._began = 0.0
        self._seconds = 0.0
        self._full_seconds = 0.0
        self._full = 0
        self.reclaims = 0
        self.reclaimed = 0  # cyclic garbage the full passes over everything found
        self._last_reclaim = time.monotonic()
        self.trims = 0
        self._last_trim = time.monotonic()
        self._worked = False  # a tick was busy since the last trim

    def start(self) -> Collector:
        """Freeze what is alive now (modules, tables) and start the clock."""
        gc.collect()
        gc.freeze()
        gc.callbacks.append(self._clock)
        return self

    def stop(self) -> None:
        if self._clock in gc.callbacks:
            gc.callbacks.remove(self._clock)

    def tick(self, idle: bool) -> None:
        """Freeze what survived since the last tick; when ``idle`` and it is time (or,
        busy or not, twice past it: frozen cyclic garbage stays bounded under endless
        load), first the full pass over everything; idle after work and ``trim_s`` after
        the last trim, the allocator's free pages go back to the system."""
        since = time.monotonic() - self._last_reclaim
        if since > self.reclaim_s and (idle or since > 2 * self.reclaim_s):
            self._last_reclaim = time.monotonic()
            gc.unfreeze()
            try:
                found = gc.collect()
            finally:
                gc.freeze()
            with self._lock:
                self.reclaims += 1
                self.reclaimed += found
        else:
            gc.freeze()
        if not idle:
            self._worked = True
        elif self._worked and time.monotonic() - self._last_trim >= self.trim_s:
            self._last_trim = time.monotonic()
            self._worked = False
            if heap.trim():
                self.trims += 1

    def _clock(self, phase: str, info: dict[str, Any]) -> None:
        # Called by the thread whose allocation triggered the pass, with the GIL held.
        if phase == "start":
            self._began = time.perf_counter()
            return
        spent = time.perf_counter() - self._began
        with self._lock:
            self._seconds += spent
            if info.get("generation") == 2:
                self._full += 1
                self._full_seconds += spent

    def counters(self) -> dict[str, float]:
        # Not gc.get_freeze_count(): it walks the frozen objects' list.
        with self._lock:
            return {
                "gcMs": round(self._seconds * 1e3, 1),
                "gcFullMs": round(self._full_seconds * 1e3, 1),
                "gcFullCollections": self._full,
                "gcReclaims": self.reclaims,
                "gcReclaimed": self.reclaimed,
                "heapTrims": self.trims,
            }
