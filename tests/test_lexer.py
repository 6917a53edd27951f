"""Unit tests of the incremental lexer (``lexer``): API, tokens, errors, chunking.

Version-dependent verdicts are checked against the CPython interpreters in
``tests/test_lexer_oracle.py``; f-strings are in ``tests/test_lexer_fstrings.py``.
"""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexer import LexError, LexState, Symbol
from lexer.version import SUPPORTED

ALL_TARGETS = [(v.major, v.minor) for v in SUPPORTED]


def lex(text: str, target: tuple[int, int] = (3, 13)) -> list[Symbol]:
    """All symbols of ``text`` fed at once."""
    state, symbols = LexState.initial(target=target).feed(text)
    return symbols + state.finish()


def pairs(text: str, target: tuple[int, int] = (3, 13)) -> list[tuple[str, str]]:
    """(kind, text) of every symbol but the final NEWLINE/DEDENT/ENDMARKER noise."""
    return [(k, t) for k, t, _ in lex(text, target) if k not in ("ENDMARKER",)]


def error(text: str, target: tuple[int, int] = (3, 13)) -> LexError | None:
    try:
        lex(text, target)
    except LexError as exc:
        return exc
    return None


def feed_chunks(
    chunks: list[str], target: tuple[int, int]
) -> tuple[list[Symbol], tuple[str, int] | None]:
    """Feed ``chunks`` one by one then finish: (symbols, (message, offset) of the error)."""
    state = LexState.initial(target=target)
    out: list[Symbol] = []
    try:
        for chunk in chunks:
            state, symbols = state.feed(chunk)
            out += symbols
        out += state.finish()
    except LexError as exc:
        return out, (exc.message, exc.offset)
    return out, None


# -- API -------------------------------------------------------------------------


def test_example_from_the_brief() -> None:
    st = LexState.initial(target=(3, 13))
    st2, symbols = st.feed("x = 1\nif")
    assert symbols == [("NAME", "x", 0), ("=", "=", 2), ("NUMBER", "1", 4), ("NEWLINE", "\n", 5)]
    assert st2.pending == "if"
    assert set(st2.pending_kinds() or ()) == {"NAME", "if"}
    assert st.pending == "" and st.pending_kinds() is None  # st is unchanged
    emitted = st2.emit_pending()
    assert emitted is not None
    after, syms = emitted
    assert syms == [("if", "if", 6)]
    assert after.pending == ""
    assert after.feed("x")[0].pending == "x"  # a new symbol starts after the emit
    assert st2.finish() == [("if", "if", 6), ("NEWLINE", "", 8), ("ENDMARKER", "", 8)]
    assert st2.feed("f")[0].pending == "iff"


def test_states_are_immutable_and_reusable() -> None:
    st, _ = LexState.initial().feed("def f(x):\n    return x")
    a = st.feed(" + 1\n")
    b = st.feed(" * 2\n")
    assert a[1][1] == ("+", "+", 23) and b[1][1] == ("*", "*", 23)
    assert st.pending == "x"
    with pytest.raises(AttributeError):
        st.foo = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        LexState()


def test_targets() -> None:
    assert LexState.initial(target="3.9").target == (3, 9)
    assert LexState.initial(target=[3, 12]).target == (3, 12)
    bad_targets: list[str | tuple[int, int]] = [(3, 7), (3, 16), (2, 7), "4.0"]
    for bad in bad_targets:
        with pytest.raises(ValueError):
            LexState.initial(target=bad)


