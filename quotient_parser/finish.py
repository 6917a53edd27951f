"""Distance to a finish: a lower bound on how much text a middle still needs.

For a quotient state (left context L, middle m so far, right context R) the
*distance* is the least ``len(w)`` such that ``L + m + w + R`` is a valid
module.  A steering decoder asks at every step whether a finish can still be
reached within its budget and which candidate brings one closer, so
:class:`FinishAnalysis` (one per quotient, ``Quotient.finish``) gives
``lower_bound(state)``: a number never above the distance, from the grammar
(``yields.py``), the Earley chart of ``L + m`` (``chart_distance.py``), the
lexer state and what R needs; cheap and memoised per state.  The witness
search (``witness.py``) takes it as its heuristic.

How the bound is made
---------------------
``w`` is followed by R, so the bound counts only what R cannot do.  R is
lexed once per right context (shared by quotients with the same R) under
the *start modes* ``w`` can leave it in: a symbol boundary, a comment that
``w`` opens (R's first line swallowed), after a backslash continuation (when
R begins with a line break), inside a string literal that ``w`` opens (kept
only where ``suffix.py`` finds that R can then end a module, checked on
first need).  Keeping a mode can only lower the bound, so the common modes
are kept without that check.  In each mode:

* for each of R's first symbols ``r_k`` (its first logical line), any finish
  makes the chart scan ``w``'s symbols and ``r_1 .. r_(k-1)`` before
  ``r_k``, so ``len(w) >= fd(chart, r_k) - cost(r_1 .. r_(k-1))``;
* the brackets open after ``L + m`` must become exactly those R closes: one
  character per bracket ``w`` closes or opens;
* R's first line that starts a logical line needs an INDENT when its column
  is not on the indentation stack, so ``fd(chart, INDENT)`` counts too; and
  when R cannot open that block itself (it starts mid-line and its first
  logical line does not end with ``:``), ``w`` must write a line break and
  that line's indentation.

The bound is the least over modes (and, for a symbol still in progress,
over it ending where it is or growing into ``w`` and R) of the best of
these, plus what opens the mode (``#``, a quote).  Not counted, so it may
be loose by that much: indentation beyond one character per INDENT except
as above, a blank between operators that would merge, R beyond its first
logical line, and the order of R's symbols (each is bounded on its own, with
R's symbols before it taken as free).  Inside an f-string it is 0.
"""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lexer import LexState
from lexer.text import INDENT_CHARS, indentation, indentation_column, last_line

from .chart_distance import chart_distances
from .earley import Chart
from .language import QuotientLanguage
from .pending_text import comment_or_continuation, open_string_head, past_continuations
from .recognizer import SymbolClassifier
from .suffix import StartMode, lex_in_mode, start_modes_that_end, string_heads
from .yields import INFINITE, YieldTables, yield_tables

if TYPE_CHECKING:
    from .recognizer import RecognizerState

__all__ = ["INFINITE", "FinishAnalysis", "RightView", "right_views", "string_view"]

#: Bounds kept per state: (in characters, with a line's indentation counted as one).
_Memo = weakref.WeakKeyDictionary["RecognizerState", tuple[int, int]]
#: R's symbols looked at per start mode (the first logical line, at most this many).
_MAX_TARGETS = 24
#: R's symbols whose allowance is larger than this are not looked at: the cost
#: of reaching one from a chart is rarely that large (fewer targets only lower
#: the bound).
_MAX_ALLOWANCE = 24
#: A first character of R that cannot join the end of ``w`` into one token.
_NO_MERGE = frozenset(" \t\f\r\n#\\)]},;:([{~")
#: Second characters of two-character operators (``==``, ``->``, ``**``, ``//``, ``...``).
_OPERATOR_SECONDS = frozenset("=><*/.")


@dataclass(frozen=True)
class RightView:
    """One way R can begin after a finish, and what its first symbols need.

    ``targets`` are R's first symbols (its first logical line, at most
    ``_MAX_TARGETS``) as (terminals the symbol scans as, allowance): the
    allowance bounds what R itself contributes to a path that scans the
    symbol (the least costs of R's symbols before it, one separator per
    word-like symbol, one character per line break), so ``fd - allowance``
    is what ``w`` must pay.  ``entry`` is what ``w`` pays to leave the lexer
    in this view's mode (``#``, a backslash, a quote).  ``openers`` are the
    brackets R closes (None: not known), ``line_start`` the (column, allowance,
    own) of R's first line that begins a logical line at depth 0, where
    ``own`` is what ``w`` must write when that line's indentation is new: a
    line break and the same indentation (1 + its characters), when R cannot
    open the block itself (R starts mid-line and its first logical line does
    not end with ``:``), else 0.
    """

    mode: str  # "code", "comment", "continuation" or "string"
    entry: int
    targets: tuple[tuple[tuple[int, ...], int], ...]
    first_may_merge: bool
    openers: str | None
    line_start: tuple[int, int, int] | None
    head: str = ""  # the string opening, for a "string" view
    #: the terminals the first token of that line scans as
    line_start_members: tuple[int, ...] = ()


