"""Single-line or multi-line: which the cursor asks for.

In ``auto`` line mode the middle is a single line unless the grammar says the cursor
opens a block (:func:`opens_block`), or, for a model that sees the code after the
cursor (FIM), the cursor is inside a line of code (:func:`inside_line`: what the model
writes may run over lines, and ends where it writes the rest of that line again,
``stopping.RightEcho.tail``).  What a single line is depends on where the cursor is:
after code on its line, the rest of that line (the model's line break ends it); at the
start of a line that has code after the cursor, a line of its own inserted there, which
ends with its line break (:func:`own_line`).  A single line that cannot connect is
generated again over several lines, and a FIM model's complete one at a line's start
goes on over the further lines the model is sure of (:mod:`.extend`): both are among
the second attempts of :mod:`.attempts`.
"""

from __future__ import annotations

from lexer.text import first_line, indentation, last_line
from lsp_server.modes import LineMode
from quotient_parser.quotient import Quotient

__all__ = ["at_line_start", "inside_line", "opens_block", "own_line", "single_line"]


def at_line_start(quotient: Quotient) -> bool:
    """The cursor has only blanks before it on its line."""
    return not last_line(quotient.left).strip()


def own_line(quotient: Quotient) -> bool:
    """The cursor is at a line's start (blanks before it) with code after it on the
    line: the middle is lines of their own inserted there, each ending with its line
    break (a single line: one such line)."""
    return at_line_start(quotient) and bool(first_line(quotient.right).strip())


def inside_line(quotient: Quotient) -> bool:
    """The cursor has code before it and after it on its line."""
    return not at_line_start(quotient) and bool(first_line(quotient.right).strip())


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


def single_line(line_mode: LineMode, quotient: Quotient, fim: bool = False) -> bool:
    """Whether to generate a single line (``auto``: unless the cursor opens a block, or
    is inside a line of code and the model is a FIM model)."""
    if line_mode != "auto":
        return line_mode == "single"
    return not opens_block(quotient) and not (fim and inside_line(quotient))
