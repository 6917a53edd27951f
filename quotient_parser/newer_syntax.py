"""Why a file fails for its target: syntax from a newer Python.

When the left context of a completion cannot be parsed for the target, the
usual reason in a real project is a construct the target does not have yet
(a t-string while ``requires-python`` says 3.12).  :func:`find_newer_syntax`
finds the first place where the text stops being a viable prefix for the
target and the oldest newer supported version for which the text up to that
line is still viable, so the server can say "line 3 uses syntax from Python
3.14 (target 3.12 from requires-python >=3.12 in .../pyproject.toml)"::

    >>> found = find_newer_syntax('x = 1\\ngreeting = t"hi {name}"\\n', "3.12")
    >>> found.line, str(found.version)
    (2, '3.14')
    >>> found.describe()
    'line 2 uses syntax from Python 3.14'
    >>> find_newer_syntax("x = (\\n", "3.12") is None  # just unfinished
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from lexer.text import split_lines
from lexer.version import SUPPORTED, TargetLike, TargetVersion

from .recognizer import Recognizer, RecognizerState

__all__ = ["NewerSyntax", "find_newer_syntax"]


@dataclass(frozen=True)
class NewerSyntax:
    """Where the text first needs a newer Python, and the oldest that accepts it.

    ``line`` and ``column`` are 1-based (the column counted in characters)
    and point at the first character after which the text is no longer a
    viable prefix for the target; ``version`` is the oldest supported
    version newer than the target for which the text up to the end of that
    line is still viable.
    """

    line: int
    column: int
    offset: int
    version: TargetVersion
    target: TargetVersion

    def describe(self) -> str:
        return f"line {self.line} uses syntax from Python {self.version}"


def find_newer_syntax(text: str, target: TargetLike) -> NewerSyntax | None:
    """Where ``text`` needs a Python newer than ``target``, or None.

    None when the text is a viable prefix for the target (it may just be
    unfinished), or when no newer supported version gets further: then the
    problem is a plain syntax error, not the version.  Costs one line-by-line
    pass with the target's recognizer, one character-by-character pass over
    the failing line, and one pass per newer version up to that line.
    """
    version = TargetVersion.parse(target)
    lines = split_lines(text)
    state = Recognizer(version).initial()
    start = 0
    for number, line in enumerate(lines, 1):
        after = state.feed(line)
        if not after.viable:
            return _explain(text, lines, number, start, state, line, version)
        state = after
        start += len(line)
    return None


def _explain(
    text: str,
    lines: list[str],
    number: int,
    start: int,
    state: RecognizerState,
    line: str,
    target: TargetVersion,
) -> NewerSyntax | None:
    """The answer for a text whose line ``number`` (at ``start``) kills the target."""
    head = text[: start + len(line)]
    newer = next(
        (v for v in SUPPORTED if v > target and Recognizer(v).initial().feed(head).viable),
        None,
    )
    if newer is None:
        return None
    column = len(line)
    current = state
    for k, ch in enumerate(line):
        current = current.feed(ch)
        if not current.viable:
            column = k + 1
            break
    return NewerSyntax(number, column, start + column - 1, newer, target)
