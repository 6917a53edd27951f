"""The incremental check that a middle loads no name bound nowhere.

A ``NameGuard`` is fed the middle's text as it grows, like a quotient state, and is as
cheap to fork: ``feed`` returns a new guard and works only when asked (``ok``), so a
candidate the syntax already rejects costs nothing here.  It lexes the middle from the
lexer state after L and walks the symbols (``walker.py``) from the walker after L, so a
middle that continues L's statement (a call's arguments, a lambda's body, a
comprehension) is read in its place.

``ok`` is false once the middle has *completed* a load of a name known nowhere: the name
is followed by a symbol that makes it a load (``np.``, ``foo(``, ``x +``), and it is
neither bound where the cursor is (``scopes.py``) nor by the middle so far.  Where the
lexer's pending text can only make it a load (``np.``: ``.``, ``...``), that counts too.
It is false as well when a load position holds a name being typed that no known name
begins (after an operator, ``return``, ``not``, a keyword argument's ``=`` and the
like, where neither an assignment nor ``:=`` can make the name a target): every way to
finish it would be a violation, and refusing it at once spares the decoder a dead end.
Not after an assignment's ``=``: a chained assignment to a new name
(``width = max_width = 0``) is correct there.

``ends_ok`` is the check where the middle would end: the middle joined with R's first
characters (``fo`` + R's ``o(x)`` loads ``foo``), the loads waiting in brackets that R
closes, and those that waited for the middle's end.  Loads still undecided after R's
first lines are allowed: false positives are worse than misses.
"""

from __future__ import annotations

from lexer import LexError, LexState, Symbol
from lexer.text import line_end_offsets

from .scopes import KnownNames
from .walker import Walker

__all__ = ["NameGuard"]

#: Symbols after which a name is a load that no assignment or ``:=`` can make a target.
_PLAIN_LOAD_AFTER = frozenset(
    {"+", "-", "*b", "**b", "/", "//", "%", "@", "<<", ">>", "&", "|", "^", "~", "<", ">",
     "<=", ">=", "==", "!=", "not", "and", "or", "in", "is", "return", "yield", "await",
     "assert", "raise", "from", "else", "->", ":", "with", "except", "+=", "-=", "*=",
     "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", ">>=", "<<="}
)  # fmt: skip
#: Lines of R read at most to settle the middle's waiting loads where it ends.
JOIN_LINES = 24


