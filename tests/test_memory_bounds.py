"""The parser's caches that grew with everything a server ever parsed are bounded.

* The Earley automata intern every item set they meet: past
  ``Recognizer.max_states`` states a new generation starts (forward and backward
  parsers alike), old states keep working, and quotient builders move over.
* The backward parses kept for their step memo are bounded by the charts they hold,
  not only by their number.

(``bench/memory_growth.py`` measures the server's resident memory over change
storms; these tests check the mechanisms with small bounds.)
"""

from __future__ import annotations

import gc
import itertools
import weakref
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotient_parser import heap, suffix
from quotient_parser.quotient import QuotientBuilder
from quotient_parser.recognizer import Recognizer

SOURCES = [
    "def f(x):\n    return [y for y in x if y]\n",
    "class A(B, metaclass=M):\n    x: int = 1\n    async def g(self): await h()\n",
    "with open(p) as f, open(q) as g:\n    data = {k: v for k, v in zip(f, g)}\n",
    "try:\n    x = a @ b ** -c\nexcept (E, F) as e:\n    raise G from e\nfinally:\n    del x\n",
    "match p:\n    case {'k': [1, *rest]} if rest:\n        pass\n"
    "    case Point(x=0):\n        pass\n",
    "lambda *a, b=1, **k: (yield from a) if b else not k\n",
]


@pytest.fixture
def small_automata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fresh automata (whatever earlier tests taught them), bounded a few dozen states
    past what they hold."""
    monkeypatch.setattr(Recognizer, "_cache", {})  # none of other tests' generations
    monkeypatch.setattr(Recognizer, "_asked", {})
    monkeypatch.setattr(Recognizer, "max_states", -1)  # the next Recognizer is a new one
    fresh = Recognizer("3.12").automaton.n_states
    suffix._reversed_automaton((3, 12))
    monkeypatch.setattr(Recognizer, "max_states", fresh + 30)
    yield


def test_a_new_generation_past_the_bound(small_automata: None) -> None:
    first = Recognizer("3.12")
    held = first.initial().feed("x = [")
    for source in SOURCES:
        first.initial().feed(source)
    assert first.automaton.n_states > Recognizer.max_states
    second = Recognizer("3.12")
    assert second is not first and second.automaton is not first.automaton
    assert Recognizer("3.12") is second  # until the new one fills up in turn
    # An old state goes on in its own generation, with its own answers.
    assert held.recognizer is first
    assert held.feed("1]\n").complete and not held.feed("1)\n").viable
    for source in SOURCES:
        assert second.recognize(source), source


def test_the_bound_holds_for_all_targets_together(small_automata: None) -> None:
    """The newer-syntax check feeds every target after the project's: their automata
    count together, and one no longer asked for is retired too."""
    versions = ["3.12", "3.13", "3.14", "3.15"]
    for version in versions:
        recognizer = Recognizer(version)
        for source in SOURCES[:3]:
            recognizer.initial().feed(source)
    idle = weakref.ref(recognizer.automaton)  # 3.15's, grown past its share
    del recognizer
    for _ in range(3):  # the project's target goes on; 3.15 is not asked for again
        for version in versions[:-1]:
            for source in SOURCES:
                Recognizer(version).initial().feed(source)
            total = sum(r.automaton.n_states for r in Recognizer._cache.values())
            # Past the bound: only the one asked for and the one asked for most, each
            # within the bound but for one source's growth (before: all four).
            assert total <= 2 * (Recognizer.max_states + 400), total
    gc.collect()
    assert idle() is None


def test_the_target_asked_for_most_outlives_the_others(
    small_automata: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build asks for the project's target; the newer-syntax check after it asks for
    the newer ones once each: those go first when all of them are over the bound."""
    target = Recognizer("3.12")
    target.initial().feed(SOURCES[0])
    monkeypatch.setattr(Recognizer, "max_states", target.automaton.n_states + 60)
    for source in SOURCES[1:]:
        assert Recognizer("3.12") is target  # a build
        for newer in ("3.13", "3.14"):  # the check
            Recognizer(newer).initial().feed(source)
    assert Recognizer("3.12") is target
    assert sum(r.automaton.n_states for r in Recognizer._cache.values()) <= (
        Recognizer.max_states + 400
    )


