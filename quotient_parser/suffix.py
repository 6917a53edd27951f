"""Can a right context end some valid module at all?

A FIM quotient is empty exactly when no text ``u`` makes ``u + R`` a valid
module: whatever the left context, a middle can first close everything the
left context opened and then play the part of ``u``.  This module decides
that question for a right context R on its own, the way the seed paper
builds its right quotients: R is lexed into the symbol streams it can stand
for, and each stream is parsed *backwards* with the reversed grammar, whose
viable prefixes are exactly the reversals of suffixes of the language.

The symbol streams depend on what ``u`` left the lexer doing where R begins,
so R is lexed under each *start mode*:

* inside a comment (R's first line is comment text),
* at a symbol boundary, mid-line or at the start of a line,
* after a line continuation, when R begins with a line break,
* inside each kind of string literal (quote, triple quote, raw, f-string,
  t-string from 3.14),

with the bracket depth and indentation that R needs: an unmatched closing
bracket in R means ``u`` opened it, a dedent to an unknown column means ``u``
indented to it, and R's first logical line may indent, stay or dedent one or
more levels.  A mode that fails to lex is dropped; R can end a module when
some remaining stream is a viable reversed prefix.  Variants are tried until
one succeeds, so the common case costs one lexing and one backward parse.
"""

from __future__ import annotations

import collections
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from lexer import LexError, LexErrorCode, LexState
from lexer.tables import CLOSE_TO_OPEN, MAX_INDENT, MAX_PAREN_LEVEL, OPERATORS, keywords
from lexer.text import LINE_END_RE, first_line, indentation

from .earley import Automaton, Chart
from .grammar_tools import Grammar, load_grammar
from .recognizer import Recognizer, SymbolClassifier

__all__ = [
    "StartMode",
    "lex_in_mode",
    "right_context_can_end_module",
    "right_line_can_be_code",
    "start_modes_that_end",
    "string_heads",
    "warm_backward_parse",
]

#: Bounds on the repairs tried for one start mode (each repair re-lexes R):
#: as many brackets as CPython can hold open and as many indentation levels.
_MAX_REPAIRS = MAX_PAREN_LEVEL + MAX_INDENT
_MAX_EXTRA_DEDENTS = 3


def _string_heads(version: tuple[int, int]) -> tuple[str, ...]:
    """The openings of the strings R may start inside (t-strings from 3.14)."""
    prefixes = ("", "r", "f", "rf", *(("t", "rt") if version >= (3, 14) else ()))
    return tuple(prefix + quote for quote in ("'''", '"""', "'", '"') for prefix in prefixes)


@functools.cache
def _reversed_grammar(version: tuple[int, int]) -> Grammar:
    grammar = load_grammar(version)
    reversed_grammar = Grammar(
        version=grammar.version,
        symbol_names=grammar.symbol_names,
        n_terminals=grammar.n_terminals,
        productions=tuple((lhs, rhs[::-1]) for lhs, rhs in grammar.productions),
        soft_keywords=grammar.soft_keywords,
        terminal_ids=grammar.terminal_ids,
        start=grammar.start,
    )
    return reversed_grammar


#: Per version: the reversed grammar's automaton, its classifier and its initial chart
#: (one, so that backward parses share its step memo).
_REVERSED: dict[tuple[int, int], tuple[Automaton, SymbolClassifier, Chart]] = {}


def _reversed_automaton(version: tuple[int, int]) -> tuple[Automaton, SymbolClassifier, Chart]:
    """The backward parser of ``version``; a fresh one (a new generation) once its
    automaton has more states than ``Recognizer.max_states``, as for the forward one."""
    found = _REVERSED.get(version)
    if found is None or found[0].n_states > Recognizer.max_states:
        grammar = _reversed_grammar(version)
        auto = Automaton(grammar)
        found = _REVERSED[version] = (auto, SymbolClassifier(grammar, auto), Chart.initial(auto))
    return found