def _may_merge(text: str) -> bool:
    """Whether R's first character could join the last symbol of ``w``."""
    if not text or text[0] in _NO_MERGE:
        return False
    c = text[0]
    return c.isalnum() or c == "_" or not c.isascii() or c in "'\"" or c in _OPERATOR_SECONDS


class _ViewBuilder:
    def __init__(self, tables: YieldTables, classify: SymbolClassifier, version: tuple[int, int]):
        self.tables = tables
        self.classify = classify
        self.version = version
        self._ids = tables.grammar.terminal_ids

    def members(self, kind: str, text: str) -> tuple[int, ...] | None:
        """The grammar terminals a lexer symbol scans as (None: none)."""
        symbol = self.classify(kind, text)
        if symbol is None:
            return None
        return self.tables.automaton.scan_members(symbol)

    def measure(self, members: tuple[int, ...]) -> tuple[int, bool, bool]:
        """Most a symbol can cost as any of its terminals, and whether it may be word-like."""
        tables = self.tables
        return (
            max(tables.cost[m] for m in members),
            any(tables.word_start[m] for m in members),
            any(tables.word_end[m] for m in members),
        )

    def view(self, text: str, start: StartMode, mode: str, entry: int) -> RightView:
        """The view of R in one start mode, from R's symbols in that mode.

        Targets are R's symbols up to the end of its first logical line (a
        NEWLINE counts only after one of R's own tokens: before, it may be a
        blank line of ``w``; INDENT and DEDENT never, they depend on the
        indentation ``w`` leaves), then ENDMARKER if R ends there.  Each
        carries the table cost of R's symbols before it, separators between
        word-like neighbours included (and one for a word-like first symbol,
        whose separator may be R's blank).
        """
        openers, symbols = start.openers, start.symbols
        targets: list[tuple[tuple[int, ...], int]] = []
        line_start: tuple[int, int, int] | None = None
        line_start_members: tuple[int, ...] = ()
        last_token = ""
        spent = 0
        word_before = True
        seen_token = mode == "string"  # the literal w opens is R's first token
        after_newline = False
        line_over = False
        for kind, value, offset in symbols:
            members = self.members(kind, value)
            if members is None:
                break
            layout = kind in ("INDENT", "DEDENT")
            if not layout and kind not in ("NEWLINE", "ENDMARKER") and after_newline:
                if line_start is None:  # a token that starts a logical line at depth 0
                    whitespace = indentation(last_line(text[:offset]))
                    own = 0
                    mid_line = mode == "string" or text[:1] not in INDENT_CHARS + "\r\n"
                    if mode in ("code", "string") and mid_line:
                        if last_token != ":":
                            own = 1 + len(whitespace.replace("\f", ""))
                    line_start = (indentation_column(whitespace), spent, own)
                    line_start_members = members
                if line_over:
                    break
            cost, starts, ends = self.measure(members)
            if starts and word_before:
                spent += 1
            if kind == "NEWLINE":
                if seen_token:
                    targets.append((members, spent))
                    line_over = True
                after_newline = True
            elif kind == "ENDMARKER":
                targets.append((members, spent))
            elif not layout:
                if not line_over:
                    targets.append((members, spent))
                    last_token = kind
                seen_token = True
            spent += cost
            if not layout:
                word_before = ends
            if len(targets) >= _MAX_TARGETS:
                break
        merge = mode == "code" and _may_merge(text)
        return RightView(
            mode, entry, tuple(targets), merge, openers, line_start, start.head, line_start_members
        )


def right_views(
    tables: YieldTables, classify: SymbolClassifier, text: str, version: tuple[int, int]
) -> list[RightView]:
    """The ways R can begin after a finish: at a symbol boundary, in a comment, after a
    continuation (when R begins with a line break).

    A mode whose lexing fails is left out; the others are kept without asking
    whether R can then end a module (a backward parse of all of R): keeping a
    view can only lower the bound, and these are the common ones.
    """
    builder = _ViewBuilder(tables, classify, version)
    modes = [("", "code", 0), ("#", "comment", 1)]
    if text[:1] in ("\r", "\n"):
        modes.append(("\\", "continuation", 1))
    views: list[RightView] = []
    for head, mode, entry in modes:
        lexed = lex_in_mode(text, version, head)
        if lexed is not None:
            start = StartMode(head, False, lexed[0], lexed[1])
            views.append(builder.view(text, start, mode, entry))
    return views


