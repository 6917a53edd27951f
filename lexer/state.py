"""Immutable incremental lexer states (see the package docstring for the design)."""

from __future__ import annotations

import re

from ._engine import EXPR, INITIAL_CTX, Ctx, Symbol, lex
from ._scan import Fail, is_id_char
from .errors import LexError
from .errors import LexErrorCode as Code
from .tables import (
    KEYWORD_KINDS,
    OPERATORS,
    PREFIX_KINDS,
    STRING_PREFIXES,
)
from .text import count_line_ends, last_line_start
from .version import NEWEST, TargetLike, TargetVersion

__all__ = ["LONGEST_KEYWORD", "LexError", "LexState", "Symbol"]

_FORBIDDEN_RE = re.compile("[\x00\ud800-\udfff]")
#: A run of identifier characters (``is_id_char``): one C call instead of one Python
#: call per character of a long pending name.
_ID_RUN_RE = re.compile("[A-Za-z0-9_\x80-\U0010ffff]*")


class LexState:
    """A lexer state: a committed context plus the pending text.

    States are immutable; :meth:`feed` and :meth:`emit_pending` return new
    ones.  Build the first with :meth:`initial`.
    """

    __slots__ = ("_ctx", "_line", "_lstart", "_pending", "_pos", "_tail", "_ver")

    _ver: int
    _ctx: Ctx
    _pending: str
    _pos: int
    _line: int
    _lstart: int
    _tail: str

    def __init__(self) -> None:
        raise TypeError("use LexState.initial(target=...)")

    @classmethod
    def _make(
        cls, ver: int, ctx: Ctx, pending: str, pos: int, line: int, lstart: int, tail: str
    ) -> LexState:
        self = object.__new__(cls)
        self._ver = ver
        self._ctx = ctx
        self._pending = pending
        self._pos = pos
        self._line = line
        self._lstart = lstart
        self._tail = tail
        return self

    @classmethod
    def initial(cls, target: TargetLike = NEWEST) -> LexState:
        """The state before any text, for a supported target version (see ``lexer.version``)."""
        return cls._make(TargetVersion.parse(target).code, INITIAL_CTX, "", 0, 1, 0, "")

    # -- inspection -------------------------------------------------------------

    @property
    def target(self) -> TargetVersion:
        """The target Python version."""
        return TargetVersion(*divmod(self._ver, 100))

    @property
    def pending(self) -> str:
        """Text fed but not yet emitted: a symbol in progress (with the look-ahead
        that decides it) or blanks, a comment, blank lines or indentation."""
        return self._pending

    @property
    def offset(self) -> int:
        """Absolute offset of the end of the text fed so far."""
        return self._pos + len(self._pending)

    @property
    def pending_offset(self) -> int:
        """Absolute offset where the pending text starts."""
        return self._pos

    @property
    def bracket_depth(self) -> int:
        """Open brackets (replacement-field braces of f-strings included)."""
        return len(self._ctx.parens)

    @property
    def brackets(self) -> str:
        """The open brackets, outermost first (replacement-field braces included)."""
        return self._ctx.parens

    @property
    def indent_levels(self) -> tuple[tuple[int, int], ...]:
        """The indentation stack, outermost first: (column, column with tab size 1) per level."""
        return self._ctx.ind

    @property
    def at_line_start(self) -> bool:
        """Whether the next token starts a line (its indentation not yet processed)."""
        return self._ctx.atbol

    @property
    def fstring_quotes(self) -> tuple[str, ...]:
        """The quotes of the open f-strings, outermost first."""
        return tuple(frame[0] for frame in self._ctx.fst)

    @property
    def enclosures(self) -> tuple[str, ...]:
        """Open brackets, f-strings and t-strings as one stack, outermost first.

        A bracket is its character (a replacement field's brace included), an
        f-string its quote after ``f`` (a t-string after ``t``): ``f"{(`` gives
        ``('f"', '{', '(')``.
        """
        ctx = self._ctx
        if not ctx.fst:
            return tuple(ctx.parens)
        out: list[str] = []
        frames = sorted(ctx.fst, key=lambda frame: frame[2])
        k = 0
        for level in range(len(ctx.parens) + 1):
            while k < len(frames) and frames[k][2] == level:
                frame = frames[k]
                out.append(frame[5][0][0].lower() + frame[0])  # FSTRING_START: 'f'
                k += 1
            if level < len(ctx.parens):
                out.append(ctx.parens[level])
        return tuple(out)

    @property
    def in_fstring_literal(self) -> bool:
        """Whether the text here is literal text of an f-string (or of its format spec)."""
        fst = self._ctx.fst
        return bool(fst) and fst[-1][4] != EXPR

    @property
    def last_char(self) -> str:
        """The last character fed (``''`` before any)."""
        return self._pending[-1:] or self._tail[-1:]

    def state_key(self) -> tuple[object, ...]:
        """A hashable key: two states with equal keys lex any further text alike.

        Absolute offsets and line numbers are left out, so states reached by
        different texts can share a key (a search uses it to merge them).
        """
        ctx = self._ctx
        return (*(getattr(ctx, name) for name in ctx.__slots__), self._pending, self._tail)

    def sync_key(self) -> tuple[tuple[int, int], ...] | None:
        """A key for this state at a clean line start, else None.

        Clean: nothing pending, at the beginning of a line, no bracket or
        f-string open.  Two clean states with equal keys lex any further text
        identically (up to absolute offsets), which lets the quotient memoise
        the parse of a right context line by line.
        """
        ctx = self._ctx
        if self._pending or not ctx.atbol or ctx.parens or ctx.fst:
            return None
        return ctx.ind

    def __repr__(self) -> str:
        return f"<LexState {self.target} at {self._pos} pending={self._pending!r}>"

    def pending_kinds(self) -> frozenset[str] | None:
        """Kinds the pending text may still become as the next symbol.

        ``None`` when unconstrained: nothing pending, or only blanks, a
        comment, blank lines or indentation (a line continuation included).
        """
        p = self._pending
        if not p:
            return None
        ctx = self._ctx
        if ctx.atbol:
            return None
        fst = ctx.fst
        if fst and fst[-1][4] != EXPR:
            quote = fst[-1][0]
            _, middle, end = fst[-1][5]
            if p == "{":
                return frozenset((middle, "{"))
            if len(quote) == 3 and p in (quote[0], quote[:2]):
                return frozenset((middle, end))
            return frozenset((middle,))
        c = p[0]
        if c in "#\\ \t\f":
            return None
        if c == "\r" or c == "\n":
            return None if ctx.parens else _NEWLINE
        if "0" <= c <= "9" or (c == "." and len(p) > 1 and "0" <= p[1] <= "9"):
            return _NUMBER
        if c == "'" or c == '"':
            return _STRING
        if is_id_char(c):
            k = _ID_RUN_RE.match(p, 1).end()  # type: ignore[union-attr]  # always matches
            word = p[:k]
            if k < len(p):  # a quote follows: a prefixed literal
                return frozenset((STRING_PREFIXES[self._ver][word.lower()],))
            return _name_kinds(self._ver, word)
        return _op_kinds(p, bool(fst))

    # -- transitions -------------------------------------------------------------

    def feed(self, text: str) -> tuple[LexState, list[Symbol]]:
        """Lex ``text`` more; return the new state and the symbols now certain.

        Raises :class:`LexError` when the text fed so far can no longer be a
        prefix of lexically valid source; this state is left unchanged.
        """
        if not text:
            return self, []
        buf = self._pending + text
        if buf.isidentifier() and self._pending and not self._ctx.atbol:
            # Fast path for typing: a name that is still growing.  A name with non-ASCII
            # characters is one exactly when it is an identifier (PEP 3131), which is
            # what the engine checks (``check_ident``) before it leaves the name pending.
            return LexState._make(
                self._ver, self._ctx, buf, self._pos, self._line, self._lstart, self._tail
            ), []
        bad = _FORBIDDEN_RE.search(text)
        if bad is not None:
            at = len(self._pending) + bad.start()
            try:  # an error earlier in the text comes first
                lex(self._ver, self._ctx, buf[:at], self._pos, 0, self._tail)
            except Fail as fail:
                raise self._error(buf, fail) from None
            if text[bad.start()] == "\x00":
                message = "source code cannot contain null bytes"
            else:
                message = "surrogate characters are not allowed"
            raise self._error(buf, Fail(message, at, Code.INVALID_CHARACTER))
        try:
            ctx, k, symbols = lex(self._ver, self._ctx, buf, self._pos, 0, self._tail)
        except Fail as fail:
            raise self._error(buf, fail) from None
        return self._advance(ctx, buf, k), symbols

    def emit_pending(self) -> tuple[LexState, list[Symbol]] | None:
        """The *emit* branch: end the pending symbol here without ending the input.

        Returns the state after the pending text is emitted as complete
        symbol(s) (it can still be fed) and those symbols, or None when the
        pending text is not a complete symbol (or nothing is pending).  With
        pending ``if`` this gives ``('if', 'if', k)``; the *extend* branch is
        this state itself, where ``if`` may still become ``iff``.
        """
        buf = self._pending
        if not buf:
            return None
        try:
            ctx, k, symbols = lex(self._ver, self._ctx, buf, self._pos, 1, self._tail)
        except Fail:
            return None
        if not symbols:
            return None
        return self._advance(ctx, buf, k), symbols

    def finish(self) -> list[Symbol]:
        """The symbols that end the input here.

        The pending symbol, a NEWLINE (text ``''``) if the last logical line
        has none, a DEDENT per open indentation level and ENDMARKER.  Raises
        :class:`LexError` if the text cannot end here (unterminated string,
        open bracket, line continuation at the end, ...).
        """
        buf = self._pending
        try:
            ctx, _, symbols = lex(self._ver, self._ctx, buf, self._pos, 2, self._tail)
        except Fail as fail:
            raise self._error(buf, fail) from None
        n = len(buf)
        end = self._pos + n
        if ctx.fst:
            message = "unterminated f-string: expecting '}'"
            raise self._error(buf, Fail(message, n, Code.UNTERMINATED_STRING))
        if ctx.parens:
            opener = ctx.parens[-1]
            message = f"'{opener}' was never closed"
            raise self._error(buf, Fail(message, n, Code.UNCLOSED_BRACKET, opener))
        if not ctx.atbol:
            symbols.append(("NEWLINE", "", end))
        symbols.extend(("DEDENT", "", end) for _ in range(len(ctx.ind) - 1))
        symbols.append(("ENDMARKER", "", end))
        return symbols

    # -- helpers ------------------------------------------------------------------

    def _advance(self, ctx: Ctx, buf: str, k: int) -> LexState:
        """The state whose pending text is ``buf[k:]``."""
        if k == 0:
            if ctx is self._ctx and buf == self._pending:
                return self
            return LexState._make(
                self._ver, ctx, buf, self._pos, self._line, self._lstart, self._tail
            )
        done = buf[:k] if k < len(buf) else buf
        line = self._line
        lstart = self._lstart
        if "\n" in done or "\r" in done:
            line += count_line_ends(done)
            lstart = self._pos + last_line_start(done)
        tail = buf[k - 2 : k] if k >= 2 else (self._tail + done)[-2:]
        return LexState._make(self._ver, ctx, buf[k:], self._pos + k, line, lstart, tail)

    def _error(self, buf: str, fail: Fail) -> LexError:
        """A LexError for ``fail`` (an index into ``buf``) with line and column."""
        at = max(0, min(fail.at, len(buf)))
        before = buf[:at]
        breaks = count_line_ends(before)
        if breaks:
            line = self._line + breaks
            column = at - last_line_start(before) + 1
        else:
            line = self._line
            column = self._pos + at - self._lstart + 1
        return LexError(
            fail.msg, self._pos + at, line, column, code=fail.code, bracket=fail.bracket
        )