def test_quotient_builders_move_to_the_new_generation(small_automata: None) -> None:
    builder = QuotientBuilder("3.12")
    old = builder.recognizer
    quotient = builder.build("def f(x):\n    return (x +", ")\n")
    assert quotient.initial.feed(" 1").complete
    for source in SOURCES:
        old.initial().feed(source)
    quotient = builder.build("def f(x):\n    return (x +", ")\n")
    assert builder.recognizer is not old and builder.recognizer.version == old.version
    assert quotient.initial.feed(" 1").complete and not quotient.initial.feed(" 1 2").viable


def test_an_old_generation_is_freed_once_nothing_holds_it(small_automata: None) -> None:
    """No cache (yield tables, chart distances, finish analyses) keeps it alive."""
    builder = QuotientBuilder("3.12")
    quotient = builder.build("def f(x):\n    return (x +", ")\n")
    state = quotient.initial.feed(" 1")
    assert state.complete and state.distance() == 0
    assert quotient.initial.distance() > 0 and quotient.initial.witness().text is not None
    old = weakref.ref(builder.recognizer.automaton)
    for source in SOURCES:
        builder.recognizer.initial().feed(source)
    del quotient, state
    quotient = builder.build("def f(x):\n    return (x +", ")\n")
    assert quotient.initial.distance() > 0 and quotient.initial.witness().text is not None
    for _ in range(3):  # what dropped weak keys held may be cycles of their own
        gc.collect()
    assert old() is None


def test_the_backward_parser_has_generations(small_automata: None) -> None:
    automaton = suffix._reversed_automaton((3, 12))[0]
    for source in SOURCES:
        assert suffix.right_context_can_end_module(source, (3, 12))
    if automaton.n_states > Recognizer.max_states:
        assert suffix._reversed_automaton((3, 12))[0] is not automaton
    assert suffix.right_context_can_end_module(") + 1\n", (3, 12))
    assert not suffix.right_context_can_end_module("x = 1\ny = ) +\n", (3, 12))


def test_recent_backward_parses_are_bounded_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suffix, "MAX_RECENT_CHARTS", 200)
    long_right = "x = 1\n" * 100  # 400 symbols
    for k in range(4):
        assert suffix.right_context_can_end_module(f"y{k} = 2\n" + long_right, (3, 12))
        assert sum(map(len, suffix._RECENT_PARSES)) <= 200 + 200  # the newest may fill up
    assert len(suffix._RECENT_PARSES) <= 2


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees objects while the test runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_retired_generation_is_freed_without_the_collector(
    small_automata: None, no_collector: None
) -> None:
    """Retirement breaks the generation's one cycle (its initial state), so it is freed
    by reference counting as soon as the builder moves on, and the heap is trimmed once
    at the next ``Recognizer(target)``."""
    builder = QuotientBuilder("3.12")
    builder.warm(SOURCES[0])  # states at each line start, no quotient
    old = weakref.ref(builder.recognizer.automaton)
    for source in SOURCES:
        builder.recognizer.initial().feed(source)
    heap.trim_if_freed()  # whatever other tests left to trim
    builder.warm(SOURCES[1])  # moves to the new generation, dropping the old states
    assert old() is None
    assert heap.trim_if_freed()  # the freed generation asks for one trim
    assert not heap.trim_if_freed()
    assert builder.recognizer.recognize(SOURCES[1])


@pytest.mark.parametrize("stay_inside", [False, True])
def test_a_dropped_quotient_is_freed_without_the_collector(
    stay_inside: bool, no_collector: None
) -> None:
    """A quotient, its states, its finish analysis and its ``module_end`` sibling form
    no reference cycle: a cycle would wait for a full collection, rare on the engine's
    large heap."""
    builder = QuotientBuilder("3.12")
    quotient = builder.build("def f(x):\n    return g(", ")\n", stay_inside=stay_inside)
    state = quotient.initial.feed("x")
    assert state.complete and state.distance() == 0
    assert quotient.free_initial.feed("x").witness(max_nodes=50).text is not None
    assert quotient.module_end.initial.distance() > 0
    alive = [weakref.ref(o) for o in (quotient, state, quotient.finish, quotient.module_end)]
    del quotient, state
    assert [ref() for ref in alive] == [None] * len(alive)


