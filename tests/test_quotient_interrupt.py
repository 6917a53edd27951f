"""Interrupting quotient construction, and warming a builder with a whole document.

An interrupted build raises ``BuildInterrupted`` and keeps only what is certainly right,
so every later answer equals a fresh quotient's and CPython's ``ast.parse``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from bench.corpus import stdlib_root
from lexer.text import count_line_ends, line_end_offsets
from quotient_parser.quotient import BuildInterrupted, Quotient, QuotientBuilder

Accepts = Callable[[str], bool]


def _text() -> str:
    return (stdlib_root() / "fnmatch.py").read_text(encoding="utf-8") * 3


def _after(polls: int) -> Callable[[], bool]:
    """An interrupt that says stop at its ``polls``-th call."""
    calls = 0

    def interrupt() -> bool:
        nonlocal calls
        calls += 1
        return calls >= polls

    return interrupt


def _same_answers(
    builder: QuotientBuilder, left: str, right: str, target: tuple[int, int], accepts: Accepts
) -> None:
    reused, fresh = builder.build(left, right), Quotient(left, right, target)
    for middle in ("", "pass", "x", ")", "1 +", "\n"):
        got = (reused.initial.feed(middle).viable, reused.initial.feed(middle).complete)
        want = (fresh.initial.feed(middle).viable, fresh.initial.feed(middle).complete)
        assert got == want, (left[-30:], middle, right[:30])
        assert got[1] == accepts(left + middle + right)


@pytest.mark.parametrize("polls", [1, 2, 5, 9])
def test_an_interrupted_build_leaves_exact_answers(
    polls: int, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    text = _text()
    rng = random.Random(polls)
    ends = line_end_offsets(text)
    cut = rng.choice(ends[len(ends) // 2 :]) + 4
    left, right = text[:cut], text[cut:]
    builder = QuotientBuilder(target)
    with pytest.raises(BuildInterrupted):
        builder.build(left, right, interrupt=_after(polls))
    _same_answers(builder, left, right, target, ast_accepts)


def test_an_interrupt_in_the_right_context_memoises_nothing(
    target: tuple[int, int], ast_accepts: Accepts
) -> None:
    text = _text()
    cut = line_end_offsets(text)[40]  # a statement boundary: R parses on to its end
    builder = QuotientBuilder(target)
    builder.warm(text)  # the left context is parsed: the polls come from R
    with pytest.raises(BuildInterrupted):
        builder.build(text[:cut], text[cut:], interrupt=_after(2))
    _same_answers(builder, text[:cut], text[cut:], target, ast_accepts)


def test_no_interrupt_no_difference(target: tuple[int, int], ast_accepts: Accepts) -> None:
    text = _text()
    cut = line_end_offsets(text)[100] + 4
    builder = QuotientBuilder(target)
    builder.build(text[:cut], text[cut:], interrupt=lambda: False)
    _same_answers(builder, text[:cut], text[cut:], target, ast_accepts)


def test_warming_resumes_where_it_was_interrupted(
    target: tuple[int, int], ast_accepts: Accepts
) -> None:
    text = _text()
    lines = count_line_ends(text)
    builder = QuotientBuilder(target)
    assert builder.warmed_lines(text) == 0
    with pytest.raises(BuildInterrupted):
        builder.warm(text, _after(3))
    partial = builder.warmed_lines(text)
    assert 0 < partial < lines
    polls = 0

    def counting() -> bool:
        nonlocal polls
        polls += 1
        return False

    builder.warm(text, counting)
    assert builder.warmed_lines(text) == lines
    assert polls < lines // 16 + 2 - partial // 16 + 1  # it went on from where it stopped
    # a cursor anywhere: the answers of a fresh quotient
    for at in (line_end_offsets(text)[10], line_end_offsets(text)[-20] + 2, len(text) - 1):
        _same_answers(builder, text[:at], text[at:], target, ast_accepts)
    # an edit: the warmed states before it still serve, those after it are not used
    edited = text[:500] + "x = (\n" + text[500:]
    _same_answers(builder, edited[:2000], edited[2000:], target, ast_accepts)


def _counting_successors(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the charts computed afresh (``Chart._successor``: a step not memoised)."""
    from quotient_parser.earley import Chart

    real = Chart._successor
    count = [0]

    def counted(self: Chart, symbol: int) -> object:
        count[0] += 1
        return real(self, symbol)

    monkeypatch.setattr(Chart, "_successor", counted)
    return count


def test_a_backward_warm_serves_every_right_context_of_the_document(
    target: tuple[int, int], ast_accepts: Accepts, monkeypatch: pytest.MonkeyPatch
) -> None:
    from quotient_parser.suffix import right_context_can_end_module

    text = _text().replace("def ", "def  ", 1) + "\n\nclass Tail:\n    pass\n"  # unseen text
    cuts = [line_end_offsets(text)[i] + 3 for i in (40, 150, 300)]
    builder = QuotientBuilder(target)
    with pytest.raises(BuildInterrupted):
        builder.warm_right(text, _after(2))  # stopped after one poll's worth of symbols
    fresh = _counting_successors(monkeypatch)
    builder.warm_right(text)  # resumes: the part parsed is found memoised
    whole = fresh[0]
    assert whole > 1000
    for cut in cuts:
        fresh[0] = 0
        can_end = right_context_can_end_module(text[cut:], target)
        assert can_end
        assert fresh[0] < whole // 8, (cut, fresh[0], whole)  # only the front is new
        _same_answers(builder, text[:cut], text[cut:], target, ast_accepts)
