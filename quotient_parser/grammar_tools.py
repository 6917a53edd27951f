"""Load the readable grammar file into an integer-coded BNF grammar.

The grammar file (``grammar/python.gram``) is written in a small EBNF dialect
documented in ``docs/architecture.md``.  The Earley engine wants plain BNF over
integers, so this module

* parses the EBNF text into a tiny expression tree,
* drops alternatives whose version gate excludes the target,
* expands ``[x]``, ``x?``, ``x*``, ``x+``, ``s.x+`` and groups into BNF, inlining
  short optional parts (fewer nonterminals means fewer completion steps) and
  creating left-recursive helper rules for repetition,
* numbers every symbol: terminals first, then nonterminals.

The result is a :class:`Grammar`, an immutable value shared by every
recognizer built for the same target version.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lexer.version import NEWEST

__all__ = ["Grammar", "GrammarError", "load_grammar"]

GRAMMAR_PATH = Path(__file__).with_name("grammar") / "python.gram"
START_RULE = "file"
AUGMENTED_START = "$start"

#: Inline an optional part only while the rule keeps at most this many alternatives.
_INLINE_LIMIT = 8


class GrammarError(ValueError):
    """The grammar file is malformed or describes an unusable grammar."""


# ---------------------------------------------------------------------------
# EBNF expression tree
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sym:
    name: str
    kind: str  # "rule", "token" (UPPER), "literal" ('x'), "soft" ("x")


@dataclass(frozen=True)
class _Alt:
    """Alternatives, each a sequence of expressions."""

    alternatives: tuple[tuple[_Expr, ...], ...]


@dataclass(frozen=True)
class _Opt:
    inner: _Expr


@dataclass(frozen=True)
class _Rep:
    inner: _Expr
    at_least_one: bool


@dataclass(frozen=True)
class _Gather:
    separator: _Expr
    inner: _Expr


_Expr = _Sym | _Alt | _Opt | _Rep | _Gather

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<gate>@<?\d+\.\d+(?:,<\d+\.\d+)?)
  | (?P<literal>'(?:[^'\\]|\\.)+')
  | (?P<soft>"[^"]+")
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op>[()\[\]|?*+.:])
    """,
    re.VERBOSE,
)


def _lex_rule_text(text: str, line: int) -> Iterator[tuple[str, str]]:
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise GrammarError(f"line {line}: cannot read grammar text at {text[pos : pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None
        if kind in ("ws", "comment"):
            continue
        yield kind, m.group()


def _gate_allows(gate: str, version: tuple[int, int]) -> bool:
    low: tuple[int, int] = (0, 0)
    high: tuple[int, int] = (99, 0)
    for part in gate[1:].split(","):
        if part.startswith("<"):
            major, minor = part[1:].split(".")
            high = (int(major), int(minor))
        else:
            major, minor = part.split(".")
            low = (int(major), int(minor))
    return low <= version < high


class _RuleParser:
    """Recursive descent over one rule body (a list of grammar-text tokens)."""

    def __init__(self, tokens: list[tuple[str, str]], version: tuple[int, int], where: str):
        self.tokens = tokens
        self.pos = 0
        self.version = version
        self.where = where

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] == value:
            self.pos += 1
            return True
        return False

    def error(self, message: str) -> GrammarError:
        return GrammarError(f"{self.where}: {message}")

    def parse_body(self) -> _Alt:
        alt = self.parse_alternatives(top=True)
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return alt

    def parse_alternatives(self, top: bool = False) -> _Alt:
        alternatives: list[tuple[_Expr, ...]] = []
        self.take("|")
        while True:
            seq = self.parse_sequence()
            allowed = True
            tok = self.peek()
            if tok is not None and tok[0] == "gate":
                if not top:
                    raise self.error("version gates may only close a top-level alternative")
                allowed = _gate_allows(tok[1], self.version)
                self.pos += 1
            if allowed:
                alternatives.append(seq)
            if not self.take("|"):
                break
        return _Alt(tuple(alternatives))

    def parse_sequence(self) -> tuple[_Expr, ...]:
        items: list[_Expr] = []
        while True:
            tok = self.peek()
            if tok is None or tok[0] == "gate" or (tok[0] == "op" and tok[1] in "|)]"):
                return tuple(items)
            items.append(self.parse_postfix())

    def parse_postfix(self) -> _Expr:
        atom = self.parse_atom()
        while True:
            if self.take("?"):
                atom = _Opt(atom)
            elif self.take("*"):
                atom = _Rep(atom, at_least_one=False)
            elif self.take("+"):
                atom = _Rep(atom, at_least_one=True)
            elif self.take("."):
                element = self.parse_atom()
                if not self.take("+"):
                    raise self.error("a gather 's.e' must be followed by '+'")
                atom = _Gather(atom, element)
            else:
                return atom

    def parse_atom(self) -> _Expr:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of rule")
        kind, text = tok
        self.pos += 1
        if kind == "name":
            return _Sym(text, "token" if text.isupper() else "rule")
        if kind == "literal":
            return _Sym(text[1:-1].replace("\\'", "'").replace("\\\\", "\\"), "literal")
        if kind == "soft":
            return _Sym(text[1:-1], "soft")
        if kind == "op" and text == "(":
            inner = self.parse_alternatives()
            if not self.take(")"):
                raise self.error("missing ')'")
            return inner
        if kind == "op" and text == "[":
            inner = self.parse_alternatives()
            if not self.take("]"):
                raise self.error("missing ']'")
            return _Opt(inner)
        raise self.error(f"unexpected {text!r}")


