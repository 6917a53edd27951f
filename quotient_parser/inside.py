"""Context escape prevention (``stay_inside``): a middle stays in the construct at the cursor.

Section VIII-A of the seed paper: a middle that is syntactically fine can
still *escape* the construct the user is typing in, for example close the
call whose arguments the cursor sits in and start a new statement, leaving
the right context to close a bracket that the middle opened.  With
``Quotient(..., stay_inside=True)`` such middles are not viable.

Definition
----------
At the cursor (the lexer state after L) the open constructs form three
stacks: the *enclosures* (brackets, f-string replacement-field braces and
f-strings, one stack, see ``LexState.enclosures``), a plain string literal
still open, and the indentation blocks.  A middle ``m`` escapes when, while
``L + m`` is lexed,

* the enclosure stack drops below its first ``p`` entries, where ``p`` is
  the length of the common prefix of the stack at the cursor and the stack R
  needs before it (the enclosures R closes, found by lexing R from the
  cursor up to the end of its first logical line, or, for a plain bracket
  mismatch, with the bracket repairs of ``suffix.lex_in_mode``): those are
  open at the cursor and R closes them, so the middle must not;
* the string literal open at the cursor ends, when R closes it;
* the indentation stack drops below the blocks around the cursor: all open
  blocks when the cursor follows a token on its line, else those whose
  column is at most the indentation already typed on the cursor's line.

A construct the middle opens itself may be closed by it (depth above ``p``),
and a construct R does not close must be closed by the middle (the stack R
needs is shorter, so ``p`` is).  A backslash continuation is no construct:
the logical line it continues may end in the middle like any other.
Examples (``|`` the cursor)::

    f(|)                 p = 1   "a, b" stays; "a), g(b" escapes
    [1, |]               p = 1   "2, 3" stays
    f(g(x|)              R = ")": p = 1, the middle closes g( and stays in f(
    f"{x|}"              the field and the f-string are kept open
    'ab|cd'              the literal stays open: "x' + 'y" escapes
    if x:\\n    y = 1|    R = "\\nz = 2": "\\n    w = 3" stays, "\\nw = 3" escapes
    if x:\\n    y = 1\\n|  (cursor at column 0) the block is not around the cursor

Checking is incremental: a step whose text holds no closing bracket, quote
or line break, from a state not at a line start, cannot escape (the lexer
never holds a bracket pending), so only such steps are lexed again, to see
the symbols they emit.  ``quotient.InsideState`` asks this at each step.
"""

from __future__ import annotations

from dataclasses import dataclass

from lexer import LexError, LexState
from lexer.tables import CLOSE_TO_OPEN, OPEN_BRACKETS
from lexer.text import LINE_END_RE, indentation, indentation_column

from .recognizer import RecognizerState
from .suffix import lex_in_mode

__all__ = ["Enclosure", "enclosure_at"]

_OPEN = frozenset(OPEN_BRACKETS)
_CLOSE = frozenset(CLOSE_TO_OPEN)
#: Kinds that open and close an f-string (or a t-string, where the lexer has them).
_OPENS_LITERAL = "STRING_START"
_CLOSES_LITERAL = "STRING_END"
#: Characters without which a step cannot close anything or dedent.
_RISKY = frozenset(")]}'\"\r\n")


