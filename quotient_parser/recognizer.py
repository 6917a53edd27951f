"""Incremental recognition of Python source: the public face of the parser.

A :class:`RecognizerState` pairs a lexer state (``lexer.LexState``: the
committed lexing context plus the text of a symbol still in progress) with an
Earley :class:`~quotient_parser.earley.Chart` over the symbols emitted so far.
Both halves are immutable, so a state can be kept, forked and fed again at no
cost; feeding returns a new state.

Two questions are answered for the text fed so far:

``viable``
    Some continuation makes it a valid module.  The committed symbols must
    leave the chart alive, and the symbol in progress must still be able to
    become a symbol the chart can scan (the lexer's *extend* branch).

``complete``
    The text is a valid module as it stands: the lexer's end-of-input branch
    (emit the symbol in progress, close the last line, dedent, ENDMARKER) must
    be accepted by the chart.
"""

from __future__ import annotations

import codecs
import io
import tokenize
import weakref
from collections.abc import Iterable

from lexer import LONGEST_KEYWORD, LexError, LexState
from lexer.version import NEWEST, TargetLike, TargetVersion

from .earley import Automaton, Chart
from .grammar_tools import Grammar, load_grammar
from .heap import free_in_pieces, trim_if_freed

__all__ = [
    "Recognizer",
    "RecognizerState",
    "SourceDecodeError",
    "SymbolClassifier",
    "decode_source",
]

_Symbol = tuple[str, str, int]

#: ``feed`` remembers its results (held weakly) for texts up to this length:
#: a decoder tries many short candidate tokens from the same state.
_FEED_MEMO_MAX_TEXT = 256


class SourceDecodeError(SyntaxError):
    """Source bytes cannot be decoded the way CPython would decode them."""