def _split_rules(text: str) -> Iterator[tuple[str, int, str]]:
    """Yield (rule name, line number, body text) for each rule in the file."""
    name: str | None = None
    start_line = 0
    body: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.split("#", 1)[0].strip():
            continue
        if raw[0] not in " \t":
            if name is not None:
                yield name, start_line, "\n".join(body)
            m = re.match(r"([a-z_][a-z_0-9]*)\s*:(.*)$", raw)
            if not m:
                raise GrammarError(f"line {number}: expected 'rule_name:' at column 0")
            name, start_line, body = m.group(1), number, [m.group(2)]
        else:
            if name is None:
                raise GrammarError(f"line {number}: continuation line outside a rule")
            body.append(raw)
    if name is not None:
        yield name, start_line, "\n".join(body)


# ---------------------------------------------------------------------------
# BNF construction
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Grammar:
    """An integer-coded BNF grammar.

    Symbols ``0 .. n_terminals-1`` are terminals, the rest nonterminals.
    ``productions[p] = (lhs, rhs)``; production 0 is ``$start -> file``.
    """

    version: tuple[int, int]
    symbol_names: tuple[str, ...]
    n_terminals: int
    productions: tuple[tuple[int, tuple[int, ...]], ...]
    soft_keywords: frozenset[str]
    terminal_ids: dict[str, int]
    start: int

    def is_terminal(self, symbol: int) -> bool:
        return symbol < self.n_terminals

    def describe(self, symbol: int) -> str:
        return self.symbol_names[symbol]


class _Builder:
    def __init__(self, version: tuple[int, int]):
        self.version = version
        self.rules: dict[str, list[tuple[str, ...]]] = {}
        self.terminals: dict[str, str] = {}  # name -> kind ("token", "literal", "soft")
        self.helpers: dict[_Expr, str] = {}
        self.helper_count = 0

    def symbol(self, sym: _Sym) -> str:
        if sym.kind == "rule":
            return sym.name
        previous = self.terminals.setdefault(sym.name, sym.kind)
        if previous != sym.kind:
            raise GrammarError(f"{sym.name!r} is used both as {previous} and as {sym.kind}")
        return "%" + sym.name  # '%' marks terminals inside the builder

    def expand(self, expr: _Expr) -> list[tuple[str, ...]]:
        """All BNF right-hand sides that ``expr`` stands for."""
        if isinstance(expr, _Sym):
            return [(self.symbol(expr),)]
        if isinstance(expr, _Alt):
            result: list[tuple[str, ...]] = []
            for seq in expr.alternatives:
                result.extend(self.expand_sequence(seq))
            return result
        if isinstance(expr, _Opt):
            inner = self.expand(expr.inner)
            return [(), *inner]
        return [(self.helper(expr),)]

    def expand_sequence(self, seq: Sequence[_Expr]) -> list[tuple[str, ...]]:
        products: list[tuple[str, ...]] = [()]
        for item in seq:
            options = self.expand(item)
            if len(products) * len(options) > _INLINE_LIMIT and len(options) > 1:
                options = [(self.helper(item),)]
            products = [p + o for p in products for o in options]
        return products

    def helper(self, expr: _Expr) -> str:
        """A nonterminal standing for ``expr`` (shared between equal expressions)."""
        if expr in self.helpers:
            return self.helpers[expr]
        self.helper_count += 1
        name = f"_h{self.helper_count}"
        self.helpers[expr] = name
        if isinstance(expr, _Rep):
            element = self.expand(expr.inner)
            first = element if expr.at_least_one else [()]
            self.rules[name] = [*first, *[(name, *e) for e in element]]
        elif isinstance(expr, _Gather):
            element = self.expand(expr.inner)
            separator = self.expand(expr.separator)
            self.rules[name] = [*element, *[(name, *s, *e) for s in separator for e in element]]
        else:
            self.rules[name] = self.expand(expr)
        return name


