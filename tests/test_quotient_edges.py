"""Edge cases of the FIM quotient, one test per kind of cursor position.

Each case is a small valid file written with two markers, ``«`` and ``»``:
the text before ``«`` is the left context L, the text between the markers is
the true middle m and the text after ``»`` is the right context R.  For every
case:

* the file itself (markers removed) must be valid for this interpreter's
  ``ast.parse``: the case is well formed;
* the quotient of (L, R) must find every prefix of m viable, and its
  ``complete`` must agree with ``ast.parse`` of ``L + m[:i] + R`` for every
  prefix (so the true middle is complete at its end);
* for the wrong middles of the case, ``complete`` must agree with
  ``ast.parse`` of ``L + w + R``; a complete state must be viable; and at
  least one wrong middle must be rejected, so that rejection is tested.

Expectations of validity always come from ``ast.parse``, never from
hand-written booleans.  The target is the running interpreter's version,
except for the cases of 3.14 and 3.15 syntax at the end, whose expectations
are those versions' stored verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from stored_verdicts import stored_accepts

from quotient_parser.quotient import Quotient

Accepts = Callable[[str], bool]

OPEN, CLOSE = "«", "»"


def split(marked: str) -> tuple[str, str, str]:
    """(L, m, R) of a text marked ``L«m»R``."""
    assert marked.count(OPEN) == 1 and marked.count(CLOSE) == 1, marked
    left, rest = marked.split(OPEN)
    middle, right = rest.split(CLOSE)
    return left, middle, right


def check_cut(
    marked: str,
    wrong: Sequence[str],
    ast_accepts: Accepts,
    target: tuple[int, int],
) -> Quotient:
    left, middle, right = split(marked)
    assert ast_accepts(left + middle + right), "the edge case itself must be a valid file"
    q = Quotient(left, right, target=target)
    assert getattr(q, "empty", False) is False, f"the quotient claims to be empty (R={right!r})"
    state = q.initial
    for i in range(len(middle) + 1):
        if i:
            state = state.feed(middle[i - 1])
        assert state.viable, f"not viable after {middle[:i]!r} (L={left!r}, R={right!r})"
        expected = ast_accepts(left + middle[:i] + right)
        assert state.complete == expected, (
            f"complete is {state.complete} after {middle[:i]!r} but ast.parse "
            f"{'accepts' if expected else 'rejects'} (L={left!r}, R={right!r})"
        )
    assert state.complete
    rejected = 0
    for w in wrong:
        expected = ast_accepts(left + w + right)
        got = q.initial.feed(w)
        assert got.complete == expected, (
            f"wrong middle {w!r}: complete is {got.complete} but ast.parse "
            f"{'accepts' if expected else 'rejects'} (L={left!r}, R={right!r})"
        )
        if got.complete:
            assert got.viable, f"wrong middle {w!r} is complete but not viable"
        rejected += not expected
    assert rejected, "no wrong middle of this case is rejected by ast.parse"
    return q


# --------------------------------------------------------------------------- inside a symbol


def test_cursor_inside_an_identifier(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "total = compute_«total(items, scale)\nprint(tot»al)\n",
        ["", "(", "total(", " total", "x)\ny = (", "total(items)\nprint(", "9"],
        ast_accepts,
        target,
    )


@pytest.mark.parametrize(
    "marked",
    [
        "x = («a_rather_long_variable_name) + 1»\n",
        "value = «a_rather_long_na»me_continued\n",
        "«return_value_of_the_cal»l = 1\n",
        "«matched_values_from_th»e_list = 1\n",
        "x = «rb_is_not_a_string_prefix» + 'a'\n",
        "«变量变量变量变量变量变量变量变量» = 1\n",
        "f(«学费学费学费学费学费学费学费学费, x»)\n",
        "def f():\n    «retur»n 1\n",
    ],
)
def test_cursor_in_a_long_name(marked: str, ast_accepts: Accepts, target: tuple[int, int]) -> None:
    """A name typed past the length of any keyword: completeness is carried over from
    the state before each character (``language._renames``), and must still agree
    with ``ast.parse`` at every prefix."""
    middle = split(marked)[1]
    wrong = ["", "(", middle + "(", middle + "'", middle + " " + middle]
    check_cut(marked, wrong, ast_accepts, target)


def test_cursor_inside_a_keyword(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "for x in items:\n    con«tinue\nel»se:\n    pass\n",
        ["", "tinue\n", "tinue\nel", "tinue\n    el", "tinue\nwhile 1:\n    pass\nel"],
        ast_accepts,
        target,
    )


@pytest.mark.parametrize(
    "marked",
    [
        "x = 12«345.678e-»3 + y\n",
        "mask = 0x1«F_F»F & flags\n",
        "z = 1«0j * 2»j\n",
        "n = 1_0«00_0»00\n",
    ],
    ids=["float-exponent", "hex", "imaginary", "underscores"],
)
def test_cursor_inside_a_number(marked: str, ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(marked, ["", "_", "__", "e", ".", "x", "0x", "j", " 1"], ast_accepts, target)


STRING_CASES = {
    "single": "s = 'ab«c d' + 'e»f'\n",
    "double": 'd = {"key«": 1, "val»ue": 2}\n',
    "triple": 'def f():\n    doc = """first «line\nsecond» line\n"""\n    return doc\n',
    "triple-single": "doc = '''a«'' '»''\n",
    "raw": "p = r'\\d+«\\.x' + r'\\»w'\n",
    "raw-backslash-quote": "p = r'a\\«'b»'\n",
    "bytes": "b = b'\\x00«\\xff' + b'\\»n'\n",
    "escape": "e = 'a\\«n\\t\\x4»1'\n",
    "f-string": 'f = f"value {x!r:>10} and «{y + 1}» end"\n',
    "f-string-field": 'g = f"{comp«ute(a, b»)}"\n',
    "f-string-format-spec": "h = f'{x:{wid«th}.{pre»c}}'\n",
    "f-string-braces": "k = f'{{«literal}} {x}»'\n",
    "f-string-conversion": "c = f'{x!«r} {y!»s}'\n",
    "f-string-nested": "n = f'{f\"{x«}\"} {y»}'\n",
    "line-continuation-in-string": "if x:\n    s = 'a\\\n«b' + 'c\\\n»d'\n    y = s\n",
}


@pytest.mark.parametrize("marked", list(STRING_CASES.values()), ids=list(STRING_CASES))
def test_cursor_inside_a_string(marked: str, ast_accepts: Accepts, target: tuple[int, int]) -> None:
    middle = split(marked)[1]
    wrong = ["", "'", '"', "\n", "'''", '"""', "{", "}", "\\", middle + "'", middle[:-1] + "\n"]
    check_cut(marked, wrong, ast_accepts, target)


