"""Lexical errors: a machine-readable code, the offending bracket, and where.

Callers decide what to do from :attr:`LexError.code` (and
:attr:`LexError.bracket`), never from the message, which follows CPython's
wording and may change with it.  ``quotient_parser/suffix.py``, for
example, repairs a right context by opening the bracket an
``UNMATCHED_BRACKET`` error names.
"""

from __future__ import annotations

import enum

__all__ = ["LexError", "LexErrorCode"]


class LexErrorCode(enum.Enum):
    """What kind of lexical error was found."""

    #: a character that cannot stand here: an invalid or non-printable
    #: character, a NUL byte, a surrogate, '!' outside an f-string field, '<>'
    INVALID_CHARACTER = "invalid-character"
    #: a malformed number literal
    INVALID_NUMBER = "invalid-number"
    #: a string escape CPython cannot decode, or non-ASCII text in bytes
    INVALID_STRING = "invalid-string"
    #: a string, f-string or t-string that is not closed
    UNTERMINATED_STRING = "unterminated-string"
    #: the input ends with a bracket open (``bracket``: the opening one)
    UNCLOSED_BRACKET = "unclosed-bracket"
    #: a closing bracket with no bracket open (``bracket``: the closing one)
    UNMATCHED_BRACKET = "unmatched-bracket"
    #: a closing bracket of another kind than the open one (``bracket``: the closing one)
    MISMATCHED_BRACKET = "mismatched-bracket"
    #: more nested brackets than CPython's limit (``lexer.tables.max_paren_level``)
    TOO_MANY_BRACKETS = "too-many-brackets"
    #: more indentation levels than CPython's limit
    TOO_MANY_INDENTS = "too-many-indents"
    #: f-strings or replacement fields nested deeper than CPython allows
    TOO_DEEP_FSTRING = "too-deep-fstring"
    #: a dedent to a column that no enclosing block has
    BAD_DEDENT = "bad-dedent"
    #: tabs and spaces mixed so that the indentation is ambiguous (TabError)
    TAB_ERROR = "tab-error"
    #: a backslash not followed by a line end, or at the end of input
    BAD_CONTINUATION = "bad-continuation"
    #: an f-string or t-string rule: a lone '}', a missing '}', a bad
    #: conversion, or (before 3.12) what the expression part may not contain
    FSTRING_SYNTAX = "fstring-syntax"


class LexError(Exception):
    """The text can no longer be a prefix of lexically valid Python source.

    ``code`` says what went wrong and ``bracket`` which bracket, for bracket
    errors (else None); ``message`` is CPython's wording.  ``offset`` is the
    absolute character offset of the problem in all the text fed since
    :meth:`LexState.initial`; ``line`` and ``column`` (both 1-based, the
    column counted in characters) locate it too.
    """

    def __init__(
        self,
        message: str,
        offset: int,
        line: int | None = None,
        column: int | None = None,
        *,
        code: LexErrorCode,
        bracket: str | None = None,
    ) -> None:
        super().__init__(message, offset)
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column
        self.code = code
        self.bracket = bracket

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.message} (offset {self.offset})"
        return f"{self.message} (line {self.line}, column {self.column}, offset {self.offset})"
