"""The default thread count: physical cores (and the CPU quota) less one, 1 to 8."""

from __future__ import annotations

from lsp_server.model.local.threads import _cgroup_quota, physical_cores, suitable_threads
from lsp_server.settings import Settings


def _cpuinfo(pairs: list[tuple[int, int]]) -> str:
    """/proc/cpuinfo with one block per logical CPU: (physical id, core id)."""
    return "\n".join(
        f"processor\t: {i}\nmodel name\t: x\nphysical id\t: {p}\ncore id\t\t: {c}\n"
        for i, (p, c) in enumerate(pairs)
    )


def test_hyper_threads_count_once() -> None:
    info = _cpuinfo([(0, 0), (0, 1), (0, 0), (0, 1)])  # 2 cores, 2 threads each
    assert physical_cores(info, allowed={0, 1, 2, 3}) == 2
    assert physical_cores(info, allowed={0, 2}) == 1  # pinned to one core's two threads
    two_sockets = _cpuinfo([(0, 0), (1, 0)])
    assert physical_cores(two_sockets, allowed={0, 1}) == 2
    assert physical_cores("", allowed={0, 1, 2}) == 3  # no topology: logical CPUs


def test_the_default_leaves_a_core_for_the_editor() -> None:
    assert suitable_threads(cores=1) == 1
    assert suitable_threads(cores=2) == 1  # the development machine
    assert suitable_threads(cores=4) == 3
    assert suitable_threads(cores=64) == 8
    assert suitable_threads(cores=8, quota=2.0) == 1  # a container allowed two CPUs
    assert suitable_threads(cores=8, quota=3.5) == 3
    assert _cgroup_quota("max 100000") is None
    assert _cgroup_quota("250000 100000") == 2.5


def test_the_setting_defaults_to_the_machine() -> None:
    assert Settings().threads == 0
    assert Settings().merged({"threads": 0})[0].threads == 0
    assert Settings().merged({"threads": 3})[0].threads == 3
    assert Settings().merged({"threads": -1})[1]  # a problem, ignored
