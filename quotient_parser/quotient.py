"""The FIM quotient: which middles fit between a left and a right context.

Given the text before the cursor (L) and after it (R), the quotient language
is ``Q = {m : L + m + R is a valid module}``.  A :class:`Quotient` answers,
incrementally as a middle grows,

``viable``
    some continuation ``w`` makes ``L + m + w + R`` valid, and
``complete``
    ``L + m + R`` is valid.

How (and how this departs from the seed paper)
-----------------------------------------------
The paper lexes R on its own into a regular language of symbol streams
(guessing the indentation, the bracket depth and how much of R continues the
middle's last symbol) and parses it backwards.  Here the left context is
known exactly, so R is never guessed at: it is lexed and parsed forward from
the real state after ``L + m``, with the real indentation stack and bracket
depth.  The answers are exact, with none of the paper's indentation
trade-offs (section VI-B).  What keeps it fast is sharing:

* *Viability needs no look at R.*  If ``L + m`` is a viable prefix, some ``w``
  closes every open construct and ends the line at top level, and any right
  context that is the suffix of some valid module can follow after a second
  piece of ``w``.  So ``viable`` is the left recognizer's answer, provided the
  quotient is not empty.
* *Right-context parses are hash-consed.*  Charts built while parsing R are
  interned by (place in R, items, origins): two middles whose parses reach
  the same items with the same origins at the same place in R share every
  chart from there on.  At each clean line start of R (no bracket, string or
  pending symbol open) the result of the rest of the parse is memoised under
  (offset in R, indentation stack, chart).  A completeness check therefore
  parses R only until it meets a parse it has seen, typically the end of
  the statement that holds the cursor.
* *A probe warms the memo at construction.*  The statement under the cursor
  is replaced by ``pass`` at the same indentation and R is parsed from the end
  of its line: the chart there equals the one any middle reaches when it
  completes that simple statement, so the first real check is already cheap.
* *Left contexts are reused.*  Recognizer states are kept at every line start
  of L; a new left context that shares a prefix with the previous one
  restarts from the last line start before they differ.  A builder can also be
  warmed with a whole document (:meth:`QuotientBuilder.warm`), so that a first
  request anywhere in it starts from the line start before the cursor, and
  (:meth:`QuotientBuilder.warm_right`) parsed backwards, so that the check
  whether a right context cut from it can end a module at all (``suffix``)
  reads only the front of R.

Construction of a large file's quotient can be interrupted: ``interrupt`` (a
callable) is polled every few lines of L and of R, and :class:`BuildInterrupted`
is raised when it returns true.  The left-context states parsed so far are kept
for the next build; nothing half-done is memoised, so results are exact.

Example::

    >>> q = Quotient("def f(x):\\n    return (x +", ")\\n")
    >>> s = q.initial
    >>> s.viable, s.complete
    (True, False)
    >>> s = s.feed(" 1")
    >>> s.viable, s.complete
    (True, True)
    >>> s.feed(" 1 2").viable
    False
"""

from __future__ import annotations

import bisect
import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from lexer import LexError, LexState
from lexer.text import INDENT_CHARS, indentation, last_line_start, line_end_offsets
from lexer.version import NEWEST, TargetLike, TargetVersion

from .earley import Chart
from .finish import comment_or_continuation
from .recognizer import Recognizer, RecognizerState
from .suffix import right_context_can_end_module, right_line_can_be_code, warm_backward_parse

if TYPE_CHECKING:
    from .finish import FinishAnalysis
    from .inside import Enclosure
    from .witness import Witness

__all__ = ["BuildInterrupted", "Interrupt", "Quotient", "QuotientBuilder", "QuotientState"]

#: Charts of the right context get positions above every left-context chart.
_RIGHT_BASE = 1 << 48
#: Room for zero-width symbols (DEDENTs) at one offset before positions overlap.
_POS_STRIDE = 128
#: Line ends of R at which construction probes with ``pass`` (see ``probe``).
_PROBE_LINES = 24
#: A right context keeps at most this many interned charts before starting afresh.
_TABLE_LIMIT = 400_000
#: Lines parsed between two polls of an ``interrupt`` callback (a few milliseconds).
_POLL_LINES = 16

