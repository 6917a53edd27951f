"""Template strings (PEP 750, 3.14+), the conversion rule, and typed lexer errors.

Acceptance of t-strings is held to CPython in ``test_grammar_versions.py``
and ``test_lexer_oracle.py`` (stored verdicts of 3.14 and 3.15); here the
symbol streams, the pending kinds and the error codes.
"""

from __future__ import annotations

import pytest

from lexer import LexError, LexErrorCode, LexState
from quotient_parser import Recognizer

S, M, E = "TSTRING_START", "TSTRING_MIDDLE", "TSTRING_END"


def pairs(text: str, target: str = "3.14") -> list[tuple[str, str]]:
    state, symbols = LexState.initial(target=target).feed(text)
    return [(k, t) for k, t, _ in symbols + state.finish()][:-2]  # drop NEWLINE, ENDMARKER


def error(text: str, target: str = "3.14") -> LexError:
    with pytest.raises(LexError) as info:
        state, _ = LexState.initial(target=target).feed(text)
        state.finish()
    return info.value


@pytest.mark.parametrize("prefix", ["t", "T", "rt", "tR", "Rt", "TR", "rT", "tr"])
def test_every_t_prefix_opens_a_template_string(prefix: str) -> None:
    for quote in ("'", '"', "'''", '"""'):
        opening = prefix + quote
        assert pairs(f"{opening}a{{x}}{quote}") == [
            (S, opening),
            (M, "a"),
            ("{", "{"),
            ("NAME", "x"),
            ("}", "}"),
            (E, quote),
        ]


def test_fields_conversions_and_nested_specs_are_tokenized_like_fstrings() -> None:
    assert pairs("t'{x=!r:>{w}.2f}'") == [
        (S, "t'"),
        ("{", "{"),
        ("NAME", "x"),
        ("=", "="),
        ("!", "!"),
        ("NAME", "r"),
        (":", ":"),
        (M, ">"),
        ("{", "{"),
        ("NAME", "w"),
        ("}", "}"),
        (M, ".2f"),
        ("}", "}"),
        (E, "'"),
    ]


def test_before_314_a_t_prefix_is_a_name() -> None:
    assert pairs("t'x'", "3.13") == [("NAME", "t"), ("STRING", "'x'")]
    assert pairs("bt'x'") == [("NAME", "bt"), ("STRING", "'x'")]


def test_pending_kinds_of_a_template_string() -> None:
    state, _ = LexState.initial(target="3.14").feed("x = t")
    assert state.pending_kinds() == frozenset({"NAME", "TSTRING_START", "try"})
    state, _ = LexState.initial(target="3.13").feed("x = t")
    assert state.pending_kinds() == frozenset({"NAME", "try"})
    state, _ = LexState.initial(target="3.14").feed("x = t'''a{x}''")
    assert state.pending_kinds() == frozenset({M, E})
    state, _ = LexState.initial(target="3.14").feed("x = t'{")
    assert state.pending_kinds() == frozenset({M, "{"})


def test_template_strings_concatenate_only_with_template_strings() -> None:
    rec = Recognizer("3.14")
    assert rec.recognize("x = t'a' T'b' rt'c'\n")
    for other in ("'b'", "b'b'", "f'b'", "rb'b'"):
        assert not rec.recognize(f"x = t'a' {other}\n"), other
        assert not rec.recognize(f"x = {other} t'a'\n"), other


@pytest.mark.parametrize("target", ["3.12", "3.13", "3.14", "3.15"])
@pytest.mark.parametrize(
    "text", ["f'{x! r}'", "f'{x!\tr}'", "f'{x:{y! r}}'", "t'{x! r}'", "f'''{x!\nr}'''"]
)
def test_the_conversion_name_must_follow_the_bang(target: str, text: str) -> None:
    if text.startswith("t") and target < "3.14":
        return
    err = error(text, target)
    assert err.code is LexErrorCode.FSTRING_SYNTAX
    assert "right after the exclamanation mark" in err.message


@pytest.mark.parametrize(
    ("text", "code", "bracket"),
    [
        ("x = )", LexErrorCode.UNMATCHED_BRACKET, ")"),
        ("x = (]", LexErrorCode.MISMATCHED_BRACKET, "]"),
        ("x = [1,\n", LexErrorCode.UNCLOSED_BRACKET, "["),
        ("x = " + "(" * 201, LexErrorCode.TOO_MANY_BRACKETS, "("),
        ("if x:\n    y\n  z\n", LexErrorCode.BAD_DEDENT, None),
        ("if x:\n\ty\n        z\n", LexErrorCode.TAB_ERROR, None),
        ("x = 'abc", LexErrorCode.UNTERMINATED_STRING, None),
        ("x = t'abc", LexErrorCode.UNTERMINATED_STRING, None),
        ("x = 0x", LexErrorCode.INVALID_NUMBER, None),
        ("x = '\\N{NOPE}'", LexErrorCode.INVALID_STRING, None),
        ("x = $", LexErrorCode.INVALID_CHARACTER, None),
        ("x = 1\x00", LexErrorCode.INVALID_CHARACTER, None),
        ("x = 1 \\ 2", LexErrorCode.BAD_CONTINUATION, None),
        ("x = t'}'", LexErrorCode.FSTRING_SYNTAX, None),
        ("x = f'{a:{b:{c:{d}}}}'", LexErrorCode.TOO_DEEP_FSTRING, None),
    ],
)
def test_errors_carry_a_code_and_the_bracket(
    text: str, code: LexErrorCode, bracket: str | None
) -> None:
    err = error(text)
    assert (err.code, err.bracket) == (code, bracket), err
