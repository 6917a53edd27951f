"""The event loop's lag monitor (``lsp_server.loop_lag``): what it records, on a real loop."""

from __future__ import annotations

import asyncio
import mmap
import os
import time
from pathlib import Path

import pytest

from lsp_server.loop_lag import STALL_MS, LoopLag
from lsp_server.rss import rss_mb


def test_percentile_and_maximum_of_recorded_lateness() -> None:
    lag = LoopLag()
    assert lag.figures() == {
        "loopLagMaxMs": 0.0,
        "loopLagP99Ms": 0.0,
        "loopLagTicks": 0,
        "loopLagStalls": [],
    }
    for _ in range(99):
        lag.record(0.25)
    lag.record(40.0, 1.5)
    assert lag.samples == 100
    # The 100th tick, 40 ms late, the loop having run 1.5 ms since the tick before.
    assert lag.figures()["loopLagStalls"] == [[100, 40.0, 1.5]]
    assert lag.max_ms == 40.0
    assert lag.percentile_ms(0.99) == 0.3  # the upper edge of 0.25's 0.1 ms bin
    assert lag.percentile_ms(1.0) == 40.0
    lag.record(5_000.0)  # past the last bin: still the exact maximum
    assert lag.figures()["loopLagMaxMs"] == 5_000.0


def test_only_the_recent_stalls_are_kept() -> None:
    lag = LoopLag()
    for tick in range(1, 201):
        lag.record(STALL_MS if tick % 2 else STALL_MS - 0.1)
    stalls = lag.figures()["loopLagStalls"]
    assert isinstance(stalls, list) and len(stalls) == 64
    assert stalls[0] == [73, STALL_MS, 0.0] and stalls[-1] == [199, STALL_MS, 0.0]


def test_a_blocked_loop_is_reported_late() -> None:
    """The loop blocked for 50 ms: a tick came due within one period of the block's
    start, so it ran at least 50 ms less a period late (a bound, not a timing)."""
    period_s, block_s = 0.005, 0.05

    async def main() -> LoopLag:
        lag = LoopLag(period_s)
        lag.start(asyncio.get_running_loop())
        await asyncio.sleep(3 * period_s)
        time.sleep(block_s)  # the loop stalls: nothing else runs
        await asyncio.sleep(3 * period_s)
        lag.stop()
        return lag

    lag = asyncio.run(main())
    assert lag.samples >= 2
    assert lag.max_ms >= (block_s - period_s) * 1e3
    # The block slept: the loop waited, it did not work (a bound on CPU, not a timing).
    late, cpu = max((ms, cpu) for _, ms, cpu in lag.stalls)
    assert cpu < late / 2
    ticks = lag.samples
    time.sleep(2 * period_s)
    assert lag.samples == ticks  # stopped


def test_start_twice_on_one_loop_keeps_one_ticker() -> None:
    async def main() -> int:
        lag = LoopLag(0.01)
        loop = asyncio.get_running_loop()
        lag.start(loop)
        lag.start(loop)
        await asyncio.sleep(0.105)
        lag.stop()
        return lag.samples

    assert asyncio.run(main()) <= 11  # one tick per period at most, not two


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="no /proc")
def test_rss_follows_the_heap() -> None:
    """``rss_mb`` is this process's resident memory, and another process's by its id."""
    first = rss_mb()
    block = bytearray(64 * 2**20)  # zero pages are not resident until touched
    block[:: mmap.PAGESIZE] = b"x" * len(range(0, len(block), mmap.PAGESIZE))
    grown = rss_mb()
    del block
    assert first > 0
    assert grown - first > 48
    assert rss_mb(os.getpid()) > 0 and rss_mb(2**22 + 1) == 0.0  # no such process