def test_pending_kinds() -> None:
    def kinds(text: str, target: tuple[int, int] = (3, 13)) -> set[str] | None:
        found = LexState.initial(target=target).feed(text)[0].pending_kinds()
        return None if found is None else set(found)

    assert kinds("i") == {"NAME", "if", "import", "in", "is"}
    assert kinds("if") == {"NAME", "if"}
    assert kinds("x = r") == {"NAME", "raise", "return", "STRING", "BYTES", "FSTRING_START"}
    assert kinds("x = b") == {"NAME", "break", "BYTES"}
    assert kinds("x = F") == {"NAME", "False", "FSTRING_START"}
    assert kinds("x = rb'abc") == {"BYTES"}
    assert kinds("x = 'abc") == {"STRING"}
    assert kinds("x = ''") == {"STRING"}
    assert kinds("x = f'") == {"FSTRING_START"}
    assert kinds("x = 1") == {"NUMBER"}
    assert kinds("x = 1an") == {"NUMBER"}
    assert kinds("x .") == {".", "...", "NUMBER"}
    assert kinds("x ..") == {".", "..."}
    assert kinds("x -") == {"-", "-=", "->"}
    assert kinds("x *") == {"*", "**", "*=", "**="}
    assert kinds("x !") == {"!="}
    assert kinds("x = 1\r") == {"NEWLINE"}
    assert kinds("x = (1\r") is None
    assert kinds("x  ") is None  # blanks are committed
    assert kinds("x  # comment") is None
    assert kinds("if x:\n    ") is None  # indentation in progress
    assert kinds("x = \\") is None
    assert kinds("") is None
    assert kinds("x = f'a{") == {"FSTRING_MIDDLE"}  # 'a' comes first
    assert kinds("x = f'{a}{") == {"FSTRING_MIDDLE", "{"}
    assert kinds("x = f'{x!") == {"!", "!="}
    assert kinds("x = f'abc") == {"FSTRING_MIDDLE"}
    assert kinds("x = f'''{a}''") == {"FSTRING_MIDDLE", "FSTRING_END"}
    assert kinds("x = f'{x!r", (3, 11)) == {"!"}
    assert kinds("__peg_pars", (3, 9)) == {"NAME", "__peg_parser__"}
    assert kinds("__peg_pars", (3, 10)) == {"NAME"}


def test_emit_pending() -> None:
    def emit(text: str, target: tuple[int, int] = (3, 13)) -> list[Symbol] | None:
        r = LexState.initial(target=target).feed(text)[0].emit_pending()
        return None if r is None else r[1]

    assert emit("x = 1") == [("NUMBER", "1", 4)]
    assert emit("x ..") == [(".", ".", 2), (".", ".", 3)]
    assert emit("x = 'abc") is None  # not a complete symbol
    assert emit("x = 1e") is None  # 1e + separator is an error (3.10+) ...
    assert emit("x = 1e", (3, 9)) == [("NUMBER", "1", 4), ("NAME", "e", 5)]  # ... not before
    assert emit("x = 1_") is None
    assert emit("x  ") is None  # nothing pending
    assert emit("x = f'ab") == [("FSTRING_MIDDLE", "ab", 6)]
    assert emit("x = f''") == [("FSTRING_START", "f'", 4), ("FSTRING_END", "'", 6)]
    state, _syms = LexState.initial().feed("x = f'ab")[0].emit_pending() or (None, [])
    assert state is not None and state.feed("c'")[1] == [
        ("FSTRING_MIDDLE", "c", 8),
        ("FSTRING_END", "'", 9),
    ]


def test_positions_are_absolute_across_feeds() -> None:
    st = LexState.initial()
    out: list[Symbol] = []
    for chunk in ["de", "f f(", "x):\n  ", "  return x\n"]:
        st, syms = st.feed(chunk)
        out += syms
    out += st.finish()
    text = "def f(x):\n    return x\n"
    for _kind, sym_text, start in out:
        assert text[start : start + len(sym_text)] == sym_text
    assert [k for k, _, _ in out] == [
        *("def", "NAME", "(", "NAME", ")", ":", "NEWLINE", "INDENT", "return", "NAME"),
        *("NEWLINE", "DEDENT", "ENDMARKER"),
    ]
    indent = next(s for s in out if s[0] == "INDENT")
    assert indent == ("INDENT", "", 14)


def test_error_location() -> None:
    exc = error("x = 1\ny = $\n")
    assert exc is not None
    assert (exc.offset, exc.line, exc.column) == (10, 2, 5)
    assert "line 2, column 5" in str(exc)
    st = LexState.initial().feed("a\r\nb\rc\n")[0]
    with pytest.raises(LexError) as info:
        st.feed("  $")
    assert (info.value.line, info.value.column, info.value.offset) == (4, 3, 9)


