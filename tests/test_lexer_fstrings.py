"""f-strings: tokenized as Python 3.12 does for every target (PEP 701 symbols),
with the pre-3.12 restrictions enforced for older targets.

The symbol streams of the valid snippets are also compared with the
``tokenize`` module of each installed 3.12+ interpreter.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from bench.tokenize_check import find_interpreter, normalize_oracle, normalize_ours
from lexer import LexError, LexState

OLD = [(3, 8), (3, 9), (3, 10), (3, 11)]
NEW = [(3, 12), (3, 13)]


def pairs(text: str, target: tuple[int, int] = (3, 12)) -> list[tuple[str, str]]:
    state, symbols = LexState.initial(target=target).feed(text)
    return [(k, t) for k, t, _ in symbols + state.finish()][:-2]  # drop NEWLINE, ENDMARKER


def fails(text: str, target: tuple[int, int]) -> bool:
    try:
        state, _ = LexState.initial(target=target).feed(text)
        state.finish()
    except LexError:
        return True
    return False


S, M, E = "FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END"


def test_simple_field() -> None:
    assert pairs("f'a{x}b'") == [
        (S, "f'"),
        (M, "a"),
        ("{", "{"),
        ("NAME", "x"),
        ("}", "}"),
        (M, "b"),
        (E, "'"),
    ]


def test_doubled_braces_stay_in_the_middle() -> None:
    assert pairs("f'a{{b}}c{x}d'") == [
        (S, "f'"),
        (M, "a{{b}}c"),
        ("{", "{"),
        ("NAME", "x"),
        ("}", "}"),
        (M, "d"),
        (E, "'"),
    ]
    assert pairs("f'{{}}'") == [(S, "f'"), (M, "{{}}"), (E, "'")]


def test_conversion_debug_and_format_spec() -> None:
    assert pairs("f'{x=!r:^20}'") == [
        (S, "f'"),
        ("{", "{"),
        ("NAME", "x"),
        ("=", "="),
        ("!", "!"),
        ("NAME", "r"),
        (":", ":"),
        (M, "^20"),
        ("}", "}"),
        (E, "'"),
    ]
    assert pairs("f'{x:}'")[2:5] == [("NAME", "x"), (":", ":"), ("}", "}")]


def test_colon_only_starts_a_spec_at_the_top_of_the_field() -> None:
    assert pairs("f'{x:=5}'")[3:5] == [(":", ":"), (M, "=5")]
    assert pairs("f'{(x:=5)}'")[3:6] == [("NAME", "x"), (":=", ":="), ("NUMBER", "5")]
    assert pairs("f'{a[1:2]}'")[4:7] == [("NUMBER", "1"), (":", ":"), ("NUMBER", "2")]
    assert pairs("f'{x!=y}'")[3] == ("!=", "!=")
    assert pairs("f'{ {1: 2}[1] }'")[3:6] == [("NUMBER", "1"), (":", ":"), ("NUMBER", "2")]


def test_nested_replacement_fields_in_the_spec() -> None:
    assert pairs("f'{x:a{y}b}'") == [
        (S, "f'"),
        ("{", "{"),
        ("NAME", "x"),
        (":", ":"),
        (M, "a"),
        ("{", "{"),
        ("NAME", "y"),
        ("}", "}"),
        (M, "b"),
        ("}", "}"),
        (E, "'"),
    ]
    assert not fails("x = f'{x:{y:{z}}}'", (3, 12))
    assert fails("x = f'{x:{y:{z}}}'", (3, 11))  # nested too deeply before 3.12
    assert fails("x = f'{x:{y:{z:{w}}}}'", (3, 12))


def test_escapes_in_literal_parts() -> None:
    assert pairs("f'\\N{BULLET} {x}'")[1] == (M, "\\N{BULLET} ")
    assert pairs("rf'\\N{x}'")[1:4] == [(M, "\\N"), ("{", "{"), ("NAME", "x")]
    assert pairs("f'\\{x}'")[1:3] == [(M, "\\"), ("{", "{")]
    for target in OLD + NEW:
        assert fails("x = f'\\x1{y}'", target)
        assert fails("x = f'{x}\\N{NOPE}'", target)
        assert fails("x = f'{x:\\x1}'", target)
        assert not fails("x = f'{x:\\n}'", target)


def test_multiline_and_nested_quotes() -> None:
    text = "f'''a\n{x\n + y # c\n}\nb'''"
    assert pairs(text) == [
        (S, "f'''"),
        (M, "a\n"),
        ("{", "{"),
        ("NAME", "x"),
        ("+", "+"),
        ("NAME", "y"),
        ("}", "}"),
        (M, "\nb"),
        (E, "'''"),
    ]
    assert pairs("f'{f'{x}'}'") == [
        (S, "f'"),
        ("{", "{"),
        (S, "f'"),
        ("{", "{"),
        ("NAME", "x"),
        ("}", "}"),
        (E, "'"),
        ("}", "}"),
        (E, "'"),
    ]
    assert pairs("f'{x:{'a'}}'")[4:6] == [("{", "{"), ("STRING", "'a'")]


@pytest.mark.parametrize(
    "text",
    [
        "x = f'{'a'}'",  # the enclosing quote again
        "x = f'{f'{x}'}'",
        "x = f'''{'''a'''}'''",
        "x = f'{\"\\n\"}'",  # a backslash in the expression
        "x = f'{x\\\n}'",
        "x = f'''{x # c\n}'''",  # a comment
        "x = f'{x\n}'",  # a newline in a single-quoted f-string
        "x = f'{x:\n}'",
        "x = f'{x!r }'",  # the conversion must be followed by ':' or '}'
        "x = f'{x! r}'",
        "x = f'{x!z}'",
        "x = f'''{f'{x}'''}'''",  # ''' made of an inner end and a following string
    ],
)
def test_pre_312_restrictions(text: str) -> None:
    for target in OLD:
        assert fails(text, target), target


@pytest.mark.parametrize(
    "text",
    [
        "x = f'{'a'}'",
        "x = f'{f'{x}'}'",
        "x = f'''{'''a'''}'''",
        "x = f'{\"\\n\"}'",
        "x = f'{x\\\n}'",
        "x = f'''{x # c\n}'''",
        "x = f'{x\n}'",
        "x = f'{x:\n}'",
        "x = f'{x!r }'",
    ],
)
def test_allowed_from_312(text: str) -> None:
    for target in NEW:
        assert not fails(text, target), target


@pytest.mark.parametrize(
    "text",
    [
        "x = f'}'",
        "x = f'{'",
        "x = f'{x}}'",
        "x = f'{x:abc'",
        "x = f'{(x}'",
        "x = f'{x)}'",
        "x = f'abc",
        "x = f'abc\n'",
        "x = f'''abc",
        "x = f'{x:{y}}}'",
        "x = f'\\N{BULLET'",
    ],
)
def test_errors_in_every_version(text: str) -> None:
    for target in OLD + NEW:
        assert fails(text, target), target


def test_313_format_spec_after_a_nested_field() -> None:
    # After a nested field closes, 3.13.0 reads '{{' as an escape and a
    # newline as the end of the literal; 3.12 keeps reading the spec.
    assert fails("x = f'{x:{y}{{}'\n", (3, 12))
    assert not fails("x = f'{x:{y}{{}'\n", (3, 13))
    assert not fails("x = f'{x:{y}a\n}'\n", (3, 12))
    assert fails("x = f'{x:{y}a\n}'\n", (3, 13))


def test_nesting_limits() -> None:
    def nest(k: int) -> str:
        return "x" if k == 0 else "f'{" + nest(k - 1) + "}'"

    assert not fails(nest(149), (3, 12))
    assert fails(nest(150), (3, 12))
    assert fails(nest(2), (3, 11))  # same quotes
    assert not fails("f'''{f\"{f'{x}'}\"}'''", (3, 11))


def test_bang_outside_fstrings() -> None:
    assert fails("x = a ! b", (3, 12))
    assert pairs("f'{a[!x]}'")[4] == ("!", "!")  # the parser rejects it


def test_incremental_fstring() -> None:
    st = LexState.initial(target=(3, 12))
    out = []
    for ch in "f'ab{x!r:>{w}}c{{":
        st, syms = st.feed(ch)
        out += syms
    assert [k for k, _, _ in out] == [S, M, "{", "NAME", "!", "NAME", ":", M, "{", "NAME", "}", "}"]
    assert st.pending == "c{{"
    assert set(st.pending_kinds() or ()) == {M}
    st, syms = st.feed("'")
    assert syms == [(M, "c{{", 14), (E, "'", 17)]


VALID = [
    "f'a{x}b{y!r}c{z:>10}'",
    "f'{x=}' f'{x = }' f'{x=!s:^{w}}'",
    "f'{{}}{{{x}}}'",
    "f'{x:{y}.{z}f}' F'{a!a}' Rf'\\d{x}' fR'{x}\\{y}'",
    "f'''{\n  x  # comment\n  + 1\n}'''",
    "f'{f\"{f'{f\"{x}\"}'}\"}'",
    "f'{'nested'}{\"q\"}'",
    "f'\\N{BULLET}{x}\\N{DIGIT ONE}'",
    "f'{x:%Y-%m-%d %H:%M}'",
    "f'{lambda_:x}' f'{(lambda: 1)()}'",
    "f'{x!r:{y}{z}}'",
    'f\'{ {"a": 1}["a"] }\'',
    "f'{x:=^10}' f'{(y:=5)}'",
    "f'a\\\nb{x}'",
    "f''\nf''''''\nrf'\\\\'",
]


@pytest.mark.parametrize("version", NEW, ids=lambda v: f"{v[0]}.{v[1]}")
def test_valid_fstrings_match_tokenize(version: tuple[int, int]) -> None:
    python = find_interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} interpreter")
    script = (
        "import io, json, keyword, sys, tokenize\n"
        "KW = set(keyword.kwlist)\n"
        "def kind(t):\n"
        "    if t.type == tokenize.OP: return t.string\n"
        "    if t.type == tokenize.NAME: return t.string if t.string in KW else 'NAME'\n"
        "    return tokenize.tok_name[t.type]\n"
        "out = []\n"
        "for src in json.load(sys.stdin):\n"
        "    toks = tokenize.generate_tokens(io.StringIO(src).readline)\n"
        "    out.append([[kind(t), t.string] for t in toks\n"
        "                if t.type not in (tokenize.NL, tokenize.COMMENT)])\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", script],
        input=json.dumps([v + "\n" for v in VALID]),
        capture_output=True,
        text=True,
        check=True,
    )
    for src, tokens in zip(VALID, json.loads(proc.stdout)):
        text = src + "\n"
        state, symbols = LexState.initial(target=version).feed(text)
        ours = normalize_ours(symbols + state.finish(), text, True)
        assert ours == normalize_oracle(tokens), src