_NEWLINE = frozenset(("NEWLINE",))
_NUMBER = frozenset(("NUMBER",))
_STRING = frozenset(("STRING",))

_NAME = frozenset(("NAME",))
#: The longest keyword or string prefix of any target: a longer name is a NAME
#: whatever is appended to it.
LONGEST_KEYWORD = max(
    len(word)
    for tables in (KEYWORD_KINDS, PREFIX_KINDS)
    for table in tables.values()
    for word in table
)

_name_cache: dict[tuple[int, str], frozenset[str]] = {}
_op_cache: dict[tuple[str, bool], frozenset[str] | None] = {}


def _name_kinds(ver: int, word: str) -> frozenset[str]:
    """NAME, the keywords ``word`` begins, and literals it may prefix."""
    if len(word) > LONGEST_KEYWORD:
        return _NAME  # longer than any keyword or string prefix it could begin
    key = (ver, word)
    kinds = _name_cache.get(key)
    if kinds is None:
        found = {"NAME"}
        found.update(k for k in KEYWORD_KINDS[ver] if k.startswith(word))
        found.update(PREFIX_KINDS[ver].get(word.lower(), ()))
        kinds = frozenset(found)
        if len(_name_cache) < 4096:
            _name_cache[key] = kinds
    return kinds


def _op_kinds(p: str, in_fstring: bool) -> frozenset[str] | None:
    """Operators the pending operator text may become.

    Pending operator text is a proper prefix of a longer operator, except
    ``..`` (``.`` or ``...``) and, before 3.12, ``!`` with the conversion
    character that must follow it.
    """
    key = (p, in_fstring)
    if key in _op_cache:
        return _op_cache[key]
    if p == "..":
        found = {".", "..."}
    elif len(p) > 1 and p[0] == "!" and p[1] != "=":
        found = {"!"}
    else:
        found = {op for op in OPERATORS if op.startswith(p)}
        if not in_fstring:
            found.discard("!")
        if p == ".":
            found.add("NUMBER")
    kinds = frozenset(found) if found else None
    if len(_op_cache) < 4096:
        _op_cache[key] = kinds
    return kinds