#: The charts of the last few backward parses.  A chart remembers its successors
#: only while something holds them, and right contexts of one file share their
#: tail: moving the cursor re-parses only what is new at the front of R.  Bounded
#: by count and by size (a parse of a long R holds a chart per symbol).
_RECENT_PARSES: collections.deque[list[Chart]] = collections.deque(maxlen=4)
#: The most charts those parses keep in all.
MAX_RECENT_CHARTS = 200_000


def _remember_parse() -> list[Chart]:
    """A new list for the charts of a backward parse, among the recent ones; older
    parses are dropped while all of them hold more than :data:`MAX_RECENT_CHARTS`."""
    while _RECENT_PARSES and sum(map(len, _RECENT_PARSES)) > MAX_RECENT_CHARTS:
        _RECENT_PARSES.popleft()
    keep: list[Chart] = []
    _RECENT_PARSES.append(keep)
    return keep


def _column(whitespace: str) -> int:
    return len(whitespace.expandtabs(8))


class _Attempt:
    """One way ``u`` may end: a start mode plus the brackets and indentation R needs."""

    def __init__(self, head: str, at_line_start: bool):
        self.head = head
        self.at_line_start = at_line_start
        self.openers = ""
        self.levels: list[str] = []  # indentation strings of u's open blocks, innermost last

    def prefix(self) -> str:
        lines = ["x\n"]
        lines.extend(level + "x:\n" for level in self.levels)
        current = self.levels[-1] if self.levels else ""
        if self.at_line_start:
            return "".join(lines) + (current + "x" + self.openers + "\n" if self.openers else "")
        return "".join(lines) + current + "x" + self.openers + " " + self.head

    def add_level(self, whitespace: str) -> bool:
        if whitespace in self.levels or not whitespace:
            return False
        self.levels.append(whitespace)
        self.levels.sort(key=_column)
        return True


def _lex(attempt: _Attempt, text: str, version: tuple[int, int]) -> list[tuple[str, str, int]]:
    """R's symbols in this attempt's mode, repairing brackets and indentation.

    Raises LexError when the mode cannot lex R.
    """
    for _ in range(_MAX_REPAIRS):
        prefix = attempt.prefix()
        state, _ = LexState.initial(target=version).feed(prefix)
        try:
            state, symbols = state.feed(text)
            symbols.extend(state.finish())
        except LexError as exc:
            where = exc.offset - len(prefix)
            if exc.code is LexErrorCode.UNMATCHED_BRACKET and where >= 0:
                # Open it in the prefix, while CPython's nesting limit allows one more.
                closer = exc.bracket
                if closer in CLOSE_TO_OPEN and len(attempt.openers) + 1 < MAX_PAREN_LEVEL:
                    attempt.openers = CLOSE_TO_OPEN[closer] + attempt.openers
                    continue
            if exc.code is LexErrorCode.BAD_DEDENT and where >= 0:
                line_start = max(text.rfind("\n", 0, where), text.rfind("\r", 0, where)) + 1
                if attempt.add_level(indentation(text[line_start:])):
                    continue
            raise
        start = len(prefix)
        return [s for s in symbols if s[2] >= start]
    raise LexError("too many repairs", 0, code=LexErrorCode.TOO_MANY_BRACKETS)


def _first_logical_line_indent(
    attempt: _Attempt, text: str, symbols: list[tuple[str, str, int]]
) -> str | None:
    """Leading whitespace of R's first logical line that starts inside R.

    Found from the symbols, not the text: a line break inside a bracket or a
    string does not start a logical line.
    """
    base = len(attempt.prefix())
    seen_newline = attempt.at_line_start
    for kind, _text, start in symbols:
        if kind == "NEWLINE":
            seen_newline = True
            continue
        if kind in ("INDENT", "DEDENT", "ENDMARKER") or not seen_newline:
            continue
        offset = start - base
        line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
        return indentation(text[line_start:])
    return None


