"""The scanning loop: lex a buffer from a committed context.

:func:`lex` is the only entry point.  It runs CPython's tokenizer algorithm
over ``text`` starting from a committed :class:`Ctx`, emits every symbol
whose extent and validity no longer depend on unseen text, and stops at the
first one that does; the caller keeps ``text[consumed:]`` as the pending text
and lexes it again, joined with the next chunk, from the returned context.

One regex match per token does the work on the bulk path; Python code only
dispatches on the token class and keeps the bracket, indentation and
f-string stacks, which are tuples and strings so that contexts can be shared.
"""

from __future__ import annotations

from ._scan import Fail, char_at, check_escapes, check_ident, is_id_start, scan_number
from .errors import LexErrorCode as Code
from .tables import (
    BLANKS_RE,
    CLOSE_TO_OPEN,
    COMMENT_RE,
    EXPR,
    EXTENDABLE,
    FSTRING_BODY_RE,
    INTERPOLATED_KINDS,
    KEYWORD_KINDS,
    LITERAL,
    MAX_FSTRING_LEVEL,
    MAX_INDENT,
    NON_ASCII_RE,
    SIMPLE_NUMBER_RE,
    SPEC,
    SPEC2,
    STRING_BODY_RE,
    STRING_PREFIXES,
    TOKEN_RE,
    max_paren_level,
)

Symbol = tuple[str, str, int]
#: An open f-string or t-string: (quote, raw, paren level at its start, open
#: replacement fields, mode, symbol kinds of its start, middle and end).
#: Fields nest only through format specs, so the brace of the k-th open field
#: sits at ``parens[level + k]``.
Frame = tuple[str, bool, int, int, int, tuple[str, str, str]]

TAB_ERROR = "inconsistent use of tabs and spaces in indentation"
EOF_ERROR = "unexpected EOF while parsing"


class Ctx:
    """Committed lexer context: everything that decides how text is lexed.

    ``ind``: indentation stack of (column, column with tabsize 1) pairs;
    ``parens``: the open brackets, innermost last; ``fst``: open f-strings,
    innermost last; ``atbol``: at the beginning of a line, indentation not yet
    processed.
    """

    __slots__ = ("atbol", "fst", "ind", "parens")

    def __init__(
        self,
        ind: tuple[tuple[int, int], ...],
        parens: str,
        fst: tuple[Frame, ...],
        atbol: bool,
    ) -> None:
        self.ind = ind
        self.parens = parens
        self.fst = fst
        self.atbol = atbol


INITIAL_CTX = Ctx(((0, 0),), "", (), True)