class NameGuard:
    """The state of the check after some middle; see the module docstring."""

    __slots__ = ("_ends", "_lex", "_ok", "_parent", "_text", "_walker", "known", "right")

    def __init__(
        self, known: KnownNames, right: str, lex: LexState | None, walker: Walker | None
    ) -> None:
        self.known = known
        self.right = right
        self._lex = lex
        self._walker = walker
        self._parent: NameGuard | None = None
        self._text = ""
        self._ok: bool | None = None
        self._ends: bool | None = None

    @classmethod
    def start(cls, known: KnownNames, right: str) -> NameGuard:
        """The guard before any middle."""
        walker = known.walker.clone()
        walker.is_known = known.knows
        walker.checked_from = known.left_chars
        walker.dedents = 0  # counted from the cursor's block
        # on a line of indentation only, the middle's first line already sets its block
        walker.on_cursor_line = not known.fresh_line
        walker.line_start = False
        return cls(known, right, known.lex, walker)

    def feed(self, text: str) -> NameGuard:
        """The guard after ``text`` more of the middle (worked out when first asked)."""
        if not text:
            return self
        child = NameGuard(self.known, self.right, None, None)
        child._parent = self
        child._text = text
        return child

    def _state(self) -> tuple[LexState | None, Walker | None]:
        """(lexer, walker) after the middle; (None, None) where the text does not lex
        (the syntax check rejects it; nothing is claimed here)."""
        parent = self._parent
        if parent is not None:
            self._parent = None
            lex, walker = parent._state()
            if lex is not None and walker is not None:
                try:
                    lex, symbols = lex.feed(self._text)
                except LexError:
                    lex = walker = None
                else:
                    if symbols:
                        walker = walker.clone()
                        if self.known.hidden:
                            self._feed_widening(walker, symbols)
                        else:
                            walker.feed(symbols)
            self._lex, self._walker = lex, walker
        return self._lex, self._walker

    def _feed_widening(self, walker: Walker, symbols: list[Symbol]) -> None:
        """Feed ``symbols``; where the middle starts a line in the body of a class whose
        names the cursor's function hides, they are visible from there on (never taken
        back: misses over false refusals)."""
        base = len(self.known.lex.indent_levels)
        for symbol in symbols:
            starting = walker.start and symbol[0] not in ("INDENT", "DEDENT", "NEWLINE")
            walker.step(symbol)
            if not starting:
                continue
            for blocks, names in self.known.hidden:
                if base - walker.dedents <= blocks and not names <= walker.bound:
                    walker.bound = walker.bound | names

    @property
    def violation(self) -> str | None:
        """The first name the middle loads that is known nowhere (None: none yet)."""
        _, walker = self._state()
        return None if walker is None else walker.violation

    @property
    def ok(self) -> bool:
        """No load of a name known nowhere is completed, or bound to be."""
        if self._ok is None:
            self._ok = self._check()
        return self._ok

    def _check(self) -> bool:
        lex, walker = self._state()
        if lex is None or walker is None:
            return True
        if walker.violation is not None:
            return False
        pending = lex.pending
        kinds = lex.pending_kinds()
        if kinds is None or not pending:
            return not self._blanks_after_unknown_load(walker, lex.offset)
        if walker.pending is not None:
            # the pending text decides the waiting name's role: a load whatever it becomes
            return not all(_violates_after(walker, kind) for kind in kinds)
        if kinds == {"NAME"} and lex.offset > self.known.left_chars:
            begun = lex.offset - len(pending) < self.known.left_chars
            return not self._doomed(walker, pending, begun)
        return True

    def _blanks_after_unknown_load(self, walker: Walker, offset: int) -> bool:
        """The name waiting for its next symbol can only be a load (``:=`` aside) and is
        known nowhere, and what followed it is more than the one blank ``x :=`` has (or
        any blank, for a name the user began before the cursor): blanks and line
        continuations only put the refusal off (``if l``, a blank, a backslash and a new
        line)."""
        waiting = walker.pending
        if waiting is None:
            return False
        _text, start, end, context = waiting
        gap = 1 if start < self.known.left_chars else 2
        return context == "load" and offset - end >= gap and _violates_after(walker, ",")

    def _doomed(self, walker: Walker, name: str, begun: bool) -> bool:
        """Whether ``name``, being typed at a plain load position, can only end as a name
        known nowhere.  ``begun``: the user began typing it before the cursor, so it is
        not a comprehension's target to be bound later, nor a chained assignment's."""
        prev = walker.prev
        # after '=', a begun name is a load, not a chained target (as ``Walker._name``
        # decides once it is complete)
        begun_after_assign = begun and prev == "="
        # in brackets an '=' is a keyword argument's or a default's: what follows is a
        # load that no comprehension binds (``f(a=x for x in y)`` is not Python)
        after_keyword = prev == "=" and bool(walker.frames)
        if prev not in _PLAIN_LOAD_AFTER and not begun_after_assign and not after_keyword:
            return False
        context = walker.context()
        if context != "load" and not (begun_after_assign and context == "stmt"):
            return False
        if not begun and (walker.defers_to_end or (walker.in_element() and not after_keyword)):
            return False  # it may be a comprehension's element, or defined later
        if self.known.has_prefix(name):
            return False
        return not any(known.startswith(name) for known in (*walker.bound, *walker.local))

    @property
    def ends_ok(self) -> bool:
        """The middle may end here: joined with R, it loads no name known nowhere."""
        if self._ends is None:
            self._ends = self._check_end()
        return self._ends

    def _check_end(self) -> bool:
        lex, walker = self._state()
        if lex is None or walker is None:
            return True
        if walker.violation is not None:
            return False
        walker = walker.clone()
        walker.checked_to = lex.offset
        right = self.right
        ends = line_end_offsets(right)
        read = 0
        for index in range(min(len(ends), JOIN_LINES) + 1):
            end = ends[index] if index < len(ends) else len(right)
            try:
                lex, symbols = lex.feed(right[read:end])
                if end == len(right):
                    symbols += lex.finish()
            except LexError:
                break
            walker.feed(symbols)
            read = end
            if walker.violation is not None:
                return False
            if end == len(right) or _settled(walker):
                break
        walker.settle_late()
        return walker.violation is None


def _violates_after(walker: Walker, kind: str) -> bool:
    """Whether the waiting name would be a violation if a symbol of ``kind`` came next."""
    probe = walker.clone()
    probe.decide(kind)
    return probe.violation is not None


def _settled(walker: Walker) -> bool:
    """Nothing the middle loaded is waiting for more of R."""
    return (
        walker.pending is None
        and not walker.targets
        and not any(frame[3] for frame in walker.frames)
    )