def test_cursor_inside_a_comment(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "x = 1  # a «comment\ny = »2\n",
        ["", "comment", "comment y = ", "comment\ny = (", "\n(", "\n    y = "],
        ast_accepts,
        target,
    )


def test_line_continuation(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "def f():\n    total = 1 + \\\n    2 «+ \\\n    3 * \\»\n    4\n    return total\n",
        ["", "+", "+ \\", "+ \\\n", "\\ ", "+ 3", "+ 3 \\\n\\"],
        ast_accepts,
        target,
    )


def test_cursor_right_after_a_backslash(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "while x:\n    x = [1,\\«\n 2] + \\»\n    [3]\n    x = x[1:]\n",
        ["", " ", "\n", "\n 2] +", "\n 2] + \\ ", "\\\n 2] + \\"],
        ast_accepts,
        target,
    )


# --------------------------------------------------------------------------- layout


def test_bracket_closed_by_the_right_context(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "def f():\n    data = {'k': [1, 2, «3], 'j': (4,\n        5»)}\n    return data\n",
        ["", "3]", "3], 'j': (4", "3], 'j': [4", "3)", "3], 'j': ", "3]}, (", ")"],
        ast_accepts,
        target,
    )


def test_bracket_closed_on_a_later_line_then_a_block_line(
    ast_accepts: Accepts, target: tuple[int, int]
) -> None:
    """R holds the rest of an open bracket over a line break, then a line of
    the enclosing block."""
    check_cut(
        "if x:\n    s = (0 «+ »1,\n)\n    t = 1\n",
        ["", ")", "+ 1)", "+ (", "+", "\n)\n", ",\n  2"],
        ast_accepts,
        target,
    )


def test_string_opened_by_the_middle_and_closed_by_the_right_context(
    ast_accepts: Accepts, target: tuple[int, int]
) -> None:
    """R holds the rest of a triple-quoted string over a line break, then a
    line of the enclosing block."""
    check_cut(
        "if x:\n    s = f(«'''a»\nb''')\n    t = 1\n",
        ["", "'''", "'''a'''", "'", "'''a\n'''\n", "a", "'''a\\"],
        ast_accepts,
        target,
    )


def test_indented_block_dedented_by_the_right_context(
    ast_accepts: Accepts, target: tuple[int, int]
) -> None:
    check_cut(
        "def f(x):\n    y = x + 1\n    if y:\n        «y -= 1\n    return y\n»z = f(1)\n",
        [
            "",
            "y -= 1\n",
            "y -= 1\n  return y\n",
            "y -= 1\n    return y",
            "y -= 1\n    return y\n  ",
            "pass\n      return y\n",
        ],
        ast_accepts,
        target,
    )


