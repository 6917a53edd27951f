"""The names bound where the cursor is, from the code before and after it.

L and R do not parse alone, so nothing here asks ``ast``: the lexer (``lexer/``) reads
L, then R from the state after L (as if the middle were empty; a line R cannot be lexed
from there starts a fresh lexer at the next line), and a ``Walker`` sorts their names
into bindings, which go to the scope being read.  Scopes come from the ``def`` and
``class`` headers and the indentation of each logical line: a line pops the scopes whose
header is not left of it.  The names known at the cursor are then:

* the builtins of the target and the module attributes (``builtin_names``);
* every name the module binds, anywhere in L or R (later bindings count: a function may
  call one defined below it);
* every name bound in each enclosing function, its parameters included, except in the
  innermost one: there a local bound only after the cursor (in R) is unbound where the
  middle reads it, unless R binds it in a loop around the cursor (the next turn may
  see it), on the cursor's line or in the rest of its statement (``x if (x := f())
  else 0``), or the read runs later (in a ``def``, ``lambda`` or ``class`` body the
  middle opened);
* a class's names only where the cursor is in the class's own body, not in a function
  nested in it (Python's class scopes are not visible there);
* names the project's other text binds at module level (``extra``: they may come in by
  an import the check cannot follow).

The middle moves between scopes by its own indentation: ``KnownNames.knows`` takes the
place of a load (the blocks the middle opened or left since the cursor's line, and
whether the code there runs later) and answers from the scopes enclosing that place
(the scopes whose header is left of the block's column).  ``names`` is the union of
what any place may know (for the early refusal of a name being typed).  The names
bound in the cursor's own statement before it (a lambda's parameters, a comprehension's
targets) are in the walker handed to the guard.

Python is dynamic: a star import, a write through ``globals()``, ``locals()`` or
``vars()``, a module-level ``__getattr__``, a ``del`` of a module-level name, or
``exec``/``eval`` anywhere in the file turn the check off for the file
(``KnownNames.disabled`` says why).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

from lexer import LexError, LexState, Symbol
from lexer.text import line_end_offsets
from lexer.version import TargetLike, TargetVersion

from .builtin_names import builtin_names
from .walker import Place, Walker

__all__ = ["KnownNames", "Place", "ScopeView", "known_names", "lex_tolerant"]

#: Calls whose result written to turns the check off (``globals()["x"] = 1``).
_NAMESPACES = frozenset({"globals", "locals", "vars"})
#: Methods of such a result that write to it.
_WRITES = frozenset({"update", "setdefault", "__setitem__", "pop", "popitem", "clear"})
#: Statements whose body may run again after a later line of it: a binding there may be
#: seen by a line above it (``async``: ``async for``, and harmlessly ``async with``).
_LOOPS = frozenset({"for", "while", "async"})
#: Deeper than any column: the blocks the middle opens past the cursor's.
_INNERMOST = 1 << 30


@dataclass(frozen=True)
class ScopeView:
    """One scope enclosing the cursor, as ``KnownNames`` answers from it."""

    kind: str  # module, class, def
    column: int  # its header's (-1: the module)
    names: frozenset[str]  # bound anywhere in it
    before: frozenset[str]  # bound where a line at the cursor runs: L, loops, statement


@dataclass
class KnownNames:
    """What the guard needs from the analysis of one (L, R) pair."""

    names: frozenset[str]
    #: why the check is off for this file (None: on)
    disabled: str | None
    #: the walker after L, without its scope sink: the cursor's statement so far
    walker: Walker
    #: the lexer after L
    lex: LexState
    left_chars: int
    #: (blocks, names): a class's names, hidden at the cursor by a function nested in
    #: it, visible where the middle starts a line in the class's body (``blocks`` open)
    hidden: tuple[tuple[int, frozenset[str]], ...] = ()
    #: the scopes enclosing the cursor, the module first
    scopes: tuple[ScopeView, ...] = ()
    #: the header the cursor is in (``def f(a, b=``), whose body the middle may write
    opening: ScopeView | None = None
    #: the columns of the blocks open after L
    columns: tuple[int, ...] = (0,)
    #: the cursor's line holds only indentation: the middle's first line sets its block
    fresh_line: bool = False
    #: the builtins and the names of the project's other text
    always: frozenset[str] = frozenset()
    _sorted: tuple[str, ...] | None = field(default=None, repr=False)
    _by_place: dict[Place, frozenset[str]] = field(default_factory=dict, repr=False)

    def knows(self, name: str, place: Place) -> bool:
        """Whether ``name`` is bound for a load at ``place`` (its set built once)."""
        names = self._by_place.get(place)
        if names is None:
            names = self._by_place[place] = self.names_at(place)
        return name in names

    def names_at(self, place: Place) -> frozenset[str]:
        """The names bound for a load at ``place``; see the module docstring."""
        if not self.scopes:
            return self.names
        level, later = place
        scopes = self.scopes
        if level is None:  # on the cursor's line: every enclosing scope
            visible = scopes[1:]
        else:
            blocks = max(1, len(self.columns) + level)
            column = self.columns[blocks - 1] if blocks <= len(self.columns) else _INNERMOST
            visible = tuple(scope for scope in scopes[1:] if scope.column < column)
            if column == _INNERMOST and self.opening is not None:
                visible += (self.opening,)  # the body of the header the cursor was in
        names = set(self.always)
        names |= scopes[0].names
        innermost = visible[-1] if visible else None
        for scope in visible:
            if scope.kind == "class" and scope is not innermost:
                continue  # a class's names are not visible in a function nested in it
            if scope is innermost and scope.kind == "def" and not later:
                names |= scope.before
            else:
                names |= scope.names
        if level is None and self.opening is not None:
            names |= self.opening.names  # the header's parameters so far
        return frozenset(names)

    def has_prefix(self, prefix: str) -> bool:
        """Whether some known name starts with ``prefix``."""
        ordered = self._sorted
        if ordered is None:
            ordered = self._sorted = tuple(sorted(self.names))
        at = bisect.bisect_left(ordered, prefix)
        return at < len(ordered) and ordered[at].startswith(prefix)


class _Scope:
    __slots__ = ("before", "column", "kind", "names")

    def __init__(self, kind: str, column: int) -> None:
        self.kind = kind  # module, class, def
        self.column = column  # the header's column (-1: the module)
        self.names: set[str] = set()
        self.before: set[str] = set()  # bound where a line at the cursor runs

    def view(self) -> ScopeView:
        return ScopeView(self.kind, self.column, frozenset(self.names), frozenset(self.before))


class _Sink:
    """Sends a walker's bindings to the scopes of a file (``walker.ScopeSink``)."""

    def __init__(self, source: str) -> None:
        self.source = source  # L + R: the text symbol offsets point into
        self.returns = "\r" in source  # lone \r line ends are rare: one search less
        self.stack = [_Scope("module", -1)]
        self.opening: _Scope | None = None  # a header's scope, until its body
        self.column = 0  # of the current logical line
        self.disabled: str | None = None
        self.everything: set[str] = set()  # every name bound, in any scope
        #: open loops: (the header's column, its scope, whether it holds the cursor)
        self.loops: list[tuple[int, _Scope, bool]] = []
        self.right = False  # reading R: a binding is after the cursor
        #: still on the cursor's line or in its statement: read with the middle empty,
        #: R's first line is joined to the cursor's (its column, even its scope, may be
        #: the middle's to change), and ``y = x if (x := f()) else 0`` binds ``x`` first
        self.cursor_statement = False
        self.cursor_line_end = 0  # where R's first line ends, in ``source``

    def cursor(self, line_end: int) -> None:
        """L ends here: what is bound from the cursor's next statement on the next line
        on is bound after the cursor."""
        self.right = True
        self.cursor_statement = True
        self.cursor_line_end = line_end
        self.loops = [(column, scope, True) for column, scope, _ in self.loops]

    def statement(self, start: int, kind: str) -> None:
        if start >= self.cursor_line_end:
            self.cursor_statement = False
        source = self.source
        line_start = source.rfind("\n", 0, start) + 1
        if self.returns:
            line_start = max(line_start, source.rfind("\r", 0, start) + 1)
        head = source[line_start:start]
        if head.strip(" \t\f"):
            return  # not the first statement of its line (after ``;`` or a header's ``:``)
        column = len(head.expandtabs(8))
        self.column = column
        stack = self.stack
        while len(stack) > 1 and stack[-1].column >= column:
            stack.pop()
        loops = self.loops
        while loops and loops[-1][0] >= column:
            loops.pop()
        if kind in _LOOPS:
            loops.append((column, stack[-1], False))
        self.opening = None

    def bind(self, name: str) -> None:
        scope = self.stack[-1]
        scope.names.add(name)
        self.everything.add(name)
        if not self.right or self.cursor_statement or self._in_cursor_loop(scope):
            scope.before.add(name)

    def _in_cursor_loop(self, scope: _Scope) -> bool:
        """Whether a loop of ``scope`` holding the cursor is still open."""
        return any(holds and of is scope for _column, of, holds in self.loops)

    def bind_param(self, name: str) -> None:
        scope = self.opening or self.stack[-1]
        scope.names.add(name)
        scope.before.add(name)
        self.everything.add(name)

    def bind_global(self, name: str) -> None:
        self.stack[0].names.add(name)

    def header(self, kind: str, name: str) -> None:
        if kind == "def" and name == "__getattr__" and len(self.stack) == 1:
            self.dynamic("module __getattr__", name)
        self.opening = _Scope(kind, self.column)

    def body(self) -> None:
        if self.opening is not None:
            self.stack.append(self.opening)
            self.opening = None

    def dynamic(self, why: str, name: str) -> None:
        if why == "del":
            if len(self.stack) > 1:
                return  # a function's own local
            why = f"del {name}"
        if self.disabled is None:
            self.disabled = why


