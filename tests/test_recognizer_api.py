"""The public contract of ``quotient_parser.Recognizer`` and its states.

Expected verdicts never come from hand-written booleans: they are what the
running interpreter's ``ast.parse`` says, and the recognizer targets that
interpreter's version.  The snippets cover the grammar broadly (statements,
expressions, soft keywords, f-strings, numbers, string prefixes and escapes,
indentation, line joining) with valid and invalid variants; several are valid
only for some Python versions, which is the point.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from quotient_parser import Recognizer

AstAccepts = Callable[[str | bytes], bool]

SNIPPETS: list[str] = [
    # ---- empty input, blank lines, comments, line endings
    "",
    "\n",
    "\n\n\n",
    "   \n",
    "   ",
    "# only a comment",
    "# only a comment\n",
    "   # indented comment\nx = 1\n",
    "x = 1",
    "x = 1  # comment, no newline at end",
    "x = 1\r\ny = 2\r\n",
    "if x:\r\n    pass\r\n",
    "x = 1\ry = 2\r",
    "\x0cx = 1\n",
    "if x:\n    pass\n\x0c\ny = 1\n",
    "x = 1\n   ",
    "x = 1;",
    "x = 1;;",
    ";",
    "pass; pass\n",
    # ---- simple statements
    "pass\n",
    "x = 1\n",
    "a = b = c\n",
    "a, b = c\n",
    "(a, b) = c\n",
    "[a, *b] = c\n",
    "a, *b, *c = d\n",
    "*a = b\n",
    "*a, = b\n",
    "x = *a, *b\n",
    "x = *a\n",
    "a: int = 1\n",
    "a.b: int\n",
    "(a): int\n",
    "a, b: int\n",
    "x += 1\n",
    "x, y += 1\n",
    "x @= y\n",
    "x //= 2; x **= 2; x >>= 1; x <<= 1; x ^= 1; x |= 1; x &= 1; x %= 2\n",
    "f() = 1\n",
    "x + 1 = 2\n",
    "True = 1\n",
    "None.x = 1\n",
    "__debug__ = 1\n",
    "del x, y[0], z.a\n",
    "del (x, y), [z]\n",
    "del f()\n",
    "del *a\n",
    "assert x, 'msg'\n",
    "raise\n",
    "raise X from Y\n",
    "return x\n",
    "return *a, *b\n",
    "yield\n",
    "x = yield\n",
    "x = yield from y\n",
    "await x\n",
    "global x, y\n",
    "nonlocal x\n",
    "break\n",
    "import a.b as c, d\n",
    "import a as b.c\n",
    "from . import x\n",
    "from .. a import (b, c,)\n",
    "from a import *\n",
    "from a import (*)\n",
    "from a import b,\n",
    "from __future__ import annotations\n",
    "print 'hello'\n",
    "exec 'code'\n",
    "x = `1`\n",
    "1 <> 2\n",
    "$x = 1\n",
    "x = 1 ? 2\n",
    "x := 1\n",
    "(x := 1)\n",
    "f(x := 1)\n",
    "x[a := 1]\n",
    # ---- expressions
    "a if b else c\n",
    "x = 1 if y\n",
    "lambda: a if b else c\n",
    "lambda x, /, y=1, *a, z, **k: 0\n",
    "lambda: (yield)\n",
    "lambda *: 0\n",
    "not a in b; a is not b; a not in b; a < b <= c != d\n",
    "-x ** -y; ~x; +x; x @ y; x // y; x % y\n",
    "a and b or not c\n",
    "...\n",
    "x = (1,)\n",
    "x = ()\n",
    "x = (,)\n",
    "x = [1,]\n",
    "x = {1,}\n",
    "x = {}\n",
    "x = {:}\n",
    "x = [*a, *b]\n",
    "x = {**a, 'b': 1}\n",
    "x = {'a': 1, **b}\n",
    "print(*a, **k)\n",
    "f(a=1, *b)\n",
    "f(**k, *a)\n",
    "f(a=1, b)\n",
    "f(True=1)\n",
    "f(x for x in y)\n",
    "f(x for x in y, 1)\n",
    "f(a)(b)[c].d\n",
    "x[1:2, ::3]\n",
    "x[:]\n",
    "x[*a]\n",
    "x[a, *b]\n",
    "[x for x in y if z if w]\n",
    "[x for x in y for z in x]\n",
    "{k: v for k, v in d}\n",
    "{x for x in y}\n",
    "(x for x in y)\n",
    "[x async for x in y]\n",
    "[x for x in *a, *b]\n",
    "x = 1 \\\n + 2\n",
    "x = 1 \\ 2\n",
    "x = (1,\n2)\n",
    "x = (1,  # comment\n\n    2)\n",
    "x = [\n]\n",
    "x = (\n",
    "x = )\n",
    "x = (]\n",
    "x = 1 +\n",
    "\\\n",
    "x = 1\n\\",
    # ---- compound statements
    "if x: pass\n",
    "if x: pass; pass\n",
    "if x:\n    pass\nelif y:\n    pass\nelse:\n    pass\n",
    "if x:\npass\n",
    "if x:\n",
    "if x:\n    pass\n  pass\n",
    "if x:\n    pass\n# comment at column 0\n    pass\n",
    "if True:\n    x = 1\n  y = 2\n",
    "  x = 1\n",
    "if x:\n\tpass\n        pass\n",
    "if x:\n        pass\n\tpass\n",
    "while 1:\n    break\nelse:\n    pass\n",
    "for x, in y: pass\n",
    "for (x, y) in z: pass\n",
    "for x in *a, *b: pass\n",
    "for x in y:\n    continue\n",
    "try:\n    pass\nexcept:\n    pass\n",
    "try:\n    pass\nfinally:\n    pass\n",
    "try:\n    pass\n",
    "try:\n    pass\nexcept E as e:\n    pass\nelse:\n    pass\nfinally:\n    pass\n",
    "try:\n    pass\nexcept (A, B):\n    pass\n",
    "try:\n    pass\nexcept A, B:\n    pass\n",
    "try:\n    pass\nexcept* E:\n    pass\n",
    "try:\n    pass\nexcept* E as e:\n    pass\nexcept* F:\n    pass\n",
    "try:\n    pass\nelse:\n    pass\n",
    "with a as b, c as d: pass\n",
    "with (a, b): pass\n",
    "with (a as b, c as d,): pass\n",
    "with (yield): pass\n",
    "def f(a, /, b, *, c): pass\n",
    "def f(*, a): pass\n",
    "def f(*): pass\n",
    "def f(a=1, b): pass\n",
    "def f(**k, a): pass\n",
    "def f(a, a): pass\n",
    "def f() -> int: pass\n",
    "def f(*args: *Ts): pass\n",
    "def f():\n    '''doc'''\n    return\n",
    "def f():\n    return [x for x in range(3)]\n",
    "def f(x):\n    global x\n",
    "async def f():\n    async with a as b: pass\n    async for x in y: pass\n    await z\n",
    "async def f():\n    return [x async for x in y]\n",
    "async = 1\n",
    "await = 1\n",
    "def async(): pass\n",
    "class A: pass\n",
    "class A(B, metaclass=M): pass\n",
    "class A(): x = 1\n",
    "class A:\n    def f(self):\n        return 1\n",
    "@dec\ndef f(): pass\n",
    "@dec.attr(1)[0]\nclass A: pass\n",
    "@x := y\ndef f(): pass\n",
    "@\ndef f(): pass\n",
    "@dec\nx = 1\n",
    # ---- soft keywords, type parameters
    "match = 1\n",
    "case = 1\n",
    "type = 1\n",
    "_ = 1\n",
    "print(match, case, type, _)\n",
    "match(x)\n",
    "match x:\n    case 1: pass\n",
    "match x:\n    case [1, *rest] if rest: pass\n    case {'k': v, **kw}: pass\n"
    "    case Point(x=0) | None: pass\n    case _: pass\n",
    "match x, y:\n    case a, b: pass\n",
    "match x:\n    case 1 + 2j: pass\n",
    "match x:\n    case -1: pass\n",
    "match x:\n    case a.b: pass\n",
    "match x:\n    case (1 as y) | 2: pass\n",
    "match x:\n    case str() | bytes(): pass\n",
    "match x:\n    pass\n",
    "match x:\n    case 1 + 1: pass\n",
    "match x:\n    case {**kw, 'a': 1}: pass\n",
    "match x:\n    case _: pass\n    case 1: pass\n",
    "class A[T]: pass\n",
    "def f[T: int, *Ts, **P](x: T) -> T: pass\n",
    "type X = int\n",
    "type X[T] = list[T]\n",
    "type X[T = int] = list[T]\n",
    "def f[T = int](): pass\n",
    # ---- numbers
    "1_000; 0b1010; 0o17; 0x_ff; 0XFF; 1e10; 1E-5; 1.; .5j; 1_0.0_1e1_0j\n",
    "0777\n",
    "00\n",
    "0_0\n",
    "09.5\n",
    "1__0\n",
    "1_\n",
    "0b2\n",
    "0x\n",
    "1e\n",
    "1.e5\n",
    "1if x else y\n",
    "x = 1if 1else 0\n",
    "0x1for x in y\n",
    "1.__class__\n",
    "1 .__class__\n",
    # ---- strings, bytes, prefixes, escapes
    "'a' 'b' \"c\"\n",
    "x = ('a'\n     'b')\n",
    "'''a\nb'''\n",
    "'''unterminated\n",
    "'unterminated\n",
    "x = 'a\\\nb'\n",
    "'\\N{BULLET}'\n",
    "'\\N{NOT A REAL NAME}'\n",
    "'\\x4'\n",
    "'\\u12'\n",
    "'\\q'\n",
    "b'\\xff'\n",
    "b'\u00e9'\n",
    "u'x'\n",
    "ur'x'\n",
    "Rb'x'; bR'x'; BR'x'; rb'\\d'\n",
    "ub''\n",
    "'a' b'b'\n",
    "b'a' 'b'\n",
    "r'\\'\n",
    "r'\\''\n",
    "'\\\n'\n",
    # ---- f-strings
    "f'{x}'\n",
    "f'{x!r:>{width}}'\n",
    "f'{x=}'\n",
    "f'{x = !r:^10}'\n",
    "f'{{literal}}'\n",
    "f'{}'\n",
    "f'{x!}'\n",
    "f'{x!z}'\n",
    "f'{lambda: 1}'\n",
    "f'{(lambda: 1)}'\n",
    "f'{x:=5}'\n",
    "f'{(x:=5)}'\n",
    "f'{f\"{x}\"}'\n",
    "f'{\"nested\"}'\n",
    "f'{'same quote'}'\n",
    "f'{x # comment\n}'\n",
    "f'{\"\\n\".join(y)}'\n",
    "f'{x:{\">\"}10}'\n",
    "rf'\\d{x}'; fr'{x}'; F'{x}'; Rf'{x}'\n",
    "f'''{\nx\n}'''\n",
    "f'{x}' f'{y}' 'z'\n",
    "b'' f''\n",
    "f'{x'\n",
    "f'}'\n",
    "f'{'\n",
    "f'{*a}'\n",
    "f'{*a,}'\n",
    "f'{yield}'\n",
    "f'{x:{y:{z}}}'\n",
    "f'{x:{y:{z:{w}}}}'\n",
    "f'{x!r=}'\n",
    "f'{ x = }'\n",
    "f'\\N{BULLET} {x}'\n",
    "f'{x}\\\n'\n",
    # ---- identifiers
    "\u00f1 = 1\n",
    "\u53d8\u91cf = 1\n",
    "x\u00b0 = 1\n",
    "\u2118 = 1\n",
    "x\u00b7y = 1\n",
]

SNIPPET_IDS = [f"{i:03d}:{s[:30]!r}" for i, s in enumerate(SNIPPETS)]


def _answers(rec: Recognizer, text: str) -> tuple[bool, bool]:
    state = rec.initial().feed(text)
    return state.viable, state.complete


def _chunkings(text: str, rng: random.Random) -> list[list[str]]:
    """Several ways of cutting ``text`` into consecutive chunks."""
    result = [[text], list(text)]
    for _ in range(3):
        cuts = sorted({rng.randint(0, len(text)) for _ in range(rng.randint(1, 6))})
        bounds = [0, *cuts, len(text)]
        result.append([text[a:b] for a, b in itertools.pairwise(bounds)])
    return result


# --------------------------------------------------------------------------- construction


def test_target_as_tuple_or_string_agree(target: tuple[int, int]) -> None:
    by_tuple = Recognizer(target=target)
    by_string = Recognizer(target=f"{target[0]}.{target[1]}")
    for text in SNIPPETS[:120]:
        assert _answers(by_tuple, text) == _answers(by_string, text), text


def test_initial_state(rec: Recognizer, ast_accepts: AstAccepts) -> None:
    state = rec.initial()
    assert state.viable is True
    assert state.complete is ast_accepts("")


def test_answers_are_bools(rec: Recognizer) -> None:
    for text in ("x = 1\n", "x = (", "x = )"):
        state = rec.initial().feed(text)
        assert isinstance(state.viable, bool)
        assert isinstance(state.complete, bool)
        assert isinstance(rec.recognize(text), bool)


# --------------------------------------------------------------------------- immutability


def test_feed_leaves_the_state_untouched(rec: Recognizer) -> None:
    state = rec.initial().feed("def f(x):\n    return (x")
    before = (state.viable, state.complete)
    assert before == (True, False)

    good1 = state.feed(" + 1)\n")
    dead = state.feed(" +)\n")
    good2 = state.feed(" + 1)\n")

    assert (good1.viable, good1.complete) == (good2.viable, good2.complete) == (True, True)
    assert (dead.viable, dead.complete) == (False, False)
    assert (state.viable, state.complete) == before
    # The state can still be continued after a failed branch, any number of times.
    assert state.feed(" + 2)\n").complete
    assert not state.feed(")\n    ) + 1\n").viable
    assert (state.viable, state.complete) == before


def test_feeding_twice_gives_equal_answers(rec: Recognizer) -> None:
    rng = random.Random(7)
    for text in SNIPPETS:
        cut = rng.randint(0, len(text))
        base = rec.initial().feed(text[:cut])
        first = base.feed(text[cut:])
        second = base.feed(text[cut:])
        assert (first.viable, first.complete) == (second.viable, second.complete), text


def test_initial_state_is_shared_safely(rec: Recognizer) -> None:
    before = (rec.initial().viable, rec.initial().complete)
    rec.initial().feed("x = (")
    rec.initial().feed("x = )")
    rec.recognize("def f(:")
    assert (rec.initial().viable, rec.initial().complete) == before
    assert rec.initial().feed("x = 1\n").complete


def test_feeding_nothing_changes_nothing(rec: Recognizer) -> None:
    for text in ("", "x = (", "x = 1\n", "x = )", "if x:\n"):
        state = rec.initial().feed(text)
        same = state.feed("")
        assert (same.viable, same.complete) == (state.viable, state.complete)


def test_state_attributes_are_read_only(rec: Recognizer) -> None:
    state = rec.initial().feed("x = 1\n")
    with pytest.raises((AttributeError, TypeError)):
        setattr(state, "viable", False)  # noqa: B010 - assignment must fail
    with pytest.raises((AttributeError, TypeError)):
        setattr(state, "complete", False)  # noqa: B010
    assert state.viable and state.complete


def test_many_branches_from_one_state(rec: Recognizer, ast_accepts: AstAccepts) -> None:
    prefix = "class A:\n    def f(self, x):\n        return "
    base = rec.initial().feed(prefix)
    endings = [
        "x\n",
        "(x\n",
        "x)\n",
        "[x for x in y]\n",
        "lambda: x\n",
        "\n",
        "x if y\n",
        "x if y else z\n",
        "yield\n",
        "*x, y\n",
        "not\n",
        "f'{x}'\n",
    ]
    states = [base.feed(e) for e in endings]
    for ending, state in zip(endings, states):
        assert state.complete == ast_accepts(prefix + ending), ending
        assert state.complete == rec.recognize(prefix + ending), ending


# --------------------------------------------------------------------------- membership


@pytest.mark.parametrize("text", SNIPPETS, ids=SNIPPET_IDS)
def test_recognize_agrees_with_ast_parse(
    rec: Recognizer, ast_accepts: AstAccepts, text: str
) -> None:
    assert rec.recognize(text) == ast_accepts(text)


@pytest.mark.parametrize("text", SNIPPETS, ids=SNIPPET_IDS)
def test_recognize_equals_complete_after_feed(rec: Recognizer, text: str) -> None:
    state = rec.initial().feed(text)
    assert rec.recognize(text) == state.complete
    if state.complete:
        assert state.viable


@pytest.mark.parametrize("text", SNIPPETS, ids=SNIPPET_IDS)
def test_every_prefix_of_a_valid_snippet_is_viable(
    rec: Recognizer, ast_accepts: AstAccepts, text: str
) -> None:
    if not ast_accepts(text):
        pytest.skip("not valid for this Python version")
    state = rec.initial()
    for i, ch in enumerate(text):
        assert state.viable, f"prefix {text[:i]!r} is not viable"
        state = state.feed(ch)
    assert state.viable and state.complete


# --------------------------------------------------------------------------- chunking


@pytest.mark.parametrize("text", SNIPPETS, ids=SNIPPET_IDS)
def test_chunked_feeding_equals_feeding_at_once(rec: Recognizer, text: str) -> None:
    expected = _answers(rec, text)
    rng = random.Random(text)
    for chunks in _chunkings(text, rng):
        state = rec.initial()
        seen_dead = False
        for chunk in chunks:
            state = state.feed(chunk)
            if seen_dead:
                assert not state.viable, f"viable again after a dead prefix: {chunks!r}"
            seen_dead = not state.viable
            if state.complete:
                assert state.viable
        assert (state.viable, state.complete) == expected, chunks
