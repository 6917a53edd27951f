"""The LR(0)-grouped Earley engine against a textbook Earley recognizer.

Random small grammars (with nullable and left/right recursive rules) and
random token strings: membership and prefix viability must agree with a
plain Earley recognizer written for clarity, not speed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from quotient_parser.earley import Automaton, Chart
from quotient_parser.grammar_tools import Grammar, GrammarError, load_grammar

TERMINALS = ["a", "b", "c"]


def _textbook_charts(grammar: Grammar, tokens: list[int]) -> list[set[tuple[int, int, int]]]:
    """Earley charts of (production, dot, origin) with Aycock-Horspool's nullable fix."""
    prods = grammar.productions
    by_lhs: dict[int, list[int]] = {}
    for p, (lhs, _) in enumerate(prods):
        by_lhs.setdefault(lhs, []).append(p)
    nullable: set[int] = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs in prods:
            if lhs not in nullable and all(s in nullable for s in rhs):
                nullable.add(lhs)
                changed = True
    charts: list[set[tuple[int, int, int]]] = [set() for _ in range(len(tokens) + 1)]
    charts[0].add((0, 0, 0))
    for i in range(len(tokens) + 1):
        agenda = list(charts[i])
        while agenda:
            p, dot, origin = agenda.pop()
            lhs, rhs = prods[p]
            new: list[tuple[int, int, int]] = []
            if dot < len(rhs):
                sym = rhs[dot]
                if grammar.is_terminal(sym):
                    if i < len(tokens) and tokens[i] == sym:
                        charts[i + 1].add((p, dot + 1, origin))
                else:
                    new.extend((q, 0, i) for q in by_lhs.get(sym, []))
                    if sym in nullable:
                        new.append((p, dot + 1, origin))
            else:
                for q, qdot, qorigin in list(charts[origin]):
                    qrhs = prods[q][1]
                    if qdot < len(qrhs) and qrhs[qdot] == lhs:
                        new.append((q, qdot + 1, qorigin))
            for item in new:
                if item not in charts[i]:
                    charts[i].add(item)
                    agenda.append(item)
    return charts


def _random_grammar(rng: random.Random, path: Path) -> Grammar | None:
    names = ["file", "x", "y", "z"]
    lines = ["file: x ENDMARKER"]
    for name in names[1:]:
        alternatives = []
        for _ in range(rng.randint(1, 3)):
            length = rng.randint(0, 3)
            seq = [rng.choice([f"'{t}'" for t in TERMINALS] + names[1:]) for _ in range(length)]
            alternatives.append(" ".join(seq))
        lines.append(f"{name}: " + " | ".join(alternatives))
    path.write_text("\n".join(lines) + "\n")
    try:
        return load_grammar((3, 13), str(path))
    except GrammarError:
        return None


@pytest.mark.parametrize("seed", range(60))
def test_engine_matches_textbook_earley(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    grammar = _random_grammar(rng, tmp_path / f"g{seed}.gram")
    if grammar is None:
        pytest.skip("random grammar derives nothing")
    auto = Automaton(grammar)
    ids = [grammar.terminal_ids[t] for t in TERMINALS if t in grammar.terminal_ids]
    end = grammar.terminal_ids["ENDMARKER"]
    for _ in range(40):
        tokens = [rng.choice(ids) for _ in range(rng.randint(0, 6))] if ids else []
        charts = _textbook_charts(grammar, [*tokens, end])
        chart: Chart | None = Chart.initial(auto)
        for i, tok in enumerate([*tokens, end]):
            assert chart is not None
            chart = chart.step(tok)
            alive = bool(charts[i + 1])
            assert (chart is not None) == alive, (tokens, i)
            if chart is None:
                break
        accepted = (0, 1, 0) in charts[-1]
        assert (chart is not None and chart.accepting) == accepted, tokens


def test_stepping_twice_returns_the_same_chart(tmp_path: Path) -> None:
    path = tmp_path / "g.gram"
    path.write_text("file: 'a'* ENDMARKER\n")
    grammar = load_grammar((3, 13), str(path))
    chart = Chart.initial(Automaton(grammar))
    a = grammar.terminal_ids["a"]
    assert chart.step(a) is chart.step(a)


def test_version_gates(tmp_path: Path) -> None:
    path = tmp_path / "g.gram"
    path.write_text("file: x ENDMARKER\nx: 'old' @<3.10 | 'new' @3.10 | 'mid' @3.9,<3.12\n")
    assert set(load_grammar((3, 8), str(path)).terminal_ids) == {"old", "ENDMARKER"}
    assert set(load_grammar((3, 10), str(path)).terminal_ids) == {"new", "mid", "ENDMARKER"}
    assert set(load_grammar((3, 13), str(path)).terminal_ids) == {"new", "ENDMARKER"}


def test_grammar_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.gram"
    path.write_text("file: x ENDMARKER\nx: 'a' (\n")
    with pytest.raises(GrammarError, match=r"bad.gram:2"):
        load_grammar((3, 13), str(path))
    path2 = tmp_path / "undefined.gram"
    path2.write_text("file: nothing ENDMARKER\n")
    with pytest.raises(GrammarError, match="undefined rule 'nothing'"):
        load_grammar((3, 13), str(path2))