def test_block_opened_by_the_middle(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "import os\n«if os.sep:\n    x = 1\nelse:\n    »x = 2\n",
        ["", "if os.sep:\n", "if os.sep:\n    ", "if os.sep\n    ", "while 1:\n  "],
        ast_accepts,
        target,
    )


def test_last_line_without_a_newline(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut("x = 1\ny = x «+ 3 *» 2", ["", "+", "+ 3", " 3", "\n"], ast_accepts, target)


def test_cut_at_the_very_end_without_a_newline(
    ast_accepts: Accepts, target: tuple[int, int]
) -> None:
    check_cut(
        "if x:\n    y = [1, «2]»", ["", "2", "]", "2]\n", "2]]", "2]\n  z"], ast_accepts, target
    )


def test_empty_left_context(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "«import os\n»x = os.sep\n",
        ["", "import", "    import os\n", "import os", "import os\n    ", "(", "x ="],
        ast_accepts,
        target,
    )


def test_empty_right_context(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "import os\nx = os.«sep\nif x:\n    pass\n»",
        ["", "sep\nif x:\n", "sep\nif x:", "(", "sep\n  y", "sep\nif x:\n    pass\n  "],
        ast_accepts,
        target,
    )


def test_both_contexts_empty(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut("«x = 1\n»", ["", " x = 1", "x =", "(", "def", "\n    y"], ast_accepts, target)


def test_crlf_file(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "def f():\r\n    x = 1\r\n    «return x\r\n»y = f()\r\n",
        ["", "return x\r\n  ", "return x\r", "return x\r\n    y\r\n  ", "return (\r\n"],
        ast_accepts,
        target,
    )


def test_crlf_split_between_cr_and_lf(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "if a:\r\n    x = 1\r«\n    y = 2\r»\nz = 3\r\n",
        ["", "\n", "\n  y = 2\r", "\n    y = 2", "\r", "\n\r\n    y = (\r"],
        ast_accepts,
        target,
    )


def test_tabs_for_indentation(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "if x:\n\tif y:\n\t\t«pass\n\tz = 1\n\tif z:\n\t\t»w = 2\nv = 3\n",
        [
            "",
            "pass\n        z = 1\n",
            "pass\n\tz = 1\n    ",
            "pass\n\tz = 1\n\tif z:\n        ",
            "pass\n\tz = 1\n\tif z:\n\t",
            "pass\n \tz = 1\n\tif z:\n\t\t",
        ],
        ast_accepts,
        target,
    )


def test_cursor_inside_indentation(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "def f():\n  «  return 1\n\n»x = f()\n",
        ["", "return 1\n", "  return 1", "  return 1\n  ", "\n", "  return (1\n"],
        ast_accepts,
        target,
    )


def test_form_feed_in_indentation(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "if x:\n    y = 1\n\x0c«z = 2\n»\x0cw = 3\n",
        ["", "\x0c", "z = 2", "  z = 2\n", "z = (2\n", "    z = 2\n"],
        ast_accepts,
        target,
    )


def test_match_statement(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "matc«h command.split():\n    case [x, *rest]:\n »       pass\n    case _:\n        pass\n",
        ["", "h", "h x:\n", "h x:\n    case 1:\n", "h x:\n    case 1:\n ", "h (x:\n"],
        ast_accepts,
        target,
    )


def test_decorator_and_soft_keyword(ast_accepts: Accepts, target: tuple[int, int]) -> None:
    check_cut(
        "@decor«ate\ndef match(case):\n    match = case\n    ret»urn match\n",
        ["", "ate\n", "ate\nclass", "ate\ndef match(case):\n", "ate\ndef match(case):\n    ret"],
        ast_accepts,
        target,
    )


def test_many_middles_reaching_the_right_context_at_other_depths(
    ast_accepts: Accepts, target: tuple[int, int]
) -> None:
    """The right context's parse is memoised per line; middles that leave it
    under other indentation stacks (or in other statements) must not share
    answers.  Each middle is judged twice, in two orders."""
    marked = "class A:\n    def f(self):\n        «pass»\n        return 1\n    x = 2\ny = 3\n"
    check_cut(marked, ["", "if a:", "pass\n  "], ast_accepts, target)
    left, _, right = split(marked)
    middles = [
        "pass",
        "if a:",
        "if a:\n            pass",
        "while a:\n            b = 1\n        else:",
        "pass\n    def g(self):",
        "pass\n    def g(self):\n        pass",
        "pass\n  ",
        "pass\n    if b:",
        "pass\ndef h():",
        "pass\nclass B:\n    def h(self):",
        "x = (",
        "x = [1,\n",
        "return 0\n    ",
        "pass;",
        "pass\\",
    ]
    q = Quotient(left, right, target=target)
    for order in (middles, middles[::-1]):
        for m in order:
            expected = ast_accepts(left + m + right)
            assert q.initial.feed(m).complete == expected, m


# --------------------------------------------------------------------------- no middle fits


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("x = 1\n", "\ndef def\n"),
        ("", "\nreturn = 3\n"),
        ("import os\nif os:\n    ", "\nelse\n"),
    ],
    ids=["def-def", "keyword-target", "dangling-else"],
)
def test_right_context_that_can_never_be_completed(
    left: str, right: str, ast_accepts: Accepts, target: tuple[int, int]
) -> None:
    q = Quotient(left, right, target=target)
    middles = ["", "y = 2", "pass\n", "def f(): pass\n", "(", "#", "'''", "x = (", "\\", "if 1:"]
    for m in middles:
        assert not ast_accepts(left + m + right), f"{m!r} would fit: not an empty quotient"
        assert q.initial.feed(m).complete is False, f"{m!r} is complete in an empty quotient"
    empty = getattr(q, "empty", None)
    if empty is not None:
        assert empty is True