def _first_line_variants(attempt: _Attempt, text: str, whitespace: str) -> Iterator[_Attempt]:
    """The attempt itself, then R's first logical line staying or dedenting more."""
    yield attempt
    column = _column(whitespace)
    below = [level for level in attempt.levels if _column(level) < column]
    stay = _Attempt(attempt.head, attempt.at_line_start)
    stay.openers = attempt.openers
    stay.levels = [*below, whitespace] if whitespace else below
    yield stay
    for extra in range(1, _MAX_EXTRA_DEDENTS + 1):
        deeper = _Attempt(attempt.head, attempt.at_line_start)
        deeper.openers = attempt.openers
        deeper.levels = [*stay.levels, *(whitespace + " " * k for k in range(1, extra + 1))]
        yield deeper


def _reverse_viable(
    version: tuple[int, int], symbols: list[tuple[str, str, int]], keep: list[Chart]
) -> bool:
    _, classify, initial = _reversed_automaton(version)
    chart: Chart | None = initial
    room = MAX_RECENT_CHARTS - len(keep)
    for kind, text, _start in reversed(symbols):
        symbol = classify(kind, text)
        if symbol is None:
            return False
        assert chart is not None
        chart = chart.step(symbol)
        if chart is None:
            return False
        if room > 0:  # shared tails of later attempts hit the step memo
            keep.append(chart)
            room -= 1
    return True


#: Symbols parsed between two polls of a warming parse's ``interrupt``.
_POLL_SYMBOLS = 256


def warm_backward_parse(
    document: str, version: tuple[int, int], interrupt: Callable[[], bool] | None = None
) -> bool:
    """Parse a whole document backwards ahead of requests, keeping its charts among the
    recent parses.

    A right context cut from the document (the text after a cursor) lexes to the same
    symbols from its second line to its end, and every backward parse starts from one
    initial chart: while the document's charts are kept, the right context's check
    finds its steps memoised except the few at its front.  Returns False when
    ``interrupt`` stopped it (the part from the end that was parsed is kept: the next
    call finds it memoised and goes on).
    """
    try:
        symbols = _lex(_Attempt("", True), document, version)
    except LexError:
        return True  # nothing to share: the document does not lex from its start
    _, classify, initial = _reversed_automaton(version)
    chart: Chart | None = initial
    keep = _remember_parse()
    for done, (kind, text, _start) in enumerate(reversed(symbols)):
        if interrupt is not None and done % _POLL_SYMBOLS == 0 and interrupt():
            return False
        symbol = classify(kind, text)
        assert chart is not None
        chart = None if symbol is None else chart.step(symbol)
        if chart is None:
            return True  # the document is broken here: what precedes it shares nothing
        if len(keep) >= MAX_RECENT_CHARTS:
            return True  # what is parsed further would not be kept: no use ahead of time
        keep.append(chart)
    return True


def right_context_can_end_module(
    text: str, version: tuple[int, int], heads: Iterable[str] | None = None
) -> bool:
    """Whether some ``u`` makes ``u + text`` a valid module for ``version``;
    ``heads``: only through start modes with one of these heads (default all).

    Never answers False for a right context that can be completed within the
    modes described in the module docstring.  Stops at the first mode that works.
    """
    return _can_end(text, version, heads, _remember_parse())


def _can_end(
    text: str, version: tuple[int, int], heads: Iterable[str] | None, keep: list[Chart]
) -> bool:
    """``right_context_can_end_module``, keeping the charts in ``keep``."""
    if not text:
        return True
    wanted = None if heads is None else set(heads)
    return any(
        _mode_can_end(text, version, head, at_line_start, keep) is not None
        for head, at_line_start in _start_modes(text, version)
        if wanted is None or head in wanted
    )