# -- names and keywords ---------------------------------------------------------------


def test_keywords_and_soft_keywords() -> None:
    assert pairs("async await match case type _ print\n") == [
        ("async", "async"),
        ("await", "await"),
        *[("NAME", w) for w in ("match", "case", "type", "_", "print")],
        ("NEWLINE", "\n"),
    ]
    assert pairs("__peg_parser__", (3, 9))[0] == ("__peg_parser__", "__peg_parser__")
    assert pairs("__peg_parser__", (3, 10))[0] == ("NAME", "__peg_parser__")


@pytest.mark.parametrize("name", ["é", "ℌ", "à", "x\u0300", "名前", "_\U0001d49c", "ǅ"])
def test_non_ascii_identifiers(name: str) -> None:
    assert pairs(f"{name} = 1")[0] == ("NAME", name)


@pytest.mark.parametrize(
    "text", ["x = €", "x = a€b", "x = ①", "x = \u0300", "x = \xa0", "\ufeffx = 1", "x = a\u2028b"]
)
def test_invalid_identifier_characters(text: str) -> None:
    assert error(text) is not None


def test_invalid_identifier_is_reported_early() -> None:
    with pytest.raises(LexError, match="invalid character"):
        LexState.initial().feed("abc€")  # no continuation can fix it


# -- numbers ----------------------------------------------------------------------------

VALID_NUMBERS = [
    "0", "00", "0_0", "000_000", "7", "1_000", "1_0_0", "0x_ff", "0XFF", "0o17", "0O1_7",
    "0b1", "0B_1_0", "1.", "1.5", ".5", "1.e5", "1e5", "1E-5", "1e+5", "1e-5j", "1J", "0j",
    "09.5", "09e1", "09j", "0.", "0e0", "1_000.000_1e1_0j", ".5_5", "1_2.3_4e5_6",
]  # fmt: skip


@pytest.mark.parametrize("num", VALID_NUMBERS)
def test_valid_numbers(num: str) -> None:
    for target in ALL_TARGETS:
        assert pairs(f"x = {num}\n", target)[2] == ("NUMBER", num)


INVALID_NUMBERS = [
    "01", "09", "0_9", "1__0", "1_", "0_", "1_.5", "0x", "0xg", "0x_", "0x1_", "0o8", "0o",
    "0o1_", "0b2", "0b12", "0b1_", "1e+", "1e-x", "0or 1", "0b", "1.5_",
]  # fmt: skip


@pytest.mark.parametrize("num", INVALID_NUMBERS)
def test_invalid_numbers(num: str) -> None:
    for target in ALL_TARGETS:
        assert error(f"x = {num}\n", target) is not None, (num, target)


def test_number_followed_by_keyword() -> None:
    assert pairs("x = 1if y else 2\n")[2:4] == [("NUMBER", "1"), ("if", "if")]
    assert pairs("x = [1for y in z]\n")[3:5] == [("NUMBER", "1"), ("for", "for")]
    assert pairs("x = 1 if 1else 2\n")[4:6] == [("NUMBER", "1"), ("else", "else")]
    assert pairs("x = 0xffor 1\n")[2:4] == [("NUMBER", "0xff"), ("or", "or")]
    assert pairs("x = 1jand 1\n")[2:4] == [("NUMBER", "1j"), ("and", "and")]
    assert pairs("x = 1not in y\n")[2:4] == [("NUMBER", "1"), ("not", "not")]
    assert pairs("x = 1..real\n")[2:5] == [("NUMBER", "1."), (".", "."), ("NAME", "real")]
    assert pairs("x = 1 .real\n")[2:5] == [("NUMBER", "1"), (".", "."), ("NAME", "real")]