#: Polled during construction; true means "stop now".
Interrupt = Callable[[], bool]


class BuildInterrupted(Exception):
    """Construction stopped because ``interrupt`` said so; what was parsed is kept."""


def _check(interrupt: Interrupt | None, line: int) -> None:
    """Raise :class:`BuildInterrupted` on every ``_POLL_LINES``-th line if asked to."""
    if interrupt is not None and line % _POLL_LINES == 0 and interrupt():
        raise BuildInterrupted


def _line_ends(text: str) -> list[int]:
    """Offsets just after each line end of ``text``, plus its end."""
    ends = line_end_offsets(text)
    if not ends or ends[-1] != len(text):
        ends.append(len(text))
    return ends


class _LeftIndex:
    """Recognizer states at every line start of a left context, for reuse."""

    __slots__ = ("offsets", "states", "text")

    def __init__(self, text: str, offsets: list[int], states: list[RecognizerState]):
        self.text = text
        self.offsets = offsets
        self.states = states

    @classmethod
    def build(
        cls,
        recognizer: Recognizer,
        text: str,
        previous: _LeftIndex | None,
        interrupt: Interrupt | None = None,
    ) -> tuple[_LeftIndex, RecognizerState]:
        """The index of ``text`` (from ``previous``'s shared lines on) and the state after
        it.  Interrupted, it raises :class:`BuildInterrupted` carrying the partial index
        (``args[0]``), whose stored line starts are all correct."""
        offsets = [0]
        states = [recognizer.initial()]
        if previous is not None:
            keep = previous.shared_lines(text)
            offsets = previous.offsets[:keep]
            states = previous.states[:keep]
        state = states[-1]
        base = start = offsets[-1]
        for line, relative_end in enumerate(_line_ends(text[base:]), start=1):
            try:
                _check(interrupt, line)
            except BuildInterrupted:
                raise BuildInterrupted(cls(text, offsets, states)) from None
            end = base + relative_end
            if end == start:
                continue
            state = state.feed(text[start:end])
            start = end
            if end < len(text) and state.chart is not None:
                offsets.append(end)
                states.append(state)
        return cls(text, offsets, states), state

    def shared_lines(self, text: str) -> int:
        """How many stored line starts lie in the prefix ``text`` shares with ours."""
        offsets = self.offsets
        lo, hi = 1, len(offsets)
        # largest k such that text[:offsets[k-1]] == self.text[:offsets[k-1]]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            cut = offsets[mid - 1]
            if text[:cut] == self.text[:cut]:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def clean_line_start(self, limit: int) -> tuple[int, RecognizerState] | None:
        """The last stored state at a clean line start at or before ``limit``."""
        k = bisect.bisect_right(self.offsets, limit) - 1
        while k >= 0:
            state = self.states[k]
            if state.lex is not None and state.lex.sync_key() is not None:
                return self.offsets[k], state
            k -= 1
        return None