def decode_source(data: bytes) -> str:
    """Decode source bytes as CPython does (BOM, PEP 263 coding cookie, UTF-8).

    Raises :class:`SourceDecodeError` with a readable message instead of
    ``UnicodeDecodeError`` or ``LookupError``.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceDecodeError(f"cannot determine the source encoding: {exc.msg}") from None
    try:
        codec = codecs.lookup(encoding)
        text = data.decode(codec.name)
    except LookupError:
        raise SourceDecodeError(f"unknown source encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        raise SourceDecodeError(
            f"source is not valid {encoding}: byte 0x{data[exc.start]:02x} at offset {exc.start}"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


#: Terminals derived from a NAME's text: a NAME other than the given word.
NAME_EXCEPT: dict[str, str] = {"NONWILD_NAME": "_", "NONFUTURE_NAME": "__future__"}


class SymbolClassifier:
    """Maps lexer symbols to the terminal (or scan-class) ids of one automaton.

    One symbol may stand for several grammar terminals at once: a soft keyword
    is also a NAME; a NAME other than ``_`` is also ``NONWILD_NAME`` (pattern
    captures and value patterns may not use the wildcard), one other than
    ``__future__`` also ``NONFUTURE_NAME`` (the module of ``lazy from``); a
    NUMBER is also ``REAL_NUMBER`` or ``IMAG_NUMBER`` (complex literal
    patterns need a real part then an imaginary part).  Such a symbol scans
    as a class of terminals.
    """

    def __init__(self, grammar: Grammar, automaton: Automaton):
        ids = grammar.terminal_ids
        soft = grammar.soft_keywords
        scan_class = automaton.scan_class
        self.kind_ids: dict[str, int] = {k: v for k, v in ids.items() if k not in soft}
        name = ids["NAME"]
        excepted = {ids[t]: word for t, word in NAME_EXCEPT.items() if t in ids}

        def name_class(word: str | None) -> int:
            terminals = [name, *(t for t, w in excepted.items() if w != word)]
            if word in soft:
                terminals.append(ids[word])
            return scan_class(tuple(terminals))

        self.name_default = name_class(None)
        self.name_by_text: dict[str, int] = {
            word: name_class(word) for word in {*soft, *excepted.values()}
        }
        number = ids.get("NUMBER")
        real, imag = ids.get("REAL_NUMBER"), ids.get("IMAG_NUMBER")
        self.real_number = self.imag_number = number
        if number is not None:
            self.real_number = scan_class((number,) if real is None else (number, real))
            self.imag_number = scan_class((number,) if imag is None else (number, imag))
        #: Terminals a pending symbol of each kind may still turn into (a
        #: pending name can still grow into one that is not an excepted word).
        self.kind_terminals: dict[str, frozenset[int]] = {
            kind: frozenset((terminal,)) for kind, terminal in self.kind_ids.items()
        }
        self.kind_terminals["NAME"] = frozenset((name, *excepted))
        self.kind_terminals["NUMBER"] = frozenset(t for t in (number, real, imag) if t is not None)
        self.soft_terminals: dict[str, int] = {word: ids[word] for word in soft}
        #: A name longer than this scans as a plain NAME whatever is appended to it: no
        #: keyword, string prefix, soft keyword or excepted name is as long.
        self.longest_special_name = max(LONGEST_KEYWORD, *map(len, self.name_by_text))

    def __call__(self, kind: str, text: str) -> int | None:
        if kind == "NAME":
            return self.name_by_text.get(text, self.name_default)
        if kind == "NUMBER":
            return self.imag_number if text[-1] in "jJ" else self.real_number
        return self.kind_ids.get(kind)

    def could_be_expected(
        self, kinds: Iterable[str], pending: str, expected: frozenset[int]
    ) -> bool:
        """Whether a pending symbol of one of ``kinds`` could be scanned next."""
        for kind in kinds:
            terminals = self.kind_terminals.get(kind)
            if terminals is not None and not terminals.isdisjoint(expected):
                return True
        if "NAME" in kinds:
            word = pending.strip()
            for soft, terminal in self.soft_terminals.items():
                if soft.startswith(word) and terminal in expected:
                    return True
        return False


class Recognizer:
    """Recognizer for one target Python version (``"3.13"`` or ``(3, 13)``).

    >>> rec = Recognizer("3.12")
    >>> state = rec.initial().feed("def f(x):\\n    return x")
    >>> state.viable, state.complete
    (True, True)
    >>> state.feed(" +").complete
    False
    """

    _cache: dict[TargetVersion, Recognizer] = {}  # least recently asked for first
    _asked: dict[TargetVersion, int] = {}  # how often each generation was asked for
    #: The automaton interns every item set it meets (about 4 KB each) and the set of
    #: those a long-running server meets keeps growing.  This bounds the states of one
    #: target's automaton, and of all targets' together (a server's own target, and
    #: the newer ones its newer-syntax check feeds the same texts): past it, the next
    #: ``Recognizer(target)`` starts a new generation (a fresh automaton) for the
    #: target asked for if it alone is past the bound, else retires the automata of the
    #: targets least often asked for until the rest are within it, never the one asked
    #: for most (the project's target, asked for at every build, outlives those of the
    #: check).  States of an old generation
    #: keep working, and keep it alive, as long as they are held (``QuotientBuilder``
    #: moves to the new generation on its next build).
    max_states = 16_000

    def __new__(cls, target: TargetLike = NEWEST) -> Recognizer:
        version = TargetVersion.parse(target)
        trim_if_freed()  # a retired generation that died: free it in pieces, trim
        cache = cls._cache
        cached = cache.pop(version, None)
        if cached is not None and cached.automaton.n_states > cls.max_states:
            cached._retire()
            cached = None
        if cached is None:
            cached = super().__new__(cls)
            cached._setup(version)
            cls._asked[version] = 0
        cls._asked[version] += 1
        cls._retire_past_the_bound(cached.automaton.n_states)
        cache[version] = cached  # the most recently asked for: last
        return cached

    @classmethod
    def _retire_past_the_bound(cls, kept: int) -> None:
        """Over ``max_states`` with ``kept`` states in use besides the cached ones: forget
        the generations least often (then least recently) asked for until the rest are
        within it, but not the one asked for most."""
        cache = cls._cache
        total = kept + sum(r.automaton.n_states for r in cache.values())
        if total <= cls.max_states:
            return
        by_use = sorted(cache, key=cls._asked.__getitem__)  # stable: then by recency
        for version in by_use[:-1]:
            retired = cache.pop(version)
            total -= retired.automaton.n_states
            del cls._asked[version]
            retired._retire()
            if total <= cls.max_states:
                break

    def _setup(self, version: TargetVersion) -> None:
        self.version = version
        self.grammar: Grammar = load_grammar(version)
        self.automaton = Automaton(self.grammar)
        self.classify = SymbolClassifier(self.grammar, self.automaton)
        self._initial: RecognizerState | None = RecognizerState(
            self, LexState.initial(target=version), Chart.initial(self.automaton), None
        )

    def _retire(self) -> None:
        """Out of the cache: let reference counting free this generation as soon as no
        state holds it.  The initial state held here is the one cycle through it
        (state -> recognizer -> state), which only the cyclic collector would break, a
        full pass holding the GIL for tens of milliseconds; nothing else is touched, so
        every state still held goes on working with its own tables.  The automaton's
        tables, once it dies, are freed in pieces and the heap trimmed (``heap.py``)."""
        self._initial = None
        free_in_pieces(self.automaton)

    def initial(self) -> RecognizerState:
        """The state before any text (an empty module is complete)."""
        initial = self._initial
        if initial is None:  # a retired generation, still asked by someone holding it
            return RecognizerState(
                self, LexState.initial(target=self.version), Chart.initial(self.automaton), None
            )
        return initial

    def recognize(self, text: str) -> bool:
        """Whether ``text`` is a complete, valid module for the target version."""
        return self.initial().feed(text).complete

    # -- helpers for states -------------------------------------------------

    def symbol_id(self, kind: str, text: str) -> int | None:
        """The terminal or scan-class id of a lexer symbol (None: no such terminal)."""
        return self.classify(kind, text)

    def step(self, chart: Chart, symbols: Iterable[_Symbol]) -> tuple[Chart | None, _Symbol | None]:
        """Scan symbols into the chart; on failure return the rejected symbol."""
        classify = self.classify
        kind_ids = classify.kind_ids
        name_by_text = classify.name_by_text
        name_default = classify.name_default
        current = chart
        for symbol in symbols:
            kind = symbol[0]
            # The classifier, inlined for the common kinds: this is the hot loop.
            symbol_id: int | None
            if kind == "NAME":
                symbol_id = name_by_text.get(symbol[1], name_default)
            elif kind == "NUMBER":
                symbol_id = classify(kind, symbol[1])
            else:
                symbol_id = kind_ids.get(kind)
            if symbol_id is None:
                return None, symbol
            next_chart = current.step(symbol_id)
            if next_chart is None:
                return None, symbol
            current = next_chart
        return current, None


class RecognizerState:
    """Immutable recognition state after some text; see the module docstring."""

    __slots__ = (
        "__weakref__",
        "_children",
        "_complete",
        "_viable",
        "chart",
        "error",
        "lex",
        "recognizer",
    )

    def __init__(
        self, recognizer: Recognizer, lex: LexState | None, chart: Chart | None, error: str | None
    ):
        self.recognizer = recognizer
        self.lex = lex
        self.chart = chart
        self.error = error
        self._children: dict[str, weakref.ref[RecognizerState]] | None = None
        self._complete: bool | None = None
        self._viable: bool | None = None

    def feed(self, text: str) -> RecognizerState:
        """The state after ``text`` more; this state is left as it was."""
        if self.chart is None or self.lex is None or not text:
            return self
        children = self._children
        if children is not None:
            known = children.get(text)
            if known is not None:
                cached = known()
                if cached is not None:
                    return cached
        try:
            lex, symbols = self.lex.feed(text)
        except LexError as exc:
            child = RecognizerState(self.recognizer, None, None, str(exc))
        else:
            chart, rejected = self.recognizer.step(self.chart, symbols)
            if chart is None:
                child = RecognizerState(self.recognizer, None, None, _unexpected(rejected))
            else:
                child = RecognizerState(self.recognizer, lex, chart, None)
        if len(text) <= _FEED_MEMO_MAX_TEXT:
            if children is None:
                children = self._children = {}
            children[text] = weakref.ref(child)
        return child

    @property
    def viable(self) -> bool:
        """Whether some continuation of the text fed so far is a valid module."""
        if self._viable is None:
            self._viable = self._check_viable()
        return self._viable

    def _check_viable(self) -> bool:
        if self.chart is None or self.lex is None:
            return False
        kinds = self.lex.pending_kinds()
        if kinds is None:
            return True
        return self.recognizer.classify.could_be_expected(
            kinds, self.lex.pending, self.chart.expected_terminals()
        )

    @property
    def complete(self) -> bool:
        """Whether the text fed so far is a complete, valid module."""
        if self._complete is None:
            self._complete = self._check_complete()
        return self._complete

    def _check_complete(self) -> bool:
        if self.chart is None or self.lex is None:
            return False
        try:
            symbols = self.lex.finish()
        except LexError:
            return False
        chart, _ = self.recognizer.step(self.chart, symbols)
        return chart is not None and chart.accepting

    def why_not_complete(self) -> str | None:
        """A readable reason when the text is not complete, else None."""
        if self.error is not None:
            return self.error
        if self.complete:
            return None
        assert self.chart is not None and self.lex is not None
        try:
            symbols = self.lex.finish()
        except LexError as exc:
            return str(exc)
        chart, rejected = self.recognizer.step(self.chart, symbols)
        if chart is None:
            return _unexpected(rejected)
        return "unexpected end of input"

    def __repr__(self) -> str:
        if self.error is not None:
            return f"<RecognizerState dead: {self.error}>"
        pending = self.lex.pending if self.lex else ""
        return f"<RecognizerState viable={self.viable} pending={pending!r}>"


def _unexpected(symbol: _Symbol | None) -> str:
    if symbol is None:
        return "syntax error"
    kind, text, start = symbol
    shown = text if text else kind
    return f"invalid syntax: unexpected {shown!r} at offset {start}"
