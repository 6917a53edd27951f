"""Stopping a quotient's construction when the caller asks.

A large file's left and right contexts take a while to parse; a caller (the
server, on a newer keystroke) passes ``interrupt``, which is polled every few
lines.  What was parsed up to then is kept; nothing half-done is memoised.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BuildInterrupted", "Interrupt", "poll"]

#: Lines parsed between two polls of an ``interrupt`` callback (a few milliseconds).
POLL_LINES = 16

#: Polled during construction; true means "stop now".
Interrupt = Callable[[], bool]


class BuildInterrupted(Exception):
    """Construction stopped because ``interrupt`` said so; what was parsed is kept."""


def poll(interrupt: Interrupt | None, line: int) -> None:
    """Raise :class:`BuildInterrupted` on every ``POLL_LINES``-th line if asked to."""
    if interrupt is not None and line % POLL_LINES == 0 and interrupt():
        raise BuildInterrupted