class _RightContext:
    """Everything learnt about one right context: interned charts and results."""

    __slots__ = (
        "_can_end",
        "_line_can_be_code",
        "line_ends",
        "memo",
        "probed",
        "recognizer",
        "table",
        "text",
    )

    def __init__(self, recognizer: Recognizer, text: str):
        self.recognizer = recognizer
        self.text = text
        self.line_ends = _line_ends(text)
        self.table: dict[tuple[object, ...], Chart] = {}
        self.memo: dict[tuple[int, object, Chart], bool] = {}
        self.probed: set[int] = set()
        self._can_end: bool | None = None
        self._line_can_be_code: bool | None = None

    @property
    def can_end_module(self) -> bool:
        """Whether some text before R makes a valid module (see ``suffix``)."""
        if self._can_end is None:
            self._can_end = right_context_can_end_module(self.text, self.recognizer.version)
        return self._can_end

    @property
    def first_line_can_be_code(self) -> bool:
        """``suffix.right_line_can_be_code``, asked once per right context."""
        if self._line_can_be_code is None:
            self._line_can_be_code = right_line_can_be_code(self.text, self.recognizer.version)
        return self._line_can_be_code

    def accepts_after(self, lex: LexState, chart: Chart) -> bool:
        """Whether the text parsed into (lex, chart), followed by R, is a valid module."""
        return self._run(lex, chart, 0, lex.offset)

    def _run(
        self, lex: LexState, chart: Chart, r: int, base: int, interrupt: Interrupt | None = None
    ) -> bool:
        """Parse R[r:] on from (lex, chart); ``base`` is the absolute offset of R[0].
        ``interrupt``: see the module docstring (nothing is memoised then)."""
        if len(self.table) > _TABLE_LIMIT:
            self.table.clear()
            self.memo.clear()
        text = self.text
        memo = self.memo
        visited: list[tuple[int, object, Chart]] = []
        ends = self.line_ends
        k = bisect.bisect_right(ends, r)
        result = False
        current: Chart | None = chart
        lines = 1  # lines fed at once: doubled while a symbol spans them (see below)
        feeds = 0
        while True:
            if r >= len(text):
                try:
                    symbols = lex.finish()
                except LexError:
                    break
                current = self._scan(current, symbols, base)
                result = current is not None and current.accepting
                break
            k = min(k + lines, len(ends))
            end = ends[k - 1]
            feeds += 1
            _check(interrupt, feeds)
            try:
                lex, symbols = lex.feed(text[r:end])
            except LexError:
                break
            r = end
            current = self._scan(current, symbols, base)
            if current is None:
                break
            # The lexer lexes its pending text again with each feed: a string that
            # stays open over many lines of R, fed line by line, would cost the square
            # of its length.  While one is pending, feed twice as many lines each time
            # (no clean line start, where the memo is asked, can lie inside it).
            lines = lines * 2 if lex.pending and not lex.at_line_start else 1
            sync = lex.sync_key()
            if sync is not None:
                key: tuple[int, object, Chart] = (r, sync, current)
                known = memo.get(key)
                if known is not None:
                    result = known
                    break
                visited.append(key)
        for seen in visited:
            memo[seen] = result
        return result

    def _scan(
        self, chart: Chart | None, symbols: Sequence[tuple[str, str, int]], base: int
    ) -> Chart | None:
        if chart is None:
            return None
        rec = self.recognizer
        table = self.table
        for kind, text, start in symbols:
            symbol = rec.symbol_id(kind, text)
            if symbol is None:
                return None
            offset = start - base
            pos = _RIGHT_BASE + _POS_STRIDE * (offset if offset > 0 else 0)
            if pos <= chart.pos:
                pos = chart.pos + 1
            next_chart = chart.step_shared(symbol, pos, table)
            if next_chart is None:
                return None
            chart = next_chart
        return chart

    def probe(self, left: _LeftIndex, left_text: str, interrupt: Interrupt | None = None) -> None:
        """Warm the memo with ``pass`` in place of the statement under the cursor.

        The statement that holds the cursor starts at the last clean line
        start of L.  For each of the first line ends of R, parse the rest of R
        after ``<indent>pass<newline>`` placed at that line end: a middle that
        completes a simple statement ending there reaches the same chart, so
        its first completeness check stops at the memo.  After the first
        probe the others meet its memo within a line or two.
        """
        found = left.clean_line_start(len(left_text))
        if found is None:
            return
        offset, state = found
        if offset in self.probed:
            return
        self.probed.add(offset)
        try:
            self._probe_from(state, left_text[offset:], interrupt)
        except BuildInterrupted:
            self.probed.discard(offset)  # not done: the next build probes again
            raise

    def _probe_from(self, state: RecognizerState, line: str, interrupt: Interrupt | None) -> None:
        indent = indentation(line)
        probe = state.feed(indent + "pass")
        if probe.lex is None or probe.chart is None:
            return
        text = self.text
        for q in self.line_ends[:_PROBE_LINES]:
            if text.endswith("\r\n", 0, q):
                newline = "\r\n"
            elif q and text[q - 1] in "\r\n":
                newline = text[q - 1]
            else:
                break  # the last line has no line break
            try:
                lex, symbols = probe.lex.feed(newline)
            except LexError:
                return
            base = probe.lex.offset - (q - len(newline))
            chart = self._scan(probe.chart, symbols, base)
            if chart is None or lex.sync_key() is None:
                return
            self._run(lex, chart, q, base, interrupt)


