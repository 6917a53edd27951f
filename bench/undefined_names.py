"""The names a middle loads that are bound nowhere, as pyflakes' F821 reports them.

A completed file ``L + m + R`` is parsed and checked by pyflakes; an ``undefined name``
message counts when it points into the middle's text (a name the middle introduced, not
one L or R already loaded).  ``None`` where the file does not parse (no verdict).  The
``knownNames`` check (``lsp_server/names``) aims this at 0 for constrained middles.
"""

from __future__ import annotations

import ast
import warnings

from pyflakes import checker, messages

__all__ = ["undefined_in_middle", "undefined_rate"]


def undefined_in_middle(left: str, middle: str, right: str) -> list[str] | None:
    """The undefined names pyflakes reports inside ``middle`` in ``left + middle +
    right`` (None: the file does not parse)."""
    source = left + middle + right
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like in the corpus
            tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    found = checker.Checker(tree, filename="<cut>")
    starts = [0]
    for index, char in enumerate(source):
        if char == "\n":
            starts.append(index + 1)
    lo, hi = len(left), len(left) + len(middle)
    names = []
    for message in found.messages:
        if not isinstance(message, messages.UndefinedName):
            continue
        line = message.lineno - 1
        if line >= len(starts):
            continue
        line_start = starts[line]
        line_end = starts[line + 1] if line + 1 < len(starts) else len(source)
        # ast's columns count UTF-8 bytes
        text = (
            source[line_start:line_end]
            .encode("utf-8")[: message.col]
            .decode("utf-8", errors="ignore")
        )
        at = line_start + len(text)
        name = str(message.message_args[0])
        if at < hi and at + len(name) > lo:
            names.append(name)
    return names


def undefined_rate(
    cases: list[tuple[str, str, str]],
) -> dict[str, object]:
    """Over (left, middle, right) cases: how many non-empty middles parse, how many of
    those load an undefined name, the rate, and the names."""
    judged = undefined = 0
    names: list[str] = []
    for left, middle, right in cases:
        if not middle.strip():
            continue
        found = undefined_in_middle(left, middle, right)
        if found is None:
            continue
        judged += 1
        if found:
            undefined += 1
            names.extend(found)
    return {
        "judged": judged,
        "with_undefined_name": undefined,
        "undefined_name_rate": round(undefined / judged, 4) if judged else None,
        "undefined_names": sorted(set(names)),
    }
