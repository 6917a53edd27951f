"""Hostile and extreme input: undecodable bytes, NUL characters, huge lines,
deep nesting, huge files.  The recognizer must give CPython's answer (the
running interpreter's ``ast.parse``) without raising, recursing too deep or
holding on to memory it does not need.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable

import pytest

from quotient_parser import Recognizer, SourceDecodeError, decode_source

AstAccepts = Callable[[str | bytes], bool]

# --------------------------------------------------------------------------- decoding

UNDECODABLE: list[bytes] = [
    b"x = '\xff'\n",  # not UTF-8 at all
    b"\xc3\x28 = 1\n",  # bad continuation byte
    b"x = '\xed\xa0\x80'\n",  # an encoded surrogate
    b"x = '\xe2\x82'\n",  # truncated sequence
    b"# coding: utf-8\nx = '\xe9'\n",  # declared UTF-8, is Latin-1
    b"\n\n# coding: latin-1\nx = '\xe9'\n",  # the cookie is too late to count
    b"# coding: nonsense\nx = 1\n",  # unknown encoding
    b"\xef\xbb\xbf# coding: latin-1\nx = 1\n",  # BOM and a different cookie
]


@pytest.mark.parametrize("data", UNDECODABLE, ids=range(len(UNDECODABLE)))
def test_undecodable_bytes_raise_a_clear_error(ast_accepts: AstAccepts, data: bytes) -> None:
    assert not ast_accepts(data)  # sanity: CPython refuses these bytes too
    with pytest.raises(SourceDecodeError) as info:
        decode_source(data)
    message = str(info.value).lower()
    assert message.strip()
    assert any(word in message for word in ("encod", "utf", "decode", "codec")), message


DECODABLE: list[tuple[bytes, str]] = [
    (b"x = 1\n", "x = 1\n"),
    (b"x = '\xc3\xa9'\n", "x = '\u00e9'\n"),
    (b"\xef\xbb\xbfx = 1\n", "x = 1\n"),
    (b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", "# -*- coding: latin-1 -*-\nx = '\u00e9'\n"),
    (
        b"#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\nx = '\xe9'\n",
        "#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\nx = '\u00e9'\n",
    ),
    (b"\xef\xbb\xbf# coding: utf-8\nx = 1\n", "# coding: utf-8\nx = 1\n"),
]


@pytest.mark.parametrize("data, text", DECODABLE, ids=range(len(DECODABLE)))
def test_decodable_bytes(rec: Recognizer, ast_accepts: AstAccepts, data: bytes, text: str) -> None:
    decoded = decode_source(data)
    assert decoded == text
    assert rec.recognize(decoded) == ast_accepts(data)


def test_source_decode_error_is_syntax_error_like() -> None:
    with pytest.raises(SourceDecodeError) as info:
        decode_source(b"x = '\xff'\n")
    assert isinstance(info.value, SyntaxError | ValueError)


# --------------------------------------------------------------------------- NUL characters

WITH_NUL = [
    "x = 1\0\n",
    "\0",
    "x = '\0'\n",
    "# comment \0\n",
    "x = 1\n\0",
    "def f():\n    return '''\0'''\n",
]


@pytest.mark.parametrize("text", WITH_NUL, ids=range(len(WITH_NUL)))
def test_nul_characters_are_rejected(rec: Recognizer, ast_accepts: AstAccepts, text: str) -> None:
    assert rec.recognize(text) == ast_accepts(text)
    assert not rec.recognize(text)
    state = rec.initial().feed(text)
    assert not state.complete
    assert not state.viable  # no continuation can remove the NUL


@pytest.mark.parametrize("text", WITH_NUL, ids=range(len(WITH_NUL)))
def test_nul_bytes_are_rejected(rec: Recognizer, ast_accepts: AstAccepts, text: str) -> None:
    data = text.encode()
    assert not ast_accepts(data)
    try:
        decoded = decode_source(data)
    except SourceDecodeError:
        return  # rejected while decoding: fine
    assert not rec.recognize(decoded)


# --------------------------------------------------------------------------- long lines

MB = 1_000_000


def _feed_in_chunks(rec: Recognizer, text: str, size: int) -> tuple[bool, bool]:
    state = rec.initial()
    for i in range(0, len(text), size):
        state = state.feed(text[i : i + size])
    return state.viable, state.complete


@pytest.mark.parametrize(
    "text",
    [
        "s = '" + "a" * MB + "'\n",
        "s = b'" + "\\x00" * (MB // 4) + "'\n",
        "# " + "comment " * (MB // 8) + "\nx = 1\n",
        "s = '''" + "line\n" * (MB // 5) + "'''\n",
        "s = '" + "a" * MB + "\n",  # unterminated
        "x = " + "y" * MB + "\n",  # a one-megabyte name
    ],
    ids=["string", "bytes", "comment", "triple-quoted", "unterminated", "name"],
)
def test_one_megabyte_line(rec: Recognizer, ast_accepts: AstAccepts, text: str) -> None:
    expected = ast_accepts(text)
    assert rec.recognize(text) == expected
    viable, complete = _feed_in_chunks(rec, text, 64 * 1024)
    assert complete == expected
    assert viable or not complete


@pytest.mark.slow
def test_one_megabyte_line_of_tokens(rec: Recognizer, ast_accepts: AstAccepts) -> None:
    text = "x = [" + "1, " * (MB // 3) + "]\n"
    assert rec.recognize(text) == ast_accepts(text)


# --------------------------------------------------------------------------- deep nesting

DEEP = 10_000


@pytest.mark.parametrize(
    "text",
    [
        "(" * DEEP + ")" * DEEP + "\n",
        "x = " + "[" * DEEP + "]" * DEEP + "\n",
        "x = " + "{" * DEEP + "}" * DEEP + "\n",
        "f" + "(" * DEEP + ")" * DEEP + "\n",
        "x = " + "[(" * (DEEP // 2) + ")]" * (DEEP // 2) + "\n",
        "(" * DEEP,
        "x = " + "(" * DEEP + "\n",
        ")" * DEEP + "\n",
    ],
    ids=["parens", "brackets", "braces", "call", "mixed", "unclosed", "unclosed-nl", "closers"],
)
def test_deeply_nested_brackets_are_rejected_cleanly(
    rec: Recognizer, ast_accepts: AstAccepts, text: str
) -> None:
    expected = ast_accepts(text)
    assert not expected  # CPython's tokenizer allows 200 levels
    assert rec.recognize(text) is False
    viable, complete = _feed_in_chunks(rec, text, 97)
    assert not complete
    # Beyond CPython's limit no continuation can make the text valid.
    assert not viable


@pytest.mark.parametrize("depth", [199, 200, 201, 202])
def test_bracket_nesting_limit(rec: Recognizer, ast_accepts: AstAccepts, depth: int) -> None:
    text = "x = " + "(" * depth + "1" + ")" * depth + "\n"
    assert rec.recognize(text) == ast_accepts(text)


@pytest.mark.parametrize(
    "text",
    ["not " * DEEP + "x\n", "-" * DEEP + "1\n", "x = " + "lambda: " * 2000 + "1\n"],
    ids=["not", "minus", "lambda"],
)
def test_deep_operator_nesting_does_not_crash(rec: Recognizer, text: str) -> None:
    # CPython gives up here on an implementation limit of its parser; the
    # recognizer need not copy that limit, but it must answer without raising.
    assert isinstance(rec.recognize(text), bool)


def _nested_blocks(depth: int, indent: str = " ") -> str:
    lines = [indent * level + "if x:\n" for level in range(depth)]
    return "".join(lines) + indent * depth + "pass\n"


@pytest.mark.parametrize("depth", [50, 98, 99, 100, 101, 150])
def test_indentation_depth_limit(rec: Recognizer, ast_accepts: AstAccepts, depth: int) -> None:
    text = _nested_blocks(depth)
    assert rec.recognize(text) == ast_accepts(text)


def test_very_deep_indentation_is_rejected_cleanly(
    rec: Recognizer, ast_accepts: AstAccepts
) -> None:
    text = _nested_blocks(1000)
    assert not ast_accepts(text)
    assert rec.recognize(text) is False


def test_indentation_limit_with_tabs(rec: Recognizer, ast_accepts: AstAccepts) -> None:
    for depth in (99, 100):
        text = _nested_blocks(depth, "\t")
        assert rec.recognize(text) == ast_accepts(text), depth


# --------------------------------------------------------------------------- huge files

BLOCK = '''

class Record{n}:
    """A record with a few fields."""

    def __init__(self, name: str, values: list[int] | None = None) -> None:
        self.name = name
        self.values = values or []

    def total(self) -> int:
        return sum(v for v in self.values if v > 0)

    def describe(self) -> str:
        return f"{{self.name}}: {{len(self.values)}} values, total {{self.total()}}"


TABLE_{n} = {{"key": [1, 2, 3], "other": (4, 5), "text": "{padding}"}}
'''


def _big_source(size: int) -> str:
    parts: list[str] = ["import os\nimport sys\n"]
    length = len(parts[0])
    n = 0
    while length < size:
        part = BLOCK.format(n=n, padding="p" * 3000)
        parts.append(part)
        length += len(part)
        n += 1
    return "".join(parts)


@pytest.mark.slow
def test_twenty_megabyte_file(rec: Recognizer, ast_accepts: AstAccepts) -> None:
    """A 20 MB module fed in 1 MB chunks: the right answer in bounded memory.

    Only the current state is kept alive, so the peak of Python allocations
    while feeding must stay far below what a chart over the whole file would
    take (limit: FIMLSP_BIG_FILE_PEAK_MB, default 512).  Skipped when feeding
    a sample shows the whole would take longer than FIMLSP_BIG_FILE_BUDGET_S
    (default 900) seconds.
    """
    chunk = MB
    text = _big_source(20 * MB)
    assert ast_accepts(text)

    budget = float(os.environ.get("FIMLSP_BIG_FILE_BUDGET_S", "900"))
    t0 = time.perf_counter()
    rec.initial().feed(text[: 2 * chunk])
    projected = (time.perf_counter() - t0) * 10
    if projected > budget:
        pytest.skip(f"too slow: 20 MB would take about {projected:.0f} s (budget {budget:.0f} s)")

    limit_mb = float(os.environ.get("FIMLSP_BIG_FILE_PEAK_MB", "512"))
    tracemalloc.start()
    try:
        state = rec.initial()
        for i in range(0, len(text), chunk):
            state = state.feed(text[i : i + chunk])
            assert state.viable, f"not viable after {i + chunk} characters"
        complete = state.complete
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert complete
    assert peak / 2**20 < limit_mb, f"peak {peak / 2**20:.0f} MiB for {len(text) / MB:.0f} MB"
