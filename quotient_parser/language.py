"""The quotient language at its core: which middles fit, and nothing more.

:class:`QuotientLanguage` and :class:`LanguageState` answer ``viable``,
``complete`` and ``lands`` for a growing middle; :class:`ContextCache` keeps the
left- and right-context parses that related requests share.  The distance to a
finish (``finish.py``), the witness search (``witness.py``) and ``stay_inside``
(``inside.py``) build on these; ``quotient.py`` composes them into the
``Quotient`` callers use, and its docstring tells the design.
"""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from lexer import LexState
from lexer.text import INDENT_CHARS, last_line_start
from lexer.version import NEWEST, TargetLike, TargetVersion

from .interrupt import BuildInterrupted, Interrupt
from .left_index import LeftIndex
from .pending_text import comment_or_continuation
from .recognizer import Recognizer, RecognizerState
from .right_context import RightContext
from .suffix import warm_backward_parse

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ContextCache", "LanguageState", "QuotientLanguage"]

#: The class of a quotient's states.
S = TypeVar("S", bound="LanguageState")


class QuotientLanguage(Generic[S]):
    """The quotient language of one (left, right) pair: which middles fit
    (``quotient.py`` tells how).  A subclass names the class of its states
    (``state_class``) and adds its own per-quotient fields in ``_start``."""

    #: The class of this quotient's states (``feed`` keeps the class of the state fed).
    state_class: type[S]

    def __init__(
        self,
        left: str,
        right: str,
        target: TargetLike = NEWEST,
        *,
        builder: ContextCache | None = None,
        interrupt: Interrupt | None = None,
    ):
        if builder is None:
            builder = ContextCache(target)
        self.left = left
        self.right = right
        self.recognizer = builder.recognizer
        left_index, left_state = builder._left(left, interrupt)
        self._right = builder._right_context(right)
        #: No middle can work: the left context is already broken, or no text
        #: at all can precede the right context in a valid module.
        self.empty = not left_state.viable or not self._right.can_end_module
        if not self.empty:
            found = left_index.clean_line_start(len(left))
            if found is not None:
                offset, state = found
                self._right.probe(offset, state, left[offset:], interrupt)
        self._start(left_state)

    def _start(self, left_state: RecognizerState) -> None:
        """Hold the state after the left context; a subclass sets its own fields here
        too, since ``module_end`` makes a quotient without ``__init__``."""
        # The initial states point back at the quotient, so the quotient holds them
        # weakly (made again when asked for after they died): a cycle would be freed only
        # by a full collection, which comes rarely on a large heap.
        self._left_state = left_state
        self._free_initial: Callable[[], S | None] = _no_state

    @property
    def free_initial(self) -> S:
        """The state before any middle (without ``stay_inside``'s restriction)."""
        state = self._free_initial()
        if state is None:
            state = self.state_class(self, self._left_state)
            self._free_initial = weakref.ref(state)
        return state

    @property
    def target(self) -> TargetVersion:
        return self.recognizer.version

    @property
    def left_viable(self) -> bool:
        """Some text after the left context makes a valid module: when the quotient is
        empty, this tells whether the left context or the right one is to blame."""
        return self._left_state.viable

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
    def module_end(self) -> Self:
        """The quotient of the same left context with an empty right one: its finishes
        end the statement (and the blocks) under the cursor, so the witness search
        crosses into a new statement through it (``witness.py``)."""
        sibling = object.__new__(type(self))
        sibling.left, sibling.right = self.left, ""
        sibling.recognizer = self.recognizer
        sibling._right = RightContext(self.recognizer, "")
        sibling.empty = self._left_state.viable is False
        sibling._start(self._left_state)
        return sibling


def _no_state() -> None:
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


class LanguageState:
    """An immutable state of the quotient after some middle text."""

    __slots__ = ("__weakref__", "_complete", "_same_end", "quotient", "state")

    def __init__(self, quotient: QuotientLanguage[Any], state: RecognizerState):
        self.quotient = quotient
        self.state = state
        self._complete: bool | None = None
        #: An earlier state whose ``complete`` is ours: we only added text to a string
        #: literal or a comment it left open (see ``_inert``).
        self._same_end: LanguageState | None = None

    def feed(self, text: str) -> Self:
        """The state after ``text`` more of the middle."""
        if not text:
            return self
        return self._child(type(self)(self.quotient, self.state.feed(text)), text)

    def _child(self, child: Self, text: str) -> Self:
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


class ContextCache:
    """What quotients of one target share between related requests
    (``QuotientBuilder`` builds them with it).

    An editor asks again after every keystroke: the new left context usually
    extends the previous one and the right context is unchanged.  The cache
    keeps the line-start states of the last left context and the memo of the
    last few right contexts.
    """

    def __init__(self, target: TargetLike = NEWEST, *, right_cache: int = 4):
        self.recognizer = Recognizer(target)
        self._left_index: LeftIndex | None = None
        #: The states of a whole document (:meth:`warm`), kept beside the last left context.
        self._document_index: LeftIndex | None = None
        self._rights: OrderedDict[str, RightContext] = OrderedDict()
        self._right_cache = right_cache

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
        before its end.  Interruptible like ``QuotientBuilder.build``, keeping what was parsed."""
        self._follow_generation()
        previous = self._best_index(document)
        try:
            self._document_index, _ = LeftIndex.build(
                self.recognizer, document, previous, interrupt
            )
        except BuildInterrupted as stop:
            self._document_index = stop.args[0]
            raise

    def warm_right(self, document: str, interrupt: Interrupt | None = None) -> None:
        """Parse ``document`` backwards ahead of requests and keep its charts: a later
        right context cut from it is checked (can it end a module?) by steps memoised
        here but for its first line.  Interruptible like ``QuotientBuilder.build`` (raising
        :class:`BuildInterrupted`); the part parsed is kept and found again at once by
        the next call.  The charts are kept with the last few right contexts' (``suffix``),
        so memory stays bounded by what checking those costs."""
        if not warm_backward_parse(document, self.recognizer.version, interrupt):
            raise BuildInterrupted(self._document_index)

    def warmed_lines(self, document: str) -> int:
        """How many line starts of ``document`` the warmed states cover (see :meth:`warm`)."""
        index = self._document_index
        return 0 if index is None else index.shared_lines(document)

    def _best_index(self, text: str) -> LeftIndex | None:
        """The kept index that shares the most lines with ``text``."""
        indexes = [i for i in (self._left_index, self._document_index) if i is not None]
        return max(indexes, key=lambda i: i.shared_lines(text), default=None)

    def _left(
        self, text: str, interrupt: Interrupt | None = None
    ) -> tuple[LeftIndex, RecognizerState]:
        try:
            index, state = LeftIndex.build(self.recognizer, text, self._best_index(text), interrupt)
        except BuildInterrupted as stop:
            self._left_index = stop.args[0]
            raise
        self._left_index = index
        return index, state

    def _right_context(self, text: str) -> RightContext:
        context = self._rights.get(text)
        if context is None:
            context = RightContext(self.recognizer, text)
            self._rights[text] = context
            while len(self._rights) > self._right_cache:
                self._rights.popitem(last=False)
        else:
            self._rights.move_to_end(text)
        return context
