"""Distance to a finish: how much text a middle still needs, and a shortest one.

For a quotient state (left context L, middle m so far, right context R) the
*distance* is the least ``|w|`` such that ``L + m + w + R`` is a valid module.
A decoder with a budget of B characters asks it at every step: can a finish
still be reached, and which candidate brings it closer?  This module gives

``lower_bound(state)``
    a number never above the distance, from the grammar (``yields.py``), the
    Earley chart of ``L + m``, the lexer state and what R needs; cheap (the
    work on charts of L is memoised per chart and shared by every state);
``search(state)``
    a best-first (A*) search over short insertions, with the lower bound as
    its heuristic, that returns a witness ``w`` checked by the quotient
    (``state.feed(w).complete``) and a lower bound; when it finishes it has
    proved the witness shortest (among the insertions it tries: canonical
    shortest texts of terminals, see ``Witness``).

How the bound is made
---------------------
A finish ``w`` is followed by R, so the bound must count only what R cannot
do.  R's first symbols are known (lexed once per right context under each
*start mode* that can end a module: R may begin at a symbol boundary, inside
a comment that ``w`` opens, after a backslash continuation, or inside a
string literal that ``w`` opens; string modes are kept only when R can end
a module that way, as ``suffix.py`` decides).  For each such symbol ``r_k``, any finish
makes the chart scan ``w``'s symbols and ``r_1 .. r_{k-1}`` before ``r_k``,
so ``|w| >= fd(chart, r_k) - cost(r_1 .. r_{k-1})``, where ``fd`` is the
least cost of any symbol string after which the chart can scan ``r_k``.
``fd`` is computed from the open items of the chart and, up the chain of
their origins, the items waiting for them: finishing an item costs the least
yield of the rest of its right-hand side, and reaching ``r_k`` inside a rest
costs what ``yields.first_distance`` says.  Two further facts are certain:
the brackets open after ``L + m`` must become exactly those R closes (each
bracket ``w`` closes or opens is one character), and R's first line that
starts a new logical line at depth 0 needs an INDENT when its column is not
on the indentation stack.  The bound is the least, over start modes (and,
for a symbol still in progress, over it ending or growing), of the best of
these, plus the characters that open the start mode (``#``, a quote).

Not counted, so the bound may be loose by that much: indentation beyond one
character per INDENT (a finish that starts a new line at column 8 costs 8
more), a blank between operators that would merge, and R's later lines.
"""

from __future__ import annotations

import heapq
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lexer import LexState
from lexer.text import INDENT_CHARS, indentation

from .earley import Chart
from .suffix import STRING_HEADS, StartMode, lex_in_mode, start_modes_that_end
from .yields import INFINITE, YieldTables, yield_tables

if TYPE_CHECKING:
    from .quotient import Quotient, QuotientState
    from .recognizer import RecognizerState

__all__ = ["ChartDistances", "FinishAnalysis", "RightView", "Witness"]

_NONE = -1
_OPENER = {")": "(", "]": "[", "}": "{"}
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


# --------------------------------------------------------------------------- charts