@pytest.mark.parametrize(
    "text", ["x = 1abc", "x = 1andy", "x = 1e", "x = 1._", "x = 0x1g", "x = 1jx"]
)
def test_number_followed_by_identifier_char(text: str) -> None:
    # 3.10+ rejects it in the tokenizer; 3.8/3.9 leave it to the parser.
    assert error(text, (3, 9)) is None
    assert error(text, (3, 10)) is not None


def test_non_ascii_after_number() -> None:
    assert error("x = 1é", (3, 10)) is not None
    assert pairs("x = 1é", (3, 11))[2:4] == [("NUMBER", "1"), ("NAME", "é")]


def test_number_lookahead_is_incremental() -> None:
    st = LexState.initial().feed("x = 1an")[0]
    assert st.pending == "1an"
    _st2, syms = st.feed("d y")
    assert syms[-2:] == [("NUMBER", "1", 4), ("and", "and", 5)]
    with pytest.raises(LexError, match="invalid decimal literal"):
        st.feed("x")


# -- operators ---------------------------------------------------------------------------


OPERATOR_TEXT = (
    "( ) [ ] { } , : ; . ... ~ + - * / // % ** @ | & ^ << >> < > = == != <= >= -> := "
    "+= -= *= /= //= %= **= @= |= &= ^= <<= >>="
)


def test_operators() -> None:
    ops = OPERATOR_TEXT.split()
    text = "x " + " ".join(ops) + "\n"
    assert [k for k, _ in pairs(text)][1:-1] == ops
    assert pairs("a...b")[1] == ("...", "...")
    assert pairs("a..b")[1:3] == [(".", "."), (".", ".")]
    assert pairs("a**=b")[1] == ("**=", "**=")
    assert pairs("a->b")[1] == ("->", "->")


@pytest.mark.parametrize("text", ["x = $", "x = ?", "x = `", "x = a ! b", "x = 1 <> 2", "x = \x01"])
def test_invalid_characters(text: str) -> None:
    assert error(text) is not None


def test_brackets() -> None:
    assert error("x = (1]") is not None
    assert error("x = 1)") is not None
    assert error("x = ]") is not None
    with pytest.raises(LexError, match="never closed"):
        LexState.initial().feed("x = (1,\n")[0].finish()
    assert pairs("x = (1,\n  2)\n")[-1] == ("NEWLINE", "\n")  # no NEWLINE inside brackets
    assert error("x = " + "(" * 200 + ")" * 200) is None
    assert error("x = " + "(" * 201 + ")" * 201) is not None


@pytest.mark.parametrize("opener", ["(", "[", "f("])
def test_brackets_for_target_38_stop_where_its_parser_stack_does(opener: str) -> None:
    """3.8's LL(1) parser overflows at the 99th bracket around an expression
    (checked against the interpreter in tests/test_depth_limits.py)."""
    closer = ")" if opener != "[" else "]"
    for n, refused in ((98, False), (99, True)):
        text = "x = " + opener * n + "1" + closer * n + "\n"
        assert (error(text, (3, 8)) is not None) is refused, n
        assert error(text, (3, 9)) is None


# -- strings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix,kind",
    [
        *[(p, "STRING") for p in ["", "r", "R", "u", "U"]],
        *[(p, "BYTES") for p in ["b", "B", "br", "bR", "Br", "BR", "rb", "rB", "Rb", "RB"]],
    ],
)
def test_string_prefixes(prefix: str, kind: str) -> None:
    for quote in ["'", '"', "'''", '"""']:
        lit = f"{prefix}{quote}ab{quote}"
        assert pairs(f"x = {lit}\n")[2] == (kind, lit)


def test_invalid_prefixes_are_names() -> None:
    # ur'', bu'', fb'' are a NAME then a string: the parser rejects them.
    assert pairs("x = ur'a'")[2:4] == [("NAME", "ur"), ("STRING", "'a'")]
    assert pairs("x = fb'a'")[2:4] == [("NAME", "fb"), ("STRING", "'a'")]