@functools.cache
def load_grammar(version: tuple[int, int] = NEWEST, path: str | None = None) -> Grammar:
    """Build the BNF grammar of ``version`` from the grammar file (cached)."""
    source = Path(path) if path else GRAMMAR_PATH
    text = source.read_text(encoding="utf-8")
    builder = _Builder(version)
    for name, line, body in _split_rules(text):
        tokens = list(_lex_rule_text(body, line))
        tree = _RuleParser(tokens, version, f"{source.name}:{line} ({name})").parse_body()
        if name in builder.rules:
            raise GrammarError(f"{source.name}:{line}: rule {name!r} defined twice")
        builder.rules[name] = builder.expand(tree)
    if START_RULE not in builder.rules:
        raise GrammarError(f"the grammar has no start rule {START_RULE!r}")
    for name, alternatives in list(builder.rules.items()):
        for rhs in alternatives:
            for sym in rhs:
                if not sym.startswith("%") and sym not in builder.rules:
                    raise GrammarError(f"rule {name!r} uses undefined rule {sym!r}")
    return _number(builder, version)


def _number(builder: _Builder, version: tuple[int, int]) -> Grammar:
    rules = _prune(builder.rules)
    used_terminals = sorted(
        {s[1:] for alts in rules.values() for rhs in alts for s in rhs if s.startswith("%")}
    )
    names: list[str] = list(used_terminals)
    ids: dict[str, int] = {"%" + t: i for i, t in enumerate(used_terminals)}
    n_terminals = len(names)
    for rule in [AUGMENTED_START, *rules]:
        ids[rule] = len(names)
        names.append(rule)
    productions: list[tuple[int, tuple[int, ...]]] = [(ids[AUGMENTED_START], (ids[START_RULE],))]
    for rule, alternatives in rules.items():
        seen: set[tuple[str, ...]] = set()
        for rhs in alternatives:
            if rhs in seen:
                continue
            seen.add(rhs)
            productions.append((ids[rule], tuple(ids[s] for s in rhs)))
    soft = frozenset(t for t in used_terminals if builder.terminals[t] == "soft")
    return Grammar(
        version=version,
        symbol_names=tuple(names),
        n_terminals=n_terminals,
        productions=tuple(productions),
        soft_keywords=soft,
        terminal_ids={t: i for i, t in enumerate(used_terminals)},
        start=ids[AUGMENTED_START],
    )


def _prune(rules: dict[str, list[tuple[str, ...]]]) -> dict[str, list[tuple[str, ...]]]:
    """Keep only productive alternatives of rules reachable from the start rule.

    Version gates can leave a rule without alternatives; such a rule and every
    alternative that needs it disappear, so every remaining nonterminal derives
    some terminal string.  The Earley engine relies on that: a non-empty chart
    then always means the input so far is a viable prefix.
    """
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, alternatives in rules.items():
            if name in productive:
                continue
            if any(all(s.startswith("%") or s in productive for s in rhs) for rhs in alternatives):
                productive.add(name)
                changed = True
    if START_RULE not in productive:
        raise GrammarError("the start rule derives no input")
    kept = {
        name: [rhs for rhs in alts if all(s.startswith("%") or s in productive for s in rhs)]
        for name, alts in rules.items()
        if name in productive
    }
    reachable: set[str] = set()
    stack = [START_RULE]
    while stack:
        name = stack.pop()
        if name in reachable:
            continue
        reachable.add(name)
        stack.extend(s for rhs in kept[name] for s in rhs if not s.startswith("%"))
    return {name: alts for name, alts in kept.items() if name in reachable}
