"""Property tests on random slices of the running interpreter's standard library.

(a) every prefix of a file that ``ast.parse`` accepts is viable;
(b) ``recognize`` agrees with ``ast.parse`` on random contiguous line ranges
    (taken as they are, so most start indented or cut a statement in two);
(c) feeding a text in random chunks gives the same answers as feeding each
    prefix at once, and viability never comes back once lost.

The corpus is the stdlib's ``*.py`` files of at most 16 kB (to keep each
example quick); the number of examples is set by the Hypothesis profile (see
``conftest.py``).
"""

from __future__ import annotations

import ast
import functools
import tokenize
import warnings
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from bench.corpus import stdlib_corpus
from lexer.text import split_lines
from quotient_parser import Recognizer

AstAccepts = Callable[[str | bytes], bool]

MAX_FILE_BYTES = 16_000
MAX_SLICE_LINES = 30

SMALL_FILES: list[Path] = [
    f.path for f in stdlib_corpus() if 0 < f.path.stat().st_size <= MAX_FILE_BYTES
]


@functools.cache
def read_text(path: Path) -> str | None:
    """The file decoded as CPython would (None if it cannot be decoded)."""
    try:
        with tokenize.open(path) as f:  # coding cookie, BOM; universal newlines
            return f.read()
    except (SyntaxError, UnicodeDecodeError):
        return None


@functools.cache
def oracle_accepts(path: Path) -> bool:
    text = read_text(path)
    if text is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return False
    return True


@st.composite
def line_slices(draw: st.DrawFn) -> str:
    """A random run of consecutive lines of a random stdlib file."""
    path = draw(st.sampled_from(SMALL_FILES))
    lines = split_lines(read_text(path) or "")
    if not lines:
        return ""
    start = draw(st.integers(0, len(lines) - 1))
    count = draw(st.integers(1, MAX_SLICE_LINES))
    text = "".join(lines[start : start + count])
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text


def test_corpus_is_not_empty() -> None:
    assert len(SMALL_FILES) > 100


@given(data=st.data())
def test_prefixes_of_valid_files_are_viable(rec: Recognizer, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(SMALL_FILES).filter(oracle_accepts), label="file")
    text = read_text(path)
    assert text is not None
    offsets = data.draw(
        st.lists(st.integers(0, len(text)), min_size=1, max_size=8, unique=True).map(sorted),
        label="offsets",
    )
    state, fed = rec.initial(), 0
    for offset in offsets:
        state = state.feed(text[fed:offset])
        fed = offset
        assert state.viable, f"{path}: prefix up to offset {offset} is not viable"
    # and a prefix fed in one go
    assert rec.initial().feed(text[: offsets[-1]]).viable


@given(text=line_slices())
def test_recognize_agrees_with_ast_on_line_ranges(
    rec: Recognizer, ast_accepts: AstAccepts, text: str
) -> None:
    assert rec.recognize(text) == ast_accepts(text)


@given(text=line_slices(), data=st.data())
def test_chunking_invariance(rec: Recognizer, text: str, data: st.DataObject) -> None:
    cuts = data.draw(
        st.lists(st.integers(0, len(text)), max_size=8, unique=True).map(sorted), label="cuts"
    )
    state, fed, was_viable = rec.initial(), 0, True
    for cut in [*cuts, len(text)]:
        state = state.feed(text[fed:cut])
        fed = cut
        at_once = rec.initial().feed(text[:cut])
        assert (state.viable, state.complete) == (at_once.viable, at_once.complete), (
            f"chunked {cuts} vs at once, up to {cut}"
        )
        assert was_viable or not state.viable, "viability came back after a dead prefix"
        assert state.viable or not state.complete, "complete but not viable"
        was_viable = state.viable
