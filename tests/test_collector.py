"""The engine's collector pacing: survivors frozen at each tick, a full pass over
everything only when idle and due, and passes clocked."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from lsp_server.collector import Collector


@pytest.fixture
def collector() -> Iterator[Collector]:
    made = Collector(reclaim_s=3600.0).start()
    yield made
    made.stop()
    gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_tick_freezes_survivors_and_passes_are_clocked(collector: Collector) -> None:
    kept = [[i] for i in range(1000)]
    before = gc.get_freeze_count()
    collector.tick(idle=True)  # not due: freeze only
    assert gc.get_freeze_count() >= before + len(kept)
    made_since = [[i] for i in range(100_000)]  # what a full pass still walks
    gc.collect()
    counters = collector.counters()
    assert made_since
    assert counters["gcFullCollections"] >= 1 and counters["gcFullMs"] > 0
    assert counters["gcReclaims"] == 0


def test_frozen_cyclic_garbage_is_reclaimed_when_idle_and_due(collector: Collector) -> None:
    _Cycle()  # garbage at once, but only the cyclic collector can free it
    collector.tick(idle=True)  # frozen with the rest
    assert gc.collect() == 0  # out of the collector's reach
    collector.reclaim_s = 60.0
    collector._last_reclaim = time.monotonic() - 90.0  # due, not twice overdue
    collector.tick(idle=False)  # a request waits: no full pass
    assert collector.reclaims == 0
    collector.tick(idle=True)
    assert collector.reclaims == 1 and collector.reclaimed >= 1


def test_a_reclaim_twice_overdue_happens_even_when_busy(collector: Collector) -> None:
    collector.reclaim_s = 0.0
    collector.tick(idle=False)  # overdue twice over at once: a busy engine reclaims too
    assert collector.reclaims == 1
    collector.reclaim_s = 3600.0
    collector.tick(idle=False)
    assert collector.reclaims == 1


def test_the_heap_is_trimmed_when_idle_after_work() -> None:
    collector = Collector(reclaim_s=3600.0, trim_s=0.0).start()
    try:
        collector.tick(idle=True)  # nothing was done since start: no trim
        assert collector.counters()["heapTrims"] == 0
        collector.tick(idle=False)
        collector.tick(idle=False)  # busy: no trim
        assert collector.counters()["heapTrims"] == 0
        collector.tick(idle=True)  # idle after work: one trim (glibc here)
        collector.tick(idle=True)
        assert collector.counters()["heapTrims"] == 1
        collector.trim_s = 3600.0
        collector.tick(idle=False)
        collector.tick(idle=True)  # too soon after the last one
        assert collector.counters()["heapTrims"] == 1
    finally:
        collector.stop()
        gc.unfreeze()
