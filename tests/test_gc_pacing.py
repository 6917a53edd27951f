"""The collector's pacing (``lsp_server.gc_pacing``): survivors frozen, cycles reclaimed."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from lsp_server.gc_pacing import SurvivorFreezer, collect_everything


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    """Leave the test process's collector as it was found (nothing frozen by us)."""
    yield
    gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_freezer_freezes_survivors_and_reclaims_frozen_cycles_when_idle() -> None:
    idle = {"now": False}

    async def main() -> SurvivorFreezer:
        freezer = SurvivorFreezer(lambda: idle["now"], period_s=0.01, reclaim_s=0.0)
        freezer.start(asyncio.get_running_loop())
        _Cycle()  # garbage in a cycle, alive only for the collector
        await asyncio.sleep(0.05)  # busy: reclaims are due but wait; freezes go on
        assert freezer.reclaims == 0
        assert gc.get_freeze_count() > 0
        idle["now"] = True
        await asyncio.sleep(0.05)
        freezer.stop()
        return freezer

    gc.collect()
    freezer = asyncio.run(main())
    assert freezer.reclaims > 0
    assert freezer.counters()["gcReclaims"] == freezer.reclaims


def test_collect_everything_finds_cycles_a_freeze_hid() -> None:
    gc.collect()
    _Cycle()
    gc.freeze()
    assert gc.collect() == 0  # frozen: out of the collector's reach
    assert collect_everything() >= 1
    assert gc.get_freeze_count() > 0  # frozen again after the pass