def string_view(
    tables: YieldTables,
    classify: SymbolClassifier,
    text: str,
    version: tuple[int, int],
    head: str,
) -> RightView | None:
    """The view of R inside a string literal that ``w`` opens with ``head`` (None: R
    cannot end a module that way).  The literal is R's first symbol (what ``w`` pays
    is the opening and what precedes the literal); R's symbols after the opening
    count as in code, with the literal's least cost in their allowance."""
    modes = start_modes_that_end(text, version, (head,))
    if not modes:
        return None
    ids = tables.grammar.terminal_ids
    letter = head.lstrip("r")[:1]  # f, t, or a quote
    names = (letter.upper() + "STRING_START",) if letter.isalpha() else ("STRING", "BYTES")
    members = tuple(ids[n] for n in names if n in ids)
    rest = _ViewBuilder(tables, classify, version).view(text, modes[0], "string", len(head))
    cost = max((tables.cost[m] for m in members), default=0)
    after = tuple((m, allowance + cost) for m, allowance in rest.targets)
    line_start = rest.line_start
    if line_start is not None:
        column, allowance, own = line_start
        line_start = (column, allowance + cost, own)
    return RightView(
        "string",
        len(head),
        ((members, 0), *after),
        False,
        rest.openers,
        line_start,
        head,
        rest.line_start_members,
    )


#: Views of the last few right contexts, by (target, text): an editor asks
#: again after every keystroke with the same right context.
_VIEWS: OrderedDict[tuple[tuple[int, int], str], list[RightView]] = OrderedDict()
_VIEWS_KEPT = 8


