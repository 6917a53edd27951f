"""Witnesses: a shortest (or near-shortest) text that completes a middle.

:func:`search` is best-first (A*) over short insertions, with the lower
bound of ``finish.py`` as its heuristic.  From a state it tries each
terminal the chart can scan next, in its shortest text (a blank first where
it would merge with the text before); a symbol in progress grown into a
keyword, name, number or literal; at a line start, the indentation of an
open block (or one unit deeper where the chart wants an INDENT), with or
without a first symbol; and a lone blank where the end of the finish would
merge with the right context's start.  Every finish is checked by the
quotient, so a witness is always a real one.
"""

from __future__ import annotations

import functools
import heapq
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lexer import LexState
from lexer.tables import OPEN_TO_CLOSE
from lexer.text import INDENT_CHARS, first_line, is_word_char

from .earley import Chart
from .finish import FinishAnalysis
from .language import LanguageState
from .pending_text import comment_or_continuation, open_string_head
from .yields import INFINITE, YieldTables

if TYPE_CHECKING:
    from .recognizer import RecognizerState

__all__ = ["Witness", "search"]

_NONE = -1


def search(
    analysis: FinishAnalysis,
    start: LanguageState,
    *,
    max_nodes: int = 2000,
    max_seconds: float = 0.5,
    within: int | None = None,
    first_share: float = 0.3,
    weight: float = 3.0,
    crossing: bool = True,
) -> Witness:
    """A shortest (or near-shortest) finish of ``start``, best first; ``analysis`` is
    the finish analysis of ``start``'s quotient (``Quotient.finish``).

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

    Between 1 and 2 (``crossing``), a finish that ends the statement under
    the cursor and begins a new one is tried (:func:`_across_statement`):
    the bound cannot see across a statement's end, so A* alone rarely
    finds those; it then plays the part of 1's witness.
    """
    deadline = time.monotonic() + max_seconds
    cutoff = INFINITE if within is None else within + 1
    if not start.viable:
        return Witness(None, INFINITE, True, 0)
    if start.lands:
        return Witness("", 0, True, 0)
    h0 = analysis.natural_bound(start.state)
    if h0 >= cutoff:
        return Witness(None, h0, True, 0)
    keys = _CanonicalKeys(analysis.tables, start.state)
    first = _AStar(analysis, keys, start, light=True, weight=1.0, cutoff=cutoff)
    found = first.run(int(max_nodes * first_share), deadline)
    nodes = first.nodes
    lower = max(first.lower, h0)
    if found is None:
        if first.exhausted:  # every path under the cutoff is dead
            if cutoff < INFINITE:
                return Witness(None, max(lower, cutoff), True, nodes)
            return Witness(None, lower, False, nodes)
        if crossing:
            found, spent = _across_statement(analysis, start, max_nodes - nodes, deadline, cutoff)
            nodes += spent
            if found is not None:
                # the crossing may use insertions the light search's proof did not
                # cover (a blank line, say): its bound holds only among its own
                lower = min(lower, len(found))
        if found is None:
            second = _AStar(analysis, keys, start, light=True, weight=weight, cutoff=cutoff)
            found = second.run(max_nodes - nodes, deadline)
            nodes += second.nodes
            return Witness(found, lower, second.exhausted and found is None, nodes)
    exact = _AStar(analysis, keys, start, light=False, weight=1.0, cutoff=min(len(found), cutoff))
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
    return Witness(found, min(max(lower, exact.lower), len(found)), False, nodes)