def test_a_quotients_initial_states_are_made_again_when_dropped() -> None:
    """The quotient holds its initial states weakly: the same object while someone holds
    it, an equal one afterwards."""
    quotient = QuotientBuilder("3.12").build("x = (", ")\n", stay_inside=True)
    first = quotient.initial
    assert quotient.initial is first and quotient.free_initial is not first
    assert quotient.free_initial is quotient.free_initial
    seen = weakref.ref(first)
    del first
    gc.collect()
    assert seen() is None
    again = quotient.initial
    assert again.feed("1").complete and not again.feed("1)").viable


def test_a_retired_generation_answers_as_before(small_automata: None) -> None:
    """States held across the retirement keep their verdicts, and a holder of the old
    recognizer can still start from its initial state."""
    first = Recognizer("3.12")
    held = first.initial().feed("def f(x):\n    return (x +")
    for source in SOURCES:
        first.initial().feed(source)
    assert Recognizer("3.12") is not first  # retired
    assert held.feed(" 1)\n").complete and not held.feed(" 1]\n").viable
    again = first.initial()
    assert again.recognizer is first and again.chart is not None
    assert again.chart.automaton is first.automaton
    assert all(first.recognize(source) for source in SOURCES)
    assert not first.recognize("x = (\n")


@settings(max_examples=60, deadline=None)
@given(
    source=st.sampled_from(SOURCES),
    edits=st.lists(st.tuples(st.integers(0, 200), st.sampled_from("():[]x 1\n=,")), max_size=3),
    cuts=st.lists(st.integers(1, 200), max_size=5),
    retire_at=st.sets(st.integers(0, 5)),
)
def test_verdicts_are_unchanged_by_retirements(
    source: str, edits: list[tuple[int, str]], cuts: list[int], retire_at: set[int]
) -> None:
    """A text fed piece by piece while generations are retired between the pieces (the
    states fed on are the retired generation's) gets the verdicts it gets without."""
    for at, char in edits:
        source = source[:at] + char + source[at:]
    bounds = sorted({0, len(source), *(c for c in cuts if c < len(source))})
    pieces = [source[a:b] for a, b in itertools.pairwise(bounds)]
    saved = Recognizer._cache, Recognizer._asked, Recognizer.max_states
    Recognizer._cache, Recognizer._asked = {}, {}
    try:
        expected = []
        state = Recognizer("3.12").initial()
        for piece in pieces:
            state = state.feed(piece)
            expected.append((state.viable, state.complete))
        state = Recognizer("3.12").initial()
        for k, piece in enumerate(pieces):
            if k in retire_at:
                Recognizer.max_states = -1
                assert Recognizer("3.12") is not state.recognizer  # a new generation
                Recognizer.max_states = saved[2]
            state = state.feed(piece)
            assert (state.viable, state.complete) == expected[k]
        fresh = Recognizer("3.12").initial().feed(source)
        assert (fresh.viable, fresh.complete) == expected[-1]
    finally:
        Recognizer._cache, Recognizer._asked, Recognizer.max_states = saved


def test_a_dead_generation_is_taken_apart_in_pieces(small_automata: None) -> None:
    """Its tables are handed over when it dies, not freed at once, and emptied by the
    next ``Recognizer(target)`` (on the thread that parses)."""
    first = Recognizer("3.12")
    for source in SOURCES:
        first.initial().feed(source)
    goto = first.automaton.st_goto
    heap.trim_if_freed()
    assert Recognizer("3.12") is not first  # retired
    del first
    gc.collect()
    assert len(goto) > heap.PIECE  # handed over, not freed with the automaton
    Recognizer("3.12")
    assert goto == [] and not heap._dead_tables