def lex(
    ver: int, ctx: Ctx, text: str, base: int, eof: int, tail: str
) -> tuple[Ctx, int, list[Symbol]]:
    """Lex ``text`` from ``ctx``; return the new context, chars consumed, symbols.

    ``base`` is the absolute offset of ``text[0]``; ``tail`` the (up to) two
    characters before it.  ``eof``: 0 more text may follow; 1 a symbol
    boundary is forced at the end (the emit branch); 2 end of input.
    Raises :class:`Fail` (with an index into ``text``) on a lexical error.
    """
    ind = ctx.ind
    parens = ctx.parens
    fst = ctx.fst
    atbol = ctx.atbol
    n = len(text)
    out: list[Symbol] = []
    append = out.append
    kinds = KEYWORD_KINDS[ver]
    prefixes = STRING_PREFIXES[ver]
    tokmatch = TOKEN_RE.match
    simple_number = SIMPLE_NUMBER_RE.match
    i = 0
    while True:
        if atbol:
            # Fast path: a line that starts with a token after plain blanks.
            j = BLANKS_RE.match(text, i).end()  # type: ignore[union-attr]
            if j < n and text[j] not in "#\r\n\\":
                if not parens:
                    ind = _indent(text, i, j, ind, base, out, None)
            else:
                j, ind, stay = _bol(ver, text, i, n, eof, ind, parens, base, out)
                if stay:
                    i = j
                    break
            atbol = False
            i = j
        if fst and fst[-1][4] != EXPR:
            i, fst, parens, stopped = _fs_literal(
                ver, text, i, n, eof, fst, parens, base, out, tail
            )
            if stopped:
                break
            continue

        m = tokmatch(text, i)
        assert m is not None
        g = m.lastgroup
        if g == "name":
            s = m.start("name")
            e = m.end()
            if e >= n and not eof:
                if not text[s:e].isascii():
                    check_ident(text, s, e)
                i = s
                break
            if e < n and (text[e] == "'" or text[e] == '"') and e - s <= 2:
                prefix = text[s:e].lower()
                kind = prefixes.get(prefix)
                if kind is not None:
                    if kind == "FSTRING_START" or kind == "TSTRING_START":
                        r = _fstring_start(
                            ver, kind, text, s, e, n, eof, fst, parens, base, out, tail
                        )
                        if r is None:
                            i = s
                            break
                        fst, i = r
                    else:
                        e = _string(text, s, e, n, eof, kind == "BYTES", "r" in prefix)
                        if e < 0:
                            i = s
                            break
                        if fst and ver < 312:
                            _old_check(text, s, e, fst, tail)
                        append((kind, text[s:e], base + s))
                        i = e
                    continue
            word = text[s:e]
            if not word.isascii():
                check_ident(text, s, e)
            append((kinds.get(word, "NAME"), word, base + s))
            i = e
        elif g == "op":
            s = m.start("op")
            e = m.end()
            op = text[s:e]
            if fst:
                # Inside a replacement field (literal modes are handled above).
                frame = fst[-1]
                if op[0] == ":" and len(parens) == frame[2] + frame[3]:
                    # A ':' directly in the field starts the format spec, even in ':='.
                    append((":", ":", base + s))
                    fst = (*fst[:-1], _moved(frame, frame[3], SPEC))
                    i = s + 1
                    continue
            if not eof:
                if e >= n:
                    if op in EXTENDABLE:
                        i = s
                        break
                elif op == "." and text[e] == "." and e + 1 >= n:
                    i = s  # '..' may still become '...'
                    break
            if op == "!":
                if not fst:
                    raise Fail(
                        "invalid syntax: '!' outside an f-string replacement field",
                        s,
                        Code.INVALID_CHARACTER,
                    )
                if len(parens) == fst[-1][2] + fst[-1][3]:
                    # The conversion of a replacement field: its name must follow
                    # the '!' at once (3.12+ checks this in the parser).
                    ready = (
                        _conversion(text, e, n, eof)
                        if ver >= 312
                        else _old_conversion(text, e, n, eof)
                    )
                    if not ready:
                        i = s
                        break
            if op in "([{":
                if len(parens) >= max_paren_level(ver):
                    raise Fail("too many nested parentheses", s, Code.TOO_MANY_BRACKETS, op)
                parens += op
            elif op in ")]}":
                if not parens:
                    raise Fail(f"unmatched '{op}'", s, Code.UNMATCHED_BRACKET, op)
                opening = parens[-1]
                if opening != CLOSE_TO_OPEN[op]:
                    if fst and opening == "{" and len(parens) == fst[-1][2] + fst[-1][3]:
                        raise Fail(f"f-string: unmatched '{op}'", s, Code.MISMATCHED_BRACKET, op)
                    raise Fail(
                        f"closing parenthesis '{op}' does not match opening parenthesis "
                        f"'{opening}'",
                        s,
                        Code.MISMATCHED_BRACKET,
                        op,
                    )
                parens = parens[:-1]
                if fst and op == "}":
                    frame = fst[-1]
                    nf = frame[3]
                    if len(parens) == frame[2] + nf - 1:
                        # The replacement field is closed.
                        nf -= 1
                        mode = LITERAL if nf == 0 else (SPEC2 if ver >= 313 else SPEC)
                        fst = (*fst[:-1], _moved(frame, nf, mode))
            elif op == "<>":
                raise Fail("invalid syntax: '<>'", s, Code.INVALID_CHARACTER)
            append((op, op, base + s))
            i = e
        elif g == "nl":
            s = m.start("nl")
            e = m.end()
            if e >= n and not eof and e - s == 1 and text[s] == "\r":
                i = s  # may be the first half of '\r\n'
                break
            if parens:
                if fst and ver < 312:
                    _old_check(text, s, e, fst, tail)
            else:
                append(("NEWLINE", text[s:e], base + s))
            i = e
            atbol = True
        elif g == "str":
            s = m.start("str")
            e = _string(text, s, s, n, eof, False, False)
            if e < 0:
                i = s
                break
            if fst and ver < 312:
                _old_check(text, s, e, fst, tail)
            append(("STRING", text[s:e], base + s))
            i = e
        elif g == "num":
            s = m.start("num")
            mm = simple_number(text, s)
            if mm is not None:
                e = mm.end()
            else:
                e = scan_number(text, s, n, eof, ver)
                if e < 0:
                    i = s
                    break
            append(("NUMBER", text[s:e], base + s))
            i = e
        elif g == "com":
            s = m.start("com")
            if fst and ver < 312:
                raise Fail("f-string expression part cannot include '#'", s, Code.FSTRING_SYNTAX)
            e = m.end()
            if e >= n and eof != 2:
                i = s  # the comment may go on
                break
            i = e
        elif g == "bs":
            s = m.start("bs")
            if fst and ver < 312:
                raise Fail(
                    "f-string expression part cannot include a backslash", s, Code.FSTRING_SYNTAX
                )
            e = _continuation(text, s, n, eof, ver)
            if e < 0:
                i = s
                break
            i = e
        elif g == "eot":
            i = n
            break
        else:
            s = m.start("bad")
            ch = text[s]
            if ch.isprintable():
                raise Fail(f"invalid character '{ch}' (U+{ord(ch):04X})", s, Code.INVALID_CHARACTER)
            raise Fail(
                f"invalid non-printable character U+{ord(ch):04X}", s, Code.INVALID_CHARACTER
            )
    return Ctx(ind, parens, fst, atbol), i, out


