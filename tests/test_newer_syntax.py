"""quotient_parser.find_newer_syntax: the line that needs a newer Python.

Each case's file is valid for the version the finder names (its stored
oracle verdict says so) and invalid for the target.
"""

from __future__ import annotations

import doctest

import pytest
from stored_verdicts import stored_accepts

import quotient_parser.newer_syntax as newer_syntax_module
from lexer.version import TargetVersion
from quotient_parser import find_newer_syntax

CASES = [
    # (text, target, line, column, oldest version that accepts it)
    ('x = 1\ngreeting = t"Hello {name}"\n', (3, 12), 2, 13, (3, 14)),
    ("try:\n    pass\nexcept A, B:\n    pass\n", (3, 13), 3, 9, (3, 14)),
    ("import os\nlazy import json\n", (3, 14), 2, 7, (3, 15)),
    ("flat = [*row for row in rows]\n", (3, 14), 1, 14, (3, 15)),
    ("match x:\n    case +1:\n        pass\n", (3, 14), 2, 10, (3, 15)),
    ("match x:\n    case 1:\n        pass\n", (3, 9), 1, 7, (3, 10)),
    ("type Alias = int\n", (3, 11), 1, 6, (3, 12)),
    ("def f[T](x: T) -> T:\n    return x\n", (3, 11), 1, 6, (3, 12)),
    ("if (n := 10) > 5:\n    pass\n", (3, 8), 0, 0, None),
    ("with (open(a) as f, open(b) as g):\n    pass\n", (3, 8), 1, 17, (3, 9)),
]


def oracle_sources() -> list[str]:
    return [text for text, *_ in CASES]


@pytest.mark.parametrize(("text", "target", "line", "column", "needs"), CASES)
def test_the_first_line_and_the_oldest_version(
    text: str,
    target: tuple[int, int],
    line: int,
    column: int,
    needs: tuple[int, int] | None,
) -> None:
    found = find_newer_syntax(text, target)
    if needs is None:
        assert found is None
        assert stored_accepts(text, target)
        return
    assert found is not None
    assert (found.line, found.column, found.version) == (line, column, needs)
    assert found.target == target
    assert text[found.offset] == text.splitlines(keepends=True)[line - 1][column - 1]
    assert not stored_accepts(text, target)
    assert stored_accepts(text, needs)
    assert found.describe() == f"line {line} uses syntax from Python {needs[0]}.{needs[1]}"


def test_a_plain_syntax_error_is_not_newer_syntax() -> None:
    assert find_newer_syntax("x = = 1\n", "3.8") is None
    assert find_newer_syntax("def f(:\n", "3.12") is None


def test_an_unfinished_text_is_not_newer_syntax() -> None:
    assert find_newer_syntax("x = (\n    1,\n", "3.8") is None
    assert find_newer_syntax("", "3.15") is None


def test_the_newest_target_has_nothing_newer() -> None:
    assert find_newer_syntax("lazy import json\n", TargetVersion(3, 15)) is None


def test_docstring_examples() -> None:
    result = doctest.testmod(newer_syntax_module)
    assert result.attempted > 0 and result.failed == 0