def test_string_forms() -> None:
    assert pairs("x = ''")[2] == ("STRING", "''")
    assert pairs("x = '''a'b''c'''")[2] == ("STRING", "'''a'b''c'''")
    assert pairs("x = 'a\\'b'")[2] == ("STRING", "'a\\'b'")
    assert pairs("x = 'a\\\nb'")[2] == ("STRING", "'a\\\nb'")
    assert pairs("x = 'a\\\r\nb'")[2] == ("STRING", "'a\\\r\nb'")
    assert pairs("x = '''a\r\nb'''")[2] == ("STRING", "'''a\r\nb'''")
    assert pairs("x = r'\\''")[2] == ("STRING", "r'\\''")


@pytest.mark.parametrize(
    "text",
    [
        "x = 'abc\n",
        "x = 'abc",
        "x = '''abc",
        "x = 'a\rb'",
        "x = b'é'",
        "x = rb'é'",
        "x = b'''é'''",
    ],
)
def test_bad_strings(text: str) -> None:
    assert error(text) is not None


ESCAPES_OK = [
    r"'\x41'", r"'\u00e9'", r"'\U0001F600'", r"'\U0010ffff'", r"'\N{BULLET}'", r"'\N{bullet}'",
    r"'\N{BYTE ORDER MARK}'", r"'\N{CJK UNIFIED IDEOGRAPH-4E00}'", r"'\777'", r"'\8'", r"'\q'",
    r"b'\x41'", r"b'\u12'", r"b'\N{BULLET}'", r"r'\x1'", r"rb'\x1'", r"'\\x'", r"'\\N'",
]  # fmt: skip
ESCAPES_BAD = [
    r"'\x1'", r"'\x1g'", r"'\xgg'", r"'\u123'", r"'\U00110000'", r"'\N{NOPE}'", r"'\N{}'",
    r"'\N'", r"'\N{BULLET'", r"b'\x1'", r"b'\x'", r"u'\x1'", r"'''\x4'''", r"'\\\x1'",
    r"'\N{LATIN SMALL LETTER A WITH MACRON AND GRAVE}'", r"'\N{ LATIN SMALL LETTER A}'",
]  # fmt: skip


@pytest.mark.parametrize("lit", ESCAPES_OK)
def test_valid_escapes(lit: str) -> None:
    assert error(f"x = {lit}\n") is None


@pytest.mark.parametrize("lit", ESCAPES_BAD)
def test_invalid_escapes(lit: str) -> None:
    assert error(f"x = {lit}\n") is not None


def test_escape_errors_are_reported_early() -> None:
    st = LexState.initial().feed("x = '\\x4")[0]  # '\x41' is still possible
    with pytest.raises(LexError, match="truncated"):
        st.feed("g")
    with pytest.raises(LexError, match="ASCII"):
        LexState.initial().feed("x = b'abcé")


# -- lines, comments, continuations ------------------------------------------------------------


def test_newlines_and_blank_lines() -> None:
    text = "x = 1  # c\n\n   \n# only a comment\n  # indented comment\ny = 2"
    assert [k for k, _ in pairs(text)] == [
        *("NAME", "=", "NUMBER", "NEWLINE", "NAME", "=", "NUMBER", "NEWLINE"),
    ]
    assert lex("y = 2")[-2] == ("NEWLINE", "", 5)  # implicit NEWLINE at the end
    assert lex("x\n# c")[-1] == ("ENDMARKER", "", 5)
    assert pairs("x\r\ny\rz\n") == [
        *[("NAME", "x"), ("NEWLINE", "\r\n"), ("NAME", "y"), ("NEWLINE", "\r")],
        *[("NAME", "z"), ("NEWLINE", "\n")],
    ]
    assert pairs("") == []
    assert lex("") == [("ENDMARKER", "", 0)]


def test_cr_is_decided_by_the_next_character() -> None:
    st, syms = LexState.initial().feed("x\r")
    assert st.pending == "\r" and syms == [("NAME", "x", 0)]
    assert st.feed("\n")[1] == [("NEWLINE", "\r\n", 1)]
    assert st.feed("y")[1] == [("NEWLINE", "\r", 1)]


