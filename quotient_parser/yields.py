"""Shortest yields of the grammar, in characters: what a finish must at least cost.

The distance to a finish (``finish.py``) is built from three grammar tables,
computed once per target and shared by every quotient:

* the cost of each terminal: the length of its shortest text (``NAME`` is
  ``x``, ``NUMBER`` ``0``, ``STRING`` ``''``, ``NEWLINE`` one line break, a
  keyword or operator its own text; ``INDENT`` one character, the least it
  adds to the indentation of the line it opens; ``DEDENT`` and ``ENDMARKER``
  nothing);
* the shortest yield of every nonterminal and of every rest of a production
  (``close``: what finishing an Earley item costs at least);
* per target terminal ``a``, the least cost of the text a symbol must derive
  before an ``a`` can be scanned (``first_distance``).

Separators are counted where they are certain: two word-like symbols in a row
(a name or keyword followed by a name, keyword or number, or a ``b''`` or
``f''`` literal) need a blank between them, and the tables add one character
for each such pair inside a yield.  Everything else is left out (indentation
beyond the one character of an ``INDENT``, a blank between operators that
would otherwise merge), so every figure is a lower bound on real text.

A cost *summary* keeps, for the yields of a symbol string, the least cost for
each combination of "starts with a word-like symbol" and "ends with one",
plus the cost of the empty yield (0 when nullable), so that the separator at
a junction of two strings can be counted exactly.
"""

from __future__ import annotations

from .earley import Automaton
from .grammar_tools import Grammar

__all__ = ["INFINITE", "SHORTEST_TEXTS", "YieldTables", "shortest_text", "yield_tables"]

#: Cost of what cannot be done.
INFINITE = 1 << 30

#: The shortest text of each token kind that has no text of its own.
SHORTEST_TEXTS: dict[str, str] = {
    "NAME": "x",
    "NUMBER": "0",
    "IMAG_NUMBER": "0j",
    "STRING": "''",
    "BYTES": "b''",
    "NEWLINE": "\n",
    "INDENT": " ",
    "DEDENT": "",
    "ENDMARKER": "",
}


def shortest_text(kind: str) -> tuple[str, bool, bool] | None:
    """(shortest text, starts with a word character, ends with one) of a token kind,
    or None for a kind unknown here (it then costs nothing and is never inserted).

    Kinds derived from another by their text follow its name: ``NONWILD_NAME``
    and ``NONFUTURE_NAME`` are names, ``REAL_NUMBER`` a number, and an
    interpolated string's ``FSTRING_START`` (``TSTRING_START``, ...) opens with
    its prefix letter, its ``*_MIDDLE`` is literal text, its ``*_END`` a quote.
    """
    if kind in SHORTEST_TEXTS:
        text = SHORTEST_TEXTS[kind]
        return text, text[:1].isalnum(), kind == "NAME"
    if kind.endswith("_NAME"):
        return "x", True, True
    if kind.endswith("_NUMBER"):
        return "0", True, False
    if kind.endswith("STRING_START") and len(kind) > len("STRING_START"):
        return kind[0].lower() + "'", True, False
    if kind.endswith("STRING_MIDDLE"):
        return "x", False, False
    if kind.endswith("STRING_END"):
        return "'", False, False
    return None


# A summary is (empty, cost[first word?][last word?]) flattened:
# (empty, c00, c01, c10, c11) with c_fl for non-empty yields.
Summary = tuple[int, int, int, int, int]
_NOTHING: Summary = (INFINITE, INFINITE, INFINITE, INFINITE, INFINITE)
EMPTY: Summary = (0, INFINITE, INFINITE, INFINITE, INFINITE)


def _single(cost: int, word_start: bool, word_end: bool) -> Summary:
    values = [INFINITE] * 5
    values[1 + 2 * word_start + word_end] = cost
    return (values[0], values[1], values[2], values[3], values[4])