# -- indentation ----------------------------------------------------------------


def _columns(ws: str, col: int = 0, alt: int = 0) -> tuple[int, int]:
    """Indentation column after blanks, with tab size 8 and with tab size 1."""
    for ch in ws:
        if ch == " ":
            col += 1
            alt += 1
        elif ch == "\t":
            col = (col // 8 + 1) * 8
            alt += 1
        else:  # form feed resets the column
            col = alt = 0
    return col, alt


def _indent(
    text: str,
    i: int,
    j: int,
    ind: tuple[tuple[int, int], ...],
    base: int,
    out: list[Symbol],
    cols: tuple[int, int] | None,
) -> tuple[tuple[int, int], ...]:
    """Compare the indentation of the line whose first token is at ``j``.

    Emits INDENT or DEDENTs (at the token) and returns the new stack.  Like
    CPython, the columns are compared with tab size 8 and with tab size 1;
    an answer that differs between the two is a TabError.
    """
    if cols is None:
        if j - i == 0:
            col = alt = 0
        else:
            ws = text[i:j]
            if "\t" in ws or "\f" in ws:
                col, alt = _columns(ws)
            else:
                col = alt = j - i
    else:
        col, alt = cols
    top_col, top_alt = ind[-1]
    if col == top_col:
        if alt != top_alt:
            raise Fail(TAB_ERROR, j, Code.TAB_ERROR)
    elif col > top_col:
        if len(ind) >= MAX_INDENT:
            raise Fail("too many levels of indentation", j, Code.TOO_MANY_INDENTS)
        if alt <= top_alt:
            raise Fail(TAB_ERROR, j, Code.TAB_ERROR)
        ind = (*ind, (col, alt))
        out.append(("INDENT", "", base + j))
    else:
        while len(ind) > 1 and col < ind[-1][0]:
            ind = ind[:-1]
            out.append(("DEDENT", "", base + j))
        if col != ind[-1][0]:
            raise Fail("unindent does not match any outer indentation level", j, Code.BAD_DEDENT)
        if alt != ind[-1][1]:
            raise Fail(TAB_ERROR, j, Code.TAB_ERROR)
    return ind


def _continuation(text: str, k: int, n: int, eof: int, ver: int) -> int:
    """End of the line continuation whose backslash is at ``k``, or -1 if unknown.

    Before 3.12, ``compile()`` appends a newline to source ending in
    ``\r\n`` (a quirk of its newline translation), so a continuation may
    end the input there.
    """
    c = char_at(text, k + 1, n, eof)
    if c is None:
        return -1
    if c == "\r":
        c2 = char_at(text, k + 2, n, eof)
        if c2 is None:
            return -1
        e = k + 3 if c2 == "\n" else k + 2
    elif c == "\n":
        e = k + 2
    elif c == "":
        raise Fail(EOF_ERROR, k, Code.BAD_CONTINUATION)
    else:
        raise Fail(
            "unexpected character after line continuation character", k, Code.BAD_CONTINUATION
        )
    c = char_at(text, e, n, eof)
    if c is None:
        return -1
    if c == "" and eof == 2 and not (ver < 312 and text.startswith("\r\n", e - 2)):
        raise Fail(EOF_ERROR, k, Code.BAD_CONTINUATION)
    return e


def _bol(
    ver: int,
    text: str,
    i: int,
    n: int,
    eof: int,
    ind: tuple[tuple[int, int], ...],
    parens: str,
    base: int,
    out: list[Symbol],
) -> tuple[int, tuple[tuple[int, int], ...], bool]:
    """Process blank lines and indentation at the start of a line.

    Returns ``(j, ind, stay)``: with ``stay`` false the first token of the
    line is at ``j`` (indentation done); with ``stay`` true the lexer stays
    at the beginning of a line and stops at ``j`` (pending text starts there,
    or everything was blank up to the end of input).
    """
    while True:
        j = BLANKS_RE.match(text, i).end()  # type: ignore[union-attr]
        cols: tuple[int, int] | None = None
        if j < n and text[j] == "\\":
            if ver >= 310:
                # 3.10+: a continuation inside the indentation; the column of
                # the first backslash not at column 0 counts.
                r = _bol_continuation(ver, text, i, n, eof)
                if r is None:
                    return i, ind, True
                j, col, alt = r
                cols = (col, alt)
            elif ver == 309:
                # 3.9: the line counts as blank; what follows the
                # continuation is not indentation.
                r9 = _bol_continuation_39(ver, text, j, n, eof)
                if r9 is None:
                    return i, ind, True
                if r9 >= 0:
                    return r9, ind, False
                j = -r9 - 1
            else:
                # 3.8: the blanks before the backslash are the indentation.
                if not parens:
                    ind = _indent(text, i, j, ind, base, out, None)
                return j, ind, False
        if j >= n:
            return (n if eof == 2 else i), ind, True
        c = text[j]
        if c == "#":
            j = COMMENT_RE.match(text, j).end()  # type: ignore[union-attr]
            if j >= n:
                return (n if eof == 2 else i), ind, True
            c = text[j]
        if c == "\r" or c == "\n":
            if c == "\r":
                if j + 1 >= n and not eof:
                    return i, ind, True
                i = j + 2 if text.startswith("\r\n", j) else j + 1
            else:
                i = j + 1
            continue
        if not parens:
            ind = _indent(text, i, j, ind, base, out, cols)
        return j, ind, False


def _bol_continuation(ver: int, text: str, i: int, n: int, eof: int) -> tuple[int, int, int] | None:
    """3.10+ indentation spanning backslash continuations, from line start ``i``.

    Returns (index of the first other character, column, alt column) or None
    when more text is needed.
    """
    col = alt = cont = 0
    k = i
    while True:
        j = BLANKS_RE.match(text, k).end()  # type: ignore[union-attr]
        col, alt = _columns(text[k:j], col, alt)
        if j >= n or text[j] != "\\":
            break
        if not cont:
            cont = col
        e = _continuation(text, j, n, eof, ver)
        if e < 0:
            return None
        k = e
    if cont:
        col = alt = cont
    return j, col, alt


def _bol_continuation_39(ver: int, text: str, j: int, n: int, eof: int) -> int | None:
    """3.9: continuation(s) at a line start whose blanks end at ``j``.

    Returns the index of the first token (>= 0, no indentation processing),
    ``-(k + 1)`` where ``k`` starts a blank or comment line (skip it as
    blank), or None when more text is needed.
    """
    k = j
    while True:
        e = _continuation(text, k, n, eof, ver)
        if e < 0:
            return None
        k = BLANKS_RE.match(text, e).end()  # type: ignore[union-attr]
        c = char_at(text, k, n, eof)
        if c is None:
            return None
        if c == "\\":
            continue
        if c in ("#", "\r", "\n"):
            return -(k + 1)
        if c == "":
            return -(n + 1) if eof == 2 else None
        return k


# -- strings ----------------------------------------------------------------------


def _string(text: str, s: int, q: int, n: int, eof: int, is_bytes: bool, raw: bool) -> int:
    """End of the (non-f) string literal with prefix at ``s`` and quote at ``q``.

    Returns -1 while the literal is unterminated and may still end; the
    part seen so far is validated all the same.
    """
    c = text[q]
    c1 = char_at(text, q + 1, n, eof)
    if c1 is None:
        return -1
    if c1 == c:
        c2 = char_at(text, q + 2, n, eof)
        if c2 is None:
            return -1
        if c2 != c:
            return q + 2  # the empty string
        quote = c * 3
    else:
        quote = c
    b = q + len(quote)
    j = STRING_BODY_RE[quote].match(text, b).end()  # type: ignore[union-attr]
    if j >= n or text[j] == "\\":
        # The body so far is checked first, so that errors come in text order
        # however the text was chunked.
        _check_body(text, s, b, n, is_bytes, raw, True)
        if eof == 2:
            if len(quote) == 3:
                raise Fail("unterminated triple-quoted string literal", s, Code.UNTERMINATED_STRING)
            raise Fail("unterminated string literal", s, Code.UNTERMINATED_STRING)
        return -1
    if text[j] != c:
        _check_body(text, s, b, j, is_bytes, raw, True)
        raise Fail("unterminated string literal", s, Code.UNTERMINATED_STRING)
    _check_body(text, s, b, j, is_bytes, raw, False)
    return j + len(quote)


def _check_body(
    text: str, s: int, b: int, e: int, is_bytes: bool, raw: bool, partial: bool
) -> None:
    """Checks CPython makes when it decodes a literal's body ``text[b:e]``.

    With ``partial`` the body may still grow.  Errors are reported in text
    order: escapes before a non-ASCII character of a bytes literal first.
    """
    bad = -1
    if is_bytes and not text[b:e].isascii():
        m = NON_ASCII_RE.search(text, b, e)
        assert m is not None
        bad = e = m.start()
        partial = True
    if not raw and text.find("\\", b, e) >= 0:
        check_escapes(text, b, e, is_bytes, partial)
    if bad >= 0:
        raise Fail("bytes can only contain ASCII literal characters", bad, Code.INVALID_STRING)


def _fstring_start(
    ver: int,
    kind: str,
    text: str,
    s: int,
    q: int,
    n: int,
    eof: int,
    fst: tuple[Frame, ...],
    parens: str,
    base: int,
    out: list[Symbol],
    tail: str,
) -> tuple[tuple[Frame, ...], int] | None:
    """Emit FSTRING_START or TSTRING_START (``kind``; prefix at ``s``, quote at
    ``q``) and open a frame."""
    c = text[q]
    c1 = char_at(text, q + 1, n, eof)
    if c1 is None:
        return None
    if c1 == c:
        c2 = char_at(text, q + 2, n, eof)
        if c2 is None:
            return None
        quote = c * 3 if c2 == c else c
    else:
        quote = c
    e = q + len(quote)
    if ver >= 312:
        if len(fst) + 1 >= MAX_FSTRING_LEVEL:
            raise Fail("too many nested f-strings", s, Code.TOO_DEEP_FSTRING)
    elif fst:
        _old_check(text, s, e, fst, tail)
    raw = "r" in text[s:q].lower()
    out.append((kind, text[s:e], base + s))
    return (*fst, (quote, raw, len(parens), 0, LITERAL, INTERPOLATED_KINDS[kind])), e


def _fs_literal(
    ver: int,
    text: str,
    i: int,
    n: int,
    eof: int,
    fst: tuple[Frame, ...],
    parens: str,
    base: int,
    out: list[Symbol],
    tail: str,
) -> tuple[int, tuple[Frame, ...], str, bool]:
    """Scan f-string literal text (or format spec text) from ``i``.

    Emits FSTRING_MIDDLE for the text up to a replacement field, the end of
    the format spec or the end of the f-string (then FSTRING_END), and returns
    ``(i, fst, parens, stopped)``; ``stopped`` means more text is needed and
    the pending text starts at ``i``.
    """
    frame = fst[-1]
    quote, raw, _, nf, mode, (_, middle_kind, end_kind) = frame
    match = FSTRING_BODY_RE[(quote, raw)].match
    s = j = i

    def partial(end: int) -> None:
        """Check the literal text so far, which may still grow."""
        if not raw and text.find("\\", s, end) >= 0:
            check_escapes(text, s, end, False, True)

    def middle(end: int) -> None:
        if end > s:
            if not raw and text.find("\\", s, end) >= 0:
                check_escapes(text, s, end, False, False)
            if ver < 312 and len(fst) > 1:
                _old_check(text, s, end, fst[:-1], tail)
            out.append((middle_kind, text[s:end], base + s))

    while True:
        j = match(text, j).end()  # type: ignore[union-attr]
        if j >= n:
            if eof == 1 and j > s:
                middle(j)  # the emit branch: literal text may end anywhere
                return j, fst, parens, True
            partial(n)
            if eof == 2:
                raise Fail(_unterminated_fstring(quote), j, Code.UNTERMINATED_STRING)
            return s, fst, parens, True
        c = text[j]
        if c == "{":
            if mode != SPEC:
                if j + 1 >= n:
                    if not eof:
                        partial(n)
                        return s, fst, parens, True
                elif text[j + 1] == "{":
                    j += 2
                    continue
            middle(j)
            if len(parens) >= max_paren_level(ver):
                raise Fail("too many nested parentheses", j, Code.TOO_MANY_BRACKETS, "{")
            if nf >= (3 if ver >= 312 else 2):
                raise Fail("f-string: expressions nested too deeply", j, Code.TOO_DEEP_FSTRING)
            out.append(("{", "{", base + j))
            return j + 1, (*fst[:-1], _moved(frame, nf + 1, EXPR)), parens + "{", False
        if c == "}":
            if mode == LITERAL:
                if j + 1 >= n:
                    if not eof:
                        partial(n)
                        return s, fst, parens, True
                elif text[j + 1] == "}":
                    j += 2
                    continue
                partial(j + 1)
                raise Fail("f-string: single '}' is not allowed", j, Code.FSTRING_SYNTAX)
            middle(j)  # end of the format spec; '}' is lexed as an operator
            return j, (*fst[:-1], _moved(frame, nf, EXPR)), parens, False
        if c == "\\":
            # A backslash the body regex could not take: one at the very end,
            # or an unterminated \N{...} escape.
            partial(j)
            if j + 1 >= n:
                if eof == 2:
                    raise Fail(_unterminated_fstring(quote), j, Code.UNTERMINATED_STRING)
                return s, fst, parens, True
            k = j + 3
            while k < n and text[k] not in "{}\\'\"\r\n":
                k += 1
            if k >= n and eof != 2:
                return s, fst, parens, True
            raise Fail("(unicode error) malformed \\N character escape", j, Code.INVALID_STRING)
        if c == "\r" or c == "\n":  # only single-quoted f-strings stop here
            if mode == SPEC:
                middle(j)  # a newline ends the format spec (3.12+)
                return j, (*fst[:-1], _moved(frame, nf, EXPR)), parens, False
            partial(j)
            raise Fail(_unterminated_fstring(quote), j, Code.UNTERMINATED_STRING)
        # The closing quote(s).
        if nf:
            raise Fail("f-string: expecting '}'", j, Code.FSTRING_SYNTAX)
        middle(j)
        e = j + len(quote)
        if ver < 312 and len(fst) > 1:
            _old_check(text, j, e, fst[:-1], tail)
        out.append((end_kind, quote, base + j))
        return e, fst[:-1], parens, False


def _moved(frame: Frame, fields: int, mode: int) -> Frame:
    """``frame`` with ``fields`` open replacement fields, in ``mode``."""
    return (frame[0], frame[1], frame[2], fields, mode, frame[5])


def _unterminated_fstring(quote: str) -> str:
    if len(quote) == 3:
        return "unterminated triple-quoted f-string literal"
    return "unterminated f-string literal"


# -- f-strings before 3.12 ----------------------------------------------------------


def _old_check(text: str, s: int, e: int, frames: tuple[Frame, ...], tail: str) -> None:
    """Before 3.12 an f-string is one STRING token whose inside is parsed later.

    ``text[s:e]`` lies inside the expression part of every frame in
    ``frames``: it may hold no backslash, no quote that would have ended an
    enclosing literal early, and no newline inside a single-quoted one.
    """
    if not frames:
        return
    span = text[s:e]
    k = span.find("\\")
    if k >= 0:
        raise Fail(
            "f-string expression part cannot include a backslash", s + k, Code.FSTRING_SYNTAX
        )
    for frame in frames:
        quote = frame[0]
        if len(quote) == 1:
            k = span.find(quote)
            if k >= 0:
                raise Fail("f-string: expecting '}'", s + k, Code.FSTRING_SYNTAX)
            if "\n" in span or "\r" in span:
                raise Fail("unterminated string literal", s, Code.UNTERMINATED_STRING)
        else:
            before = text[s - 2 : s] if s >= 2 else (tail + text[:s])[-2:]
            if quote in before + span:
                raise Fail("f-string: expecting '}'", s, Code.FSTRING_SYNTAX)


def _conversion(text: str, e: int, n: int, eof: int) -> bool:
    """3.12+: the conversion's name starts right after the '!' at ``e - 1``.

    CPython tokenizes ``!`` and the name apart and its parser then demands
    that they touch (``f"{x! r}"`` is an error); a name can start with any
    identifier character, so only that first character is checked here.
    Returns False while it is unknown.
    """
    c = char_at(text, e, n, eof)
    if c is None:
        return False
    if not is_id_start(c):
        raise Fail(
            "f-string: conversion type must come right after the exclamanation mark",
            e,
            Code.FSTRING_SYNTAX,
        )
    return True


def _old_conversion(text: str, e: int, n: int, eof: int) -> bool:
    """Before 3.12 a conversion is one of s, r, a right after '!', then ':' or '}'.

    Returns False while the two characters after the '!' are unknown.
    """
    c = char_at(text, e, n, eof)
    if c is None:
        return False
    if c not in ("s", "r", "a"):
        raise Fail(
            "f-string: invalid conversion character: expected 's', 'r', or 'a'",
            e,
            Code.FSTRING_SYNTAX,
        )
    c2 = char_at(text, e + 1, n, eof)
    if c2 is None:
        return False
    if c2 not in (":", "}"):
        raise Fail("f-string: expecting '}'", e + 1, Code.FSTRING_SYNTAX)
    return True
