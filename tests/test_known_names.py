"""knownNames: the names bound at the cursor, the guard over a growing middle, and the
decoder refusing a middle that loads a name bound nowhere (with the real
Qwen2.5-Coder-0.5B where it is installed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.undefined_names import undefined_in_middle
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model import FimModel, ModelError
from lsp_server.model.catalog import find_model, model_path
from lsp_server.names import NameGuard, builtin_names, known_names
from lsp_server.settings import Settings

TARGET = "3.11"


def names_at(left: str, right: str = "\n", target: str = TARGET) -> frozenset[str]:
    known = known_names(left, right, target)
    assert known.disabled is None, known.disabled
    return known.names


def first_refusal(left: str, middle: str, right: str = "\n") -> str | None:
    """The prefix of ``middle`` at which the guard first says no (fed a character at a
    time, each prefix from the guard before it), "<end>" where only the end is refused,
    or None."""
    known = known_names(left, right, TARGET)
    assert known.disabled is None, known.disabled
    guard = NameGuard.start(known, right)
    for index, char in enumerate(middle):
        guard = guard.feed(char)
        if not guard.ok:
            return middle[: index + 1]
    return None if guard.ends_ok else "<end>"


# -- what is bound where ------------------------------------------------------------


def test_builtins_follow_the_target() -> None:
    assert "aiter" not in builtin_names("3.9") and "aiter" in builtin_names("3.10")
    assert "ExceptionGroup" in builtin_names("3.11")
    assert "PythonFinalizationError" in builtin_names("3.13")
    assert {"print", "len", "__name__", "__file__"} <= builtin_names("3.8")


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("import os.path\n", "os"),
        ("import numpy as np\n", "np"),
        ("from collections import OrderedDict as OD, deque\n", "OD"),
        ("from collections import OrderedDict as OD, deque\n", "deque"),
        ("x = 1\n", "x"),
        ("a, (b, c) = 1, (2, 3)\n", "c"),
        ("[first, *rest] = range(3)\n", "rest"),
        ("total: int = 0\n", "total"),
        ("count = 0\ncount += 1\n", "count"),
        ("for i, item in enumerate(x):\n    pass\n", "item"),
        ("for i, (key, value) in x:\n    pass\n", "value"),
        ("with open(p) as fh, open(q) as (gh):\n    pass\n", "gh"),
        ("try:\n    pass\nexcept OSError as err:\n    pass\n", "err"),
        ("def helper(a, b=1, *args, c, **kw):\n    pass\n", "helper"),
        ("class Point:\n    pass\n", "Point"),
        ("if (n := 10) > 5:\n    pass\n", "n"),
        ("def f():\n    global G\n    G = 1\n", "G"),
        ("async def fetch():\n    pass\n", "fetch"),
        ("@decorator\ndef wrapped():\n    pass\n", "wrapped"),
    ],
)
def test_each_binding_form_binds_at_module_level(code: str, name: str) -> None:
    assert name in names_at(code)


def test_function_scope_parameters_and_locals_are_visible_inside_only() -> None:
    code = "def f(a, *args, key=None, **kw):\n    local = 1\n    "
    inside = names_at(code, "\nz = 2\n")
    assert {"a", "args", "key", "kw", "local", "f", "z"} <= inside
    outside = names_at(code + "return local\n\nx = ", "\n")
    assert "local" not in outside and "a" not in outside and "f" in outside


def test_class_names_are_visible_in_the_class_body_not_in_its_methods() -> None:
    head = "class C:\n    limit = 3\n\n    def m(self, x):\n        "
    method = names_at(head, "\n")
    assert "self" in method and "x" in method and "limit" not in method
    body = names_at("class C:\n    limit = 3\n    other = ", "\n")
    assert "limit" in body


def test_an_indentation_only_cursor_line_sees_every_scope_it_may_still_be_in() -> None:
    code = "class C:\n    attr = 1\n    def m(self):\n        y = 2\n"
    names = names_at(code, "\n")  # column 0: module, class body or method, as indented
    assert {"attr", "self", "y", "C"} <= names


def test_names_bound_later_in_the_right_context_count() -> None:
    names = names_at("def main():\n    return ", "\n\n\ndef helper():\n    pass\n\nLIMIT = 3\n")
    assert {"helper", "LIMIT"} <= names
    # bound later in a sibling function: not visible
    assert "hidden" not in names_at("def f():\n    ", "\n\ndef g():\n    hidden = 1\n")


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("from os.path import *\n", "star import"),
        ("exec('x = 1')\n", "exec"),
        ("y = eval('1')\n", "eval"),
        ("globals()['x'] = 1\n", "globals()"),
        ("vars().update(x=1)\n", "globals()"),
        ("def __getattr__(name):\n    pass\n", "__getattr__"),
        ("x = 1\ndel x\n", "del x"),
    ],
)
def test_dynamic_features_switch_the_check_off(code: str, why: str) -> None:
    disabled = known_names("", code, TARGET).disabled
    assert disabled is not None and why in disabled


def test_del_of_a_local_and_attribute_lookalikes_leave_it_on() -> None:
    assert known_names("def f():\n    x = 1\n    del x\n", "", TARGET).disabled is None
    assert known_names("obj.eval(1)\nself.exec = 2\nvars(obj)\n", "", TARGET).disabled is None


def test_project_text_adds_its_module_level_names() -> None:
    known = known_names("x = ", "\n", TARGET, extra="def shared():\n    inner = 1\n")
    assert "shared" in known.names and "inner" not in known.names


# -- the guard over a growing middle ---------------------------------------------------


@pytest.mark.parametrize(
    ("left", "middle"),
    [
        ("import os\nx = ", "os.path.join('a', 'b')"),
        ("x = ", "[y * 2 for y in range(3) if y]"),
        ("x = ", "{k: v for k, v in {}.items()}"),
        ("x = ", "sum(v for v in range(3))"),
        ("x = ", "[[a for a in b] for b in [[1]]]"),
        ("x = ", "sorted([3, 1], key=lambda v: -v)"),
        ("def f():\n    ", "y = 3\n    return y"),
        ("def f():\n    ", "a, b = 1, 2\n    return a + b"),
        ("def f():\n    ", "total: int = 0\n    return total"),
        ("def f():\n    ", "print(sep='', end='')"),
        ("def f(s):\n    ", "if (m := len(s)) > 2:\n        return m"),
        ("def f(xs):\n    ", "for i, x in enumerate(xs):\n        print(i, x)"),
        ("def f(p):\n    ", "with open(p) as fh:\n        return fh.read()"),
        ("def f():\n    try:\n        pass\n    ", "except ValueError as e:\n        raise e"),
        ("def f():\n    ", "import json\n    return json.dumps(1)"),
        ("def f(p):\n    ", "with open(p) as fh, open(fh.name) as gh:\n        return gh"),
        (
            "def f():\n    ",
            "def inner(a):\n        return a + later()\n    def later():\n        return 1",
        ),
        ("s = 'a'\nt = ", "f'{s!r} {len(s)} undefined words'"),
        ("s = 'a'\nt = ", "'undefined' # undefined too"),
        ("x = 1\n", "del x"),
        ("def f(obj):\n    ", "return obj.undefined_attribute"),
        ("", "class A:\n    size = 1\n    twice = size * 2"),
        ("def f(x):\n    match x:\n        ", "case [a, b]:\n            return a + b"),
        ("items = [", "i * 2 for i in range(3)"),
    ],
)
def test_correct_middles_are_never_refused(left: str, middle: str) -> None:
    assert first_refusal(left, middle) is None


@pytest.mark.parametrize(
    ("left", "middle", "refused_at"),
    [
        # after '=', 'np' may still be a chained target: refused where '.' makes it a load
        ("x = ", "np.array(1)", "np."),
        ("x = 2 * ", "np.array(1)", "np"),  # no known name begins with 'np' ('n': 'not')
        ("import math\ny = 1 + ", "mth.pi", "mt"),
        ("def f():\n    ", "numpy.zeros(3)", "numpy."),
        ("def f():\n    ", "undefined_call()", "undefined_call("),
        ("x = ", "[z for y in range(3)]", "[z for y in range(3)]"),
        ("x = ", "print(missing)", "print(missing)"),
        (
            "class C:\n    limit = 3\n    def m(self):\n        ",
            "return self.x + limit",
            "return self.x + lim",
        ),
        ("def f():\n    ", "y = y + 1", "y = y +"),
        ("s = 'a'\nt = ", "f'{s} {nope}'", "f'{s} {nope}"),
        ("def f():\n    ", "def g():\n        return nothere()\n", "<end>"),
    ],
)
def test_a_load_of_a_name_bound_nowhere_is_refused_where_it_completes(
    left: str, middle: str, refused_at: str
) -> None:
    assert first_refusal(left, middle) == refused_at


def test_a_name_joined_with_the_right_context_is_judged_at_the_end() -> None:
    assert first_refusal("x = [fo", "o", "(1)]\n") == "<end>"
    assert first_refusal("x = fo", "o", "(1)\n") == "o"  # refused sooner: see below
    assert first_refusal("x = (fo", "o", ")\n") == "<end>"  # the end of an element: R's ')'
    assert first_refusal("x = (fo", "o", " for foo in [1])\n") is None
    assert first_refusal("def foo():\n    pass\nx = fo", "o", "(1)\n") is None
    # the comprehension's target comes from R
    assert first_refusal("x = [", "i * 2", " for i in range(3)]\n") is None


def test_forks_do_not_share_state() -> None:
    known = known_names("import os\nx = ", "\n", TARGET)
    start = NameGuard.start(known, "\n")
    good, bad = start.feed("os."), start.feed("ox.")
    assert good.ok and not bad.ok
    assert start.feed("os").ok and good.feed("path").ends_ok
    assert not bad.feed("path").ends_ok


def test_a_prefix_no_known_name_begins_is_refused_at_a_plain_load() -> None:
    known = known_names("import math\nvalue = 2 * ", "\n", TARGET)
    guard = NameGuard.start(known, "\n")
    assert guard.feed("ma").ok  # math
    assert not guard.feed("zq").ok  # nothing begins with it
    # where a target may stand, a new name is fine
    known = known_names("def f():\n    ", "\n", TARGET)
    assert NameGuard.start(known, "\n").feed("zq").ok


def test_a_keyword_arguments_value_is_a_plain_load() -> None:
    # in brackets '=' is a keyword argument's or a default's, never a chained target,
    # so a value no known name begins is refused before the model spells it out
    # (hypothesis' datetime.py: ``dst=dst_tz_local_time_zone_...`` to the budget's end)
    code = "import datetime\ndef f(value, tz):\n    return value.replace("
    assert first_refusal(code, "tzinfo=tz, dst=dst_tz_local)") == "tzinfo=tz, dst=ds"
    assert first_refusal(code, "tzinfo=tz, dst=datetime.UTC)") is None
    assert first_refusal(code, "tzinfo=tz, fold=value)") is None
    # a default, and a keyword before any comma, are loads too
    assert first_refusal("def g(", "a=zqx): pass") == "a=zq"
    assert first_refusal("print(", "sep=zqx)") == "sep=zq"
    # a generator argument still binds its element later
    assert first_refusal("print(", "x for x in [1])") is None


def test_a_name_the_user_began_before_the_cursor_is_refused_once_nothing_known_begins_it() -> None:
    # the cursor inside a word: what the middle adds to it must lead to a known name,
    # even in a bracket (where a new name could otherwise be a comprehension's target)
    # and after '=' (where it could otherwise be a chained assignment's)
    code = "def _get_annotation_arg(k, t):\n    pass\n"
    assert first_refusal(code + "x = _get_annota", "tion_arg(1, 2)") is None
    assert first_refusal(code + "x = _get_annota", "ble(1)") == "b"
    assert first_refusal(code + "x = _get_annota", "tion_a = 1") == "tion_a "
    assert first_refusal("kind = 1\nok = (kind is bytes\n    or isi", "nstance(kind, str))") is None
    assert first_refusal("kind = 1\nok = (kind is bytes\n    or isi", "nt(kind))") == "nt"
    # a name the middle starts itself may still be a chained assignment's target
    assert first_refusal("x = ", "width = 0") is None
    # and a comprehension's element the user began is judged when its 'for' comes
    assert first_refusal("xs = [1]\nys = [ite", "m for item in xs]") is None


def test_blanks_after_an_unknown_load_do_not_put_its_refusal_off() -> None:
    # HumanEval/127: 'l >' refused, the model went on with ' \' and a new line
    assert first_refusal("def f(a):\n    if ", "l \\\n") == "l \\"
    assert first_refusal("def f(a):\n    if ", "l  > 0:") == "l  "
    assert first_refusal("def f(a):\n    if ", "n := len(a):\n        pass") is None
    assert first_refusal("def f(a):\n    return [", "y := 1, y]") is None


def test_the_setting_is_on_by_default_and_can_be_switched_off() -> None:
    assert Settings().known_names is True and DecodeOptions().known_names is True
    settings, problems = Settings().merged({"knownNames": False})
    assert problems == [] and settings.known_names is False


# -- decoding with a real model ------------------------------------------------------

NAME = "qwen2.5-coder-0.5b"
#: ``np`` is loaded by the code after the cursor but imported nowhere: the model writes
#: ``np.array(values)`` for the middle.
TEMPTING = (
    "import math\n\n\ndef normalize(values):\n    arr = ",
    "\n    return (arr - np.mean(arr)) / np.std(arr)\n",
)


@pytest.fixture(scope="module")
def qwen() -> Iterator[FimModel]:
    entry = find_model(NAME)
    assert entry is not None
    try:
        path: Path = model_path(entry, show_progress=False)
    except ModelError as exc:
        pytest.skip(f"{NAME} is not installed: {exc}")
    with FimModel(path, n_ctx=2048, n_threads=1) as model:
        yield model


def test_the_decoder_refuses_an_unknown_name_the_model_wants(qwen: FimModel) -> None:
    left, right = TEMPTING
    options = DecodeOptions(max_tokens=24, single_line=True)
    free = generate(
        qwen, left, right, DecodeOptions(max_tokens=24, known_names=False), target=TARGET
    )
    assert "np." in free.middle  # the temptation is real
    guarded = generate(qwen, left, right, options, target=TARGET)
    assert guarded.complete and guarded.middle.strip() and guarded.names_off is None
    assert "np." not in guarded.middle
    # pyflakes, not the guard, judges the result: no name the middle loads is unbound
    assert undefined_in_middle(left, guarded.middle, right) == []
    assert undefined_in_middle(left, free.middle, right) == ["np"]


def test_a_file_with_a_star_import_is_not_checked(qwen: FimModel) -> None:
    left, right = TEMPTING
    left = "from os.path import *\n" + left
    r = generate(qwen, left, right, DecodeOptions(max_tokens=24), target=TARGET)
    assert r.names_off == "star import"
    assert "np." in r.middle


def test_a_middle_that_leaves_a_method_for_its_class_body_sees_the_class_names() -> None:
    left = "class C:\n    def get(self):\n        return 1\n    "
    assert first_refusal(left, "alias = get\n    other = alias") is None
    deeper = "class C:\n    def get(self):\n        x = 1\n        "
    assert first_refusal(deeper, "return x\n    alias = get") is None
    assert first_refusal(deeper, "return get") == "<end>"  # 'get' may become 'getattr'
    assert first_refusal(deeper, "return alias") == "return ali"  # 'al': 'all'?
    # a blank line right after a method's header: the body's first line is no class body
    header = "class C:\n    k = 1\n    def m(self):\n        "
    assert first_refusal(header, "return k") == "return k"  # no known name begins with k


# -- pyflakes as the reference: the guard refuses where F821 points into the middle ----


def agrees_with_pyflakes(left: str, middle: str, right: str) -> tuple[bool, bool]:
    """(the guard refuses ``middle``, pyflakes finds an undefined name in it)."""
    undefined = undefined_in_middle(left, middle, right)
    assert undefined is not None, "the completed file must parse"
    return first_refusal(left, middle, right) is not None, bool(undefined)


#: HumanEval/11's single-line task (``bench.usefulness``): a middle of indentation
#: ending in ``_``, which only the interactive interpreter binds.
XOR_LEFT = (
    "def string_xor(a: str, b: str) -> str:\n    def xor(i, j):\n        if i == j:\n"
    "            return '0'\n        else:\n"
)
XOR_RIGHT = "\n    return ''.join(xor(x, y) for x, y in zip(a, b))\n"


@pytest.mark.parametrize(
    ("left", "middle", "right"),
    [
        (XOR_LEFT, "    " + "\t" * 31 + "_", XOR_RIGHT),
        ("def f(a):\n    ", "return _", "\n"),
        ("x = ", "_", "\n"),
    ],
)
def test_underscore_is_bound_only_where_the_file_binds_it(
    left: str, middle: str, right: str
) -> None:
    assert agrees_with_pyflakes(left, middle, right) == (True, True)


@pytest.mark.parametrize(
    ("left", "middle"),
    [
        ("for _ in range(3):\n    pass\nx = ", "_"),
        ("_ = str\nmsg = ", "_('hi')"),
        ("import gettext\n_ = gettext.gettext\nmsg = ", "_('hi')"),
        ("from gettext import gettext as _\nmsg = ", "_('hi')"),
        ("def f(xs):\n    ", "return [0 for _ in xs]"),
    ],
)
def test_underscore_bound_by_the_file_is_allowed(left: str, middle: str) -> None:
    assert agrees_with_pyflakes(left, middle, "\n") == (False, False)


#: HumanEval/51's random-span task: the cursor on a line of indentation after the
#: function's docstring; the middle dedents to module level and loads ``text`` there.
VOWELS_LEFT = 'def remove_vowels(text):\n    """Drop the vowels."""\n   '
VOWELS_RIGHT = ', "o", "u"]])\n'

#: HumanEval/127's multi-line task: the middle leaves the nested ``is_prime`` for the
#: outer function and tests ``l > r`` before R assigns them.
PRIME_LEFT = (
    "def intersection(interval1, interval2):\n    def is_prime(num):\n"
    "        if num == 1 or num == 0:\n            return False\n"
)
PRIME_RIGHT = (
    "        for i in range(2, num):\n            if num%i == 0:\n                return False\n"
    "        return True\n\n    l = max(interval1[0], interval2[0])\n"
    "    r = min(interval1[1], interval2[1])\n    length = r - l\n"
    '    if length > 0 and is_prime(length):\n        return "YES"\n    return "NO"\n'
)


@pytest.mark.parametrize(
    ("left", "middle", "right"),
    [
        (VOWELS_LEFT, "    # a comment\n([text[:", VOWELS_RIGHT),
        (PRIME_LEFT, '    if l > r:\n        return "NO"\n    if l == r:\n', PRIME_RIGHT),
        # out of a method, out of its class, to module level
        ("class C:\n    def m(self, size):\n        ", "pass\nprint(size)", "\n"),
        ("def f(a):\n    b = a\n", "print(b)", "\n"),
        ("def f(a):\n    if a:\n        return a\n    ", "return 2\nx = a", "\n"),
    ],
)
def test_a_middle_that_dedents_is_judged_in_the_scope_it_moved_to(
    left: str, middle: str, right: str
) -> None:
    assert agrees_with_pyflakes(left, middle, right) == (True, True)


@pytest.mark.parametrize(
    ("left", "middle", "right"),
    [
        ("def f(a):\n    b = a\n", "    return b", "\n"),
        ("def f(a):\n    b = a\n    ", "return b\n\nx = f", "\n"),
        ("def outer(n):\n    def inner():\n        ", "return n\n    return inner", "\n"),
        ("class C:\n    k = 1\n    def m(self):\n        ", "return 1\n    j = k", "\n"),
        ("def f(a):\n    ", "def g(b):\n        return b\n    return g(a)", "\n"),
        (PRIME_LEFT, "    l = 1\n    if l > 0:\n", PRIME_RIGHT),
    ],
)
def test_a_middle_that_dedents_keeps_what_the_scope_it_moved_to_binds(
    left: str, middle: str, right: str
) -> None:
    assert agrees_with_pyflakes(left, middle, right) == (False, False)


@pytest.mark.parametrize(
    ("left", "middle", "right"),
    [
        ("def f():\n    ", "print(x)", "\n    x = 1\n"),
        ("def f():\n    y = 1 + ", "x", "\n    x = 1\n"),
        ("def f(a):\n    if a:\n        ", "return later", "\n    else:\n        later = 1\n"),
        ("def f():\n    def g():\n        return 1\n    ", "return g() + x", "\n    x = 2\n"),
    ],
)
def test_a_local_read_before_its_assignment_is_refused(left: str, middle: str, right: str) -> None:
    assert agrees_with_pyflakes(left, middle, right) == (True, True)


@pytest.mark.parametrize(
    ("left", "middle", "right"),
    [
        ("def f():\n    x = 0\n    ", "print(x)", "\n    x = 1\n"),  # bound before too
        ("def f(xs):\n    for i, (a, b) in xs:\n        pass\n    ", "print(a)", "\n    a = 1\n"),
        ("def f():\n    global x\n    ", "print(x)", "\n    x = 1\n"),
        ("x = 0\ndef f():\n    ", "print(g)", "\n    g = 1\ndef g():\n    pass\n"),
        ("def f():\n    def g():\n        ", "return x", "\n    x = 1\n    return g\n"),
        ("def f():\n    ", "g = lambda: x", "\n    x = 1\n"),
        ("def f():\n    ", "g = sorted([], key=lambda v: x + v)", "\n    x = 1\n"),
        ("def f():\n    ", "def g():\n        return x\n", "    x = 1\n    return g\n"),
        ("def f(g):\n    y = ", "x", " if (x := g()) else 0\n"),
        ("def f():\n    ", "return helper()", "\n\n\ndef helper():\n    return 1\n"),
        # R read with the middle empty joins its first line to the cursor's: this
        # module-level def looks nested in f there
        ("def f(a):\n    b = a\n    ", "return helper(b)\n", "def helper(x):\n    return x\n"),
    ],
)
def test_a_local_bound_later_is_allowed_where_it_runs_later_or_is_bound_before(
    left: str, middle: str, right: str
) -> None:
    assert agrees_with_pyflakes(left, middle, right) == (False, False)


def test_a_local_bound_later_in_a_loop_around_the_cursor_counts_as_bound() -> None:
    # pyflakes reads straight through and reports it; the next iteration binds it
    left, right = "def f(xs):\n    for a in xs:\n        ", "\n        last = a\n"
    assert agrees_with_pyflakes(left, "print(last)", right) == (False, True)
    # after the loop ends in R, a later local is unbound at the cursor again
    right = "\n        pass\n    last = 1\n"
    assert agrees_with_pyflakes(left, "print(last)", right) == (True, True)


def test_a_name_shadowing_an_outer_binding_is_left_to_pyflakes_f823() -> None:
    # x is local to f (UnboundLocalError at run time), but bound in the module: the
    # check refuses only names bound nowhere visible (F821), never an outer binding
    assert agrees_with_pyflakes("x = 0\ndef f():\n    ", "print(x)", "\n    x = 1\n") == (
        False,
        False,
    )
