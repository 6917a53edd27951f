"""Which bare names a stream of symbols binds and which it loads.

A ``Walker`` reads the lexer's symbols (``lexer/``: whitespace, comments and the
literal text of strings never arrive) one at a time and sorts every ``NAME`` into a
binding, a load, or neither (an attribute after ``.``, a keyword argument ``f(x=1)``,
a module path in an import, an f-string's conversion ``!r``).  It needs no parse: the
place of a name in its statement says which it is, with one symbol of look-ahead where
the place alone cannot tell (``x`` at a statement's start is a target before ``=`` and
a load before ``(``; ``f(x`` is a keyword before ``=``).

It runs in two roles (``scopes.py`` and ``guard.py``): over a file's code, where
bindings go to the scope being read (``ScopeSink``) and loads are not looked at, and over
a middle being generated, where bindings go to ``bound`` and every load of a name that
overlaps the middle's text is checked against what is known.  A load that cannot be
judged yet waits:

* in the element of what may become a comprehension (an open bracket with no comma and
  no ``for`` at its level yet: ``[x for x in y]``, ``f(x for x in y)``), until the
  bracket's first comma or its close, when the comprehension's targets are known;
* in a statement that may turn out to be an assignment (``a, b`` before ``= ...``),
  until ``=`` or the statement's end;
* after the middle opened a ``def`` (its body may call a function the middle defines
  later), until the middle ends.

Each checked load carries its place (``Place``): the blocks the middle opened or
left by its INDENTs and DEDENTs since the cursor's line, and whether it stands in a
``def``, ``class`` or ``lambda`` body the middle opened (code that runs later, when the
function's later locals are bound); a load that waits is judged at its own place.

A walker is mutated only while it reads one chunk of symbols; ``clone`` forks it and all
it holds are tuples, frozensets and numbers, so a fork never sees another's changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from lexer import Symbol

__all__ = ["Place", "ScopeSink", "Walker"]

#: Where a load stands: (the blocks the middle opened, or left when negative, since the
#: cursor's line; None while on the cursor's line), and whether the code there runs
#: later (in a ``def``, ``class`` or ``lambda`` body the middle opened).
Place = tuple[int | None, bool]

#: A symbol after which ``(`` calls and ``[`` subscripts (an expression's end).
_EXPRESSION_END = frozenset(
    {"NAME", "NUMBER", "STRING", "BYTES", "FSTRING_END", "TSTRING_END", ")", "]", "}",
     "None", "True", "False", "..."}
)  # fmt: skip
#: Keywords that begin a compound statement: a ``:`` at depth 0 ends their header.
_COMPOUND = frozenset(
    {"if", "elif", "else", "while", "for", "try", "except", "finally", "with", "def",
     "class", "async"}
)  # fmt: skip
#: Soft keywords that may begin a statement (``match x:``, ``case [a]:``, ``type X = int``).
_SOFT = frozenset({"match", "case", "type"})
#: Symbols after a statement-initial soft keyword that make it the keyword.
_SOFT_FOLLOWERS = frozenset(
    {"NAME", "NUMBER", "STRING", "BYTES", "FSTRING_START", "TSTRING_START", "(", "[", "{",
     "-", "*", "None", "True", "False", "not", "lambda", "await", "~", "..."}
)  # fmt: skip
_AUGMENTED = frozenset(
    {"+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", ">>=", "<<="}
)
#: Bracket kinds whose first element may turn out to be a comprehension's element.
_COMPREHENSIBLE = frozenset({"call", "group", "list", "dict", "field", "tgroup", "tlist"})
_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")

# A frame is one open bracket: (kind, comma seen, ``for`` seen, deferred loads).  Its
# kinds: call (arguments), group (parentheses), list, subscript, dict (braces), field
# (an f-string's replacement field), params (a def's), typeparams (``def f[T]``),
# tgroup / tlist (brackets where an assignment target may stand: ``(a, b) = ...``).
Frame = tuple[str, bool, bool, tuple[tuple[str, int, Place], ...]]
#: A name whose role waits for the next symbol: (text, start, end, context).
Pending = tuple[str, int, int, str]


class ScopeSink(Protocol):
    """Where a walker over a file's code sends what it finds (``scopes.py``)."""

    def bind(self, name: str) -> None: ...
    def bind_param(self, name: str) -> None: ...
    def bind_global(self, name: str) -> None: ...
    def statement(self, start: int, kind: str) -> None: ...
    def header(self, kind: str, name: str) -> None: ...
    def body(self) -> None: ...
    def dynamic(self, why: str, name: str) -> None: ...