def concat(a: Summary, b: Summary) -> Summary:
    """The summary of every yield of ``a`` followed by every yield of ``b``."""
    if a[0] == 0 and a[1:] == _NOTHING[1:]:
        return b
    if b[0] == 0 and b[1:] == _NOTHING[1:]:
        return a
    out = [a[0] + b[0] if a[0] < INFINITE and b[0] < INFINITE else INFINITE, *_NOTHING[1:]]
    for fa in (0, 1):
        for la in (0, 1):
            ca = a[1 + 2 * fa + la]
            if ca >= INFINITE:
                continue
            if b[0] < INFINITE:  # b empty
                k = 1 + 2 * fa + la
                if ca + b[0] < out[k]:
                    out[k] = ca + b[0]
            for fb in (0, 1):
                for lb in (0, 1):
                    cb = b[1 + 2 * fb + lb]
                    if cb >= INFINITE:
                        continue
                    cost = ca + cb + (1 if la and fb else 0)
                    k = 1 + 2 * fa + lb
                    if cost < out[k]:
                        out[k] = cost
    if a[0] < INFINITE:  # a empty
        for k in range(1, 5):
            cost = a[0] + b[k]
            if cost < out[k]:
                out[k] = cost
    return (out[0], out[1], out[2], out[3], out[4])


def merge(a: Summary, b: Summary) -> Summary:
    """The summary of the union of two yield sets (element-wise minimum)."""
    return (
        min(a[0], b[0]),
        min(a[1], b[1]),
        min(a[2], b[2]),
        min(a[3], b[3]),
        min(a[4], b[4]),
    )


def least(a: Summary) -> int:
    return min(a)


def least_before(a: Summary, word_start: bool) -> int:
    """Least cost of a yield of ``a`` followed by a symbol (its separator included)."""
    best = min(a[0], a[1], a[3])
    word_last = min(a[2], a[4])
    if word_last < INFINITE:
        best = min(best, word_last + (1 if word_start else 0))
    return best


