"""Least cost of the text after which an Earley chart can scan a terminal.

``fd(chart, a)`` is the least cost (``yields.py``: shortest texts,
separators between word-like symbols) of a symbol string after which
``chart`` can scan the terminal ``a``.  It is found from the open items of
the chart and, up the chain of their origins, the items waiting for them:
reaching ``a`` inside the rest of an item costs what the grammar tables say;
finishing the item costs the shortest yield of its rest, after which the
items that waited for its left-hand side at its origin go on.  Completing an
item predicted at a chart goes on in that same chart, a shortest path over
the predicted items.

With ``levels`` (``fd(chart, a, k)``), the ``k`` innermost indentation
levels open at the chart must close before ``a`` is scanned (the right
context's next line starts further left): ``a`` is then not reached inside
an item whose level is still open, and finishing an item whose rest holds
the DEDENT of an open level (``block: NEWLINE INDENT statements . DEDENT``)
closes one.  So a middle inside a ``try:`` block whose right context goes on
one level out pays for the ``except`` clause.

The values of a chart's origins are memoised per chart (held weakly) and
per target and level count, and the tables that depend only on an automaton
state per state, so the sibling states of a decoder step pay only for their
own newest chart.  ``finish.py`` builds the distance to a finish from these
values.
"""

from __future__ import annotations

import heapq
import weakref

from .earley import Chart
from .yields import INFINITE, YieldTables

__all__ = ["ChartDistances", "chart_distances"]

_NONE = -1
#: The (state, target) memos start afresh past this many entries: a server that
#: runs for days meets new states and terminals without end.
_MEMO_LIMIT = 200_000


