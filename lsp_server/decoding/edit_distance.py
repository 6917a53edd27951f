"""Levenshtein distance between two strings, and the edit similarity built on it.

The heuristic mode compares generated lines with the code after the cursor, and the
usefulness benchmarks compare middles with the true ones ("edit similarity", as
CodeXGLUE and RepoCoder report it: one less the distance over the longer length).
"""

from __future__ import annotations

__all__ = ["edit_distance", "edit_similarity", "nearly_equal"]


def edit_distance(a: str, b: str) -> int:
    """The fewest insertions, deletions and substitutions that turn ``a`` into ``b``.

    The usual two-row dynamic programme, over the shorter string, after the common
    prefix and suffix are set aside (they cost nothing and are most of a near match).
    """
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    a, b = a[start:], b[start:]
    end = 0
    while end < len(a) and end < len(b) and a[-1 - end] == b[-1 - end]:
        end += 1
    if end:
        a, b = a[:-end], b[:-end]
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def edit_similarity(a: str, b: str) -> float:
    """``1 - distance / max(len(a), len(b))``: 1.0 for equal strings (both empty too)."""
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else 1.0 - edit_distance(a, b) / longest


def nearly_equal(text: str, target: str, share: float) -> bool:
    """``text`` is ``target`` or within ``share`` of its length in edits of it."""
    return text == target or edit_distance(text, target) <= share * len(target)