class ChartDistances:
    """``fd(chart, a)``: the least cost of symbols after which a chart can scan ``a``.

    One per automaton.  Work on a chart's origins is memoised per chart (held
    weakly) and per target, and per automaton state for the tables that only
    depend on the state, so sibling states of a decoder pay only for their
    own newest chart.
    """

    def __init__(self, tables: YieldTables):
        self.tables = tables
        automaton = tables.automaton
        self._st_items = automaton.st_items
        self._item_next = automaton.item_next
        self._item_lhs = automaton.item_lhs
        self._n_terminals = automaton.n_terminals
        self._up: weakref.WeakKeyDictionary[Chart, dict[int, dict[int, int]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lhs_close: dict[int, dict[int, int]] = {}
        self._state_first: dict[tuple[int, int], int] = {}
        self._waiting: dict[int, dict[int, list[int]]] = {}
        self._pred_edges: dict[int, dict[int, list[tuple[int, int]]]] = {}
        self._pred_first: dict[tuple[int, int], dict[int, int]] = {}

    def first_distance(self, chart: Chart, target: int) -> int:
        """Least cost of a symbol string after which ``chart`` can scan ``target``."""
        best = INFINITE
        groups = chart.groups
        if not groups and chart.pred != _NONE:
            groups = ((chart, chart.pred),)
        for origin, state in groups:
            value = self._min_first(state, target)
            if value < best:
                best = value
            up: dict[int, int] | None = None
            for lhs, cost in self._closes(state).items():
                if cost >= best:
                    continue
                if up is None:
                    up = self._up_values(origin, target)
                total = cost + up.get(lhs, INFINITE)
                if total < best:
                    best = total
        return best

    # -- per-state tables -------------------------------------------------

    def _closes(self, state: int) -> dict[int, int]:
        """Per left-hand side, the least cost of finishing an item of ``state``."""
        table = self._lhs_close.get(state)
        if table is None:
            table = {}
            close = self.tables.close
            lhs_of = self._item_lhs
            for item in self._st_items[state]:
                lhs = lhs_of[item]
                cost = close[item]
                if cost < table.get(lhs, INFINITE):
                    table[lhs] = cost
            self._lhs_close[state] = table
        return table

    def _min_first(self, state: int, target: int) -> int:
        key = (state, target)
        value = self._state_first.get(key)
        if value is None:
            firsts = self.tables.item_first_distances(target)
            value = min((firsts[i] for i in self._st_items[state]), default=INFINITE)
            self._state_first[key] = value
        return value

    def _waiting_items(self, state: int) -> dict[int, list[int]]:
        """Per nonterminal Y, the items of ``state`` advanced past a Y they wait for."""
        table = self._waiting.get(state)
        if table is None:
            table = {}
            item_next, n_terminals = self._item_next, self._n_terminals
            for item in self._st_items[state]:
                nxt = item_next[item]
                if nxt >= n_terminals:
                    table.setdefault(nxt, []).append(item + 1)
            self._waiting[state] = table
        return table

    def _edges(self, pred: int) -> dict[int, list[tuple[int, int]]]:
        """Predicted items as edges: Z -> [(Y, cost)] for ``Z -> . Y rest`` (cost: rest)."""
        table = self._pred_edges.get(pred)
        if table is None:
            table = {}
            close = self.tables.close
            for nxt, advanced in self._waiting_items(pred).items():
                for item in advanced:
                    table.setdefault(self._item_lhs[item], []).append((nxt, close[item]))
            self._pred_edges[pred] = table
        return table

    def _pred_firsts(self, pred: int, target: int) -> dict[int, int]:
        """Per Y, the least cost to reach ``target`` in the rest of a predicted ``. Y rest``."""
        key = (pred, target)
        table = self._pred_first.get(key)
        if table is None:
            firsts = self.tables.item_first_distances(target)
            table = {}
            for nxt, advanced in self._waiting_items(pred).items():
                best = min(firsts[item] for item in advanced)
                if best < INFINITE:
                    table[nxt] = best
            self._pred_first[key] = table
        return table

    # -- per-chart values -------------------------------------------------

    def _up_values(self, chart: Chart, target: int) -> dict[int, int]:
        """Per nonterminal X started at ``chart``: least cost, once X is complete, to
        reach ``target`` in what the items waiting for X at ``chart`` still need."""
        per_chart = self._up.get(chart)
        if per_chart is None:
            per_chart = self._up[chart] = {}
        values = per_chart.get(target)
        if values is not None:
            return values
        values = {}
        firsts = self.tables.item_first_distances(target)
        close = self.tables.close
        lhs_of = self._item_lhs
        for origin, state in chart.groups:
            up: dict[int, int] | None = None
            for nxt, advanced in self._waiting_items(state).items():
                best = values.get(nxt, INFINITE)
                for item in advanced:
                    value = firsts[item]
                    if value < best:
                        best = value
                    cost = close[item]
                    if cost < best:
                        if up is None:
                            up = self._up_values(origin, target)
                        value = cost + up.get(lhs_of[item], INFINITE)
                        if value < best:
                            best = value
                if best < INFINITE:
                    values[nxt] = best
        pred = chart.pred
        if pred != _NONE:
            for nxt, value in self._pred_firsts(pred, target).items():
                if value < values.get(nxt, INFINITE):
                    values[nxt] = value
            # Completing a predicted item (started here) completes its left-hand
            # side here too: shortest paths down the prediction edges.
            edges = self._edges(pred)
            heap = [(value, symbol) for symbol, value in values.items()]
            heapq.heapify(heap)
            while heap:
                value, symbol = heapq.heappop(heap)
                if value > values.get(symbol, INFINITE):
                    continue
                for nxt, cost in edges.get(symbol, ()):
                    total = value + cost
                    if total < values.get(nxt, INFINITE):
                        values[nxt] = total
                        heapq.heappush(heap, (total, nxt))
        per_chart[target] = values
        return values


_DISTANCES: dict[int, ChartDistances] = {}


def chart_distances(tables: YieldTables) -> ChartDistances:
    found = _DISTANCES.get(id(tables))
    if found is None or found.tables is not tables:
        found = _DISTANCES[id(tables)] = ChartDistances(tables)
    return found


# --------------------------------------------------------------------------- right context


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


def _column(whitespace: str) -> int:
    column = 0
    for ch in whitespace:
        column = (column // 8 + 1) * 8 if ch == "\t" else 0 if ch == "\f" else column + 1
    return column


def _may_merge(text: str) -> bool:
    """Whether R's first character could join the last symbol of ``w``."""
    if not text or text[0] in _NO_MERGE:
        return False
    c = text[0]
    return c.isalnum() or c == "_" or not c.isascii() or c in "'\"" or c in _OPERATOR_SECONDS


class _ViewBuilder:
    def __init__(self, tables: YieldTables, classify: object, version: tuple[int, int]):
        self.tables = tables
        self.classify = classify
        self.version = version
        self._ids = tables.grammar.terminal_ids

    def members(self, kind: str, text: str) -> tuple[int, ...] | None:
        """The grammar terminals a lexer symbol scans as (None: none)."""
        symbol = self.classify(kind, text)  # type: ignore[operator]
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
        last_token = ""
        spent = 0
        word_before = True
        seen_token = False
        after_newline = False
        line_over = False
        for kind, value, offset in symbols:
            members = self.members(kind, value)
            if members is None:
                break
            layout = kind in ("INDENT", "DEDENT")
            if not layout and kind not in ("NEWLINE", "ENDMARKER") and after_newline:
                if line_start is None:  # a token that starts a logical line at depth 0
                    whitespace = indentation(_line_at(text, offset))
                    own = 0
                    if mode == "code" and text[:1] not in INDENT_CHARS + "\r\n":
                        if last_token != ":":
                            own = 1 + len(whitespace.replace("\f", ""))
                    line_start = (_column(whitespace), spent, own)
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
        return RightView(mode, entry, tuple(targets), merge, openers, line_start, start.head)


def _line_at(text: str, offset: int) -> str:
    """The line of ``text`` that holds ``offset``."""
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return text[start:offset]


def right_views(
    tables: YieldTables, classify: object, text: str, version: tuple[int, int]
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
    tables: YieldTables, text: str, version: tuple[int, int], head: str
) -> RightView | None:
    """The view of R inside a string literal that ``w`` opens with ``head`` (None: R
    cannot end a module that way).  Only the literal is a target: what ``w`` pays is
    the opening and what precedes the literal."""
    if not start_modes_that_end(text, version, (head,)):
        return None
    ids = tables.grammar.terminal_ids
    names = ("FSTRING_START",) if "f" in head else ("STRING", "BYTES")
    members = tuple(ids[n] for n in names if n in ids)
    return RightView("string", len(head), ((members, 0),), False, None, None, head)


#: Views of the last few right contexts, by (target, text): an editor asks
#: again after every keystroke with the same right context.
_VIEWS: OrderedDict[tuple[tuple[int, int], str], list[RightView]] = OrderedDict()
_VIEWS_KEPT = 8


def _comment_or_continuation(pending: str) -> bool:
    """Whether the pending text is a comment, or a backslash whose line has not ended."""
    blank = pending.lstrip(INDENT_CHARS)
    return blank.startswith("#") or (
        blank.startswith("\\") and "\n" not in blank and "\r" not in blank
    )


def _open_string_head(pending: str) -> tuple[str, str] | None:
    """(suffix head, closing quote) of a plain string literal still open in ``pending``."""
    k = 0
    while k < len(pending) and pending[k].isalpha():
        k += 1
    prefix = pending[:k].lower()
    if k >= len(pending) or pending[k] not in "'\"" or "f" in prefix or len(prefix) > 2:
        return None
    quote = pending[k : k + 3] if pending[k : k + 3] in ("'''", '"""') else pending[k]
    body = pending[k + len(quote) :]
    if len(quote) == 1 and body.endswith(quote):
        return None  # already closed (a complete literal still pending)
    head = ("r" if "r" in prefix else "") + quote
    return head, quote


class FinishAnalysis:
    """Distances to a finish for the states of one quotient (``Quotient.finish``)."""

    def __init__(self, quotient: Quotient):
        self.quotient = quotient
        recognizer = quotient.recognizer
        self.recognizer = recognizer
        self.tables = yield_tables(recognizer.grammar, recognizer.automaton)
        self.distances = chart_distances(self.tables)
        self._views: list[RightView] | None = None
        self._bounds: weakref.WeakKeyDictionary[RecognizerState, tuple[int, int]] = (
            weakref.WeakKeyDictionary()
        )
        self._indent = self.tables.grammar.terminal_ids.get("INDENT")
        self._string_views: dict[str, RightView | None] = {}
        self._moves: _Moves | None = None

    #: The distance of a state from which no finish exists.
    unreachable = INFINITE

    @property
    def views(self) -> list[RightView]:
        """How R can begin (computed on first use, shared by quotients with the same R)."""
        if self._views is None:
            version = tuple(self.recognizer.version)
            key = ((version[0], version[1]), self.quotient.right)
            views = _VIEWS.get(key)
            if views is None:
                views = right_views(
                    self.tables, self.recognizer.classify, self.quotient.right, key[0]
                )
                _VIEWS[key] = views
                while len(_VIEWS) > _VIEWS_KEPT:
                    _VIEWS.popitem(last=False)
            else:
                _VIEWS.move_to_end(key)
            self._views = views
        return self._views

    # -- the bound --------------------------------------------------------

    def lower_bound(self, state: RecognizerState) -> int:
        """A number of characters never above the distance of ``state`` (see the module
        docstring); INFINITE for a dead state or an empty quotient."""
        return self._pair(state)[0]

    def light_bound(self, state: RecognizerState) -> int:
        """Like :meth:`lower_bound`, for lengths where a line's indentation counts as one."""
        return self._pair(state)[1]

    def _pair(self, state: RecognizerState) -> tuple[int, int]:
        known = self._bounds.get(state)
        if known is None:
            known = self._bound(state)
            self._bounds[state] = known
        return known

    def _bound(self, state: RecognizerState) -> tuple[int, int]:
        lex, chart = state.lex, state.chart
        if lex is None or chart is None or self.quotient.empty:
            return INFINITE, INFINITE
        if lex.fstring_quotes:
            return 0, 0  # inside an f-string: not analysed
        pending = lex.pending
        blank = pending.lstrip(INDENT_CHARS)
        if not pending or not blank or lex.pending_kinds() is None:
            if _comment_or_continuation(pending):
                if blank.startswith("#"):
                    return self._views_bound(chart, lex, 0, False, in_comment=True)
                return 0, 0  # a backslash: the next character must end the line
            return self._views_bound(chart, lex, 0, False)
        # A symbol in progress either ends here (emit) or grows into w and R (extend).
        best = (INFINITE, INFINITE)
        emitted = lex.emit_pending()
        if emitted is not None:
            after, symbols = emitted
            stepped, _ = self.recognizer.step(chart, symbols)
            if stepped is not None:
                best = self._views_bound(stepped, after, 0, False)
        string = _open_string_head(pending)
        if string is not None:
            head, quote = string
            if self._string_view(head) is not None:
                return 0, 0  # R may go on with this very string
            ids = self.tables.grammar.terminal_ids
            for kind in ("STRING", "BYTES"):
                stepped = chart.step(ids[kind]) if kind in ids else None
                if stepped is not None:
                    full, light = self._views_bound(stepped, lex, 0, False)
                    best = _least(best, (len(quote) + full, len(quote) + light))
            return best
        kinds = lex.pending_kinds() or frozenset()
        costs = [
            self.tables.cost[t]
            for kind in kinds
            for t in self.recognizer.classify.kind_terminals.get(kind, ())
        ]
        spent = max(costs, default=len(pending))
        return _least(best, self._views_bound(chart, lex, spent, True))

    def _string_view(self, head: str) -> RightView | None:
        """The view for a string literal opened by ``head`` (checked on first use)."""
        if head not in self._string_views:
            version = tuple(self.recognizer.version)
            self._string_views[head] = string_view(
                self.tables, self.quotient.right, (version[0], version[1]), head
            )
        return self._string_views[head]

    # -- the search -------------------------------------------------------

    def search(
        self,
        start: QuotientState,
        *,
        max_nodes: int = 2000,
        max_seconds: float = 0.5,
        within: int | None = None,
        first_share: float = 0.6,
        weight: float = 3.0,
    ) -> Witness:
        """A shortest (or near-shortest) finish of ``start``, best first.

        Two A* searches with the lower bound as heuristic (children are fed
        and bounded only when taken from the queue; states that accept the
        same continuations are expanded once):

        1. lengths where a line's indentation counts as one character, for
           which the bound is nearly tight on statement-level finishes, so
           a witness comes fast (``first_share`` of the node budget);
        2. real lengths, keeping only paths shorter than that witness: an
           empty queue proves it shortest, a finish found is shorter and
           shortest.  Without a witness from 1, this one is weighted
           (``g + weight * h``) to find one sooner: at most ``weight`` times
           as long as the shortest by the usual argument.

        ``within``: look only for finishes of at most that many characters
        (paths that cannot stay within are dropped, which makes the search
        cheaper); a Witness without text and with ``exact`` then proves that
        none exists.  ``lower`` is the best bound proved on the way.  At the
        budget (nodes or seconds) the search returns what it has.
        """
        if self._moves is None:
            self._moves = _Moves(self)
        deadline = time.monotonic() + max_seconds
        cutoff = INFINITE if within is None else within + 1
        if not start.viable:
            return Witness(None, INFINITE, True, 0)
        if start.complete:
            return Witness("", 0, True, 0)
        h0 = self.lower_bound(start.state)
        if h0 >= cutoff:
            return Witness(None, h0, True, 0)
        keys = _CanonicalKeys(self.tables, start.state)
        first = _AStar(self, keys, start, light=True, weight=1.0, cutoff=cutoff)
        found = first.run(int(max_nodes * first_share), deadline)
        nodes = first.nodes
        lower = max(first.lower, h0)
        if found is None:
            if first.exhausted:  # every path under the cutoff is dead
                if cutoff < INFINITE:
                    return Witness(None, max(lower, cutoff), True, nodes)
                return Witness(None, lower, False, nodes)
            second = _AStar(self, keys, start, light=True, weight=weight, cutoff=cutoff)
            found = second.run(max_nodes - nodes, deadline)
            nodes += second.nodes
            return Witness(found, lower, second.exhausted and found is None, nodes)
        exact = _AStar(self, keys, start, light=False, weight=1.0, cutoff=min(len(found), cutoff))
        shorter = exact.run(max_nodes - nodes, deadline)
        nodes += exact.nodes
        if shorter is not None:
            return Witness(shorter, len(shorter), True, nodes)
        if exact.exhausted:
            if len(found) >= cutoff:  # the light search's finish is too long in characters
                return Witness(None, cutoff, True, nodes)
            return Witness(found, len(found), True, nodes)
        if len(found) >= cutoff:
            return Witness(None, max(lower, exact.lower), False, nodes)
        return Witness(found, max(lower, exact.lower), False, nodes)

    def _views_bound(
        self, chart: Chart, lex: LexState, spent: int, skip_first: bool, in_comment: bool = False
    ) -> tuple[int, int]:
        """Least, over R's views, of what ``w`` must pay after ``chart``: (in characters,
        with a line's indentation counted as one).

        ``spent``: the least cost of a symbol in progress that the paths scan
        before ``w`` (subtracted); ``skip_first``: R's first symbol may merge
        with it.
        """
        first = self.distances.first_distance
        brackets = lex.brackets
        columns = {column for column, _alt in lex.indent_levels}
        best = best_light = INFINITE
        for view in self.views:
            if in_comment:
                entry = 0 if view.mode == "comment" else 1 + view.entry
            else:
                entry = view.entry
            if entry >= best:
                continue
            need = 0
            if view.openers is not None:
                shared = 0
                limit = min(len(brackets), len(view.openers))
                while shared < limit and brackets[shared] == view.openers[shared]:
                    shared += 1
                need = len(brackets) + len(view.openers) - 2 * shared
            skip = skip_first or view.first_may_merge
            for index, (members, allowance) in enumerate(view.targets):
                if entry + need >= best:
                    break  # this view cannot lower the minimum
                if (index == 0 and skip) or allowance > _MAX_ALLOWANCE:
                    continue
                reach = min(first(chart, m) for m in members)
                value = reach - allowance - spent
                if value > need:
                    need = value
            need_full = need
            if view.line_start is not None and self._indent is not None:
                column, allowance, own = view.line_start
                if column not in columns:
                    value = first(chart, self._indent) - allowance - spent
                    if value > need:
                        need = need_full = value
                    if own > need_full:
                        need_full = own
            best = min(best, entry + need_full)
            best_light = min(best_light, entry + need)
        # R may also begin inside a string literal that w opens; such a view can only
        # matter where it costs less than the others, so it is checked only then.
        for head in STRING_HEADS:
            entry = len(head) + (1 if in_comment else 0)
            if entry >= best_light:
                break
            string = self._string_view(head)
            if string is None:
                continue
            members, _allowance = string.targets[0]
            reach = min(first(chart, m) for m in members) - spent
            value = entry + max(0, reach)
            best = min(best, value)
            best_light = min(best_light, value)
        return best, best_light


def _least(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return min(a[0], b[0]), min(a[1], b[1])


# --------------------------------------------------------------------------- witnesses


@dataclass(frozen=True)
class Witness:
    """A finish found by :meth:`FinishAnalysis.search`.

    ``text`` completes the middle (``state.feed(text).complete`` holds), or
    is None when none was found.  ``lower`` is a lower bound on the distance
    proved by the search (at least the state's ``distance()``).  ``exact``:
    with a text, no shorter finish exists; without one, no finish exists
    within the search's ``within`` (or at all, for a dead state); both
    among the insertions the search tries: the shortest text of
    each terminal the chart can scan next (``yields.SHORTEST_TEXTS``, a
    keyword or operator itself), a blank only where two symbols would merge,
    and at a line start the indentation of an open block or, for a new
    block, one unit more (the file's unit, else four spaces).  ``nodes``:
    states expanded.
    """

    text: str | None
    lower: int
    exact: bool
    nodes: int

    @property
    def length(self) -> int | None:
        return None if self.text is None else len(self.text)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_" or (not c.isascii() and c.isidentifier())


class _Moves:
    """Short insertions tried from a state: one terminal's shortest text each."""

    def __init__(self, analysis: FinishAnalysis):
        self.analysis = analysis
        tables = analysis.tables
        grammar = tables.grammar
        names = grammar.symbol_names
        layout = {"INDENT", "DEDENT", "ENDMARKER", "FSTRING_MIDDLE", "FSTRING_END"}
        self.text_of: dict[int, str] = {
            t: text for t, text in enumerate(tables.text) if text and names[t] not in layout
        }
        operators = [n for n in names[: grammar.n_terminals] if not n.isidentifier()]
        self.operator_pairs = frozenset(op[:2] for op in operators if len(op) >= 2)
        self.operator_chars = frozenset("".join(operators))
        ids = grammar.terminal_ids
        self.indent = ids.get("INDENT")
        self.dedent = ids.get("DEDENT")
        self.right = analysis.quotient.right

    def separator(self, before: str, text: str) -> str:
        """A blank where ``before`` followed by ``text`` would lex as other symbols."""
        if not before:
            return ""
        first = text[0]
        if _is_word_char(before) and (_is_word_char(first) or first in "'\""):
            return " "
        if (before == "." and first.isdigit()) or (before.isdigit() and first == "."):
            return " "
        if before in self.operator_chars and first in self.operator_chars:
            if before + first in self.operator_pairs:
                return " "
        return ""

    def from_chart(self, chart: Chart, before: str) -> Iterator[str]:
        text_of, separator = self.text_of, self.separator
        seen: set[str] = set()
        for terminal in chart.expected_terminals():
            text = text_of.get(terminal)
            if text is None:
                continue
            move = separator(before, text) + text
            if move not in seen:
                seen.add(move)
                yield move

    def __call__(self, state: RecognizerState) -> list[str]:
        lex, chart = state.lex, state.chart
        assert lex is not None and chart is not None
        if lex.in_fstring_literal:
            return [lex.fstring_quotes[-1], "{", "}", "x"]
        pending = lex.pending
        if _comment_or_continuation(pending):
            return ["\n"]  # only a line break helps
        kinds = lex.pending_kinds() if pending else None
        if kinds is not None:
            return self.growing(lex, chart, kinds)
        if lex.at_line_start and not lex.brackets:
            return list(self.line_start(lex, chart))
        found = list(self.from_chart(chart, lex.last_char))
        if self.right[:1] and self.separator(lex.last_char, self.right[0]):
            found.append(" ")  # keep the last symbol apart from R's first
        return found

    def growing(self, lex: LexState, chart: Chart, kinds: frozenset[str]) -> list[str]:
        """Moves from a symbol in progress: grow it, or end it and go on."""
        pending = lex.pending
        moves: list[str] = []
        # grow it into a keyword or operator the chart takes ...
        for terminal in chart.expected_terminals():
            text = self.text_of.get(terminal)
            if text and len(text) > len(pending) and text.startswith(pending):
                moves.append(text[len(pending) :])
        # ... into a name (a keyword so far), a number, a string literal ...
        word = pending.isidentifier()
        if word and "NAME" in kinds and kinds != _NAME_ONLY:
            moves.append("x")
        if "NUMBER" in kinds:
            moves.append("0")
        if word and kinds & _LITERAL_KINDS:
            moves.append("''")
        string = _open_string_head(pending)
        if string is not None:
            moves.append(string[1])
        # ... or end it here and go on with the next symbol
        emitted = lex.emit_pending()
        if emitted is not None:
            stepped, _ = self.analysis.recognizer.step(chart, emitted[1])
            if stepped is not None:
                moves.extend(self.from_chart(stepped, pending[-1]))
                if self.right[:1] and self.separator(pending[-1], self.right[0]):
                    moves.append(" ")  # keep the symbol apart from R's first
        return moves

    def line_start(self, lex: LexState, chart: Chart) -> Iterator[str]:
        """Indentation of an open block (or one level deeper), then a first symbol."""
        levels = lex.indent_levels
        typed = lex.pending if not lex.pending.strip(INDENT_CHARS) else None
        if typed is None:
            return
        options: list[tuple[str, Chart | None]] = []
        for depth, (column, alt) in enumerate(levels):
            whitespace = _whitespace(column, alt)
            if whitespace is None or not whitespace.startswith(typed):
                continue
            target: Chart | None = chart
            for _ in range(len(levels) - 1 - depth):
                if target is None or self.dedent is None:
                    break
                target = target.step(self.dedent)
            options.append((whitespace, target))
        if self.indent is not None and self.indent in chart.expected_terminals():
            column, alt = levels[-1]
            unit = column - levels[-2][0] if len(levels) > 1 else 4
            whitespace = _whitespace(column, alt)
            if whitespace is not None:
                deeper = whitespace + ("\t" if "\t" in whitespace else " " * max(unit, 1))
                if deeper.startswith(typed):
                    options.append((deeper, chart.step(self.indent)))
        for whitespace, target in options:
            if target is None:
                continue
            if whitespace != typed and self.right[:1] not in ("", "\r", "\n"):
                yield whitespace[len(typed) :]  # R's first line goes on from here
            for move in self.from_chart(target, ""):
                yield whitespace[len(typed) :] + move


_NAME_ONLY = frozenset({"NAME"})
_LITERAL_KINDS = frozenset({"STRING", "BYTES", "FSTRING_START"})


def _whitespace(column: int, alt: int) -> str | None:
    """Indentation text for a level: spaces, or tabs when the level is all tabs."""
    if column == alt:
        return " " * column
    if column == 8 * alt:
        return "\t" * alt
    return None


#: A search queue entry: (priority, -g, counter, g, h, text, state, move); a
#: child not yet fed has its parent's state and its move.
_Entry = tuple[float, int, int, int, int, str, "QuotientState", str]


class _AStar:
    """One best-first search for a finish (see :meth:`FinishAnalysis.search`)."""

    def __init__(
        self,
        analysis: FinishAnalysis,
        keys: _CanonicalKeys,
        start: QuotientState,
        *,
        light: bool,
        weight: float,
        cutoff: int,
    ):
        self.analysis = analysis
        self.keys = keys
        self.light = light
        self.weight = weight
        self.cutoff = cutoff
        self.bound = analysis.light_bound if light else analysis.lower_bound
        h0 = max(1, self.bound(start.state))
        self.queue: list[_Entry] = [(weight * h0, 0, 0, 0, h0, "", start, "")]
        self.lower = h0
        self.nodes = 0
        self.exhausted = False

    def cost(self, move: str, at_line_start: bool) -> int:
        if not self.light or not at_line_start:
            return len(move)
        token = move.lstrip(INDENT_CHARS)
        return len(token) + (1 if len(token) < len(move) else 0)

    def run(self, max_nodes: int, deadline: float) -> str | None:
        """Search on; the text of a finish, or None (budget spent or queue empty)."""
        queue, keys, bound, weight = self.queue, self.keys, self.bound, self.weight
        moves = self.analysis._moves
        assert moves is not None
        best_g: dict[object, int] = {}
        counter = 1
        exact = weight == 1.0
        while queue:
            if self.nodes >= max_nodes or time.monotonic() > deadline:
                return None
            _priority, _neg, _n, g, h, text, state, move = heapq.heappop(queue)
            if g + h >= self.cutoff:
                continue
            if exact and g + h > self.lower:
                self.lower = g + h
            if move:
                state = state.feed(move)
                if not state.viable:
                    continue
                value = bound(state.state)
                if value >= INFINITE:
                    continue
                if value > h:  # a better estimate: back into the queue
                    queue_push(queue, g, value, weight, counter, text, state, "")
                    counter += 1
                    continue
                h = value
            key = keys(state.state)
            known = best_g.get(key)
            if known is not None and known <= g:
                continue
            best_g[key] = g
            if h <= 0 and state.complete:
                return text
            self.nodes += 1
            lex = state.state.lex
            assert lex is not None
            at_line_start = lex.at_line_start and not lex.brackets
            for step in moves(state.state):
                gc = g + self.cost(step, at_line_start)
                hc = max(0, h - (gc - g))
                queue_push(queue, gc, hc, weight, counter, text + step, state, step)
                counter += 1
        self.exhausted = True
        return None


def queue_push(
    queue: list[_Entry],
    g: int,
    h: int,
    weight: float,
    counter: int,
    text: str,
    state: QuotientState,
    move: str,
) -> None:
    heapq.heappush(queue, (g + weight * h, -g, counter, g, h, text, state, move))


class _CanonicalKeys:
    """Keys under which states that accept the same continuations are equal.

    An Earley item's future depends only on its left-hand side and the rest
    of its right-hand side, so items are compared as (lhs, rest) and charts
    made during the search are compared by content, origins included (charts
    of ``L + m`` by identity).  ``x + 1`` and ``x - 1`` then share a key.
    """

    def __init__(self, tables: YieldTables, start: RecognizerState):
        assert start.chart is not None
        self.base = start.chart.pos
        automaton = tables.automaton
        self._items = automaton.st_items
        rest: list[tuple[int, tuple[int, ...]]] = []
        for lhs, rhs in tables.grammar.productions:
            for dot in range(len(rhs) + 1):
                rest.append((lhs, rhs[dot:]))
        self._rest = rest
        self._states: dict[int, int] = {}
        self._ids: dict[frozenset[tuple[int, tuple[int, ...]]], int] = {}
        self._charts: weakref.WeakKeyDictionary[Chart, object] = weakref.WeakKeyDictionary()

    def state(self, state: int) -> int:
        found = self._states.get(state)
        if found is None:
            if state == _NONE:
                return _NONE
            content = frozenset(self._rest[i] for i in self._items[state])
            found = self._ids.setdefault(content, len(self._ids))
            self._states[state] = found
        return found

    def chart(self, chart: Chart) -> object:
        if chart.pos <= self.base:
            return chart
        found = self._charts.get(chart)
        if found is None:
            found = (
                frozenset(
                    (self.chart(origin), self.state(state)) for origin, state in chart.groups
                ),
                self.state(chart.pred),
                chart.accepting,
            )
            self._charts[chart] = found
        return found

    def __call__(self, state: RecognizerState) -> object:
        assert state.chart is not None and state.lex is not None
        return (self.chart(state.chart), state.lex.state_key())
