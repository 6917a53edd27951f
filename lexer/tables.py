"""Static tables of the lexer: versions, keywords, operators and regexes.

Everything here is computed once at import time so that the scanning loop in
:mod:`lexer._engine` only does dictionary look-ups and compiled-regex matches.
"""

from __future__ import annotations

import re

from .version import NEWEST, OLDEST

#: Oldest and newest supported targets, as ``major * 100 + minor``.
MIN_VERSION = OLDEST.code
MAX_VERSION = NEWEST.code

# CPython limits (Parser/tokenizer.c): MAXLEVEL, MAXINDENT, MAXFSTRINGLEVEL.
MAX_PAREN_LEVEL = 200
MAX_INDENT = 100
MAX_FSTRING_LEVEL = 150
#: 3.8's LL(1) parser runs out of stack (MAXSTACK 1500 entries, "s_push: parser stack
#: overflow", a MemoryError) long before the tokenizer's MAXLEVEL: about 15 entries a
#: bracket, so 98 brackets around an expression is the most it parses at the top
#: level (99 around nothing; fewer in deep blocks: docs/architecture.md).
MAX_PAREN_LEVEL_38 = 98


def max_paren_level(version: int) -> int:
    """The most nested brackets the target parses (``version``: major * 100 + minor)."""
    return MAX_PAREN_LEVEL_38 if version < 309 else MAX_PAREN_LEVEL


_KWLIST = [
    *("False", "None", "True", "and", "as", "assert", "async", "await", "break", "class"),
    *("continue", "def", "del", "elif", "else", "except", "finally", "for", "from"),
    *("global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass"),
    *("raise", "return", "try", "while", "with", "yield"),
]


def keywords(version: int) -> frozenset[str]:
    """Hard keywords of ``keyword.kwlist`` for the target (3.9 has an easter egg)."""
    words = set(_KWLIST)
    if version == 309:
        words.add("__peg_parser__")
    return frozenset(words)


#: kind of a NAME-like token: the keyword itself or ``NAME``, per target.
KEYWORD_KINDS: dict[int, dict[str, str]] = {
    v: {w: w for w in keywords(v)} for v in range(MIN_VERSION, MAX_VERSION + 1)
}