def test_line_continuation() -> None:
    assert pairs("x = 1 + \\\n  2\n") == [
        *[("NAME", "x"), ("=", "="), ("NUMBER", "1"), ("+", "+"), ("NUMBER", "2")],
        ("NEWLINE", "\n"),
    ]
    assert pairs("x = 1 + \\\r\n2\n")[-2] == ("NUMBER", "2")
    assert error("x = 1 \\ \n") is not None  # something after the backslash
    assert error("x = 1 \\") is not None  # at the end of the input
    assert error("x = 1 \\\n", (3, 12)) is not None
    assert error("x = 1 \\\n   ") is None
    assert error("x = \\y") is not None


def test_nul_and_surrogates() -> None:
    for text in ["x = '\x00'", "# \x00\n", "x\x00", "x = '\ud800'"]:
        assert error(text) is not None
    st = LexState.initial().feed("x = 1")[0]
    with pytest.raises(LexError):
        st.feed("\x00")


# -- indentation ------------------------------------------------------------------------------


def test_indent_dedent() -> None:
    text = "if x:\n    if y:\n        z\n\n    w\nv\n"
    kinds = [k for k, _ in pairs(text)]
    assert kinds == [
        *("if", "NAME", ":", "NEWLINE", "INDENT", "if", "NAME", ":", "NEWLINE", "INDENT"),
        *("NAME", "NEWLINE", "DEDENT", "NAME", "NEWLINE", "DEDENT", "NAME", "NEWLINE"),
    ]
    assert [k for k, _ in pairs("if x:\n  y")][-3:] == ["NAME", "NEWLINE", "DEDENT"]


def test_tabs_and_form_feed() -> None:
    assert error("if x:\n\ty\n\tz\n") is None
    assert error("if x:\n\ty\n        z\n") is not None  # TabError
    assert error("if x:\n        y\n\tz\n") is not None
    assert error("if x:\n    \ty\n\tz\n") is not None
    assert error("if x:\n  \ty\n  \tz\n") is None
    assert error("if x:\n\f  y\n") is None  # form feed resets the column
    assert error("  \fx = 1\n") is None
    assert error("\f  x = 1\n") is None  # unexpected indent: the parser's business
    assert next(k for k, _ in pairs("\f  x = 1\n")) == "INDENT"


def test_bad_dedent() -> None:
    exc = error("if x:\n  y\n z\n")
    assert exc is not None and "unindent" in exc.message


def test_too_many_indentation_levels() -> None:
    def nest(n: int) -> str:
        return "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "pass\n"

    assert error(nest(99)) is None
    assert error(nest(100)) is not None


def test_no_indentation_inside_brackets() -> None:
    assert error("x = (\n  1,\n 2)\n") is None
    assert error("if x:\n    y = [\n1]\n    z\n") is None


# -- chunking invariance ------------------------------------------------------------------------

CHUNK_SAMPLES = [
    "def f(a, b=1, *c, **d) -> int:\n    '''doc'''\n    return a ** b // 0x1F\n",
    "class C:\n\tdef m(self):\n\t\tx = [1, 2,\n\t\t\t3]  # c\n\t\treturn x[1:2]\n\n\f\nprint(C)\n",
    "x = 1if y else 2\ny = 1..real\nz = 0xffor 1\nw = 1e-5j + .5 + 1_000\n",
    "s = b'\\x41' + rb'\\d' + u'é' + '''a\r\nb''' + 'c\\\nd'\r\n",
    "f(x, \\\n  y)\nif a:\n  \\\n  b\n",
    "x = f'{a!r:>{w}} {b=} {{c}} {d:%Y-%m-%d} {e[\"k\"]:{f}.{g}}' + rf'\\{h}'\n",
    "x = f'''\n{a\n + b # c\n}''' + f\"{f'{1}'}\"\n",
    "x = 01\n",
    "x = 'abc\n",
    "if x:\n  y\n z\n",
    "x = '\\N{BULLET'\n",
    "x = f'{a!}' $\n",
    "x = 1an\n",
]


