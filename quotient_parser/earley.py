"""Earley recognition over a lazily built LR(0) automaton.

This is the practical Earley algorithm of Aycock and Horspool, arranged so
that a parse state is a small immutable value:

* Earley items are grouped by origin.  The items of one chart that share an
  origin always form one set of LR(0) items, which is interned as an automaton
  state (an ``int``).  A chart is therefore a short tuple of
  ``(origin chart, state)`` *groups* plus the *predicted* state whose items
  start at the chart itself.
* Automaton states are built lazily and every transition is memoised: the goto
  on a terminal, the goto on a set of completed nonterminals, the union of two
  states, and the completion fixpoint of a group against the predictions of
  its origin chart (which collapses the long unit chains of an expression
  grammar, ``atom -> primary -> ... -> expression``, into one lookup).
* Nullable symbols are handled in the closure (an item before a nullable
  symbol also stands past it), so completions never look into the chart that
  is being built.

A :class:`Chart` refers only to the charts where its open constructs began,
so forking a parse costs nothing (keep the reference) and memory follows the
nesting of the input, not its length.  Stepping a chart with the same symbol
twice returns the same chart object.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from operator import attrgetter

from .grammar_tools import Grammar

__all__ = ["Automaton", "Chart"]

_NONE = -1
_UNKNOWN = object()
_pos_of = attrgetter("pos")


class Automaton:
    """Integer-coded LR(0) item automaton built on demand for one grammar."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        n_terminals = grammar.n_terminals
        item_next: list[int] = []
        item_lhs: list[int] = []
        first_item: list[int] = []
        for lhs, rhs in grammar.productions:
            first_item.append(len(item_next))
            for dot in range(len(rhs) + 1):
                item_next.append(rhs[dot] if dot < len(rhs) else _NONE)
                item_lhs.append(lhs)
        self.item_next = item_next
        self.item_lhs = item_lhs
        self.n_terminals = n_terminals
        self.nullable = self._nullable()
        self.accept_item = first_item[0] + 1  # $start -> file .

        by_lhs: dict[int, list[int]] = {}
        for p, (lhs, _rhs) in enumerate(grammar.productions):
            by_lhs.setdefault(lhs, []).append(first_item[p])
        self._rule_items = by_lhs
        self._predicted: dict[int, frozenset[int]] = {}

        # state tables, indexed by state id
        self._state_ids: dict[frozenset[int], int] = {}
        self.st_items: list[frozenset[int]] = []
        self.st_goto: list[dict[int, int]] = []
        self.st_goto_complete: list[dict[int, int]] = []
        self.st_complete: list[int] = []
        self.st_pred: list[int] = []
        self.st_has_next: list[bool] = []
        self.st_accept: list[bool] = []
        self.st_terminals: list[frozenset[int]] = []
        self._by_next: list[dict[int, list[int]] | None] = []
        # complete-set tables
        self._cset_ids: dict[frozenset[int], int] = {}
        self.cset_items: list[frozenset[int]] = []
        # memo tables on pairs of states
        self._union: dict[tuple[int, int], int] = {}
        self._fixpoint: dict[tuple[int, int], int] = {}
        self._union_many: dict[frozenset[int], int] = {}
        # multi-terminal scan classes (soft keywords scan as NAME and as the keyword)
        self._classes: dict[frozenset[int], int] = {}
        self._class_members: list[tuple[int, ...]] = []

        start_items = self._advance_nullable([first_item[0]])
        start_items |= self._predict_items(start_items)
        self.initial_pred = self._intern(start_items)

    # -- grammar analysis -------------------------------------------------

    def _nullable(self) -> frozenset[int]:
        nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.grammar.productions:
                if lhs not in nullable and all(s in nullable for s in rhs):
                    nullable.add(lhs)
                    changed = True
        return frozenset(nullable)

    def _advance_nullable(self, items: Iterable[int]) -> set[int]:
        """Close items over nullable symbols.

        ``A -> a . B c`` with B nullable also stands for ``A -> a B . c``.
        """
        out: set[int] = set()
        item_next, nullable = self.item_next, self.nullable
        for item in items:
            out.add(item)
            while item_next[item] in nullable:
                item += 1
                out.add(item)
        return out

    def _predicted_for(self, nonterminal: int) -> frozenset[int]:
        """Items predicted (transitively) when ``nonterminal`` is expected."""
        cached = self._predicted.get(nonterminal)
        if cached is not None:
            return cached
        seen_nt = {nonterminal}
        stack = [nonterminal]
        items: set[int] = set()
        n_terminals = self.n_terminals
        while stack:
            nt = stack.pop()
            for item in self._advance_nullable(self._rule_items[nt]):
                items.add(item)
                nxt = self.item_next[item]
                if nxt >= n_terminals and nxt not in seen_nt:
                    seen_nt.add(nxt)
                    stack.append(nxt)
        result = frozenset(items)
        self._predicted[nonterminal] = result
        return result

    def _predict_items(self, items: Iterable[int]) -> set[int]:
        out: set[int] = set()
        n_terminals = self.n_terminals
        for item in items:
            nxt = self.item_next[item]
            if nxt >= n_terminals:
                out |= self._predicted_for(nxt)
        return out

    # -- states -------------------------------------------------------------

    def _intern(self, items: set[int] | frozenset[int]) -> int:
        if not items:
            return _NONE
        key = frozenset(items)
        state = self._state_ids.get(key)
        if state is not None:
            return state
        state = len(self.st_items)
        self._state_ids[key] = state
        item_next, item_lhs, n_terminals = self.item_next, self.item_lhs, self.n_terminals
        complete = frozenset(item_lhs[i] for i in key if item_next[i] == _NONE)
        terminals = frozenset(item_next[i] for i in key if 0 <= item_next[i] < n_terminals)
        self.st_items.append(key)
        self.st_goto.append({})
        self.st_goto_complete.append({})
        self.st_complete.append(self._intern_cset(complete) if complete else _NONE)
        self.st_has_next.append(any(item_next[i] != _NONE for i in key))
        self.st_accept.append(self.accept_item in key)
        self.st_terminals.append(terminals)
        self._by_next.append(None)
        self.st_pred.append(_NONE)
        self.st_pred[state] = self._intern(self._predict_items(key))
        return state

    def _intern_cset(self, nonterminals: frozenset[int]) -> int:
        cset = self._cset_ids.get(nonterminals)
        if cset is None:
            cset = len(self.cset_items)
            self._cset_ids[nonterminals] = cset
            self.cset_items.append(nonterminals)
        return cset

    def _items_by_next(self, state: int) -> dict[int, list[int]]:
        table = self._by_next[state]
        if table is None:
            table = {}
            item_next = self.item_next
            for item in self.st_items[state]:
                nxt = item_next[item]
                if nxt != _NONE:
                    table.setdefault(nxt, []).append(item)
            self._by_next[state] = table
        return table

    def goto(self, state: int, symbol: int) -> int:
        """State reached from ``state`` over a terminal or scan class (memoised)."""
        table = self.st_goto[state]
        target = table.get(symbol)
        if target is None:
            if symbol < 0:
                members = self._class_members[-symbol - 1]
                advanced = [
                    i + 1 for member in members for i in self._items_by_next(state).get(member, ())
                ]
            else:
                advanced = [i + 1 for i in self._items_by_next(state).get(symbol, ())]
            target = self._intern(self._advance_nullable(advanced))
            table[symbol] = target
        return target

    def goto_complete(self, state: int, cset: int) -> int:
        """State reached from ``state`` over any nonterminal of a completed set (memoised)."""
        table = self.st_goto_complete[state]
        target = table.get(cset)
        if target is None:
            by_next = self._items_by_next(state)
            advanced = [i + 1 for nt in self.cset_items[cset] for i in by_next.get(nt, ())]
            target = self._intern(self._advance_nullable(advanced))
            table[cset] = target
        return target

    def union(self, a: int, b: int) -> int:
        if a == b:
            return a
        key = (a, b) if a < b else (b, a)
        result = self._union.get(key)
        if result is None:
            result = self._intern(self.st_items[a] | self.st_items[b])
            self._union[key] = result
        return result

    def union_many(self, states: frozenset[int]) -> int:
        result = self._union_many.get(states)
        if result is None:
            items: set[int] = set()
            for s in states:
                items |= self.st_items[s]
            result = self._intern(items)
            self._union_many[states] = result
        return result

    def fixpoint(self, group: int, predicted: int) -> int:
        """Close a group under completions against its origin's predictions.

        Items of ``predicted`` share the group's origin, so completing one of
        the group's nonterminals there extends the same group; repeat until
        nothing changes.  Memoised on the pair of states.
        """
        key = (group, predicted)
        result = self._fixpoint.get(key)
        if result is None:
            result = group
            st_complete = self.st_complete
            while True:
                cset = st_complete[result]
                if cset == _NONE:
                    break
                advanced = self.goto_complete(predicted, cset)
                if advanced == _NONE:
                    break
                merged = self.union(result, advanced)
                if merged == result:
                    break
                result = merged
            self._fixpoint[key] = result
        return result

    def scan_class(self, terminals: Iterable[int]) -> int:
        """Id to scan several terminals at once (a soft keyword is also a NAME)."""
        members = frozenset(terminals)
        if len(members) == 1:
            return next(iter(members))
        cls = self._classes.get(members)
        if cls is None:
            self._class_members.append(tuple(sorted(members)))
            cls = -len(self._class_members)
            self._classes[members] = cls
        return cls

    def scan_members(self, symbol: int) -> tuple[int, ...]:
        """The terminals a terminal or scan-class id stands for."""
        return self._class_members[-symbol - 1] if symbol < 0 else (symbol,)

    @property
    def n_states(self) -> int:
        return len(self.st_items)