def lex_tolerant(state: LexState, text: str, base: int) -> tuple[LexState, list[Symbol]]:
    """The symbols of ``text`` lexed from ``state`` (whose offsets are absolute; ``text``
    starts at ``base``), offsets absolute: where a line cannot be lexed, a fresh lexer
    starts at the next line."""
    symbols: list[Symbol] = []
    offset = 0  # into text
    origin = 0  # what the current lexer's offsets are relative to
    while True:
        try:
            state, found = state.feed(text[offset:])
        except LexError as error:
            at = origin + error.offset - base  # into text
            whole = good_line_end(text[offset:at]) if at > offset else 0
            if whole:
                try:
                    _, found = state.feed(text[offset : offset + whole])
                except LexError:
                    found = []
                symbols.extend(_shifted(found, origin))
            later = [end for end in line_end_offsets(text) if end > max(at, offset)]
            if not later:
                return state, symbols
            offset = later[0]
            origin = base + offset
            state = LexState.initial(state.target)
            continue
        symbols.extend(_shifted(found, origin))
        return state, symbols


def good_line_end(text: str) -> int:
    """The end of ``text``'s last whole line (0 when it has none)."""
    ends = line_end_offsets(text)
    return ends[-1] if ends else 0


def _shifted(symbols: list[Symbol], by: int) -> list[Symbol]:
    if not by:
        return symbols
    return [(kind, text, start + by) for kind, text, start in symbols]