@pytest.mark.parametrize("text", CHUNK_SAMPLES)
@pytest.mark.parametrize("target", [(3, 9), (3, 11), (3, 13)])
def test_chunking_invariance(text: str, target: tuple[int, int]) -> None:
    ref, ref_err = feed_chunks([text], target)
    rng = random.Random(text)
    chunkings = [list(text)]
    for _ in range(5):
        chunks, k = [], 0
        while k < len(text):
            size = rng.randint(1, 7)
            chunks.append(text[k : k + size])
            k += size
        chunkings.append(chunks)
    for chunks in chunkings:
        got, err = feed_chunks(chunks, target)
        assert err == ref_err
        if ref_err is None:
            assert got == ref
        else:
            # Symbols certain before the error agree with lexing the text up to it.
            before = LexState.initial(target=target).feed(text[: ref_err[1]])[1]
            common = min(len(got), len(before))
            assert got[:common] == before[:common]


def test_pending_kinds_predict_the_next_symbol() -> None:
    text = CHUNK_SAMPLES[0] + CHUNK_SAMPLES[2] + CHUNK_SAMPLES[5] + CHUNK_SAMPLES[6]
    full = lex(text)
    for k in range(1, len(text)):
        st, emitted = LexState.initial().feed(text[:k])
        kinds = st.pending_kinds()
        if kinds is None:
            continue
        nxt = full[len(emitted)]
        assert nxt[0] in kinds and nxt[2] == st.pending_offset, (k, st.pending, kinds, nxt)
        branch = st.emit_pending()
        if branch is not None:
            assert branch[1][0][0] in kinds


# -- robustness ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "x = [" + "1, " * 300_000 + "]\n",
        "x = '" + "a" * 1_000_000 + "'\n",
        "# " + "a" * 1_000_000 + "\n",
        "a" * 1_000_000 + "\n",
        "x = " + "(" * 10_000 + ")" * 10_000 + "\n",
        "x = " + "[" * 10_000 + "]" * 10_000 + "\n",
        "x = " + "f'{" * 10_000 + "x" + "}'" * 10_000 + "\n",
        "".join(" " * i + "if x:\n" for i in range(2000)),
        "if x:\n" + "\\\n" * 50_000 + "    pass\n",
        "\n" * 200_000 + "x\n",
    ],
)
def test_pathological_inputs_terminate(text: str) -> None:
    """Huge and deeply nested inputs are lexed (or rejected) without blowing up.

    Speed is measured by the benchmarks; the bound here only turns a quadratic
    blow-up (hours on these inputs) into a failure instead of a hung suite, and is
    loose enough for a heavily loaded two-core machine.
    """
    t0 = time.perf_counter()
    error(text)
    error(text, (3, 9))
    assert time.perf_counter() - t0 < 180


# -- property: chunking never matters ---------------------------------------------------------

FRAGMENTS = [
    *("x", "if", "else", "1", "0", "1e", "0x", "_", "é", " ", "  ", "\t", "\f", "\n", "\r\n"),
    *("\r", "\\\n", "\\", "#c", "(", ")", "[", "]", "{", "}", ":", "=", "!", ".", "'", '"'),
    *("'''", "f'", 'f"', "rb'", "{x}", "{{", "}}", "\\x4", "\\N{", "BULLET}", "if x:\n    "),
    *("\n  ", "\n\t", "+", "-", "*", "<", ">", "@", "%", "$", "\x00"),
]


@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=25),
    st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=40),
    st.sampled_from(ALL_TARGETS),
)
def test_chunking_never_matters(
    fragments: list[str], sizes: list[int], target: tuple[int, int]
) -> None:
    text = "".join(fragments)
    ref, ref_err = feed_chunks([text], target)
    chunks, k, idx = [], 0, 0
    while k < len(text):
        size = sizes[idx % len(sizes)]
        chunks.append(text[k : k + size])
        k += size
        idx += 1
    got, err = feed_chunks(chunks, target)
    assert err == ref_err
    if ref_err is None:
        assert got == ref
