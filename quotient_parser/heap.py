"""Giving the memory of a freed parser generation back to the system.

A retired generation (``Recognizer.max_states``) is freed by reference counting
once no state holds it: some thousands of item sets, goto tables and memo dicts,
megabytes at a time.  glibc's allocator keeps what is freed for later use and
returns it only from the top of its heaps, so a server that retires generations
now and then would keep its resident memory at its highest ever.  When an
automaton noted here dies, the next :func:`trim_if_freed` (the recognizer asks at
every ``Recognizer(target)``, on the thread that parses) runs ``malloc_trim(0)``
once, which hands free pages inside the heaps back as well.  The call releases the
GIL (ctypes), so other threads run meanwhile.  Without glibc it is a no-op.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable

__all__ = ["note_freed_on_death", "trim_if_freed"]


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` among the symbols the process has loaded, if any."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS, Windows)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_malloc_trim = _find_malloc_trim()
#: How many noted objects died since the last trim (set from any thread, by the
#: finalizer; read and reset by the thread that trims).
_freed_since_trim = 0
#: How many trims ran (for tests and benchmarks).
trims = 0


def _count_freed() -> None:
    global _freed_since_trim
    _freed_since_trim += 1


def note_freed_on_death(obj: object) -> None:
    """Ask for a trim once ``obj`` (a retired generation's automaton) is freed."""
    weakref.finalize(obj, _count_freed)


def trim_if_freed() -> bool:
    """Trim the heap if a noted object died since the last trim; whether it did."""
    global _freed_since_trim, trims
    if not _freed_since_trim:
        return False
    _freed_since_trim = 0
    if _malloc_trim is not None:
        _malloc_trim(0)
        trims += 1
    return True