def _across_statement(
    analysis: FinishAnalysis, start: LanguageState, max_nodes: int, deadline: float, cutoff: int
) -> tuple[str | None, int]:
    """(a finish that crosses a statement boundary, or None; states expanded).

    The shortest end of the module from ``start`` (the quotient of the same left
    context with nothing after it, ``Quotient.module_end``) ends the statement
    under the cursor and the blocks it opens; after it and a line break, a
    search from that line start (an open block's indentation, then what R's
    first line needs on its left, as ``from `` before ``unittest import mock``).
    The whole text is checked by the quotient, so only a real finish comes back.
    """
    quotient = start.quotient
    if not quotient.right.strip() or quotient.empty:
        return None, 0
    seconds = deadline - time.monotonic()
    if seconds <= 0 or max_nodes <= 0:
        return None, 0
    ending = quotient.module_end
    # the light search alone until a finish of the statement is found: any will do
    # (the whole finish is not claimed shortest), and split the way the main search
    # splits, a third of a steering search's budget left too few for a nest to close
    end = search(
        analysis.module_end,
        ending.state_class(ending, start.state),
        max_nodes=max_nodes // 3,
        max_seconds=seconds / 3,
        first_share=1.0,
        crossing=False,
    )
    nodes = end.nodes
    if end.text is None:
        return None, nodes
    head = end.text.rstrip(INDENT_CHARS + "\r\n") + "\n"
    lex = start.state.lex
    if head == "\n" and lex is not None and lex.at_line_start and not lex.pending:
        head = ""  # already at a line start: no blank line first
    if len(head) >= cutoff:
        return None, nodes
    line_start = start.feed(head)
    if not line_start.viable:
        return None, nodes
    # a first symbol alone first, at this line start or in a new block's first line
    right_line = first_line(quotient.right)
    moves = _moves_of(analysis)
    tails = _line_tails(analysis)
    for opener in ("", _BLOCK_OPENER):
        where = line_start.feed(opener)
        if not where.viable:
            continue
        texts = [text for tail in tails for text in _first_symbols(moves, where, tail)]
        for text in sorted(texts, key=_line_start_order):
            if len(head) + len(opener) + len(text) >= cutoff or time.monotonic() > deadline:
                break
            candidate = where.feed(text)
            if right_line and not candidate.feed(right_line).viable:
                continue  # R's first line cannot follow: a left-prefix test, not a node
            if nodes >= max_nodes:  # each candidate is a check of all of R: it counts
                return None, nodes
            nodes += 1
            if candidate.lands:
                return head + opener + text, nodes
    rest = search(
        analysis,
        line_start,
        max_nodes=max_nodes - nodes,
        max_seconds=deadline - time.monotonic(),
        within=cutoff - 1 - len(head) if cutoff < INFINITE else None,
        crossing=False,
    )
    nodes += rest.nodes
    if rest.text is None or not start.feed(head + rest.text).lands:
        return None, nodes
    return head + rest.text, nodes


#: The shortest header that opens a block in any statement context: after it, a line
#: start one level deeper (where R's first line may need to be).
_BLOCK_OPENER = "if x:\n"


def _first_symbols(moves: _Moves, line_start: LanguageState, openers: str) -> list[str]:
    """Texts that begin a line at ``line_start`` with one symbol, shortest first: each
    line-start move, with a blank after it, a keyword with a name after it (``if x``
    before R's ``:``), and a word's prefixes (R's first line
    may go on with the rest of the word, as ``ret`` before ``urn x``); where R closes
    brackets (``openers``), a move then the brackets, or a keyword, a name and the
    brackets (``def x(`` before ``a, b):``), and then only those that open them."""
    texts: set[str] = set()
    right_goes_on_word = is_word_char(moves.right[:1]) if moves.right else False
    for move in moves(line_start.state):
        texts.add(move)
        texts.add(move + " ")
        token = move.lstrip(INDENT_CHARS)
        if token.isidentifier():
            indent = move[: len(move) - len(token)]
            if right_goes_on_word:  # R's first word may complete a prefix of this one
                texts.update(indent + token[:k] for k in range(1, len(token)))
            if token != "x":  # a keyword and a name: 'if x' before R's ':'
                texts.add(move + " x")
            if openers:
                texts.add(move + " x" + openers)
        if openers:
            texts.add(move + openers)
    if openers:  # the line starts with no bracket open: it must open R's
        texts = {text for text in texts if text.endswith(openers)}
    return sorted(texts, key=_line_start_order)