class Quotient:
    """The quotient language of one (left, right) pair; see the module docstring."""

    def __init__(
        self,
        left: str,
        right: str,
        target: TargetLike = NEWEST,
        *,
        builder: QuotientBuilder | None = None,
        stay_inside: bool = False,
        interrupt: Interrupt | None = None,
    ):
        if builder is None:
            builder = QuotientBuilder(target)
        self.left = left
        self.right = right
        self.recognizer = builder.recognizer
        left_index, left_state = builder._left(left, interrupt)
        self._right = builder._right_context(right)
        #: No middle can work: the left context is already broken, or no text
        #: at all can precede the right context in a valid module.
        self.empty = not left_state.viable or not self._right.can_end_module
        if not self.empty:
            self._right.probe(left_index, left, interrupt)
        #: Middles must not leave the construct at the cursor (``inside.py``).
        self.stay_inside = stay_inside
        self._inside_empty: bool | None = None  # decided by ``inside_empty``
        self._hold_initial(left_state)
        if stay_inside:
            if not self.empty:
                # Worked out now, with the build, rather than by the first middle fed:
                # lexing the right context's first line (all of it, where it does not
                # lex from the cursor) is a one-time cost of up to a few milliseconds
                # that would otherwise land in the first decoding step's parser time.
                _ = self.enclosure

    def _hold_initial(self, left_state: RecognizerState) -> None:
        # The initial states point back at the quotient, so the quotient holds them
        # weakly (made again when asked for after they died): a cycle would be freed only
        # by a full collection, which comes rarely on a large heap.
        self._left_state = left_state
        self._free_initial: Callable[[], QuotientState | None] = _no_state
        self._inside_initial: Callable[[], QuotientState | None] = _no_state

    @property
    def free_initial(self) -> QuotientState:
        """The state before any middle, without the ``stay_inside`` restriction."""
        state = self._free_initial()
        if state is None:
            state = QuotientState(self, self._left_state)
            self._free_initial = weakref.ref(state)
        return state

    @property
    def initial(self) -> QuotientState:
        """The state before any middle (under ``stay_inside``, an ``InsideState``)."""
        if not self.stay_inside:
            return self.free_initial
        state = self._inside_initial()
        if state is None:
            from .inside import InsideState

            state = InsideState(self, self._left_state, False)
            self._inside_initial = weakref.ref(state)
        return state

    @property
    def target(self) -> TargetVersion:
        return self.recognizer.version

    @property
    def left_viable(self) -> bool:
        """Some text after the left context makes a valid module: when the quotient is
        empty, this tells whether the left context or the right one is to blame."""
        return self.initial.state.viable

    @property
    def right_line_can_be_code(self) -> bool:
        """R's first line may be code, which a comment or continuation the middle opens
        would swallow or join (``QuotientState.lands``, steering's comment filter and
        the natural distance all ask this).

        False where that line is blank, and where R cannot begin at a symbol boundary
        of any valid module (R's backward parse, ``suffix.py``): then the line is the
        rest of a comment (``and flush it to the file.``) and a finish *must* open
        one, as the user's own text did.  Decided once per right context, on first
        use: the backward parse mostly meets the steps of the document's warm one.
        """
        return self._right.first_line_can_be_code

    @functools.cached_property
    def enclosure(self) -> Enclosure:
        """What a middle must keep open under ``stay_inside`` (``inside.py``)."""
        from .inside import enclosure_at

        return enclosure_at(self.free_initial.state, self.right)

    def inside_empty(self, *, max_nodes: int = 600, max_seconds: float = 1.0) -> bool:
        """Under ``stay_inside``: no middle that stays inside seems able to complete,
        while one that escapes can; a decoder then starts from ``free_initial``.

        Decided by two witness searches (``finish.py``) within the budget, so a
        quotient whose only finishes that stay inside are long may be called empty.
        A decided answer is kept: asking again costs nothing.
        """
        if not self.stay_inside or self.empty:
            return False
        if self._inside_empty is not None:
            return self._inside_empty
        for state in (self.initial, self.free_initial):
            found = state.witness(max_nodes=max_nodes, max_seconds=max_seconds)
            if found.text is not None:
                self._inside_empty = state is self.free_initial
                return self._inside_empty
        return False

    @functools.cached_property
    def module_end(self) -> Quotient:
        """The quotient of the same left context with an empty right one: its finishes
        end the statement (and the blocks) under the cursor, so the witness search
        crosses into a new statement through it (``witness.py``)."""
        sibling = object.__new__(Quotient)
        sibling.left, sibling.right = self.left, ""
        sibling.recognizer = self.recognizer
        sibling._right = _RightContext(self.recognizer, "")
        sibling.empty = self.free_initial.state.viable is False
        sibling.stay_inside = False
        sibling._inside_empty = None
        sibling._hold_initial(self._left_state)
        return sibling

    @functools.cached_property
    def finish(self) -> FinishAnalysis:
        """Distances to a finish for this quotient's states (``finish.py``)."""
        from .finish import FinishAnalysis

        return FinishAnalysis(self)


