"""Where a middle ends: the pieces of the end rules and of heuristic mode, without a model.

The decoder's use of them with a real FIM model is in ``tests/test_real_model.py``.
"""

from __future__ import annotations

import pytest

from lsp_server.decoding.edit_distance import edit_distance, edit_similarity
from lsp_server.decoding.heuristic import HeuristicFilter
from lsp_server.decoding.stopping import RightEcho, StoppingPoints
from lsp_server.decoding.text import breaks_only_at_end
from quotient_parser.quotient import Quotient

# --------------------------------------------------------------------------- edit distance


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("", "", 0),
        ("abc", "", 3),
        ("", "abc", 3),
        ("kitten", "sitting", 3),
        ("flaw", "lawn", 2),
        ("return x", "return x", 0),
        ("return x\n", "return y\n", 1),
        ("abcdef", "azced", 3),
    ],
)
def test_edit_distance(a: str, b: str, distance: int) -> None:
    assert edit_distance(a, b) == distance
    assert edit_distance(b, a) == distance


def test_edit_similarity() -> None:
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("abcd", "abcd") == 1.0
    assert edit_similarity("abcd", "") == 0.0
    assert edit_similarity("abcd", "abce") == 0.75


# --------------------------------------------------------------------------- stopping points


def test_likelihood_points_settle_once_no_later_point_can_win() -> None:
    points = StoppingPoints(likelihood=True)
    assert not points.settled(-0.1)  # nothing found yet
    score = points.score(-1.0, -2.0, 3)
    assert score == -3.0
    points.found(score, "x)", 3)
    assert not points.settled(-2.9)  # a later point ending with certainty could beat it
    assert points.settled(-3.0)
    assert points.settled(-4.5)


def test_normalised_points_never_settle() -> None:
    points = StoppingPoints(likelihood=False)
    assert points.score(-1.0, -2.0, 3) == -0.75
    points.found(-0.75, "x", 3)
    assert not points.settled(-100.0)


def test_best_within_takes_the_best_point_of_a_prefix() -> None:
    points = StoppingPoints()
    points.found(-5.0, "a", 1)
    points.found(-4.0, "a b", 4)
    points.found(-3.0, "a b c", 9)
    assert points.best_within(0) is None
    assert points.best_within(2) == (-5.0, "a", 1)
    assert points.best_within(4) == (-4.0, "a b", 4)
    assert points.best_within(20) == (-3.0, "a b c", 9)


def test_the_rest_of_the_cursor_line_written_again_is_an_echo() -> None:
    """Inside a line, a line of the middle that ends with the rest of the cursor's line
    writes R again within the line: the middle ends before that text."""
    left, right = "    closest_pair = None\n    cl", "osest_pair = x\n    return y\n"
    echo = RightEcho(right, left)
    middle = "osest_pair = min(pairs)\n    return closest_pair = x\n"
    assert echo.tail(middle) == middle.index("osest_pair = x")
    assert echo.tail("osest_pair = min(pairs)\n") is None
    assert echo.tail(middle.rstrip("\n")) is None  # the line is not ended yet
    # a line of its own, or the cursor at a line's end: no rest of the line to echo
    assert RightEcho(right, "    closest_pair = None\n").tail(middle) is None
    assert RightEcho("\n    return y\n", left).tail(middle) is None


def test_tokens_before_an_offset() -> None:
    q = Quotient("x = ", "\n")
    points = StoppingPoints()
    state = q.initial
    for before in ("", "ab", "abcd"):  # three tokens: "ab", "cd", "ef"
        points.passed(before, state)
    assert points.tokens_before(0) == 0
    assert points.tokens_before(3) == 1
    assert points.tokens_before(4) == 2
    assert points.tokens_before(6) == 2


def test_blank_middles_are_no_stopping_points() -> None:
    q = Quotient("def f():\n    return 1\n", "\nx = 2\n")
    points = StoppingPoints()
    from lsp_server.decoding.stopping import StopCheck

    state = q.initial.feed("\n")
    assert state.lands
    assert points.fallback("\n", b"", state, 1, StopCheck(None, None)) == ("\n", False, 1)


# --------------------------------------------------------------------------- echo of R