def _line_start_order(text: str) -> tuple[int, int, str]:
    """The order line starts are tried in: an indentation counts as one character, as
    in the light search (each candidate is a check of all of R, and a line at the open
    block's depth, 12 spaces then ``(``, comes before every two-symbol line at a
    shallower one)."""
    return _line_start_cost(text), len(text), text


def _line_start_cost(text: str) -> int:
    """Length of a text at a line start with its indentation counted as one character
    (the light search's measure, under which the bound is nearly tight)."""
    token = text.lstrip(INDENT_CHARS)
    return len(token) + (1 if len(token) < len(text) else 0)


def _line_tails(analysis: FinishAnalysis) -> list[str]:
    """What a line that R's first line goes on must end with: the brackets R closes
    where R begins in code, and for each plain string literal R can go on inside, the
    brackets R closes after it and the literal's opening quote (``("`` before R's
    ``not started") from None``: the finish must open the string R ends)."""
    tails = [view.openers or "" for view in analysis.views if view.mode == "code"][:1]
    for head in _PLAIN_OPENINGS:
        inside = analysis.right_in_string(head)
        if inside is not None and inside.openers is not None:
            tails.append(inside.openers + head)
    return tails or [""]


def _openers_of(analysis: FinishAnalysis) -> str:
    """The brackets R closes when it begins in code ("" when none or not known)."""
    for view in analysis.views:
        if view.mode == "code":
            return view.openers or ""
    return ""


@dataclass(frozen=True)
class Witness:
    """A finish found by :func:`search`.

    ``text`` completes the middle and lands (``state.feed(text).lands`` holds), or
    is None when none was found.  ``exact``: with a text, no shorter finish
    exists; without one, no finish exists within the search's ``within`` (or
    at all, for a dead state).  ``lower``: no finish is shorter.  Both are
    proved among the insertions the search tries (the state's
    ``distance()`` bounds every finish): the shortest text of
    each terminal the chart can scan next (``yields.SHORTEST_TEXTS``, a
    keyword or operator itself), a blank only where two symbols would merge,
    and at a line start the indentation of an open block or, for a new
    block, one unit more (the file's unit, else four spaces), or a blank.
    ``nodes``: states expanded.
    """

    text: str | None
    lower: int
    exact: bool
    nodes: int


