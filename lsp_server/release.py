"""Large structures let go of a little at a time, so that freeing them never stalls.

Dropping the last reference to a quotient builder that parsed a 1.5 MB file frees
millions of objects in one cascade of deallocations: one bytecode, so the GIL is not
handed over until it ends, and the event loop waited 40-120 ms on ``didClose``
(``bench.lsp_fuzz``: documents/1_5_mb_file).  :func:`release` hands such an object to
a thread that takes it apart instead, from the top: what an object holds is taken
into the thread's own stack before the object is let go of, so freeing it frees only
itself, and the interpreter can switch threads between any two steps.

Only the built-in ``dict``, ``list`` and ``set`` are emptied (a slice at a time), and
only when the thread alone holds them (their reference count says so; no weak
reference can reach them); any other object is only read (its slots, its attributes,
a tuple's items), never changed.  An object that others hold too is set aside, and
taken apart once they let go of it (its last other holder may be among what is taken
apart); what is still held elsewhere at the end is only let go of.
"""

from __future__ import annotations

import queue
import sys
import threading
import weakref
from collections import deque
from typing import Any

__all__ = ["release", "take_apart"]

_queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()
#: Elements moved out of a list at once.
_SLICE = 4096
_SHARDS = 1024
#: Objects that hold nothing (or nothing but other atoms): freed on the spot.
_ATOMS = frozenset({int, float, complex, bool, str, bytes, type(None), weakref.ref})


def release(obj: Any) -> None:
    """Let go of ``obj`` on the releasing thread (the caller drops its references)."""
    global _thread
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="fimlsp-release", daemon=True)
            _thread.start()
    _queue.put(obj)


def _run() -> None:
    while True:
        take_apart([_queue.get()])


def _slots(kind: type) -> list[str]:
    names: list[str] = []
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    return [n for n in names if n not in ("__dict__", "__weakref__")]


def _children(obj: Any) -> list[Any] | None:
    """What ``obj`` holds (None: nothing this module looks into).  Only the built-in
    ``dict``, ``list`` and ``set``, which no weak reference can reach, are emptied, a
    slice at a time; anything else is only read (its items are then held here, so
    freeing it frees nothing else)."""
    kind = type(obj)
    if kind is dict:
        items: list[Any] = []
        while obj:
            items += obj.popitem()
        return items
    if kind is list:
        items = []
        while obj:
            items += obj[-_SLICE:]
            del obj[-_SLICE:]
        return items
    if kind is set:
        items = []
        while obj:
            items.append(obj.pop())
        return items
    if kind is tuple or kind is frozenset:
        return list(obj)
    if kind.__module__ == "builtins" or isinstance(obj, type):
        return None
    items = []
    for name in _slots(kind):
        if hasattr(obj, name):
            items.append(getattr(obj, name))
    attributes = getattr(obj, "__dict__", None)
    if type(attributes) is dict:
        items += attributes.values()
    return items


def take_apart(holder: list[Any]) -> int:
    """Free what ``holder`` (a list, emptied) holds, a little at a time; the number of
    objects emptied.  Runs on any thread; see the module docstring.

    The stack is a deque and the objects set aside are spread over small dicts: a list
    or a dict of millions of entries would be copied whole when it grows (one long C
    call, the very thing this avoids)."""
    stack: deque[Any] = deque(holder)
    holder.clear()
    aside: list[dict[int, Any]] = [{} for _ in range(_SHARDS)]  # held by others too
    emptied = 0
    while True:
        while stack:
            obj = stack.pop()
            key = id(obj)
            shard = aside[(key >> 4) % _SHARDS]
            # Ours alone: the variable and getrefcount's argument (and ``shard``'s).
            held_by_others = sys.getrefcount(obj) - 2
            if key in shard:
                if held_by_others > 1:
                    continue  # a copy of one set aside, still held elsewhere
                del shard[key]
            elif held_by_others:
                shard[key] = obj
                continue
            children = _children(obj)
            if children:
                emptied += 1
                stack.extend(child for child in children if type(child) not in _ATOMS)
            children = None  # the atoms it held go: each frees only itself
        obj = None
        # Set aside objects whose other holders were all let go of since.
        for shard in aside:
            for key in [key for key in shard if sys.getrefcount(shard[key]) <= 2]:
                stack.append(shard.pop(key))
        if not stack:
            return emptied  # the rest is held elsewhere: only let go of
