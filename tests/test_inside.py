"""Context escape prevention (``Quotient(..., stay_inside=True)``, ``inside.py``).

Every example of the definition in ``inside.py`` and ``docs/architecture.md``
is checked here, against the unrestricted quotient and CPython's
``ast.parse`` (a middle that stays inside must still make a valid file).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from lexer import LexState
from quotient_parser.quotient import InsideState, Quotient, QuotientBuilder

Accepts = Callable[[str], bool]

#: (left, right, middle, stays inside?, what it escapes)
EXAMPLES = [
    ("x = f(", ")\n", "a, b", True, None),
    ("x = f(", ")\n", "a), g(b", False, "bracket"),
    ("x = f(", ")\n", "a)\ny = g(b", False, "bracket"),
    ("x = [1, ", "]\n", "2, 3", True, None),
    ("x = [1, ", "]\n", "2], [3", False, "bracket"),
    # R closes one bracket: the middle closes g( and stays in f(
    ("x = f(g(x", ")\n", ")", True, None),
    ("x = f(g(x", ")\n", "))\ny = (", False, "bracket"),
    ('x = f"{x', '}"\n', " + 1", True, None),
    ('x = f"{x', '}"\n', "} and {y", False, "bracket"),
    ("x = f'a", "b'\n", "{c}", True, None),
    ("x = f'a", "b'\n", "' + f'", False, "bracket"),
    ("x = 'ab", "cd'\n", "x", True, None),
    ("x = 'ab", "cd'\n", "x' + 'y", False, "string"),
    ("if x:\n    y = 1", "\nz = 2\n", "\n    w = 3", True, None),
    ("if x:\n    y = 1", "\nz = 2\n", "\nw = 3", False, "block"),
    ("if x:\n    y = 1", "\nz = 2\n", " + 1", True, None),
    # a block the middle opens may be closed by it
    ("def f():\n    y = 1", "\n    return y\n", "\n    if y:\n        y = 2", True, None),
    # the cursor at column 0 after a block is outside it
    ("if x:\n    y = 1\n", "z = 2\n", "w = 3\n", True, None),
    # the cursor in the block's indentation is inside it
    ("if x:\n    y = 1\n    ", "z = 2\n", "w = 3\nif w:\n    ", False, "block"),
    # a backslash continuation is no construct: the logical line may end
    ("x = 1 + \\\n", "2\ny = 3\n", "4\nz = 5 +", True, None),
    # R does not close the bracket: the middle must
    ("x = f(a", "\ny = 2\n", ")", True, None),
]


@pytest.mark.parametrize(("left", "right", "middle", "stays", "reason"), EXAMPLES)
def test_examples(
    left: str,
    right: str,
    middle: str,
    stays: bool,
    reason: str | None,
    target: tuple[int, int],
    ast_accepts: Accepts,
) -> None:
    q = Quotient(left, right, target, stay_inside=True)
    assert ast_accepts(left + middle + right), "the examples use valid files"
    free = q.free_initial.feed(middle)
    inside = q.initial.feed(middle)
    assert free.complete
    assert inside.complete == stays
    assert inside.viable == stays
    assert q.enclosure.escape(q.initial.state, middle) == reason
    assert not q.inside_empty(max_seconds=60)


def test_escaping_is_for_good_and_chunking_does_not_matter(target: tuple[int, int]) -> None:
    q = Quotient("x = f(", ")\n", target, stay_inside=True)
    middle = "a), g(b"
    rng = random.Random(0)
    for _ in range(10):
        state = q.initial
        assert isinstance(state, InsideState)
        cuts = sorted(rng.sample(range(1, len(middle)), 3))
        escaped = False
        for a, b in zip([0, *cuts], [*cuts, len(middle)]):
            state = state.feed(middle[a:b])
            escaped = escaped or state.escaped
            assert state.escaped == escaped
        assert state.escaped and not state.viable
        assert not state.feed("x").viable  # no way back


def test_dedent_pending_across_steps(target: tuple[int, int]) -> None:
    """A DEDENT is emitted with the first token of a line, a step after the line break."""
    q = Quotient("if x:\n    y = 1", "\nz = 2\n", target, stay_inside=True)
    state = q.initial.feed("\n")
    assert state.viable
    assert not state.feed("w").viable  # dedents to column 0
    assert state.feed("    w").viable


def test_off_by_default_and_the_fallback(target: tuple[int, int]) -> None:
    q = Quotient("x = f(", ")\n", target)
    assert not q.stay_inside and q.initial is q.free_initial
    assert q.initial.feed("a), g(b").complete
    builder = QuotientBuilder(target)
    inside = builder.build("x = f(", ")\n", stay_inside=True)
    assert inside.stay_inside and inside.initial is not inside.free_initial
    assert not inside.initial.feed("a), g(b").viable
    assert inside.free_initial.feed("a), g(b").complete


def test_enclosure_is_worked_out_with_the_build(target: tuple[int, int]) -> None:
    """Not by the first middle fed: that would land in a decoding step's parser time."""
    inside = Quotient("x = f(", ")\n", target, stay_inside=True)
    assert "enclosure" in vars(inside)
    assert inside.enclosure.depth == 1
    assert "enclosure" not in vars(Quotient("x = f(", ")\n", target))
    assert "enclosure" not in vars(Quotient("x = )", "\n", target, stay_inside=True))


def test_inside_empty_when_only_escapes_complete(target: tuple[int, int]) -> None:
    """R closes a bracket the cursor is in but needs a statement of its own first."""
    q = Quotient("x = f(", ") as y:\n    pass\n", target, stay_inside=True)
    assert not q.empty
    assert q.inside_empty(max_nodes=4000, max_seconds=60)
    found = q.free_initial.witness(max_nodes=4000, max_seconds=60)
    assert found.text is not None and q.free_initial.feed(found.text).complete


def test_witness_stays_inside(target: tuple[int, int], ast_accepts: Accepts) -> None:
    left, right = "x = f(a, ", ")\nprint(x)\n"
    q = Quotient(left, right, target, stay_inside=True)
    state = q.initial.feed("g(1, [2")
    found = state.witness(max_nodes=4000, max_seconds=5)
    assert found.text is not None and found.exact
    assert state.feed(found.text).complete
    assert ast_accepts(left + "g(1, [2" + found.text + right)


def test_lexer_enclosures() -> None:
    cases = {
        "f(": ("(",),
        'f(f"{(': ("(", 'f"', "{", "("),
        'x = [f"a{b:{c': ("[", 'f"', "{", "{"),
        "x = 1": (),
    }
    for text, expected in cases.items():
        state, _ = LexState.initial().feed(text)
        assert state.enclosures == expected, text
    state, _ = LexState.initial().feed("if x:\n    y = (1,\n")
    assert state.brackets == "(" and state.indent_levels == ((0, 0), (4, 4))
    assert state.at_line_start and state.last_char == "\n"
    other, _ = LexState.initial().feed("while y:\n    z = (2,\n")
    assert other.state_key() == state.state_key()


def test_tstring_fields_are_kept_open() -> None:
    """3.14's t-strings are enclosures like f-strings (judged by the recognizer alone:
    the oracle here is this interpreter)."""
    q = Quotient('x = t"{a', '}"\n', "3.14", stay_inside=True)
    assert q.initial.feed(" + 1").complete
    assert q.free_initial.feed("} and {y").complete
    assert not q.initial.feed("} and {y").viable
    assert q.enclosure.escape(q.initial.state, "} and {y") == "bracket"
    state, _ = LexState.initial(target="3.14").feed('x = [t"a{b')
    assert state.enclosures == ("[", 't"', "{")