class FinishAnalysis:
    """Distances to a finish for the states of one quotient (``Quotient.finish``)."""

    def __init__(self, quotient: QuotientLanguage[Any]):
        # The quotient holds its analysis (``Quotient.finish``): held weakly, the pair is
        # freed by reference counting, not only by a full collection (rare on a large
        # heap).
        self._quotient = weakref.ref(quotient)
        self.right = quotient.right
        self.empty = quotient.empty
        recognizer = quotient.recognizer
        self.recognizer = recognizer
        self.tables = yield_tables(recognizer.grammar, recognizer.automaton)
        self.distances = chart_distances(self.tables)
        self._views: list[RightView] | None = None
        #: per state, (full, light) bounds over every start mode, then over the natural ones
        self._bounds: tuple[_Memo, _Memo] = (
            weakref.WeakKeyDictionary(),
            weakref.WeakKeyDictionary(),
        )
        self._indent = self.tables.grammar.terminal_ids.get("INDENT")
        self._string_views: dict[str, RightView | None] = {}
        version = recognizer.version
        self._string_heads = string_heads((version.major, version.minor))

    #: The distance of a state from which no finish exists.
    unreachable = INFINITE

    @property
    def quotient(self) -> QuotientLanguage[Any]:
        """The quotient analysed (alive while its states are)."""
        quotient = self._quotient()
        assert quotient is not None, "a finish analysis outlived its quotient"
        return quotient

    @property
    def views(self) -> list[RightView]:
        """How R can begin (computed on first use, shared by quotients with the same R)."""
        if self._views is None:
            version = tuple(self.recognizer.version)
            key = ((version[0], version[1]), self.right)
            views = _VIEWS.get(key)
            if views is None:
                views = right_views(self.tables, self.recognizer.classify, self.right, key[0])
                _VIEWS[key] = views
                while len(_VIEWS) > _VIEWS_KEPT:
                    _VIEWS.popitem(last=False)
            else:
                _VIEWS.move_to_end(key)
            self._views = views
        return self._views

    @functools.cached_property
    def module_end(self) -> FinishAnalysis:
        """The analysis of ``Quotient.module_end`` (the same left context, nothing
        after it): the witness search crosses into a new statement through it."""
        return FinishAnalysis(self.quotient.module_end)

    # -- the bound --------------------------------------------------------

    def lower_bound(self, state: RecognizerState) -> int:
        """A number of characters never above the distance of ``state`` (see the module
        docstring); INFINITE for a dead state or an empty quotient."""
        return self._pair(state, False)[0]

    def light_bound(self, state: RecognizerState) -> int:
        """Like :meth:`lower_bound`, for lengths where a line's indentation counts as one."""
        return self._pair(state, False)[1]

    def natural_bound(self, state: RecognizerState, light: bool = False) -> int:
        """Like :meth:`lower_bound` (``light``: :meth:`light_bound`), for the *natural*
        finishes only: those that leave R in code or in a string literal, not in a
        comment or after a backslash continuation that ``w`` opens (``#`` that swallows
        R's first line, ``;\\`` that joins R's next line to this one).  Never below
        the plain bound, and a lower bound on every natural finish: what a steering
        decoder wants to aim at, and what the witness search can reach."""
        return self._pair(state, True)[1 if light else 0]

    def _pair(self, state: RecognizerState, natural: bool) -> tuple[int, int]:
        memo = self._bounds[natural]
        known = memo.get(state)
        if known is None:
            known = self._bound(state, natural)
            memo[state] = known
        return known

    def _bound(self, state: RecognizerState, natural: bool) -> tuple[int, int]:
        lex, chart = state.lex, state.chart
        if lex is None or chart is None or self.empty:
            return INFINITE, INFINITE
        if lex.fstring_quotes:
            return 0, 0  # inside an f-string: not analysed
        pending = lex.pending
        blank = past_continuations(pending)
        if not pending or not blank or lex.pending_kinds() is None:
            if comment_or_continuation(pending):
                if blank.startswith("#"):
                    return self._views_bound(chart, lex, 0, False, natural, in_comment=True)
                if not natural:
                    return 0, 0  # a backslash: R's first line break may end it
                # a natural finish ends the continuation itself: a line break, then the rest
                full, light = self._pair(state.feed("\n"), True)
                return _plus_one(full), _plus_one(light)
            # indentation typed at a line start may be the INDENT a path scans first
            typed = 1 if pending and not blank and lex.at_line_start else 0
            return self._views_bound(chart, lex, typed, False, natural)
        # A symbol in progress either ends here (emit) or grows into w and R (extend).
        best = (INFINITE, INFINITE)
        emitted = lex.emit_pending()
        if emitted is not None:
            after, symbols = emitted
            stepped, _ = self.recognizer.step(chart, symbols)
            if stepped is not None:
                best = self._views_bound(stepped, after, 0, False, natural)
        string = open_string_head(pending)
        if string is not None:
            head, quote = string
            if self._string_view(head) is not None:
                return 0, 0  # R may go on with this very string
            ids = self.tables.grammar.terminal_ids
            for kind in ("STRING", "BYTES"):
                stepped = chart.step(ids[kind]) if kind in ids else None
                if stepped is not None:
                    full, light = self._views_bound(stepped, lex, 0, False, natural)
                    best = _least(best, (len(quote) + full, len(quote) + light))
            return best
        kinds = lex.pending_kinds() or frozenset()
        costs = [
            self.tables.cost[t]
            for kind in kinds
            for t in self.recognizer.classify.kind_terminals.get(kind, ())
        ]
        # the grown symbol's text holds the pending characters and w's first ones, and is
        # at least its terminal's cost long: w writes at least fd - len(pending) - what R
        # brings (the most costly terminal alone, 'match' for a pending 'x', left the
        # bound at the brackets)
        spent = min(len(pending), max(costs, default=len(pending)))
        return _least(best, self._views_bound(chart, lex, spent, True, natural))

    def right_goes_on_in_string(self, head: str) -> bool:
        """Whether R can go on inside a string literal that ``w`` opens with ``head``."""
        return self._string_view(head) is not None

    def right_in_string(self, head: str) -> RightView | None:
        """The view of R inside a string literal that ``w`` opens with ``head`` (None: R
        cannot end a module that way)."""
        return self._string_view(head)

    def _string_view(self, head: str) -> RightView | None:
        """The view for a string literal opened by ``head`` (checked on first use)."""
        if head not in self._string_views:
            version = tuple(self.recognizer.version)
            self._string_views[head] = string_view(
                self.tables,
                self.recognizer.classify,
                self.right,
                (version[0], version[1]),
                head,
            )
        return self._string_views[head]

    def _views_bound(
        self,
        chart: Chart,
        lex: LexState,
        spent: int,
        growing: bool,
        natural: bool,
        in_comment: bool = False,
    ) -> tuple[int, int]:
        """Least, over R's views, of what ``w`` must pay after ``chart``: (in characters,
        with a line's indentation counted as one).

        ``spent``: what a symbol in progress that the paths scan before ``w`` has
        already typed of its cost (subtracted); ``growing``: that symbol grows into
        ``w``; ``natural``: not through a comment or continuation ``w`` opens.
        R's first symbol is skipped only where R's text may merge with the end of
        ``w`` (``RightView.first_may_merge``): a symbol in progress cannot reach
        into R past a blank, a line break or a closing bracket, and skipping the
        first target there (an R that begins with a line break, or ENDMARKER)
        left the bound at the brackets alone.
        """
        known: dict[tuple[int, int], int] = {}  # R's symbols repeat terminals: one fd each
        distance = self.distances.first_distance

        def first(target: int, levels: int) -> int:
            value = known.get((target, levels))
            if value is None:
                value = known[(target, levels)] = distance(chart, target, levels)
            return value

        best = best_light = INFINITE
        for view in self.views:
            if natural and view.mode == "continuation":
                continue
            if (
                natural
                and view.mode == "comment"
                and not in_comment
                and self.quotient.right_line_can_be_code
            ):
                continue  # w's comment would swallow code (a comment tail is the user's)
            if in_comment:
                entry = 0 if view.mode == "comment" else 1 + view.entry
            else:
                entry = view.entry
            if entry >= best:
                continue
            skip = view.first_may_merge
            full, light = self._view_need(view, first, lex, spent, skip, best - entry)
            best = min(best, entry + full)
            best_light = min(best_light, entry + light)
        # R may also begin inside a string literal that w opens; such a view can only
        # matter where it costs less than the others, so it is checked only then.  A
        # symbol in progress that cannot prefix the literal ends in w: w writes at
        # least what its least cost adds to the characters already typed.
        if growing and not _may_prefix_string(lex.pending):
            spent = min(spent, len(lex.pending))
        for head in self._string_heads:
            entry = len(head) + (1 if in_comment else 0)
            if entry >= best_light:
                break
            string = self._string_view(head)
            if string is None:
                continue
            full, light = self._view_need(string, first, lex, spent, False, best - entry)
            best = min(best, entry + max(0, full))
            best_light = min(best_light, entry + max(0, light))
        return best, best_light

    def _view_need(
        self,
        view: RightView,
        first: Callable[[int, int], int],
        lex: LexState,
        spent: int,
        skip: bool,
        enough: int,
    ) -> tuple[int, int]:
        """What ``w`` must pay after the chart for R to begin as ``view`` says, beyond
        the view's entry: (in characters, with a line's indentation counted as one).
        ``first(target, levels)`` is ``fd`` from the chart; past ``enough`` the view
        cannot lower the minimum and the count may stop there."""
        brackets = lex.brackets
        need = 0
        if view.openers is not None:
            shared = 0
            limit = min(len(brackets), len(view.openers))
            while shared < limit and brackets[shared] == view.openers[shared]:
                shared += 1
            need = len(brackets) + len(view.openers) - 2 * shared
        for index, (members, allowance) in enumerate(view.targets):
            if need >= enough:
                break  # this view cannot lower the minimum
            if (index == 0 and skip) or allowance > _MAX_ALLOWANCE:
                continue
            reach = min(first(m, 0) for m in members)
            value = reach - allowance - spent
            if value > need:
                need = value
        need_full = need
        if view.line_start is None or self._indent is None:
            return need_full, need
        column, allowance, own = view.line_start
        if column not in {level for level, _alt in lex.indent_levels}:
            value = first(self._indent, 0) - allowance - spent
            if own and lex.at_line_start:
                # the line break is written, and maybe some of the indentation
                own = max(0, own - 1 - len(lex.pending))
            elif own:
                # R cannot open the block: its INDENT lies in w, before R's first
                # symbol, with the new line's indentation after it
                block = first(self._indent, 0) - spent
                value = block + 1
                need_full = max(need_full, block + own - 1)
            need = max(need, value)
            need_full = max(need_full, value, own)
        elif view.line_start_members and allowance <= _MAX_ALLOWANCE:
            # R's line goes on further left: the levels deeper than it close before
            # its first token, with whatever their statements still need
            levels = sum(1 for level, _alt in lex.indent_levels if level > column)
            if levels:
                reach = min(first(m, levels) for m in view.line_start_members)
                value = reach - allowance - spent
                need = max(need, value)
                need_full = max(need_full, value)
        return need_full, need


def _may_prefix_string(pending: str) -> bool:
    """Whether ``pending`` may be the prefix letters of a string literal (``rb``, ``f``)."""
    return len(pending) <= 2 and all(c in "rRbBfFuUtT" for c in pending)


def _plus_one(value: int) -> int:
    return value if value >= INFINITE else value + 1


def _least(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return min(a[0], b[0]), min(a[1], b[1])
