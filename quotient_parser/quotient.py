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

Modules
-------
One way, each importing only those before it: ``interrupt``, ``left_index``
and ``right_context`` (what is parsed of L and of R), ``pending_text``;
``language`` (``QuotientLanguage``: membership, ``viable``, ``complete``,
``lands``); ``finish`` (the distance bound); ``witness`` (the search for a
finish); ``inside`` (what ``stay_inside`` protects); and this module, which
composes them into :class:`Quotient`, :class:`QuotientState` (adding
``distance`` and ``witness``), :class:`InsideState` and :class:`QuotientBuilder`.

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

import functools
import weakref
from collections.abc import Callable

from lexer.version import NEWEST, TargetLike

from .finish import FinishAnalysis
from .inside import Enclosure, enclosure_at
from .interrupt import BuildInterrupted, Interrupt
from .language import ContextCache, LanguageState, QuotientLanguage
from .recognizer import RecognizerState
from .witness import Witness, search

__all__ = [
    "BuildInterrupted",
    "InsideState",
    "Interrupt",
    "Quotient",
    "QuotientBuilder",
    "QuotientState",
]


class QuotientState(LanguageState):
    """An immutable state of the quotient after some middle text: whether it fits
    (``language.py``) and how far a finish is."""

    __slots__ = ()

    quotient: Quotient

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
        See ``witness.Witness`` for what the result proves, and
        ``witness.search`` for the budget.
        """
        return search(
            self.quotient.finish,
            self,
            max_nodes=max_nodes,
            max_seconds=max_seconds,
            within=within,
        )


class InsideState(QuotientState):
    """A quotient state that also remembers whether its middle escaped (``stay_inside``)."""

    __slots__ = ("escaped",)

    def __init__(self, quotient: Quotient, state: RecognizerState, escaped: bool):
        super().__init__(quotient, state)
        self.escaped = escaped

    def feed(self, text: str) -> InsideState:
        if not text:
            return self
        escaped = self.escaped or self.quotient.enclosure.escapes(self.state, text)
        child = InsideState(self.quotient, self.state.feed(text), escaped)
        self._child(child, text)
        return child

    @property
    def viable(self) -> bool:
        """Viable, and the middle has not left the construct at the cursor."""
        return not self.escaped and super().viable

    @property
    def complete(self) -> bool:
        """Complete, and the middle has not left the construct at the cursor."""
        return not self.escaped and super().complete


class Quotient(QuotientLanguage[QuotientState]):
    """The quotient language of one (left, right) pair; see the module docstring."""

    state_class = QuotientState

    def __init__(
        self,
        left: str,
        right: str,
        target: TargetLike = NEWEST,
        *,
        builder: ContextCache | None = None,
        stay_inside: bool = False,
        interrupt: Interrupt | None = None,
    ):
        super().__init__(left, right, target, builder=builder, interrupt=interrupt)
        #: Middles must not leave the construct at the cursor (``inside.py``).
        self.stay_inside = stay_inside
        if stay_inside:
            if not self.empty:
                # Worked out now, with the build, rather than by the first middle fed:
                # lexing the right context's first line (all of it, where it does not
                # lex from the cursor) is a one-time cost of up to a few milliseconds
                # that would otherwise land in the first decoding step's parser time.
                _ = self.enclosure

    def _start(self, left_state: RecognizerState) -> None:
        """Also the fields ``stay_inside`` needs, at their values without it (a
        ``module_end`` sibling keeps those; ``__init__`` then sets ``stay_inside``)."""
        super()._start(left_state)
        self.stay_inside = False
        self._inside_empty: bool | None = None  # decided by ``inside_empty``
        self._inside_initial: Callable[[], InsideState | None] = _no_state

    @property
    def initial(self) -> QuotientState:
        """The state before any middle (under ``stay_inside``, an ``InsideState``)."""
        if not self.stay_inside:
            return self.free_initial
        state = self._inside_initial()
        if state is None:
            state = InsideState(self, self._left_state, False)
            self._inside_initial = weakref.ref(state)
        return state

    @functools.cached_property
    def enclosure(self) -> Enclosure:
        """What a middle must keep open under ``stay_inside`` (``inside.py``)."""
        return enclosure_at(self._left_state, self.right)

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
    def finish(self) -> FinishAnalysis:
        """Distances to a finish for this quotient's states (``finish.py``)."""
        return FinishAnalysis(self)


def _no_state() -> None:
    return None


class QuotientBuilder(ContextCache):
    """Builds quotients for one target, reusing work between related requests
    (what is kept: ``language.ContextCache``)."""

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