# --------------------------------------------------------------------------- today's syntax
#
# Cursors inside 3.14 and 3.15 constructs.  No interpreter of those versions
# runs the tests, so every expectation is the stored verdict of that
# version's own CPython (``stored_verdicts.py``; derived again by the slow
# test in ``test_stored_verdicts.py``).

#: (marked text, wrong middles, the targets it is checked for)
TODAY_CASES: dict[str, tuple[str, list[str], list[tuple[int, int]]]] = {
    "tstring-field": (
        'greeting = t"Hello {na«me!r:>{wid»th}}!"\nprint(greeting)\n',
        ["", "me! r:>{wid", "me!x:>{wid", "me}", "me!r}{wid", "me!r:>{wid}", "me=:{wid"],
        [(3, 14), (3, 15)],
    ),
    "tstring-spec": (
        'row = t"{name:<{wi«dth}} {total:>1»0.2f}"\n',
        ["", "dth}", "dth}} {total!r:>1", "dth}} {total!r:>1}", "dth}} {total!r :>1"],
        [(3, 14), (3, 15)],
    ),
    "except-comma": (
        "try:\n    run()\nexcept ValueError,« Type»Error:\n    pass\n",
        ["", " Key", " (Key", " Key as e,", " *Type", " KeyError, Type", ")"],
        [(3, 14), (3, 15)],
    ),
    "except-star-comma": (
        "try:\n    run()\nexcept* ValueError,« »TypeError:\n    pass\n",
        ["", " ", "  (", " A as e, ", " A, ", "*"],
        [(3, 14), (3, 15)],
    ),
    "after-lazy": (
        "lazy «import json»\nprint(json)\n",
        [
            "",
            "from __future__ import annotations",
            "from . import *",
            "= 1",
            "json",
            "def f(): pass",
        ],
        [(3, 15)],
    ),
    "lazy-from": (
        "lazy from «os import pa»th\n",
        ["", "__future__ import pa", ". import pa", "os.path import pa", "import pa"],
        [(3, 15)],
    ),
    "unpacking-comprehension": (
        "flat = [*ro«w for row in ma»trix]\n",
        ["", "w for row in *ma", "w, *ma", "w for row in ma]", "*w for row in ma"],
        [(3, 15)],
    ),
}


def _today_sources(marked: str, wrong: Sequence[str]) -> list[str]:
    left, middle, right = split(marked)
    prefixes = [left + middle[:i] + right for i in range(len(middle) + 1)]
    return prefixes + [left + w + right for w in wrong]


def oracle_sources() -> list[str]:
    """Every text whose verdict the cases below read (stored_verdicts.py stores them)."""
    return [s for marked, wrong, _ in TODAY_CASES.values() for s in _today_sources(marked, wrong)]


@pytest.mark.parametrize(
    ("name", "version"),
    [(name, v) for name, (_, _, versions) in TODAY_CASES.items() for v in versions],
    ids=lambda x: x if isinstance(x, str) else f"{x[0]}.{x[1]}",
)
def test_cursor_in_todays_syntax(name: str, version: tuple[int, int]) -> None:
    marked, wrong, _ = TODAY_CASES[name]
    check_cut(marked, wrong, lambda source: stored_accepts(source, version), version)


def test_todays_syntax_needs_todays_target() -> None:
    """The same cuts for 3.13 (3.14 for lazy imports): every file is invalid, and the
    quotient never calls a middle complete that CPython of that version rejects."""
    for marked, wrong, versions in TODAY_CASES.values():
        older = (3, versions[0][1] - 1)
        left, middle, right = split(marked)
        q = Quotient(left, right, target=older)
        for source_middle in [middle, *wrong]:
            expected = stored_accepts(left + source_middle + right, older)
            assert q.initial.feed(source_middle).complete == expected, (marked, source_middle)
        assert not stored_accepts(left + middle + right, older)
