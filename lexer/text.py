"""Lines and indentation of source text, as Python and the LSP see them.

Only ``\\n``, ``\\r\\n`` and a lone ``\\r`` end a line: that is CPython's rule
for source and the protocol's rule for positions.  ``str.splitlines`` also
breaks at form feeds, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, which
occur in real files, so nothing in fimlsp uses it on source text.  Every
layer (lexer, quotient, server, benchmarks) takes these helpers from here, so
a classic-Mac ``\\r`` is a line end everywhere or nowhere.
"""

from __future__ import annotations

import re
from itertools import accumulate

__all__ = [
    "INDENT_CHARS",
    "LINE_END_RE",
    "count_line_ends",
    "first_line",
    "indentation",
    "indentation_column",
    "is_word_char",
    "last_line",
    "last_line_start",
    "line_end_offsets",
    "line_ends_and_end",
    "split_lines",
]

#: One line end: ``\r\n`` counts once.
LINE_END_RE = re.compile(r"\r\n|\r|\n")
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")

#: Characters CPython's tokenizer reads as indentation (a form feed resets the column).
INDENT_CHARS = " \t\f"


def is_word_char(c: str) -> bool:
    """Whether ``c`` can be part of a name (so two of them side by side join into one)."""
    return c.isalnum() or c == "_" or (not c.isascii() and c.isidentifier())


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its line end (the last one may have none)."""
    return _LINE_RE.findall(text)


def line_end_offsets(text: str) -> list[int]:
    """Offsets just after each line end of ``text``.

    Computed by the string's own split and running sums (C loops: a server indexes
    megabyte documents with it), by the regex only when a ``\r`` is present.
    """
    if "\r" not in text:
        return list(accumulate(map((1).__add__, map(len, text.split("\n")[:-1]))))
    return [m.end() for m in LINE_END_RE.finditer(text)]


def line_ends_and_end(text: str) -> list[int]:
    """Offsets just after each line end of ``text``, plus its end: where text fed line
    by line is cut."""
    ends = line_end_offsets(text)
    if not ends or ends[-1] != len(text):
        ends.append(len(text))
    return ends


def count_line_ends(text: str) -> int:
    """Line ends in ``text``; ``\\r\\n`` counts once."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def last_line_start(text: str) -> int:
    """Index just after the last line end of ``text`` (0 if it has none)."""
    return max(text.rfind("\n"), text.rfind("\r")) + 1


def last_line(text: str) -> str:
    """The text after the last line end: the cursor's line, for a left context."""
    return text[last_line_start(text) :]


def first_line(text: str) -> str:
    """The text before the first line end: the rest of the cursor's line, for a right
    context."""
    match = LINE_END_RE.search(text)
    return text if match is None else text[: match.start()]


def indentation(line: str) -> str:
    """The leading whitespace CPython counts as indentation."""
    return line[: len(line) - len(line.lstrip(INDENT_CHARS))]


def indentation_column(whitespace: str) -> int:
    """The column leading whitespace reaches, as CPython's tokenizer counts it (tab
    stops every 8 columns; a form feed resets the column)."""
    column = 0
    for ch in whitespace:
        if ch == "\t":
            column = (column // 8 + 1) * 8
        elif ch == "\f":
            column = 0
        else:
            column += 1
    return column
