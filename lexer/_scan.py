"""Scanners for the tokens whose end needs look-ahead: numbers and strings.

Each scanner works on ``text`` (the whole buffer being lexed, of length
``n``) from a start index and returns the end index of the token, or ``-1``
when the end depends on characters not received yet.  ``eof`` tells what
follows the buffer: ``0`` unknown (more text may come), anything else a
virtual character that extends nothing (end of input or a forced symbol
boundary).  Lexical errors raise :class:`Fail` with the offending index.
"""

from __future__ import annotations

import unicodedata

from .errors import LexErrorCode as Code
from .tables import (
    BIN_RE,
    ESCAPE_PAIR_RE,
    HEX_DIGITS,
    HEX_RE,
    INT_RE,
    OCT_RE,
    STR_ESCAPE_HINT_RE,
)


class Fail(Exception):
    """A lexical error at index ``at`` of the buffer being lexed (see :class:`LexError`)."""

    def __init__(self, msg: str, at: int, code: Code, bracket: str | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.at = at
        self.code = code
        self.bracket = bracket


def char_at(text: str, k: int, n: int, eof: int) -> str | None:
    """``text[k]``; past the end ``''`` if nothing follows, ``None`` if unknown."""
    if k < n:
        return text[k]
    return "" if eof else None


def is_id_start(c: str) -> bool:
    """CPython's ``is_potential_identifier_start`` (every non-ASCII char is one)."""
    return c >= "\x80" or c == "_" or (c.isalpha() and c.isascii())


def is_id_char(c: str) -> bool:
    """CPython's ``is_potential_identifier_char`` (every non-ASCII char is one)."""
    return c >= "\x80" or c == "_" or (c.isalnum() and c.isascii())


# -- numbers ------------------------------------------------------------------

#: CPython's limit on the digits of an ``int`` made from a decimal string
#: (``sys.int_info.default_max_str_digits``, CVE-2020-10735): its parser converts
#: a decimal integer literal that way, so a longer one is a SyntaxError.  Every
#: supported target's oracle raises it (the limit came with 3.11 and was
#: backported to 3.8.14, 3.9.14 and 3.10.7; earlier patch releases accept such
#: literals).  Underscores do not count, nor do the zeros of ``000...0`` (the only
#: decimal literal with a leading zero); hexadecimal, octal and binary literals,
#: floats and imaginary literals have no limit.
MAX_INT_DIGITS = 4300


def _integer_end(text: str, i: int, e: int, end: int) -> int:
    """``end``, the end of the number at ``i`` whose digits end at ``e``, once it is
    known to be a decimal integer literal that CPython can convert."""
    if end == e and e - i > MAX_INT_DIGITS and text[i] != "0":
        digits = e - i - text.count("_", i, e)
        if digits > MAX_INT_DIGITS:
            raise Fail(
                f"Exceeds the limit ({MAX_INT_DIGITS} digits) for integer string "
                f"conversion: value has {digits} digits",
                i,
                Code.INVALID_NUMBER,
            )
    return end


def _lookahead(text: str, k: int, n: int, eof: int, word: str) -> bool | None:
    """CPython's ``lookahead``: ``word`` at ``k`` not followed by an identifier char."""
    for idx, want in enumerate(word):
        c = char_at(text, k + idx, n, eof)
        if c is None:
            return None
        if c != want:
            return False
    c = char_at(text, k + len(word), n, eof)
    if c is None:
        return None
    return not is_id_char(c)


def _verify_end(text: str, k: int, n: int, eof: int, ver: int, kind: str) -> bool | None:
    """CPython's ``verify_end_of_number`` (3.10+): may a number end before ``k``?

    A number directly followed by an identifier character is an error unless
    that character starts ``and``/``else``/``for``/``if``/``in``/``is``/
    ``not``/``or`` (3.10 also rejects a non-ASCII character).  Returns True or
    None (undecided); raises on error.
    """
    if ver < 310:
        return True
    c = char_at(text, k, n, eof)
    if c is None:
        return None
    if c == "":
        return True
    r: bool | None = False
    if c == "a":
        r = _lookahead(text, k + 1, n, eof, "nd")
    elif c == "e":
        r = _lookahead(text, k + 1, n, eof, "lse")
    elif c == "f":
        r = _lookahead(text, k + 1, n, eof, "or")
    elif c == "i":
        c2 = char_at(text, k + 1, n, eof)
        if c2 is None:
            return None
        r = c2 in ("f", "n", "s")
    elif c == "o":
        r = _lookahead(text, k + 1, n, eof, "r")
    elif c == "n":
        r = _lookahead(text, k + 1, n, eof, "ot")
    if r is None:
        return None
    if not r and is_id_char(c) and (c < "\x80" or ver == 310):
        raise Fail(f"invalid {kind} literal", k, Code.INVALID_NUMBER)
    return True


def _end(text: str, k: int, n: int, eof: int, ver: int, kind: str) -> int:
    return k if _verify_end(text, k, n, eof, ver, kind) else -1


def _underscore(text: str, k: int, n: int, eof: int) -> int:
    """A ``_`` at ``k`` not followed by a digit: an error once the next char is known."""
    if char_at(text, k + 1, n, eof) is None:
        return -1
    raise Fail("invalid decimal literal", k, Code.INVALID_NUMBER)


def scan_number(text: str, i: int, n: int, eof: int, ver: int) -> int:
    """End of the number starting at ``i`` (a digit, or ``.`` then a digit).

    Follows CPython's tokenizer exactly: ``0or`` commits to an octal literal
    and fails, ``1if`` is a number then ``if``, ``1e`` may be ``1`` followed
    by ``else``.
    """
    c0 = text[i]
    if c0 == ".":
        return _fraction(text, i + 1, n, eof, ver)
    if c0 == "0":
        c1 = char_at(text, i + 1, n, eof)
        if c1 is None:
            return -1
        if c1 in ("x", "X"):
            return _radix(text, i + 2, n, eof, ver, "hexadecimal")
        if c1 in ("o", "O"):
            return _radix(text, i + 2, n, eof, ver, "octal")
        if c1 in ("b", "B"):
            return _radix(text, i + 2, n, eof, ver, "binary")
    m = INT_RE.match(text, i)
    assert m is not None
    e = m.end()
    c = char_at(text, e, n, eof)
    if c is None:
        return -1
    if c == "_":
        return _underscore(text, e, n, eof)
    if c == ".":
        return _fraction(text, e + 1, n, eof, ver)
    if c in ("e", "E"):  # an exponent, or an integer followed by `else`
        return _integer_end(text, i, e, _exponent(text, e, n, eof, ver))
    if c in ("j", "J"):
        return _end(text, e + 1, n, eof, ver, "imaginary")
    if c0 == "0" and text[i:e].strip("0_"):
        raise Fail(
            "leading zeros in decimal integer literals are not permitted; "
            "use an 0o prefix for octal integers",
            i,
            Code.INVALID_NUMBER,
        )
    return _integer_end(text, i, e, _end(text, e, n, eof, ver, "decimal"))


def _fraction(text: str, k: int, n: int, eof: int, ver: int) -> int:
    c = char_at(text, k, n, eof)
    if c is None:
        return -1
    if "0" <= c <= "9":
        m = INT_RE.match(text, k)
        assert m is not None
        k = m.end()
        c = char_at(text, k, n, eof)
        if c is None:
            return -1
        if c == "_":
            return _underscore(text, k, n, eof)
    if c in ("e", "E"):
        return _exponent(text, k, n, eof, ver)
    if c in ("j", "J"):
        return _end(text, k + 1, n, eof, ver, "imaginary")
    return _end(text, k, n, eof, ver, "decimal")


def _exponent(text: str, k: int, n: int, eof: int, ver: int) -> int:
    """``text[k]`` is ``e``/``E`` after a mantissa."""
    c = char_at(text, k + 1, n, eof)
    if c is None:
        return -1
    if c in ("+", "-"):
        c2 = char_at(text, k + 2, n, eof)
        if c2 is None:
            return -1
        if not ("0" <= c2 <= "9"):
            raise Fail("invalid decimal literal", k + 2, Code.INVALID_NUMBER)
        d = k + 2
    elif "0" <= c <= "9":
        d = k + 1
    else:
        # Not an exponent: the number ends before the 'e' (maybe 'else').
        return _end(text, k, n, eof, ver, "decimal")
    m = INT_RE.match(text, d)
    assert m is not None
    e = m.end()
    c = char_at(text, e, n, eof)
    if c is None:
        return -1
    if c == "_":
        return _underscore(text, e, n, eof)
    if c in ("j", "J"):
        return _end(text, e + 1, n, eof, ver, "imaginary")
    return _end(text, e, n, eof, ver, "decimal")


_RADIX = {
    "hexadecimal": (HEX_RE, ""),
    "octal": (OCT_RE, "89"),
    "binary": (BIN_RE, "23456789"),
}


def _radix(text: str, k: int, n: int, eof: int, ver: int, kind: str) -> int:
    """Digits of a ``0x``/``0o``/``0b`` literal starting at ``k``."""
    rx, bad = _RADIX[kind]
    m = rx.match(text, k)
    e = m.end() if m is not None else k
    c = char_at(text, e, n, eof)
    if c is None:
        return -1
    if c == "_":
        c = char_at(text, e + 1, n, eof)
        if c is None:
            return -1
        e += 1
    elif m is not None and not (c and c in bad):
        return _end(text, e, n, eof, ver, kind)
    if c and c in bad:
        raise Fail(f"invalid digit '{c}' in {kind} literal", e, Code.INVALID_NUMBER)
    raise Fail(f"invalid {kind} literal", e, Code.INVALID_NUMBER)


# -- strings ------------------------------------------------------------------


def check_escapes(text: str, a: int, b: int, is_bytes: bool, partial: bool) -> None:
    """Raise for escapes in ``text[a:b]`` that CPython fails to decode.

    ``\\x`` needs two hex digits (str and bytes); in str literals ``\\u``
    needs four, ``\\U`` eight (at most U+10FFFF) and ``\\N{name}`` a known
    character name.  With ``partial`` the body may still grow, so an escape
    cut off by the end of the buffer is not (yet) an error.  Unknown escapes
    such as ``\\q`` are only warnings in CPython and pass.
    """
    if is_bytes:
        if text.find("\\x", a, b) < 0:
            return
    elif STR_ESCAPE_HINT_RE.search(text, a, b) is None:
        return
    for m in ESCAPE_PAIR_RE.finditer(text, a, b):
        c = m.group(1)
        k = m.start()
        if c == "x":
            count = 2
        elif is_bytes:
            continue
        elif c == "u":
            count = 4
        elif c == "U":
            count = 8
        elif c == "N":
            if not _check_named(text, k, b, partial):
                return  # the rest may all be the name of an open \N{
            continue
        else:
            continue
        digits = text[k + 2 : min(k + 2 + count, b)]
        good = 0
        for ch in digits:
            if ch not in HEX_DIGITS:
                break
            good += 1
        if good < count:
            if partial and k + 2 + good == b:
                return
            if is_bytes:
                raise Fail("(value error) invalid \\x escape", k, Code.INVALID_STRING)
            message = f"(unicode error) truncated \\{c}{'X' * count} escape"
            raise Fail(message, k, Code.INVALID_STRING)
        if c == "U" and int(digits, 16) > 0x10FFFF:
            raise Fail("(unicode error) illegal Unicode character", k, Code.INVALID_STRING)


def _check_named(text: str, k: int, b: int, partial: bool) -> bool:
    """Validate ``\\N{name}`` at ``k`` (the backslash) within ``text[:b]``.

    Returns False if the escape is still open (only with ``partial``).
    """
    if k + 2 >= b:
        if partial:
            return False
        raise Fail("(unicode error) malformed \\N character escape", k, Code.INVALID_STRING)
    if text[k + 2] != "{":
        raise Fail("(unicode error) malformed \\N character escape", k, Code.INVALID_STRING)
    close = text.find("}", k + 3, b)
    if close < 0:
        if partial:
            return False
        raise Fail("(unicode error) malformed \\N character escape", k, Code.INVALID_STRING)
    name = text[k + 3 : close]
    if not name:
        raise Fail("(unicode error) malformed \\N character escape", k, Code.INVALID_STRING)
    try:
        ch = unicodedata.lookup(name)
    except KeyError:
        ch = ""
    if len(ch) != 1:  # unknown, or a named sequence (not allowed in \N{})
        raise Fail("(unicode error) unknown Unicode character name", k, Code.INVALID_STRING)
    return True


def check_ident(text: str, s: int, e: int) -> None:
    """PEP 3131 check of a name holding non-ASCII characters.

    CPython consumes every character >= U+0080 as a potential identifier
    character and then requires the whole token to be an identifier; a
    prefix of an identifier is one too, so a bad prefix is already final.
    """
    word = text[s:e]
    if word.isidentifier():
        return
    k = 0
    for k, ch in enumerate(word):
        if not (ch if k == 0 else "a" + ch).isidentifier():
            break
    ch = word[k]
    if ch.isprintable():
        raise Fail(f"invalid character '{ch}' (U+{ord(ch):04X})", s + k, Code.INVALID_CHARACTER)
    message = f"invalid non-printable character U+{ord(ch):04X}"
    raise Fail(message, s + k, Code.INVALID_CHARACTER)
