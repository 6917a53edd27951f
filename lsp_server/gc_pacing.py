"""The cyclic garbage collector, paced so that its passes stay short.

A collection walks every object it tracks in the generations it collects, holding the
GIL all along, so the event loop waits for as long as it takes.  A full (generation 2)
pass is as long as the heap: with the quotient parser's states for a 1.5 MB file alive,
about 150 ms (``python -m bench.event_loop_costs``: "GIL: longest loop gap while
building the quotient"), the largest loop lag ``bench.lsp_fuzz`` saw.  Yet what the
server keeps alive is almost never cyclic garbage: the parser's quotients and states, the
planner's interrupted builds, the model's token arrays and the untyped messages are
built without reference cycles (``tests/test_memory_bounds.py``,
``bench.memory_growth --collect``), so those passes find next to nothing.

So what has survived is set aside from the collector's reach, often:

* :func:`tune_gc`, once before serving, freezes what is alive (modules, pygls' and
  lsprotocol's tables; ``gc.freeze``) and makes full passes ten times rarer;
* :class:`SurvivorFreezer` then freezes, every :data:`FREEZE_PERIOD_S`, whatever is
  alive (``gc.freeze`` is O(1): it moves the generations' lists as they are).  A
  pass then walks only what was made since the last freeze: a fraction of a second of
  allocations, a few milliseconds.  Frozen objects are still freed by reference
  counting; only a reference cycle that became garbage before it was collected stays
  (which is why the server's own objects must make none)
  until the next full pass over everything, which the freezer makes every
  :data:`RECLAIM_PERIOD_S` at a moment when no request is waiting
  (:meth:`SurvivorFreezer.reclaim`: ``gc.unfreeze``, ``gc.collect``, ``gc.freeze``; it
  costs what one full pass costs today, rarely and while nobody waits).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from .loop_lag import Periodic

__all__ = [
    "FREEZE_PERIOD_S",
    "RECLAIM_PERIOD_S",
    "SurvivorFreezer",
    "collect_everything",
    "tune_gc",
]

#: Seconds between two freezes of what is alive.
FREEZE_PERIOD_S = 0.1
#: Seconds between two full passes over everything, frozen objects included.
RECLAIM_PERIOD_S = 600.0


def tune_gc() -> None:
    """Keep the cyclic garbage collector's full passes off the event loop's back.

    What is alive once the server has started (imported modules, pygls' and
    lsprotocol's tables) is moved out of the collector's reach (``gc.freeze``; it is
    still freed by reference counting), and full passes come ten times less often
    (gen-2 threshold 100; they still come, so cyclic garbage stays bounded).  Called
    once by ``fimlsp`` before serving; see ``bench/event_loop_costs.py`` for the gaps
    with and without.
    """
    gc.collect()
    gc.freeze()
    first, second, third = gc.get_threshold()
    gc.set_threshold(first, second, max(third, 100))


def collect_everything() -> int:
    """A full pass over every object, the frozen ones included (then frozen again):
    the cyclic garbage it found."""
    gc.unfreeze()
    try:
        return gc.collect()
    finally:
        gc.freeze()


class SurvivorFreezer(Periodic):
    """Freezes what is alive every :data:`FREEZE_PERIOD_S` on an event loop, and
    reclaims frozen cyclic garbage every :data:`RECLAIM_PERIOD_S` when ``idle()``."""

    def __init__(
        self,
        idle: Callable[[], bool],
        period_s: float = FREEZE_PERIOD_S,
        reclaim_s: float = RECLAIM_PERIOD_S,
    ) -> None:
        super().__init__(period_s)
        self.idle = idle
        self.reclaim_s = reclaim_s
        self.reclaims = 0
        self.reclaimed = 0  # cyclic garbage found by the full passes
        self._last_reclaim = time.monotonic()

    def tick(self, late_s: float) -> None:
        if time.monotonic() - self._last_reclaim > self.reclaim_s and self.idle():
            self.reclaim()
        else:
            gc.freeze()

    def reclaim(self) -> None:
        """The full pass over everything (see the module docstring)."""
        self._last_reclaim = time.monotonic()
        self.reclaims += 1
        self.reclaimed += collect_everything()

    def counters(self) -> dict[str, int]:
        # Not gc.get_freeze_count(): it walks the frozen objects' list (milliseconds).
        return {"gcReclaims": self.reclaims, "gcReclaimed": self.reclaimed}