class _Moves:
    """Short insertions tried from a state: one terminal's shortest text each."""

    def __init__(self, analysis: FinishAnalysis):
        # Not the analysis itself: ``_MOVES`` holds this weakly keyed by it.
        self.recognizer = analysis.recognizer
        tables = analysis.tables
        grammar = tables.grammar
        names = grammar.symbol_names
        # layout comes with line starts, literal text only in an f-string's literal mode
        layout = {"INDENT", "DEDENT", "ENDMARKER"}
        self.text_of: dict[int, str] = {
            t: text
            for t, text in enumerate(tables.text)
            if text
            and names[t] not in layout
            and not names[t].endswith(("STRING_MIDDLE", "STRING_END"))
        }
        operators = [n for n in names[: grammar.n_terminals] if not n.isidentifier()]
        self.operator_pairs = frozenset(op[:2] for op in operators if len(op) >= 2)
        self.operator_chars = frozenset("".join(operators))
        ids = grammar.terminal_ids
        #: construct phrases, each tried where the chart can scan its first keyword: a
        #: comprehension's clause (R's ``if`` inside a display, or its closing bracket
        #: after a name) and a conditional's test (R's ``else``).  The bound sees each of
        #: R's symbols apart and so not that these are needed before them.
        self.phrases: dict[int, str] = {
            ids[phrase.split()[0]]: phrase for phrase in _PHRASES if phrase.split()[0] in ids
        }
        self.indent = ids.get("INDENT")
        self.dedent = ids.get("DEDENT")
        self.right = analysis.quotient.right
        self.phrase_end = " " if is_word_char(self.right[:1]) else ""
        #: the brackets R closes (closing runs stop short of them)
        self.openers = _openers_of(analysis)
        #: R's first line has text that cannot be code: a finish may open the comment
        #: it ends (``Quotient.right_line_can_be_code``)
        self.comment_tail = bool(first_line(self.right).strip()) and (
            not analysis.quotient.right_line_can_be_code
        )
        #: plain string openings that R can close: a finish may open the literal R ends
        self.string = ids.get("STRING")
        #: f-string (and t-string) openings, not tried where a plain literal may stand
        #: instead: ``''`` finishes whatever ``f''`` does, and inside an f-string the
        #: bound is 0, so the search would spend its budget on ``f'{x...``
        self.interpolated = frozenset(t for t in self.text_of if names[t].endswith("STRING_START"))
        self.string_openings = tuple(
            head for head in _PLAIN_OPENINGS if analysis.right_goes_on_in_string(head)
        )

    def separator(self, before: str, text: str) -> str:
        """A blank where ``before`` followed by ``text`` would lex as other symbols."""
        if not before:
            return ""
        first = text[0]
        if is_word_char(before) and (is_word_char(first) or first in "'\""):
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
        expected = chart.expected_terminals()
        plain = self.string in expected
        for terminal in expected:
            if terminal == self.string:
                for head in self.string_openings:
                    yield separator(before, head) + head
            elif plain and terminal in self.interpolated:
                continue
            phrase = self.phrases.get(terminal)
            if phrase is not None:  # first: among equally short paths, tried first
                # with the blank that keeps its last name apart from R's first word
                yield separator(before, phrase) + phrase + self.phrase_end
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
        if comment_or_continuation(pending):
            return ["\n"]  # only a line break helps
        kinds = lex.pending_kinds() if pending else None
        if kinds is not None:
            found = self.growing(lex, chart, kinds)
        elif lex.at_line_start and not lex.brackets:
            found = list(self.line_start(lex, chart))
        else:
            found = list(self.from_chart(chart, lex.last_char))
            found.extend(self.closing_runs(lex.brackets, found))
            if self.right[:1] and self.separator(lex.last_char, self.right[0]):
                found.append(" ")  # keep the last symbol apart from R's first
        if self.comment_tail and open_string_head(pending) is None:
            found.append("#")  # R's first line is the rest of a comment: open it
        return found

    def closing_runs(self, brackets: str, moves: list[str]) -> list[str]:
        """Runs of closing brackets taken as one move, where the innermost closer is one:
        down to the brackets R closes itself, and all of them.

        One closer a move costs a node per bracket and, on each, a node for every move
        the bound cannot tell from it (``x`` or ``)**`` where ``)`` goes on), so a
        nest of ten ``not (`` would spend a steering search's whole budget on closing
        it.  A run is still fed and bounded like any move, so nothing unreal comes of it.
        """
        if len(brackets) < 2 or OPEN_TO_CLOSE[brackets[-1]] not in moves:
            return []
        shared = 0
        limit = min(len(brackets), len(self.openers))
        while shared < limit and brackets[shared] == self.openers[shared]:
            shared += 1
        runs = []
        for keep in {shared, 0}:
            run = "".join(OPEN_TO_CLOSE[b] for b in reversed(brackets[keep:]))
            if len(run) >= 2:
                runs.append(run)
        return runs

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
        string = open_string_head(pending)
        if string is not None:
            moves.append(string[1])
        # ... or end it here and go on with the next symbol
        emitted = lex.emit_pending()
        if emitted is not None:
            stepped, _ = self.recognizer.step(chart, emitted[1])
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
        yield " "  # R may bring the rest of the line's indentation
        for whitespace, target in options:
            if target is None:
                continue
            if whitespace != typed and self.right[:1] not in ("", "\r", "\n"):
                yield whitespace[len(typed) :]  # R's first line goes on from here
            for move in self.from_chart(target, ""):
                yield whitespace[len(typed) :] + move