def _no_state() -> QuotientState | None:
    return None


def _inert(lex: LexState, text: str) -> bool:
    """Whether ``text``, appended to the string literal or comment pending in ``lex``,
    leaves how any further text is lexed unchanged (only the literal's or comment's
    own text grows).

    True for text without line breaks after a comment, and for text without the quote
    and without a backslash inside a plain string literal (no f or t prefix) whose
    quote is decided and whose body ends in a plain character (no escape in progress;
    none at all in a literal that is not raw, whose escapes are checked).  Never in an
    f-string's literal text, where braces matter.  The caller also makes sure the text
    lexed without an error.
    """
    pending = lex.pending
    if not pending or lex.in_fstring_literal:
        return False
    if pending[0] in " \t\f#":
        return pending.lstrip(" \t\f")[:1] == "#" and not _has_line_end(pending + text)
    if "\\" in text:
        return False
    at = 0
    while at < 2 and at < len(pending) and pending[at].isalpha():
        at += 1
    if at == len(pending) or pending[at] not in "'\"" or pending[:at].lower() not in _PLAIN:
        return False
    quote = pending[at]
    if quote in text:
        return False
    body = at + (3 if pending.startswith(quote * 3, at) else 1)
    if body == at + 1 and pending[body : body + 1] in ("", quote):
        return False  # '' or ': it may yet become a triple-quoted literal
    last = pending[-1]
    if last == "\\" or (last == quote and len(pending) > body):
        return False  # an escape, or quotes that may begin the closing ones
    return "r" in pending[:at].lower() or "\\" not in pending[body:]


def _renames(lex: LexState, text: str, longest: int) -> bool:
    """Whether ``text``, appended to the name pending in the lexer, only respells it.

    A name longer than any keyword, string prefix, soft keyword or excepted name
    (``longest``) scans as a plain NAME whatever follows; whether text after it lexes
    as part of it, and whether that part is valid (PEP 3131: each further character on
    its own), do not depend on its spelling either.  So while ``text`` keeps it one
    name, the middle completes exactly as before.  (Outside an f-string's literal text
    a pending identifier is a name: strings, comments, numbers and indentation never
    are identifiers.)  The caller also makes sure the text lexed without an error.
    """
    pending = lex.pending
    if len(pending) <= longest or lex.in_fstring_literal:
        return False
    return pending.isidentifier() and (pending + text).isidentifier()


def _has_line_end(text: str) -> bool:
    return "\n" in text or "\r" in text


#: Prefixes of plain string and bytes literals, lower-cased.
_PLAIN = frozenset(("", "r", "u", "b", "br", "rb"))


