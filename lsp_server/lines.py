"""How a middle relates to the document's lines: the line mode, and the document's line ends.

In ``auto`` line mode the middle is a single line unless the grammar says the cursor
opens a block (:func:`opens_block`).  Models write any line end; the middle shown takes
the document's own (:func:`document_line_ends`), so an editor shows no stray ``^M``.
"""

from __future__ import annotations

from lexer.text import LINE_END_RE, first_line, indentation, last_line
from quotient_parser.quotient import Quotient

from .modes import LineMode

__all__ = ["document_line_ends", "opens_block", "single_line"]


def opens_block(quotient: Quotient) -> bool:
    """The grammar's view: the cursor ends a block header, so the middle needs lines.

    True when the rest of the cursor's line is blank and the left context can go
    on with a new, more deeply indented line but not with one at the line's own
    indentation (``if x:``, ``def f(a):``, ``class C:``, ``else:`` and so on).
    """
    if first_line(quotient.right).strip():
        return False
    line = last_line(quotient.left)
    if not line.strip():
        return False
    indent = indentation(line)
    state = quotient.initial
    deeper = state.feed(f"\n{indent}    pass").viable
    same = state.feed(f"\n{indent}pass").viable
    return deeper and not same


def single_line(line_mode: LineMode, quotient: Quotient) -> bool:
    """Whether to generate a single line (``auto``: unless the cursor opens a block)."""
    if line_mode != "auto":
        return line_mode == "single"
    return not opens_block(quotient)


def document_line_ends(middle: str, quotient: Quotient, text: str) -> str:
    """``middle`` with the document's line ends, if the file still parses that way.

    Python reads every line end alike, but the rewritten middle is checked again, since
    a line end that meets one in the context (``\\r`` before R's ``\\n``) can change how
    many lines there are.
    """
    newline = "\r\n" if "\r\n" in text else "\r" if "\r" in text and "\n" not in text else "\n"
    rewritten = LINE_END_RE.sub(newline, middle)
    if rewritten == middle:
        return middle
    if quotient.initial.feed(rewritten).complete:
        return rewritten
    return middle