class Chart:
    """One Earley chart: an immutable parse state after some input symbols.

    ``groups`` holds ``(origin chart, automaton state)`` pairs for items that
    began before this chart; ``pred`` is the state of items predicted here.
    """

    __slots__ = (
        "__weakref__",
        "_next",
        "_terminals",
        "accepting",
        "automaton",
        "groups",
        "pos",
        "pred",
    )

    def __init__(
        self,
        automaton: Automaton,
        pos: int,
        groups: tuple[tuple[Chart, int], ...],
        pred: int,
        accepting: bool,
    ):
        self.automaton = automaton
        self.pos = pos
        self.groups = groups
        self.pred = pred
        self.accepting = accepting
        # Successors are held weakly: a chart must not keep alive every chart
        # ever stepped from it, or memory would grow with the input length.
        self._next: dict[int, weakref.ref[Chart] | None] = {}
        self._terminals: frozenset[int] | None = None

    @classmethod
    def initial(cls, automaton: Automaton) -> Chart:
        return cls(automaton, 0, (), automaton.initial_pred, False)

    def step(self, symbol: int) -> Chart | None:
        """The chart after scanning ``symbol``, or None if the input dies here."""
        known = self._next.get(symbol, _UNKNOWN)
        if known is None:
            return None
        if known is not _UNKNOWN:
            chart: Chart | None = known()  # type: ignore[operator]
            if chart is not None:
                return chart
        content = self._successor(symbol)
        if content is None:
            self._next[symbol] = None
            return None
        result = Chart(self.automaton, self.pos + 1, *content)
        self._next[symbol] = weakref.ref(result)
        return result

    def step_shared(
        self, symbol: int, pos: int, table: dict[tuple[object, ...], Chart]
    ) -> Chart | None:
        """Like :meth:`step`, but hash-consed: equal charts become one object.

        ``pos`` must grow along every path and be equal for equal places in
        the input (the quotient uses offsets in the right context).  Two
        parses that reach the same items with the same origins at the same
        place then share the chart, and every chart after it, so a result
        memoised for one is found by the other.
        """
        content = self._successor(symbol)
        if content is None:
            return None
        key = (pos, *content)
        chart = table.get(key)
        if chart is None:
            chart = table[key] = Chart(self.automaton, pos, *content)
        return chart

    def _successor(self, symbol: int) -> tuple[tuple[tuple[Chart, int], ...], int, bool] | None:
        """Groups, predicted state and acceptance after scanning ``symbol``."""
        goto = self.automaton.goto
        pending: dict[Chart, int] = {}
        for origin, state in self.groups:
            target = goto(state, symbol)
            if target != _NONE:
                pending[origin] = target
        if self.pred != _NONE:
            target = goto(self.pred, symbol)
            if target != _NONE:
                pending[self] = target
        return self._complete(pending) if pending else None

    def _complete(
        self, pending: dict[Chart, int]
    ) -> tuple[tuple[tuple[Chart, int], ...], int, bool] | None:
        auto = self.automaton
        st_complete = auto.st_complete
        goto_complete = auto.goto_complete
        fixpoint = auto.fixpoint
        union = auto.union
        final: list[tuple[Chart, int]] = []
        while pending:
            origin = max(pending, key=_pos_of) if len(pending) > 1 else next(iter(pending))
            group = pending.pop(origin)
            if origin.pred != _NONE:
                group = fixpoint(group, origin.pred)
            final.append((origin, group))
            cset = st_complete[group]
            if cset != _NONE:
                for outer, state in origin.groups:
                    target = goto_complete(state, cset)
                    if target != _NONE:
                        previous = pending.get(outer)
                        pending[outer] = target if previous is None else union(previous, target)
        has_next = auto.st_has_next
        st_accept = auto.st_accept
        accepting = False
        groups: list[tuple[Chart, int]] = []
        preds: set[int] = set()
        st_pred = auto.st_pred
        for origin, group in final:
            if st_accept[group]:
                accepting = True
            if has_next[group]:
                groups.append((origin, group))
                if st_pred[group] != _NONE:
                    preds.add(st_pred[group])
        if not groups and not accepting:
            return None
        if len(preds) == 1:
            pred = preds.pop()
        elif preds:
            pred = auto.union_many(frozenset(preds))
        else:
            pred = _NONE
        return tuple(groups), pred, accepting

    def expected_terminals(self) -> frozenset[int]:
        """Terminals that can be scanned next (memoised)."""
        if self._terminals is None:
            auto = self.automaton
            terminals: set[int] = set()
            for _origin, state in self.groups:
                terminals |= auto.st_terminals[state]
            if self.pred != _NONE:
                terminals |= auto.st_terminals[self.pred]
            self._terminals = frozenset(terminals)
        return self._terminals

    def __repr__(self) -> str:
        return f"<Chart pos={self.pos} groups={len(self.groups)} accepting={self.accepting}>"