class QuotientState:
    """An immutable state of the quotient after some middle text."""

    __slots__ = ("__weakref__", "_complete", "_same_end", "quotient", "state")

    def __init__(self, quotient: Quotient, state: RecognizerState):
        self.quotient = quotient
        self.state = state
        self._complete: bool | None = None
        #: An earlier state whose ``complete`` is ours: we only added text to a string
        #: literal or a comment it left open (see ``_inert``).
        self._same_end: QuotientState | None = None

    def feed(self, text: str) -> QuotientState:
        """The state after ``text`` more of the middle."""
        if not text:
            return self
        return self._child(QuotientState(self.quotient, self.state.feed(text)), text)

    def _child(self, child: QuotientState, text: str) -> QuotientState:
        """``child`` (the state after ``text``), told when it completes exactly as this
        state does: then a completeness check, which parses the right context, is asked
        once for all the text typed into one docstring or comment."""
        lex = self.state.lex
        if lex is None or child.state.lex is None:
            return child
        longest = self.quotient.recognizer.classify.longest_special_name
        if _inert(lex, text) or _renames(lex, text, longest):
            child._same_end = self._same_end or self
        return child

    @property
    def viable(self) -> bool:
        """Some continuation of the middle makes the whole file valid."""
        return not self.quotient.empty and self.state.viable

    @property
    def complete(self) -> bool:
        """Left context + middle + right context is a valid module."""
        if self._complete is None:
            state = self.state
            if self._same_end is not None:
                self._complete = self._same_end.complete
            elif state.lex is None or state.chart is None or self.quotient.empty:
                self._complete = False
            else:
                self._complete = self.quotient._right.accepts_after(state.lex, state.chart)
        return self._complete

    @property
    def lands(self) -> bool:
        """Complete, and keeps R's first line as code: the middle does not end in a
        comment or a backslash continuation it opened while that line may be code
        (``Quotient.right_line_can_be_code``).

        ``L + m + "  # " + R`` is often a valid module (R's first line becomes
        comment text), but a completion that comments out or joins the code after
        the cursor changes the user's program: the decoder stops only where the
        middle *lands*.  ``complete`` stays the language's exact membership.  A
        comment the left context opened on the cursor's line and the middle only
        extends is the user's own: R's first line was comment text already; so is a
        line that cannot be code (the rest of a comment the cut split).
        """
        if not self.complete:
            return False
        lex = self.state.lex
        if lex is None:
            return True
        if not comment_or_continuation(lex.pending):
            return True  # code, or a string literal (which may hold lines and '#')
        line_start = last_line_start(lex.pending)
        line = lex.pending[line_start:]
        if not comment_or_continuation(line):
            return True
        opened_at = lex.pending_offset + line_start + len(line) - len(line.lstrip(INDENT_CHARS))
        if opened_at < len(self.quotient.left):
            return True  # the left context's own comment (or continuation), extended
        return not self.quotient.right_line_can_be_code

    @property
    def error(self) -> str | None:
        """Why the middle is not viable, when the recognizer knows."""
        return self.state.error

    def distance(self, *, natural: bool = False) -> int:
        """A lower bound on the characters a finish still needs (0 when complete).

        Never above the least ``len(w)`` with ``self.feed(w).complete``; a
        very large number (``finish.INFINITE``) when no finish exists.
        ``natural``: the bound for finishes that do not open a comment or a
        backslash continuation that R's text completes (never lower; 0 only where
        the middle ``lands``).
        See ``finish.py`` for what it counts.
        """
        if not self.viable:
            return self.quotient.finish.unreachable
        if self.lands if natural else self.complete:
            return 0
        finish = self.quotient.finish
        bound = finish.natural_bound(self.state) if natural else finish.lower_bound(self.state)
        return max(1, bound)

    def witness(
        self, *, within: int | None = None, max_nodes: int = 2000, max_seconds: float = 0.5
    ) -> Witness:
        """A shortest (or near-shortest) text ``w`` with ``self.feed(w).lands`` (complete,
        and not by commenting out R's first line of code).

        ``within``: look only for finishes of at most that many characters.
        See ``finish.Witness`` for what the result proves, and
        ``FinishAnalysis.search`` for the budget.
        """
        return self.quotient.finish.search(
            self, within=within, max_nodes=max_nodes, max_seconds=max_seconds
        )