def _namespace_writes(symbols: list[Symbol]) -> bool:
    """Whether the symbols write through ``globals()``, ``locals()`` or ``vars()``."""
    count = len(symbols)
    for index, (kind, text, _start) in enumerate(symbols):
        if kind != "NAME" or text not in _NAMESPACES or index + 3 >= count:
            continue
        if index and symbols[index - 1][0] == ".":
            continue
        if symbols[index + 1][0] != "(" or symbols[index + 2][0] != ")":
            continue
        after = symbols[index + 3][0]
        if after == "." and index + 4 < count and symbols[index + 4][1] in _WRITES:
            return True
        if after == "[":
            depth = 0
            for later in range(index + 3, count):
                kind_later = symbols[later][0]
                depth += kind_later in "([{" and kind_later != ""
                depth -= kind_later in (")", "]", "}")
                if depth == 0:
                    nxt = symbols[later + 1][0] if later + 1 < count else ""
                    if nxt == "=" or (nxt.endswith("=") and nxt not in ("==", "<=", ">=", "!=")):
                        return True
                    break
    return False


def known_names(left: str, right: str, target: TargetLike, extra: str = "") -> KnownNames:
    """The names bound at the end of ``left`` in ``left + right``; see the module
    docstring."""
    version = TargetVersion.parse(target)
    source = left + right
    sink = _Sink(source)
    walker = Walker(sink)
    lex, left_symbols = lex_tolerant(LexState.initial(version), left, 0)
    walker.feed(left_symbols)
    sink.cursor(len(left) + _first_line_end(right))
    cursor_walker = walker.clone()
    cursor_walker.sink = None
    chain = list(sink.stack)
    opening = sink.opening
    last_line = left[max(left.rfind("\n"), left.rfind("\r")) + 1 :]
    # the cursor's line holds only indentation: the middle may indent further
    open_column = len(last_line.expandtabs(8)) if walker.start and not last_line.strip() else None
    after, right_symbols = lex_tolerant(lex, right, len(left))
    walker.feed(right_symbols)
    walker.feed([("NEWLINE", "", len(source)), ("ENDMARKER", "", len(source))])
    if _in_string(lex) or after.bracket_depth or _in_string(after) or _resets(right_symbols):
        # R read after L alone pairs its quotes or brackets unlike the file does (the
        # middle closes a string or a bracket L opened, or R's own): R's lines are read
        # afresh too, their bindings all at module level
        rest = right[min((end for end in line_end_offsets(right)), default=len(right)) :]
        chain[0].names |= _module_names(rest, version, everywhere=True)
    disabled = sink.disabled
    if disabled is None and (_namespace_writes(left_symbols) or _namespace_writes(right_symbols)):
        disabled = "a write through globals(), locals() or vars()"
    names = set(builtin_names(version))
    # the innermost scope the cursor is surely in; deeper ones it may still indent into
    definite = len(chain) - 1
    if open_column is not None:
        while definite > 0 and chain[definite].column >= open_column:
            definite -= 1
    hidden = []
    for index, scope in enumerate(chain):
        if scope.kind == "class" and index < definite:
            # not visible in the function nested in it, unless the middle leaves it
            header = chain[index + 1].column
            blocks = sum(column <= header for column, _ in lex.indent_levels)
            hidden.append((blocks, frozenset(scope.names)))
            continue
        names |= scope.names
    if opening is not None:
        names |= opening.names  # the cursor is in a header: its parameters so far
    always = builtin_names(version)
    if extra:
        always = always | _module_names(extra, version)
        names |= always
    return KnownNames(
        frozenset(names),
        disabled,
        cursor_walker,
        lex,
        len(left),
        tuple(hidden),
        scopes=tuple(scope.view() for scope in chain),
        opening=None if opening is None else opening.view(),
        columns=tuple(column for column, _ in lex.indent_levels),
        fresh_line=open_column is not None,
        always=always,
    )


def _first_line_end(text: str) -> int:
    """The offset just after ``text``'s first line end (its length when it has none)."""
    ends = [at for at in (text.find("\n"), text.find("\r")) if at >= 0]
    return min(ends) + 1 if ends else len(text)


def _resets(symbols: list[Symbol]) -> bool:
    """Whether ``lex_tolerant`` had to start afresh (its symbols' offsets go back)."""
    return any(a[2] > b[2] for a, b in itertools.pairwise(symbols))


def _in_string(lex: LexState) -> bool:
    """Whether the lexer is inside a string literal or an f-string."""
    pending = lex.pending.lstrip("rRbBuUfFtT")
    return bool(lex.fstring_quotes) or pending[:1] in ("'", '"')


def _module_names(text: str, version: TargetVersion, everywhere: bool = False) -> set[str]:
    """The names ``text`` binds at module level (``everywhere``: in any scope)."""
    sink = _Sink(text)
    walker = Walker(sink)
    _, symbols = lex_tolerant(LexState.initial(version), text, 0)
    walker.feed(symbols)
    walker.feed([("NEWLINE", "", len(text)), ("ENDMARKER", "", len(text))])
    if everywhere:
        return sink.everything
    return set(sink.stack[0].names)