class Walker:
    """The roles of the names in a stream of symbols; see the module docstring."""

    __slots__ = (
        "as_bracket", "as_next", "assigned", "bound", "checked_from", "checked_to",
        "dedents", "defers_to_end", "first", "for_depths", "frames", "fstrings", "header",
        "import_seen", "is_known", "lambda_bodies", "lambdas", "late", "line_start",
        "local", "on_cursor_line", "opened", "pending", "prev", "sink", "staged", "start",
        "statement", "targets", "violation",
    )  # fmt: skip

    def __init__(self, sink: ScopeSink | None = None) -> None:
        self.sink = sink
        #: decides whether a name is known at a place (the guard's; None: nothing is
        #: checked)
        self.is_known: Callable[[str, Place], bool] | None = None
        #: names overlapping [checked_from, checked_to) are the middle's: checked
        self.checked_from = self.checked_to = -1
        self.bound: frozenset[str] = frozenset()  # bound by the middle (guard role)
        #: bound by the statement being read, visible from its end (``x = x + 1`` loads
        #: an ``x`` bound before); ``:=`` binds at once
        self.staged: frozenset[str] = frozenset()
        self.local: frozenset[str] = frozenset()  # comprehension targets, lambda params
        self.frames: tuple[Frame, ...] = ()
        self.fstrings: tuple[int, ...] = ()  # bracket depths of the open f-strings
        self.statement = ""  # "", import, global, del, soft
        self.start = True  # the next symbol begins a statement
        self.first = ""  # the statement's first symbol (its kind, or a NAME's text)
        self.prev = ""  # the previous symbol's kind
        self.pending: Pending | None = None
        self.targets: tuple[tuple[str, int, int], ...] = ()  # undecided, before ``=``
        self.assigned = False  # a ``=`` at depth 0 in this statement
        self.for_depths: tuple[int, ...] = ()  # ``for`` targets open at these depths
        self.lambdas: tuple[tuple[int, bool], ...] = ()  # (depth, in a default)
        self.as_next = False
        self.as_bracket = -1
        self.header = ""  # def_name, def_after, def_done, class_name, class_after
        self.import_seen = False  # ``from x import``: past ``import``
        self.defers_to_end = False  # the middle opened a def
        self.dedents = 0  # DEDENTs less INDENTs read (the middle leaving blocks)
        self.on_cursor_line = True  # no NEWLINE read yet (the guard's: since the cursor)
        self.line_start = False  # a NEWLINE read, the next line's first symbol not yet
        #: -dedents where the middle opened a ``def`` or ``class`` whose body may go on
        self.opened: tuple[int, ...] = ()
        self.lambda_bodies: tuple[int, ...] = ()  # bracket depths of open lambda bodies
        #: loads checked when the middle ends
        self.late: tuple[tuple[str, int, Place], ...] = ()
        self.violation: str | None = None

    def clone(self) -> Walker:
        other = object.__new__(Walker)
        for name in Walker.__slots__:
            setattr(other, name, getattr(self, name))
        return other

    # -- reading ------------------------------------------------------------

    def feed(self, symbols: list[Symbol]) -> None:
        for symbol in symbols:
            self.step(symbol)

    def step(self, symbol: Symbol) -> None:
        kind, text, start = symbol
        if kind == "INDENT" or kind == "DEDENT":
            self.dedents += 1 if kind == "DEDENT" else -1
            return
        if self.line_start:
            self.line_start = False
            level = -self.dedents
            while self.opened and self.opened[-1] >= level:
                self.opened = self.opened[:-1]  # back at the header's block: its body ended
        if self.pending is not None:
            self.decide(kind)
        if self.start and kind not in ("NEWLINE", "ENDMARKER"):
            self.start = False
            self.prev = ""  # the mark of a statement's start for ``context``
            self.first = text if kind == "NAME" else kind
            if self.sink is not None:
                self.sink.statement(start, kind)
            if kind in ("import", "from"):
                self.statement = "import"
            elif kind in ("global", "nonlocal"):
                self.statement = "global"
            elif kind == "del":
                self.statement = "del"
        if kind == "NAME":
            self._name(text, start)
        elif kind in ("NEWLINE", "ENDMARKER") or (kind == ";" and not self.frames):
            self._end_statement()
            if kind != ";":
                self.on_cursor_line = False
                self.line_start = True
            return
        elif kind in _OPENERS:
            self._open(kind)
        elif kind in _CLOSERS:
            self._close()
        else:
            self._other(kind)
        if (kind == "*" or kind == "**") and self.prev in _EXPRESSION_END:
            kind += "b"  # binary: no starred target or unpacking follows
        self.prev = kind

    # -- names --------------------------------------------------------------

    def context(self) -> str:
        """What a name arriving now would be: skip, bind, local or param, decided at
        once, or load, stmt, arg, for or del, decided by the symbol after it."""
        prev = self.prev
        if prev == "." or prev == "!":
            return "skip"
        statement = self.statement
        if statement == "import":
            if self.first == "from" and not self.import_seen:
                return "skip"
            return "bind" if prev in ("import", ",", "(", "as") else "skip"
        if statement == "global" or statement == "soft":
            return "bind"
        if statement == "del":
            return "del"
        header = self.header
        if header == "def_name" or header == "class_name":
            return "bind"
        if self.as_next:
            return "bind"
        depth = len(self.frames)
        if self.as_bracket >= 0 and depth > self.as_bracket:
            return "bind"
        if self.lambdas and self.lambdas[-1][0] == depth and not self.lambdas[-1][1]:
            return "local"
        if self.for_depths and self.for_depths[-1] <= depth:
            return "for"  # (deeper: a parenthesized target, ``for (a, b) in``)
        if depth:
            kind = self.frames[-1][0]
            if kind == "typeparams":
                return "param" if prev in ("[", ",", "*", "**") else "load"
            if kind == "params":
                return "param" if prev in ("(", ",", "*", "**", "/") else "load"
            if kind == "call" and prev in ("(", ","):
                return "arg"
            if (kind == "tgroup" or kind == "tlist") and prev in ("(", "[", ",", "*"):
                return "stmt"
            return "load"
        if self.first in _COMPOUND or self.first in ("return", "@", "assert", "raise"):
            return "load"
        if prev in ("", ",", "=", "*"):
            return "stmt"
        return "load"

    def _name(self, text: str, start: int) -> None:
        context = self.context()
        if context == "skip":
            return
        if context == "bind":
            # ``with a() as x, b(x):`` enters its items in turn: ``as`` binds at once
            now = self.as_next or self.as_bracket >= 0
            self.as_next = False
            if self.header == "def_name" or self.header == "class_name":
                if self.sink is not None:
                    self.sink.header(self.header[:-5], text)
                self.header = self.header[:-5] + "_after"
            self._bind(text, now=now)
            if self.statement == "global" and self.sink is not None:
                self.sink.bind_global(text)
            return
        if context == "local":
            self.local = self.local | {text}
            return
        if context == "param":
            if self.sink is not None:
                self.sink.bind_param(text)
            else:
                self.bound = self.bound | {text}
            return
        end = start + len(text)
        if context == "stmt" and self.prev == "=" and start < self.checked_from < end:
            context = "load"  # begun before the cursor after '=': not a new chained target
        # every other role waits for the next symbol: ``:=`` makes any of them a binding
        self.pending = (text, start, end, context)

    def decide(self, after: str) -> None:
        """Decide the pending name's role now that ``after`` follows it."""
        pending = self.pending
        assert pending is not None
        self.pending = None
        text, start, end, context = pending
        if after == ":=":
            self._bind(text, now=True)
        elif context == "stmt":
            if after == "=":
                self._bind(text)
            elif after == ":" and not self.frames and self.first == text and not self.targets:
                self._bind(text)  # an annotated assignment: ``x: int``
            elif after == "," or after == ")" or after == "]":
                self.targets += ((text, start, end),)
            elif self.first == text and text in _SOFT and after in _SOFT_FOLLOWERS:
                self.statement = "soft"  # ``match x:``, ``case [a, b]:``, ``type X = int``
            else:
                self._load(text, start, end)
        elif context == "arg":
            if after != "=":
                self._load(text, start, end)
        elif context == "load":
            self._load(text, start, end)
        elif context == "for":
            if after in (".", "[", "("):
                self._load(text, start, end)
            elif self.for_depths and self.for_depths[-1]:
                self.local = self.local | {text}  # a comprehension's target
            else:
                self._bind(text)  # a ``for`` statement's, parenthesized too: ``for (a, b) in``
        elif context == "del":
            if after in (",", "NEWLINE", ";", ")", "]", "ENDMARKER") and self.sink is not None:
                self.sink.dynamic("del", text)

    def _bind(self, text: str, now: bool = False) -> None:
        if self.sink is not None:
            self.sink.bind(text)
        elif now:
            self.bound = self.bound | {text}
        else:
            self.staged = self.staged | {text}

    def place(self) -> Place:
        """Where a load read now stands."""
        level = None if self.on_cursor_line else -self.dedents
        return level, bool(self.opened or self.lambda_bodies)

    def _load(self, text: str, start: int, end: int) -> None:
        if self.sink is not None:
            if text in ("exec", "eval"):
                self.sink.dynamic(text, text)
            return
        if self.is_known is None or end <= self.checked_from:
            return
        if self.checked_to >= 0 and start >= self.checked_to:
            return
        place = self.place()
        if self._known(text, place):
            return
        self._defer(text, start, len(self.frames), place)

    def in_element(self) -> bool:
        """Whether a load here may be in a comprehension's element (it would wait)."""
        return any(
            kind in _COMPREHENSIBLE and not comma and not fored
            for kind, comma, fored, _deferred in self.frames
        )

    def _known(self, text: str, place: Place) -> bool:
        assert self.is_known is not None
        return text in self.bound or text in self.local or self.is_known(text, place)

    def _defer(self, text: str, start: int, depth: int, place: Place) -> None:
        """An unknown load at bracket ``depth`` (frames below it): wait in the innermost
        bracket whose first element it may be, or to the middle's end after a def; else
        it is a violation."""
        frames = self.frames
        for index in range(depth - 1, -1, -1):
            kind, comma, fored, deferred = frames[index]
            if kind in _COMPREHENSIBLE and not comma and not fored:
                waiting = (kind, comma, fored, (*deferred, (text, start, place)))
                self.frames = (*frames[:index], waiting, *frames[index + 1 :])
                return
        if self.defers_to_end:
            self.late += ((text, start, place),)
        elif self.violation is None:
            self.violation = text

    def _settle(self, deferred: tuple[tuple[str, int, Place], ...]) -> None:
        """Judge loads that waited in a bracket now closed (or past its first comma)."""
        for text, start, place in deferred:
            if not self._known(text, place):
                self._defer(text, start, len(self.frames), place)

    def settle_late(self) -> None:
        """The middle ends: judge the loads that waited for it."""
        late, self.late = self.late, ()
        for text, _start, place in late:
            if not self._known(text, place) and self.violation is None:
                self.violation = text

    # -- brackets and other symbols -----------------------------------------

    def _open(self, kind: str) -> None:
        prev = self.prev
        depth = len(self.frames)
        if prev == "as":
            self.as_bracket = depth
            self.as_next = False
        header = self.header
        if header == "def_after" and kind == "(":
            frame = "params"
        elif header in ("def_after", "class_after") and kind == "[":
            frame = "typeparams"
        elif kind == "{":
            frame = "field" if self.fstrings and self.fstrings[-1] == depth else "dict"
        elif prev in _EXPRESSION_END:
            frame = "call" if kind == "(" else "subscript"
        elif self._target_place():
            frame = "tgroup" if kind == "(" else "tlist"
        else:
            frame = "group" if kind == "(" else "list"
        self.frames = (*self.frames, (frame, False, False, ()))

    def _target_place(self) -> bool:
        """Whether a bracket opening now may hold assignment targets."""
        if self.statement or self.first in _COMPOUND:
            return False
        if not self.frames:
            return self.prev in ("", ",", "=", "*")
        kind = self.frames[-1][0]
        return (kind == "tgroup" or kind == "tlist") and self.prev in ("(", "[", ",", "*")

    def _close(self) -> None:
        if not self.frames:
            return
        kind, _comma, _fored, deferred = self.frames[-1]
        self.frames = self.frames[:-1]
        depth = len(self.frames)
        if kind == "params":
            self.header = "def_done"
        if self.as_bracket == depth:
            self.as_bracket = -1
        while self.for_depths and self.for_depths[-1] > depth:
            self.for_depths = self.for_depths[:-1]
        while self.lambdas and self.lambdas[-1][0] > depth:
            self.lambdas = self.lambdas[:-1]
        while self.lambda_bodies and self.lambda_bodies[-1] > depth:
            self.lambda_bodies = self.lambda_bodies[:-1]
        if deferred:
            self._settle(deferred)

    def _other(self, kind: str) -> None:
        depth = len(self.frames)
        if kind == ",":
            self.as_next = False
            while self.lambda_bodies and self.lambda_bodies[-1] >= depth:
                self.lambda_bodies = self.lambda_bodies[:-1]  # ``f(lambda: x, y)``
            if depth:
                frame, comma, fored, deferred = self.frames[-1]
                if not comma and not fored:  # (after ``for``: a comprehension's targets)
                    self.frames = (*self.frames[:-1], (frame, True, fored, ()))
                    if deferred:
                        self._settle(deferred)
            if self.lambdas and self.lambdas[-1][0] == depth:
                self.lambdas = (*self.lambdas[:-1], (depth, False))
        elif kind == "=":
            if self.lambdas and self.lambdas[-1][0] == depth and not self.lambdas[-1][1]:
                self.lambdas = (*self.lambdas[:-1], (depth, True))
            elif not depth and not self.statement:
                self.assigned = True
                targets, self.targets = self.targets, ()
                for text, _start, _end in targets:
                    self._bind(text)
        elif kind == ":":
            self._colon(depth)
        elif kind == "for":
            self.for_depths = (*self.for_depths, depth)
            if depth:
                frame, comma, _fored, deferred = self.frames[-1]
                self.frames = (*self.frames[:-1], (frame, comma, True, deferred))
        elif kind == "in":
            if self.for_depths and self.for_depths[-1] == depth:
                self.for_depths = self.for_depths[:-1]
        elif kind == "as":
            self.as_next = True
        elif kind == "lambda":
            self.lambdas = (*self.lambdas, (depth, False))
        elif kind == "def":
            self.header = "def_name"
        elif kind == "class":
            self.header = "class_name"
        elif kind == "import":
            self.import_seen = True
        elif kind == "*" and self.statement == "import" and self.sink is not None:
            self.sink.dynamic("star import", "*")
        elif kind == "FSTRING_START" or kind == "TSTRING_START":
            self.fstrings = (*self.fstrings, depth)
        elif kind == "FSTRING_END" or kind == "TSTRING_END":
            self.fstrings = self.fstrings[:-1]
        elif kind in _AUGMENTED and not depth:
            self._end_targets()

    def _colon(self, depth: int) -> None:
        if self.lambdas and self.lambdas[-1][0] == depth:
            self.lambdas = self.lambdas[:-1]  # the lambda's parameters end: its body
            self.lambda_bodies = (*self.lambda_bodies, depth)
            return
        if depth:
            return  # a dict's value, a slice, an annotation in a def's parameters
        if self.first in _COMPOUND or self.statement == "soft":
            header = self.header
            self._end_statement()  # a header: what follows on the line is its body
            if self.sink is not None:
                self.sink.body()
            elif header:
                # a body that runs later, from here to the line back at this block
                self.opened = (*self.opened, -self.dedents)
                if header.startswith("def"):
                    self.defers_to_end = True

    def _end_targets(self) -> None:
        targets, self.targets = self.targets, ()
        for text, start, end in targets:
            self._load(text, start, end)

    def _end_statement(self) -> None:
        if self.pending is not None:
            self.decide("NEWLINE")
        self._end_targets()
        for frame in self.frames:  # an unclosed bracket (text the lexer has not closed)
            if frame[3]:
                self._settle(frame[3])
        if self.staged:
            self.bound = self.bound | self.staged
            self.staged = frozenset()
        self.frames = ()
        self.statement = ""
        self.start = True
        self.first = self.prev = self.header = ""
        self.assigned = self.as_next = self.import_seen = False
        self.as_bracket = -1
        self.for_depths = self.lambdas = self.lambda_bodies = ()
        self.local = frozenset()
