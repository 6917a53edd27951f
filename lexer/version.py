"""Target Python versions: the one type every layer uses to name one.

A target decides which syntax is valid (keywords, f-string rules, grammar
alternatives).  Users write it as ``"3.13"``, code as ``(3, 13)``, and the
lexer's hot loop compares small integers (``313``); :class:`TargetVersion`
is all three at once, so the spelling is converted in exactly one place::

    >>> v = TargetVersion.parse("3.12")
    >>> v, str(v), v.code, v >= (3, 10)
    (TargetVersion(major=3, minor=12), '3.12', 312, True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["NEWEST", "OLDEST", "SUPPORTED", "TargetLike", "TargetVersion"]

_VERSION_RE = re.compile(r"\s*(\d+)\.(\d+)\s*")


class TargetVersion(NamedTuple):
    """A supported ``(major, minor)`` Python version; compares like a tuple."""

    major: int
    minor: int

    @classmethod
    def parse(cls, value: TargetLike) -> TargetVersion:
        """``"3.12"``, ``(3, 12)`` or a ``TargetVersion``; ValueError if unsupported."""
        if isinstance(value, TargetVersion):
            return value
        if isinstance(value, str):
            match = _VERSION_RE.fullmatch(value)
            if not match:
                raise ValueError(f"a target version looks like '3.12', got {value!r}")
            parts = (int(match.group(1)), int(match.group(2)))
        else:
            try:
                parts = tuple(int(p) for p in list(value)[:2])  # type: ignore[assignment]
            except (TypeError, ValueError):
                raise ValueError(f"a target version is (major, minor), got {value!r}") from None
            if len(parts) != 2:
                raise ValueError(f"a target version is (major, minor), got {value!r}")
        version = cls(*parts)
        if version not in SUPPORTED:
            raise ValueError(f"target version {version} is not supported ({OLDEST} to {NEWEST})")
        return version

    @property
    def code(self) -> int:
        """``major * 100 + minor``: the lexer's tables are keyed by it."""
        return self.major * 100 + self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: Anything :meth:`TargetVersion.parse` accepts.
TargetLike = TargetVersion | str | Sequence[int]

#: Every supported target, oldest first.
SUPPORTED: tuple[TargetVersion, ...] = tuple(TargetVersion(3, minor) for minor in range(8, 16))
OLDEST = SUPPORTED[0]
NEWEST = SUPPORTED[-1]
