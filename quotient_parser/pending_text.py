"""What the text the lexer holds pending at the end of a middle is: a comment, a
backslash continuation, a plain string literal still open.

Landing (``QuotientState.lands``), the finish bound (``finish.py``) and the witness
search (``witness.py``) all ask, and a middle that opens a comment or a continuation
is told apart from one that writes code by these answers alone.
"""

from __future__ import annotations

from lexer.text import INDENT_CHARS

__all__ = ["comment_or_continuation", "open_string_head", "past_continuations"]


def comment_or_continuation(pending: str) -> bool:
    """Whether the pending text is a comment, or a backslash whose line has not ended
    (after any blanks and continuation lines: ``\\<newline>#`` is a comment)."""
    blank = past_continuations(pending)
    return blank.startswith("#") or (
        blank.startswith("\\") and "\n" not in blank and "\r" not in blank
    )


def past_continuations(pending: str) -> str:
    """``pending`` without its leading blanks and ended backslash continuations."""
    blank = pending.lstrip(INDENT_CHARS)
    while blank.startswith("\\"):
        if blank.startswith("\\\r\n"):
            blank = blank[3:].lstrip(INDENT_CHARS)
        elif blank[1:2] in ("\n", "\r"):
            blank = blank[2:].lstrip(INDENT_CHARS)
        else:
            break
    return blank


def open_string_head(pending: str) -> tuple[str, str] | None:
    """(suffix head, closing quote) of a plain string literal still open in ``pending``."""
    k = 0
    while k < len(pending) and pending[k].isalpha():
        k += 1
    prefix = pending[:k].lower()
    interpolated = "f" in prefix or "t" in prefix
    if k >= len(pending) or pending[k] not in "'\"" or interpolated or len(prefix) > 2:
        return None
    quote = pending[k : k + 3] if pending[k : k + 3] in ("'''", '"""') else pending[k]
    body = pending[k + len(quote) :]
    if len(quote) == 1 and body.endswith(quote):
        return None  # already closed (a complete literal still pending)
    head = ("r" if "r" in prefix else "") + quote
    return head, quote