class YieldTables:
    """Cost tables of one grammar (see the module docstring); build with :func:`yield_tables`."""

    def __init__(self, grammar: Grammar, automaton: Automaton):
        self.grammar = grammar
        self.automaton = automaton
        n_terminals = grammar.n_terminals
        names = grammar.symbol_names
        n_symbols = len(names)
        #: Shortest text of each terminal (None: not insertable).
        self.text: list[str | None] = [None] * n_terminals
        self.cost: list[int] = [0] * n_terminals
        self.word_start: list[bool] = [False] * n_terminals
        self.word_end: list[bool] = [False] * n_terminals
        summaries: list[Summary] = [_NOTHING] * n_symbols
        for t in range(n_terminals):
            name = names[t]
            text: str | None
            if name.isupper() and name.replace("_", "").isalpha():
                known = shortest_text(name)
                text, start, end = known if known is not None else (None, False, False)
            else:
                text = name  # a keyword, soft keyword or operator is its own text
                start = end = name.isidentifier()
            self.text[t] = text if text else None
            self.cost[t] = len(text) if text is not None else 0
            self.word_start[t], self.word_end[t] = start, end
            summaries[t] = _single(self.cost[t], start, end)
        productions = grammar.productions
        nullable = automaton.nullable
        for nt in nullable:
            summaries[nt] = EMPTY
        # Least yields of nonterminals: iterate to the fixpoint (costs only fall).
        changed = True
        while changed:
            changed = False
            for lhs, rhs in productions:
                total = EMPTY
                for s in rhs:
                    total = concat(total, summaries[s])
                    if total == _NOTHING:
                        break
                new = merge(summaries[lhs], total)
                if new != summaries[lhs]:
                    summaries[lhs] = new
                    changed = True
        self.summary = summaries
        #: Least cost of a yield of each symbol.
        self.least: list[int] = [least(s) for s in summaries]

        # Items, numbered as the automaton numbers them.
        item_prod: list[int] = []
        item_dot: list[int] = []
        for p, (_lhs, rhs) in enumerate(productions):
            for dot in range(len(rhs) + 1):
                item_prod.append(p)
                item_dot.append(dot)
        self.item_prod = item_prod
        self.item_dot = item_dot
        #: Summary of the rest of each item's right-hand side.
        rest: list[Summary] = [EMPTY] * len(item_prod)
        first = 0
        for _lhs, rhs in productions:
            total = EMPTY
            rest[first + len(rhs)] = total
            for dot in range(len(rhs) - 1, -1, -1):
                total = concat(summaries[rhs[dot]], total)
                rest[first + dot] = total
            first += len(rhs) + 1
        self.rest = rest
        #: Least cost of finishing each item (the rest of its right-hand side).
        self.close: list[int] = [least(s) for s in rest]
        # Occurrences for first distances: (lhs, production, position) per symbol.
        occurrences: list[list[tuple[int, int, int]]] = [[] for _ in range(n_symbols)]
        prefix: list[list[Summary]] = []
        for p, (lhs, rhs) in enumerate(productions):
            total = EMPTY
            sums = [total]
            for i, s in enumerate(rhs):
                occurrences[s].append((lhs, p, i))
                total = concat(total, summaries[s])
                sums.append(total)
            prefix.append(sums)
        self._occurrences = occurrences
        self._prefix = prefix
        self._firsts: dict[int, list[Summary]] = {}
        self._item_firsts: dict[int, list[int]] = {}

    # -- first distances ----------------------------------------------------

    def first_summary(self, target: int) -> list[Summary]:
        """Per symbol, the summary of the texts it derives before a ``target``.

        ``Z =>* u target v``: the summary of the least such ``u`` (empty for
        the target itself, nothing for a symbol that never derives it).
        """
        known = self._firsts.get(target)
        if known is None:
            known = self._firsts[target] = self._first_summary(target)
        return known

    def _first_summary(self, target: int) -> list[Summary]:
        n_symbols = len(self.summary)
        best: list[Summary] = [_NOTHING] * n_symbols
        best[target] = EMPTY
        prefix = self._prefix
        # Label-correcting search over symbols: a symbol is revisited when its
        # summary improves (summaries only fall, and they are finite vectors).
        queue = [target]
        queued = {target}
        while queue:
            s = queue.pop()
            queued.discard(s)
            value = best[s]
            for lhs, p, i in self._occurrences[s]:
                candidate = merge(best[lhs], concat(prefix[p][i], value))
                if candidate != best[lhs]:
                    best[lhs] = candidate
                    if lhs not in queued:
                        queued.add(lhs)
                        queue.append(lhs)
        return best

    def first_distance(self, symbol: int, target: int) -> int:
        """Least cost of what ``symbol`` derives before a ``target`` (its separator included)."""
        return least_before(self.first_summary(target)[symbol], self.word_start[target])

    def item_first_distances(self, target: int) -> list[int]:
        """Per item, the least cost of the text before a ``target`` within the item's rest."""
        known = self._item_firsts.get(target)
        if known is None:
            known = self._item_firsts[target] = self._item_first(target)
        return known

    def warm_up(self) -> None:
        """Build the per-terminal tables of every terminal now (about a second; they
        are otherwise built on first use, a few milliseconds each)."""
        for target in range(self.grammar.n_terminals):
            self.item_first_distances(target)

    def _item_first(self, target: int) -> list[int]:
        firsts = self.first_summary(target)
        word = self.word_start[target]
        summaries = self.summary
        out = [INFINITE] * len(self.item_prod)
        first = 0
        for _lhs, rhs in self.grammar.productions:
            # reach[d]: summaries of texts before the target within rhs[d:]
            reach = _NOTHING
            out[first + len(rhs)] = INFINITE
            for dot in range(len(rhs) - 1, -1, -1):
                s = rhs[dot]
                reach = merge(firsts[s], concat(summaries[s], reach))
                out[first + dot] = least_before(reach, word)
            first += len(rhs) + 1
        return out


#: The tables of the latest automaton of each grammar: an automaton replaced by a new
#: generation (``Recognizer.max_states``) is not kept alive from here.
_TABLES: dict[int, YieldTables] = {}


def yield_tables(grammar: Grammar, automaton: Automaton) -> YieldTables:
    """The (cached) tables of an automaton's grammar."""
    tables = _TABLES.get(id(grammar))
    if tables is None or tables.automaton is not automaton:
        tables = _TABLES[id(grammar)] = YieldTables(grammar, automaton)
    return tables
