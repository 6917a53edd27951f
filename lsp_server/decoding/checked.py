"""Checked mode: the model's own output cut back until ``ast.parse`` accepts the file.

The comparison the paper makes: what a decoder without an incremental parser can do
after the fact.
"""

from __future__ import annotations

import ast
import warnings

from .result import Completion
from .stop_reason import StopReason

__all__ = ["checked_prefix"]


def checked_prefix(result: Completion, left: str, right: str) -> Completion:
    """Keep the longest prefix of the output with which the file parses (ast.parse)."""
    middle = result.middle
    for cut in range(len(middle), -1, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(left + middle[:cut] + right)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        result.middle = middle[:cut]
        result.complete = True
        if cut < len(middle):
            result.stop_reason = StopReason.CHECKED_PREFIX
        return result
    result.complete = False
    return result