def test_echo_is_a_whole_line_equal_to_the_next_line_of_code() -> None:
    echo = RightEcho("\n        res.append(x)\n    return res\n")
    assert echo.start("    while lst:\n") is None
    assert echo.start("    while lst:\n        res.append(x)") is None  # not whole yet
    assert echo.start("    while lst:\n        res.append(x)\n") == len("    while lst:\n")
    assert echo.start("    while lst:\n    res.append(x)  \n") == len("    while lst:\n")
    assert echo.start("    while lst:\n        res.append(y)\n") is None
    assert RightEcho("\n\n").start("x\n") is None  # R has no code
    # The middle's first line ends the cursor's line: no line of its own unless the
    # cursor's line has no code before it.
    assert RightEcho(")\nprint(total)\n", "total = max(values, ").start(")\n") is None
    assert RightEcho("    return x\n", "def f():\n    ").start("    return x\n") == 0
    assert RightEcho("    return x\n", "def f():\n").start("    return x\n") == 0


def test_a_line_restates_one_of_the_next_lines_of_code_exactly_or_nearly() -> None:
    """What ends an extension (``extend.py``): R's next three lines of code, each within
    a tenth of its length in edits; blanks around the line aside."""
    echo = RightEcho("\n        if i%2 == 1:\n            odd += 1\n    for i in lst2:\n    x\n")
    assert echo.restates("        if i%2 == 0:")  # one edit in twelve characters
    assert echo.restates("odd += 1")
    assert echo.restates("  for i in lst2:  ")
    assert not echo.restates("    x")  # the fourth line of code: too far
    assert not echo.restates("        if i%3 == 0:")  # two edits
    assert not RightEcho("\n\n").restates("x")  # R has no code


def test_breaks_only_at_end() -> None:
    assert breaks_only_at_end("x = 1")
    assert breaks_only_at_end(")\n")
    assert breaks_only_at_end("\r\n")
    assert not breaks_only_at_end("\n    ")
    assert not breaks_only_at_end("a\nb\n")


# --------------------------------------------------------------------------- heuristic mode


def test_heuristic_one_line_in_the_middle_of_a_line() -> None:
    rules = HeuristicFilter("total = max(", ", 0)\nprint(total)\n")
    assert rules.cut("values") is None
    assert rules.cut("values\n") == len("values")
    assert rules.tidy("values\nprint(1)") == "values"


def test_heuristic_indentation_stop() -> None:
    left = "def f(x):\n    if x:\n        y = 1"
    rules = HeuristicFilter(left, "\n    return y\n")
    middle = "\n        z = 2\n    w = 3\n"
    assert rules.cut(middle) == len("\n        z = 2\n")
    # inside the indentation, the indentation to the cursor's left counts
    rules = HeuristicFilter("def f(x):\n    ", "\n")
    assert rules.cut("return x\nprint(1)\n") == len("return x\n")
    # at a line's start, the indentation of the code after the cursor on its line
    rules = HeuristicFilter("def f(x):\n", "        y = 1\n")
    assert rules.cut("    if x:\n        z = 2\n    w = 3\n") == len("    if x:\n        z = 2\n")


def test_heuristic_stops_before_the_next_line_of_code() -> None:
    rules = HeuristicFilter("def f(lst):\n", "        res.append(1)\n    return res\n")
    middle = "    while lst:\n        res.append(1)\n"
    assert rules.cut(middle) == len("    while lst:\n")
    # within a tenth of the line's length in edits counts too
    assert rules.cut("    while lst:\n        res.append(2)\n") == len("    while lst:\n")
    # a line of its own before code keeps its line break
    assert rules.tidy("    while lst:\n   \n") == "    while lst:\n"


def test_heuristic_repeated_lines() -> None:
    rules = HeuristicFilter("def f():\n    ", "\n")
    middle = "x = 1\n    y += 1\n    y += 1\n    y += 1\n"
    assert rules.cut(middle) == len("x = 1\n    y += 1\n")


def test_heuristic_drops_closing_brackets_the_line_has() -> None:
    rules = HeuristicFilter("total = sum(", ")\nreturn total\n")
    assert rules.tidy("values)") == "values"
    assert rules.tidy("f(values))") == "f(values)"
    assert rules.tidy("values") == "values"
    assert HeuristicFilter("x = [", "]\n").tidy("1, 2]  ") == "1, 2"