class ChartDistances:
    """``fd(chart, a)`` for the charts of one automaton (see the module docstring)."""

    def __init__(self, tables: YieldTables):
        self.tables = tables
        automaton = tables.automaton
        self._st_items = automaton.st_items
        self._item_next = automaton.item_next
        self._item_lhs = automaton.item_lhs
        self._n_terminals = automaton.n_terminals
        self._up: weakref.WeakKeyDictionary[Chart, dict[tuple[int, int], dict[int, int]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lhs_close: dict[int, list[tuple[int, int, int]]] = {}
        self._dedents = _levels_closed(tables)
        self._state_first: dict[tuple[int, int], int] = {}
        self._waiting: dict[int, dict[int, list[int]]] = {}
        self._pred_edges: dict[int, dict[int, list[tuple[int, int]]]] = {}
        self._pred_first: dict[tuple[int, int], dict[int, int]] = {}

    def first_distance(self, chart: Chart, target: int, levels: int = 0) -> int:
        """Least cost of a symbol string after which ``chart`` can scan ``target`` (after
        closing its ``levels`` innermost indentation levels)."""
        best = INFINITE
        groups = chart.groups
        if not groups and chart.pred != _NONE:
            groups = ((chart, chart.pred),)
        for origin, state in groups:
            if not levels:
                value = self._min_first(state, target)
                if value < best:
                    best = value
            ups: dict[int, dict[int, int]] = {}
            for cost, lhs, closed in self._closes(state):
                if cost >= best:
                    break  # sorted: no later one is cheaper
                left = levels - closed if levels > closed else 0
                up = ups.get(left)
                if up is None:
                    up = ups[left] = self._up_values(origin, target, left)
                total = cost + up.get(lhs, INFINITE)
                if total < best:
                    best = total
        return best

    def _closes(self, state: int) -> list[tuple[int, int, int]]:
        """(least cost of finishing an item of ``state``, its left-hand side, levels its
        rest closes), cheapest first."""
        table = self._lhs_close.get(state)
        if table is None:
            least: dict[tuple[int, int], int] = {}
            close = self.tables.close
            lhs_of = self._item_lhs
            dedents = self._dedents
            for item in self._st_items[state]:
                key = (lhs_of[item], dedents[item])
                cost = close[item]
                if cost < least.get(key, INFINITE):
                    least[key] = cost
            table = sorted((cost, lhs, closed) for (lhs, closed), cost in least.items())
            self._lhs_close[state] = table
        return table

    def _min_first(self, state: int, target: int) -> int:
        key = (state, target)
        value = self._state_first.get(key)
        if value is None:
            firsts = self.tables.item_first_distances(target)
            value = min((firsts[i] for i in self._st_items[state]), default=INFINITE)
            if len(self._state_first) > _MEMO_LIMIT:
                self._state_first.clear()
            self._state_first[key] = value
        return value

    def _waiting_items(self, state: int) -> dict[int, list[int]]:
        """Per nonterminal Y, the items of ``state`` advanced past a Y they wait for."""
        table = self._waiting.get(state)
        if table is None:
            table = {}
            item_next, n_terminals = self._item_next, self._n_terminals
            for item in self._st_items[state]:
                nxt = item_next[item]
                if nxt >= n_terminals:
                    table.setdefault(nxt, []).append(item + 1)
            self._waiting[state] = table
        return table

    def _edges(self, pred: int) -> dict[int, list[tuple[int, int]]]:
        """Predicted items as edges: Z -> [(Y, cost)] for ``Z -> . Y rest`` (cost: rest)."""
        table = self._pred_edges.get(pred)
        if table is None:
            table = {}
            close = self.tables.close
            for nxt, advanced in self._waiting_items(pred).items():
                for item in advanced:
                    table.setdefault(self._item_lhs[item], []).append((nxt, close[item]))
            self._pred_edges[pred] = table
        return table

    def _pred_firsts(self, pred: int, target: int) -> dict[int, int]:
        """Per Y, the least cost to reach ``target`` in the rest of a predicted ``. Y rest``."""
        key = (pred, target)
        table = self._pred_first.get(key)
        if table is None:
            firsts = self.tables.item_first_distances(target)
            table = {}
            for nxt, advanced in self._waiting_items(pred).items():
                best = min(firsts[item] for item in advanced)
                if best < INFINITE:
                    table[nxt] = best
            if len(self._pred_first) > _MEMO_LIMIT:
                self._pred_first.clear()
            self._pred_first[key] = table
        return table

    # -- per-chart values -------------------------------------------------

    def _up_values(self, chart: Chart, target: int, levels: int) -> dict[int, int]:
        """Per nonterminal X started at ``chart``: least cost, once X is complete (with
        ``levels`` indentation levels still to close), to reach ``target`` in what the
        items waiting for X at ``chart`` still need."""
        per_chart = self._up.get(chart)
        if per_chart is None:
            per_chart = self._up[chart] = {}
        values = per_chart.get((target, levels))
        if values is not None:
            return values
        values = {}
        firsts = self.tables.item_first_distances(target)
        close = self.tables.close
        lhs_of = self._item_lhs
        dedents = self._dedents
        for origin, state in chart.groups:
            ups: dict[int, dict[int, int]] = {}
            for nxt, advanced in self._waiting_items(state).items():
                best = values.get(nxt, INFINITE)
                for item in advanced:
                    if not levels:
                        value = firsts[item]
                        if value < best:
                            best = value
                    cost = close[item]
                    if cost < best:
                        closed = dedents[item]
                        left = levels - closed if levels > closed else 0
                        up = ups.get(left)
                        if up is None:
                            up = ups[left] = self._up_values(origin, target, left)
                        value = cost + up.get(lhs_of[item], INFINITE)
                        if value < best:
                            best = value
                if best < INFINITE:
                    values[nxt] = best
        pred = chart.pred
        if pred != _NONE:
            if not levels:
                for nxt, value in self._pred_firsts(pred, target).items():
                    if value < values.get(nxt, INFINITE):
                        values[nxt] = value
            # Completing a predicted item (started here) completes its left-hand
            # side here too: shortest paths down the prediction edges.
            edges = self._edges(pred)
            heap = [(value, symbol) for symbol, value in values.items()]
            heapq.heapify(heap)
            while heap:
                value, symbol = heapq.heappop(heap)
                if value > values.get(symbol, INFINITE):
                    continue
                for nxt, cost in edges.get(symbol, ()):
                    total = value + cost
                    if total < values.get(nxt, INFINITE):
                        values[nxt] = total
                        heapq.heappush(heap, (total, nxt))
        per_chart[(target, levels)] = values
        return values


def _levels_closed(tables: YieldTables) -> list[int]:
    """Per item, the indentation levels open before its dot that its rest closes: the
    DEDENTs of its rest less its INDENTs (1 for ``block: NEWLINE INDENT . statements
    DEDENT``, 0 where the rest opens and closes a level itself)."""
    grammar = tables.grammar
    ids = grammar.terminal_ids
    indent, dedent = ids.get("INDENT", _NONE), ids.get("DEDENT", _NONE)
    out = [0] * len(tables.item_prod)
    for item, (production, dot) in enumerate(zip(tables.item_prod, tables.item_dot)):
        rest = grammar.productions[production][1][dot:]
        closed = sum(s == dedent for s in rest) - sum(s == indent for s in rest)
        out[item] = max(0, closed)
    return out


#: The distances of the latest tables of each grammar, like ``yields._TABLES``: the
#: tables of an automaton replaced by a new generation are not kept alive from here.
_DISTANCES: dict[int, ChartDistances] = {}


def chart_distances(tables: YieldTables) -> ChartDistances:
    """The (cached) distances of one grammar's charts."""
    key = id(tables.grammar)
    found = _DISTANCES.get(key)
    if found is None or found.tables is not tables:
        found = _DISTANCES[key] = ChartDistances(tables)
    return found