@dataclass(frozen=True)
class Enclosure:
    """What middles of one quotient must keep open (see the module docstring)."""

    #: Entries of the enclosure stack at the cursor that must stay open.
    depth: int
    #: Indentation levels (the module's included) that must stay open.
    blocks: int
    #: Offset of the plain string literal open at the cursor that must stay open
    #: (-1: none).
    string_start: int

    def escapes(self, before: RecognizerState, text: str) -> bool:
        """Whether feeding ``text`` after ``before`` leaves a protected construct."""
        return self.escape(before, text) is not None

    def escape(self, before: RecognizerState, text: str) -> str | None:
        """What feeding ``text`` after ``before`` leaves: ``"bracket"`` (an enclosure,
        f-strings included), ``"string"``, ``"block"``, or None."""
        lex = before.lex
        if lex is None or not text:
            return None
        if not lex.at_line_start and _RISKY.isdisjoint(text):
            return None
        try:
            _after, symbols = lex.feed(text)
        except LexError:
            return None  # not viable anyway
        depth = len(lex.enclosures)
        blocks = len(lex.indent_levels)
        for kind, _value, start in symbols:
            if kind in _OPEN or kind.endswith(_OPENS_LITERAL):
                depth += 1
            elif kind in _CLOSE or kind.endswith(_CLOSES_LITERAL):
                depth -= 1
                if depth < self.depth:
                    return "bracket"
            elif kind == "INDENT":
                blocks += 1
            elif kind == "DEDENT":
                blocks -= 1
                if blocks < self.blocks:
                    return "block"
            elif start == self.string_start:
                return "string"  # the literal open at the cursor was closed
        return None


def _string_open(lex: LexState) -> bool:
    """Whether the pending text is a plain string literal still open."""
    pending = lex.pending
    k = 0
    while k < len(pending) and pending[k].isalpha():
        k += 1
    interpolated = set(pending[:k].lower()) & {"f", "t"}
    if k >= len(pending) or pending[k] not in "'\"" or interpolated:
        return False
    return lex.emit_pending() is None


def _common(a: tuple[str, ...] | str, b: tuple[str, ...] | str) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def _needed_enclosures(cursor: LexState, right: str) -> tuple[tuple[str, ...], bool] | None:
    """The cursor's enclosures that R closes (outermost first), read by lexing R from
    the cursor to the end of its first logical line, and whether R closes the string
    open there; None when R does not lex from the cursor."""
    at_cursor = cursor.enclosures
    depth = lowest = len(at_cursor)
    string_closed = False
    string_start = cursor.pending_offset if _string_open(cursor) else -1
    state = cursor
    start = 0
    ends = [m.end() for m in LINE_END_RE.finditer(right)] + [len(right)]
    try:
        for end in ends:
            if end <= start:
                continue
            state, symbols = state.feed(right[start:end])
            start = end
            for kind, _value, offset in symbols:
                if offset == string_start:
                    string_closed = True
                if kind in _OPEN or kind.endswith(_OPENS_LITERAL):
                    depth += 1
                elif kind in _CLOSE or kind.endswith(_CLOSES_LITERAL):
                    depth -= 1
                    lowest = min(lowest, depth)
                elif kind == "NEWLINE":  # depth 0: everything R closes is closed
                    return at_cursor[lowest:], string_closed
    except LexError:
        return None
    return at_cursor[lowest:], string_closed


def enclosure_at(cursor: RecognizerState, right: str) -> Enclosure:
    """The enclosure of a quotient whose left context ends in ``cursor``."""
    lex = cursor.lex
    if lex is None:
        return Enclosure(0, 0, -1)
    at_cursor = lex.enclosures
    needed = _needed_enclosures(lex, right)
    string_start = -1
    if needed is None:
        # R does not lex from the cursor as it stands (the cursor is in a
        # bracket the middle must close first): in plain code, R's own needs
        # come from the bracket repairs; elsewhere nothing is protected.
        depth = 0
        if not lex.fstring_quotes and not _string_open(lex):
            version = lex.target
            lexed = lex_in_mode(right, (version.major, version.minor), "")
            if lexed is not None:
                depth = _common(lex.brackets, lexed[0])
    else:
        closed, string_closed = needed
        depth = _common(at_cursor, at_cursor[len(at_cursor) - len(closed) :])
        if string_closed and _string_open(lex):
            string_start = lex.pending_offset
    levels = lex.indent_levels
    if lex.at_line_start:
        column = indentation_column(indentation(lex.pending))
        blocks = sum(1 for level_column, _alt in levels if level_column <= column)
    else:
        blocks = len(levels)
    return Enclosure(depth, blocks, string_start)
