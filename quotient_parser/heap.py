"""Freeing a retired parser generation without stalling other threads.

A retired generation (``Recognizer.max_states``) is freed by reference counting
once no state holds it: some thousands of item sets, goto tables and memo dicts.
Freed at once, its tables would hold the GIL for milliseconds per thousand states
(the event loop waits as long), and glibc's allocator would keep the memory for
later use, returning only what lies at the top of its heaps.

So an automaton noted here (:func:`free_in_pieces`) hands its tables over when it
dies, and the next :func:`trim_if_freed` (the recognizer asks at every
``Recognizer(target)``, on the thread that parses) takes them apart a few hundred
entries at a time, letting other threads run in between, then runs
``malloc_trim(0)`` once, which returns free pages inside the heaps to the system
too.  The trim releases the GIL (ctypes); without glibc it is skipped.
"""

from __future__ import annotations

import ctypes
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["free_in_pieces", "trim", "trim_if_freed"]

#: Entries of a table freed at once: each piece holds the GIL well under a millisecond.
PIECE = 256
#: Seconds of freeing between two offers of the GIL to other threads.
_YIELD_EVERY = 0.001


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
#: Tables of noted objects that died, waiting to be taken apart (appended by the
#: finalizer on whichever thread dropped the last reference, popped by the trimming one).
_dead_tables: list[list[Any] | dict[Any, Any]] = []
#: How many trims ran, and the longest a trim and a taking apart took (milliseconds;
#: for benchmarks: ``bench/memory_growth.py`` reports them).
trims = 0
longest_trim_ms = 0.0
longest_take_apart_ms = 0.0


def free_in_pieces(obj: object) -> None:
    """When ``obj`` dies, keep its list and dict attributes for :func:`trim_if_freed`
    to free in pieces, then trim the heap."""
    tables = [v for v in vars(obj).values() if isinstance(v, (list, dict))]
    weakref.finalize(obj, _dead_tables.extend, tables).atexit = False


def _take_apart(table: list[Any] | dict[Any, Any]) -> None:
    yielded = time.perf_counter()
    while table:
        if isinstance(table, list):
            del table[-PIECE:]
        else:
            for _ in range(min(PIECE, len(table))):
                table.popitem()
        now = time.perf_counter()
        if now - yielded > _YIELD_EVERY:
            time.sleep(0)  # let a thread waiting for the GIL (the event loop) have it
            yielded = now


def trim_if_freed() -> bool:
    """Free the tables of noted objects that died since the last call, piece by piece,
    then trim the heap once; whether there were any."""
    global trims, longest_trim_ms, longest_take_apart_ms
    if not _dead_tables:
        return False
    started = time.perf_counter()
    while True:
        try:
            table = _dead_tables.pop()
        except IndexError:  # all taken (another thread may have taken the last)
            break
        _take_apart(table)
    taken = time.perf_counter()
    trim()
    longest_take_apart_ms = max(longest_take_apart_ms, (taken - started) * 1e3)
    return True


def trim() -> bool:
    """Return the free pages of glibc's heaps to the system (``malloc_trim(0)``, without
    the GIL); whether it could (False without glibc)."""
    global trims, longest_trim_ms
    if _malloc_trim is None:
        return False
    started = time.perf_counter()
    _malloc_trim(0)
    trims += 1
    longest_trim_ms = max(longest_trim_ms, (time.perf_counter() - started) * 1e3)
    return True