def right_line_can_be_code(text: str, version: tuple[int, int]) -> bool:
    """Whether R's first line may be code: it has text, and some valid module has R
    begin at a symbol boundary or with the rest of a symbol that the text before R
    began (``ret`` + ``urn x``, ``=`` + ``= y``, ``x`` + ``s in a``).

    Also where R may begin inside a string literal that the line closes, going on
    with code (``d " * 2``), and where R's first 1, 4 or 16 lines alone can end a
    module so (the cheap answer on a long R: microseconds, not a lexing of all of R).
    "May" errs towards code, which keeps a comment from swallowing it.  False where
    the line can only be the rest of a comment (``and flush it to the file.``): a
    finish must open one, as the user's own text did.  Two plain names in a row
    (``flush it``) or no closing quote on the line rule ways out without a parse;
    the others cost a backward parse of R each, made only for an R of at most
    ``FULL_CHECK_CHARS`` (a longer one's line is taken to be code).
    """
    line = first_line(text)
    if not line.strip():
        return False
    keep = _remember_parse()  # one entry among the recent parses: the warm ones stay
    heads = () if _adjacent_names(line, version) else tuple(_symbol_beginnings(text, version))
    # R's first lines alone first: where they can begin a module's last statements the
    # line may be code (a sufficient answer, cheap on a long R); else all of R decides.
    # Inside a string literal, code can follow only where the line closes it; a raw or
    # formatted literal differs from a plain one only with a backslash or a brace.
    closing = [
        head
        for head in _string_heads(version)
        if head.lstrip("rft") in line
        and ("r" not in head or "\\" in line)
        and ("f" not in head or "{" in line)
    ]
    for piece in _leading_lines(text):
        if any(_can_end(head + piece, version, ("",), keep) for head in heads):
            return True
        if closing and _can_end(piece, version, closing, keep):
            return True
    if not heads and not closing:
        return False
    if len(text) > FULL_CHECK_CHARS:
        return True  # a whole parse per way costs seconds on the largest files: may be
    if any(_can_end(head + text, version, ("",), keep) for head in heads):
        return True
    return bool(closing) and _can_end(text, version, closing, keep)


#: The longest right context whose first line ``right_line_can_be_code`` proves not to
#: be code by backward parses of all of it (about 1,500 lines); a longer one's line
#: that its first lines do not show to be code is taken to be code all the same.
FULL_CHECK_CHARS = 50_000


#: The numbers of R's first lines tried on their own by ``right_line_can_be_code``.
_LEADING_LINES = (1, 4, 16)


def _leading_lines(text: str) -> Iterator[str]:
    """``text``'s first lines, up to each count of ``_LEADING_LINES`` that is shorter
    than all of it."""
    ends = [match.end() for _, match in zip(range(_LEADING_LINES[-1]), LINE_END_RE.finditer(text))]
    for count in _LEADING_LINES:
        if count <= len(ends) and ends[count - 1] < len(text):
            yield text[: ends[count - 1]]


def _adjacent_names(line: str, version: tuple[int, int]) -> bool:
    """Whether ``line`` lexes, as code, with two plain names in a row after its first
    symbol (``flush it``): no valid module holds that, whatever ``u`` joins to the
    line's first symbol, so the backward parses need not be made.  Only a soft
    keyword (``match x``) may precede a name."""
    try:
        _, symbols = LexState.initial(target=version).feed(line.lstrip(" \t\f") + "\n")
    except LexError:
        return False
    soft = _reversed_grammar(version).soft_keywords
    return any(
        kind == "NAME" and after == "NAME" and text not in soft
        for (kind, text, _), (after, _, _) in itertools.pairwise(symbols[1:])
    )


