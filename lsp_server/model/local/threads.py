"""How many CPU threads llama.cpp should use on the machine the server runs on.

llama.cpp's matrix products scale with physical cores, not with hyper-threads (two
threads on one core fight over its vector units), and the editor that started the
server needs a core of its own to stay responsive while a prompt is read.  So the
default is the physical cores this process may run on, less one, within what a
container's CPU quota allows; at least one, and at most :data:`MAX_DEFAULT_THREADS`
(beyond that, memory bandwidth bounds a small model and more threads only add waiting).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["MAX_DEFAULT_THREADS", "physical_cores", "suitable_threads"]

MAX_DEFAULT_THREADS = 8


def _allowed_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def physical_cores(cpuinfo: str | None = None, allowed: set[int] | None = None) -> int:
    """Physical cores among the CPUs this process may use (``/proc/cpuinfo``'s distinct
    (physical id, core id) pairs); the logical CPU count where that is unknown."""
    allowed = _allowed_cpus() if allowed is None else allowed
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return max(1, len(allowed))
    cores: set[tuple[str, str]] = set()
    processor: int | None = None
    package = core = None
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            processor = int(value) if value.isdigit() else None
        elif key == "physical id":
            package = value
        elif key == "core id":
            core = value
        elif not key:  # a blank line ends a processor's block
            if processor is not None and processor in allowed and core is not None:
                cores.add((package or "0", core))
            processor, package, core = None, None, None
    return max(1, len(cores) if cores else len(allowed))


def _cgroup_quota(cpu_max: str | None = None) -> float | None:
    """CPUs a cgroup v2 quota allows (``cpu.max``: "quota period" or "max period")."""
    if cpu_max is None:
        try:
            cpu_max = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii")
        except OSError:
            return None
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        return int(parts[0]) / int(parts[1])
    except (ValueError, ZeroDivisionError):
        return None


def suitable_threads(cores: int | None = None, quota: float | None = None) -> int:
    """The default thread count: physical cores (and the CPU quota) less one, within
    1..MAX_DEFAULT_THREADS."""
    cores = physical_cores() if cores is None else cores
    quota = _cgroup_quota() if quota is None else quota
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, min(MAX_DEFAULT_THREADS, cores - 1))
