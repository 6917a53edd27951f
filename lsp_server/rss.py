"""Resident memory of a process, for ``fimlsp/serverStatus`` (the front's and the engine's)."""

from __future__ import annotations

import mmap

__all__ = ["rss_mb"]


def rss_mb(pid: int | None = None) -> float:
    """Resident memory in MB of process ``pid`` (None: this one), from Linux's /proc;
    0 where unavailable or the process has gone."""
    path = f"/proc/{'self' if pid is None else pid}/statm"
    try:
        with open(path, "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * mmap.PAGESIZE / 2**20
