"""The document's own line ends for a middle.

Models write any line end; the middle shown takes the document's own
(:func:`document_line_ends`), so an editor shows no stray ``^M``.  Which lines a middle
may span is the decoder's business (:mod:`lsp_server.decoding.line_mode`).
"""

from __future__ import annotations

from lexer.text import LINE_END_RE
from quotient_parser.quotient import Quotient

__all__ = ["document_line_ends"]


def document_line_ends(middle: str, quotient: Quotient, text: str) -> str:
    """``middle`` with the document's line ends, if the file still parses that way.

    Python reads every line end alike, but the rewritten middle is checked again, since
    a line end that meets one in the context (``\\r`` before R's ``\\n``) can change how
    many lines there are.
    """
    newline = "\r\n" if "\r\n" in text else "\r" if "\r" in text and "\n" not in text else "\n"
    rewritten = LINE_END_RE.sub(newline, middle)
    if rewritten == middle:
        return middle
    if quotient.initial.feed(rewritten).complete:
        return rewritten
    return middle