class QuotientBuilder:
    """Builds quotients for one target, reusing work between related requests.

    An editor asks again after every keystroke: the new left context usually
    extends the previous one and the right context is unchanged.  The builder
    keeps the line-start states of the last left context and the memo of the
    last few right contexts.
    """

    def __init__(self, target: TargetLike = NEWEST, *, right_cache: int = 4):
        self.recognizer = Recognizer(target)
        self._left_index: _LeftIndex | None = None
        #: The states of a whole document (:meth:`warm`), kept beside the last left context.
        self._document_index: _LeftIndex | None = None
        self._rights: OrderedDict[str, _RightContext] = OrderedDict()
        self._right_cache = right_cache

    def build(
        self,
        left: str,
        right: str,
        *,
        stay_inside: bool = False,
        interrupt: Interrupt | None = None,
    ) -> Quotient:
        """The quotient for (``left``, ``right``); ``interrupt``: see the module docstring."""
        self._follow_generation()
        return Quotient(left, right, builder=self, stay_inside=stay_inside, interrupt=interrupt)

    def _follow_generation(self) -> None:
        """Move to the recognizer's newest generation (``Recognizer.max_states``),
        dropping what was parsed with the old one."""
        current = Recognizer(self.recognizer.version)
        if current is not self.recognizer:
            self.recognizer = current
            self._left_index = self._document_index = None
            self._rights.clear()

    def warm(self, document: str, interrupt: Interrupt | None = None) -> None:
        """Parse ``document`` ahead of requests, keeping a state at each of its line
        starts: a later left context that is a prefix of it starts from the line start
        before its end.  Interruptible like :meth:`build`, keeping what was parsed."""
        self._follow_generation()
        previous = self._best_index(document)
        try:
            self._document_index, _ = _LeftIndex.build(
                self.recognizer, document, previous, interrupt
            )
        except BuildInterrupted as stop:
            self._document_index = stop.args[0]
            raise

    def warm_right(self, document: str, interrupt: Interrupt | None = None) -> None:
        """Parse ``document`` backwards ahead of requests and keep its charts: a later
        right context cut from it is checked (can it end a module?) by steps memoised
        here but for its first line.  Interruptible like :meth:`build` (raising
        :class:`BuildInterrupted`); the part parsed is kept and found again at once by
        the next call.  The charts are kept with the last few right contexts' (``suffix``),
        so memory stays bounded by what checking those costs."""
        if not warm_backward_parse(document, self.recognizer.version, interrupt):
            raise BuildInterrupted(self._document_index)

    def warmed_lines(self, document: str) -> int:
        """How many line starts of ``document`` the warmed states cover (see :meth:`warm`)."""
        index = self._document_index
        return 0 if index is None else index.shared_lines(document)

    def _best_index(self, text: str) -> _LeftIndex | None:
        """The kept index that shares the most lines with ``text``."""
        indexes = [i for i in (self._left_index, self._document_index) if i is not None]
        return max(indexes, key=lambda i: i.shared_lines(text), default=None)

    def _left(
        self, text: str, interrupt: Interrupt | None = None
    ) -> tuple[_LeftIndex, RecognizerState]:
        try:
            index, state = _LeftIndex.build(
                self.recognizer, text, self._best_index(text), interrupt
            )
        except BuildInterrupted as stop:
            self._left_index = stop.args[0]
            raise
        self._left_index = index
        return index, state

    def _right_context(self, text: str) -> _RightContext:
        context = self._rights.get(text)
        if context is None:
            context = _RightContext(self.recognizer, text)
            self._rights[text] = context
            while len(self._rights) > self._right_cache:
                self._rights.popitem(last=False)
        else:
            self._rights.move_to_end(text)
        return context