def _symbol_beginnings(text: str, version: tuple[int, int]) -> Iterator[str]:
    """Texts that may end ``u`` and join R's first characters into one symbol: none
    (a symbol boundary), a name's or keyword's start, an operator's first part."""
    yield ""
    word = _WORD.match(text)
    if word is not None and ("x" + word.group()).isidentifier():
        tail = word.group()
        yield "x"
        for keyword in sorted(keywords(version[0] * 100 + version[1])):
            if len(keyword) > len(tail) and keyword.endswith(tail):
                yield keyword[: -len(tail)]
    for op in sorted(OPERATORS):
        for cut in range(1, len(op)):
            if text.startswith(op[cut:]):
                yield op[:cut]


_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class StartMode:
    """A start mode under which R can end a module, and R's symbols in it.

    ``head`` is what ``u`` ends with: ``""`` (a symbol boundary), ``"#"`` (a
    comment), a backslash, or the opening of a string literal (a quote or a
    triple quote, maybe after ``r``, ``f``, ``rf``, and from 3.14 ``t`` or
    ``rt``).  ``openers``: the brackets R closes, outermost first;
    ``symbols``: R's symbols with offsets in R (the indentation R's lines get
    may differ with ``u``).
    """

    head: str
    at_line_start: bool
    openers: str
    symbols: tuple[tuple[str, str, int], ...]


def start_modes_that_end(
    text: str, version: tuple[int, int], heads: Iterable[str] | None = None
) -> list[StartMode]:
    """Every start mode (with a head among ``heads``, default all) under which
    ``u + text`` can be a valid module."""
    keep = _remember_parse()
    modes: list[StartMode] = []
    wanted = None if heads is None else set(heads)
    for head, at_line_start in _start_modes(text, version):
        if wanted is not None and head not in wanted:
            continue
        found = _mode_can_end(text, version, head, at_line_start, keep)
        if found is not None:
            modes.append(StartMode(head, at_line_start, *found))
    return modes


def lex_in_mode(
    text: str, version: tuple[int, int], head: str, at_line_start: bool = False
) -> tuple[str, tuple[tuple[str, str, int], ...]] | None:
    """R's symbols in one start mode (offsets relative to R), with the brackets R
    closes, outermost first; None when R does not lex in that mode."""
    attempt = _Attempt(head, at_line_start)
    try:
        symbols = _lex(attempt, text, version)
    except LexError:
        return None
    return attempt.openers, _relative(attempt, symbols)


def _relative(
    attempt: _Attempt, symbols: list[tuple[str, str, int]]
) -> tuple[tuple[str, str, int], ...]:
    base = len(attempt.prefix())
    return tuple((kind, value, start - base) for kind, value, start in symbols)


def string_heads(version: tuple[int, int]) -> tuple[str, ...]:
    """The heads of string-literal start modes for ``version``, shortest first."""
    return tuple(sorted(_string_heads(version), key=len))


def _start_modes(text: str, version: tuple[int, int]) -> list[tuple[str, bool]]:
    heads: list[tuple[str, bool]] = [("#", False), ("", False), ("", True)]
    if text[:1] in ("\r", "\n"):
        heads.append(("\\", False))
    heads.extend((head, False) for head in _string_heads(version))
    return heads


def _mode_can_end(
    text: str, version: tuple[int, int], head: str, at_line_start: bool, keep: list[Chart]
) -> tuple[str, tuple[tuple[str, str, int], ...]] | None:
    """R lexed in one start mode (with its repairs) as (openers, symbols), when some
    variant of it is a viable reversed prefix; else None."""
    base = _Attempt(head, at_line_start)
    try:
        symbols = _lex(base, text, version)
    except LexError:
        return None
    found = base.openers, _relative(base, symbols)
    if not text or _reverse_viable(version, symbols, keep):
        return found
    whitespace = _first_logical_line_indent(base, text, symbols)
    if whitespace is None:
        return None
    for attempt in _first_line_variants(base, text, whitespace):
        try:
            variant = _lex(attempt, text, version)
        except LexError:
            continue
        if _reverse_viable(version, variant, keep):
            return found
    return None