#: Every operator or delimiter that is a symbol of its own (``!`` only inside
#: an f-string replacement field, and only as a conversion).
OPERATORS = frozenset(
    [
        *("(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "...", "~", "!"),
        *("+", "-", "*", "/", "//", "%", "**", "@", "|", "&", "^", "<<", ">>"),
        *("<", ">", "=", "==", "!=", "<=", ">=", "->", ":="),
        *("+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "|=", "&=", "^=", "<<=", ">>="),
    ]
)

#: Operators that are a proper prefix of a longer operator: seen at the very
#: end of the text they are not yet certain.
EXTENDABLE = frozenset(
    op for op in OPERATORS if any(o != op and o.startswith(op) for o in OPERATORS)
) | {"."}

OPEN_BRACKETS = "([{"
CLOSE_TO_OPEN = {")": "(", "]": "[", "}": "{"}
OPEN_TO_CLOSE = {opener: closer for closer, opener in CLOSE_TO_OPEN.items()}

# String prefixes (lower-cased) and what the literal becomes, per target:
# template strings (PEP 750) from 3.14.  Any other letters before a quote are
# a NAME followed by a plain string, as in CPython (``bt'x'``, ``ft'x'``).
_PREFIXES = {
    "": "STRING",
    "r": "STRING",
    "u": "STRING",
    "b": "BYTES",
    "br": "BYTES",
    "rb": "BYTES",
    "f": "FSTRING_START",
    "fr": "FSTRING_START",
    "rf": "FSTRING_START",
}
_T_PREFIXES = {"t": "TSTRING_START", "tr": "TSTRING_START", "rt": "TSTRING_START"}

STRING_PREFIXES: dict[int, dict[str, str]] = {
    v: {**_PREFIXES, **(_T_PREFIXES if v >= 314 else {})}
    for v in range(MIN_VERSION, MAX_VERSION + 1)
}

#: A prefix of a prefix maps to every kind it may still become (used by
#: ``pending_kinds()``), per target.
PREFIX_KINDS: dict[int, dict[str, frozenset[str]]] = {
    v: {p: frozenset(k for q, k in table.items() if q.startswith(p)) for p in table}
    for v, table in STRING_PREFIXES.items()
}

#: The symbol kinds of an interpolated string's pieces (start, middle, end):
#: f-strings (PEP 701) and t-strings (PEP 750) are tokenized alike.
FSTRING_KINDS = ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
TSTRING_KINDS = ("TSTRING_START", "TSTRING_MIDDLE", "TSTRING_END")
INTERPOLATED_KINDS = {kinds[0]: kinds for kinds in (FSTRING_KINDS, TSTRING_KINDS)}

# f-string frame modes.
LITERAL = 0  # literal text between replacement fields
EXPR = 1  # inside a replacement field's expression (regular tokenizing)
SPEC = 2  # literal text of a format spec
SPEC2 = 3  # 3.13 quirk: format spec text after a nested field closed

_ID_START = r"A-Za-z_\x80-\U0010ffff"
_ID_CHAR = r"A-Za-z0-9_\x80-\U0010ffff"

#: One token of regular mode, after optional blanks.  Exactly one named group
#: matches, so ``m.lastgroup`` tells the token class.
TOKEN_RE = re.compile(
    rf"""[ \t\f]*(?:
      (?P<name>[{_ID_START}][{_ID_CHAR}]*)
    | (?P<num>\.?[0-9])
    | (?P<op>\*\*=?|//=?|>>=?|<<=?|<>|->|\.\.\.|[-+*/%&|^@=!<>:]=|[()\[\]{{}},:;.~+\-*/%&|^@=<>!])
    | (?P<nl>\r\n|\r|\n)
    | (?P<str>['"])
    | (?P<com>\#[^\r\n]*)
    | (?P<bs>\\)
    | (?P<eot>\Z)
    | (?P<bad>.)
    )""",
    re.VERBOSE | re.DOTALL,
)

#: A decimal literal that is certainly complete: the next character can
#: neither extend it nor make it an error (nor can its length: longer ones go
#: to ``_scan.scan_number``, which checks CPython's limit on their digits).
SIMPLE_NUMBER_RE = re.compile(r"(?:[1-9][0-9]{0,4299}|0+)(?=[ \t\f\r\n)\],:;}+\-*/%=<>!&|^~#])")

INT_RE = re.compile(r"[0-9](?:_?[0-9])*")
HEX_RE = re.compile(r"_?[0-9a-fA-F]+(?:_[0-9a-fA-F]+)*")
OCT_RE = re.compile(r"_?[0-7]+(?:_[0-7]+)*")
BIN_RE = re.compile(r"_?[01]+(?:_[01]+)*")

BLANKS_RE = re.compile(r"[ \t\f]*")
COMMENT_RE = re.compile(r"#[^\r\n]*")
NEWLINE_RE = re.compile(r"\r\n|\r|\n")

#: Body of a plain string literal up to (not including) its end, keyed by the
#: opening quote.  Backslash escapes any character, a newline too.
STRING_BODY_RE = {
    "'": re.compile(r"[^'\\\r\n]*(?:\\(?:\r\n|[\s\S])[^'\\\r\n]*)*"),
    '"': re.compile(r'[^"\\\r\n]*(?:\\(?:\r\n|[\s\S])[^"\\\r\n]*)*'),
    "'''": re.compile(r"[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*"),
    '"""': re.compile(r'[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*'),
}


def _fstring_body(quote: str, raw: bool) -> re.Pattern[str]:
    """Literal text of an f-string up to a brace, its end, or a lone backslash.

    A backslash escapes the next character except a brace (``\\{`` is a
    backslash followed by a replacement field), and in non-raw f-strings
    ``\\N{...}`` is one escape whose braces are not replacement fields.
    """
    q = re.escape(quote[0])
    stop = "{}\\\\" + q + ("" if len(quote) == 3 else "\\r\\n")
    plain = f"[^{stop}]"
    escaped = r"\\(?:\r\n|[^{}])" if raw else r"\\(?:\r\n|[^{}N])"
    alts = [escaped, r"\\(?=[{}])"]
    if not raw:
        alts += [rf"\\N\{{[^{{}}\\\\{q}\r\n]*\}}", r"\\N(?!\{)"]
    if len(quote) == 3:
        alts.append(f"{q}(?!{q}{q})")
    return re.compile(f"{plain}*(?:(?:{'|'.join(alts)}){plain}*)*")


FSTRING_BODY_RE = {
    (quote, raw): _fstring_body(quote, raw)
    for quote in ("'", '"', "'''", '"""')
    for raw in (False, True)
}

#: Escapes that CPython validates when it decodes a str literal.
STR_ESCAPE_HINT_RE = re.compile(r"\\[xuUN]")
ESCAPE_PAIR_RE = re.compile(r"\\([\s\S])")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
NON_ASCII_RE = re.compile(r"[^\x00-\x7f]")