_NAME_ONLY = frozenset({"NAME"})
#: Construct phrases (see ``_Moves.phrases``), keyed by their first keyword.
_PHRASES = frozenset({"for x in x", "if x"})
#: String openings tried where R can go on inside the literal (prefixed ones are not).
_PLAIN_OPENINGS = ("'", '"', "'''", '"""')
_LITERAL_KINDS = frozenset({"STRING", "BYTES", "FSTRING_START", "TSTRING_START"})


def _whitespace(column: int, alt: int) -> str | None:
    """Indentation text for a level: spaces, or tabs when the level is all tabs."""
    if column == alt:
        return " " * column
    if column == 8 * alt:
        return "\t" * alt
    return None


#: A search queue entry: (priority, -g, counter, g, h, text, state, move); a
#: child not yet fed has its parent's state and its move.
_Entry = tuple[float, int, int, int, int, str, "LanguageState", str]


class _AStar:
    """One best-first search for a finish (see :func:`search`)."""

    def __init__(
        self,
        analysis: FinishAnalysis,
        keys: _CanonicalKeys,
        start: LanguageState,
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
        self.bound = functools.partial(analysis.natural_bound, light=light)
        h0 = max(1, self.bound(start.state))
        self.queue: list[_Entry] = [(weight * h0, 0, 0, 0, h0, "", start, "")]
        self.lower = h0
        self.nodes = 0
        self.exhausted = False

    def cost(self, move: str, at_line_start: bool) -> int:
        if not self.light or not at_line_start:
            return len(move)
        return _line_start_cost(move)

    def light_cost(self, move: str, at_line_start: bool) -> int:
        """What ``move`` adds to the light search's length: a construct phrase counts as
        one character, so the phrases R's later symbols need are tried early (the bound
        cannot see that need; see ``_Moves.phrases``)."""
        if self.light and move.strip(" ") in _PHRASES:
            return 1
        return self.cost(move, at_line_start)

    def run(self, max_nodes: int, deadline: float) -> str | None:
        """Search on; the text of a finish, or None (budget spent or queue empty)."""
        queue, keys, bound, weight = self.queue, self.keys, self.bound, self.weight
        moves = _moves_of(self.analysis)
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
                    _push(queue, g, value, weight, counter, text, state, "")
                    counter += 1
                    continue
                h = value
            key = keys(state.state)
            known = best_g.get(key)
            if known is not None and known <= g:
                continue
            best_g[key] = g
            if h <= 0 and state.lands:
                return text
            self.nodes += 1
            lex = state.state.lex
            assert lex is not None
            at_line_start = lex.at_line_start and not lex.brackets
            for step in moves(state.state):
                # the child's bound drops by the move's own length, not its discounted one
                gc = g + self.light_cost(step, at_line_start)
                hc = max(0, h - self.cost(step, at_line_start))
                _push(queue, gc, hc, weight, counter, text + step, state, step)
                counter += 1
        self.exhausted = True
        return None


def _push(
    queue: list[_Entry],
    g: int,
    h: int,
    weight: float,
    counter: int,
    text: str,
    state: LanguageState,
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


#: The move generator of each analysis (built on first use, dropped with it: a
#: ``_Moves`` must not refer to its analysis, or neither would ever be dropped).
_MOVES: weakref.WeakKeyDictionary[FinishAnalysis, _Moves] = weakref.WeakKeyDictionary()


def _moves_of(analysis: FinishAnalysis) -> _Moves:
    moves = _MOVES.get(analysis)
    if moves is None:
        moves = _MOVES[analysis] = _Moves(analysis)
    return moves
