"""The middle as a ``textDocument/completion`` item, for clients without inline completion.

Built on the event loop, so its cost must not grow with the document: the word
before the cursor is looked for in a bounded window (a ``\\w*\\Z`` search over the
whole left context is quadratic in a long run of word characters), and the range
comes from the cursor's position taken with the snapshot.
"""

from __future__ import annotations

import re

from lsprotocol import types

from lexer.text import count_line_ends, first_line

from .documents import PositionEncoding, code_units
from .request import Request

__all__ = ["MAX_WORD", "completion_item", "word_before"]

#: The longest word before the cursor the item replaces; after a longer run of word
#: characters (a base64 blob, a generated name) the item inserts at the cursor.
MAX_WORD = 100
_WORD_END = re.compile(r"\w*\Z")
_LABEL_CHARS = 60


def word_before(text: str, offset: int) -> str:
    """The word characters just before ``offset``; empty when there are more than
    :data:`MAX_WORD` of them (the search never looks further back)."""
    window = text[max(0, offset - MAX_WORD - 1) : offset]
    match = _WORD_END.search(window)
    word = match.group() if match is not None else ""
    return "" if len(word) > MAX_WORD else word


def completion_item(
    request: Request,
    cursor: types.Position,
    middle: str,
    tokens: int,
    encoding: PositionEncoding,
) -> types.CompletionItem:
    """One completion item that inserts ``middle`` at ``cursor`` (the request's offset as
    a position); it replaces the word before the cursor with itself plus the middle, so
    that clients filtering by that word keep it."""
    prefix = word_before(request.text, request.offset)
    start = types.Position(cursor.line, cursor.character - code_units(prefix, encoding))
    shown = first_line(middle).strip() or first_line(middle.strip())
    if len(shown) > _LABEL_CHARS:
        shown = shown[: _LABEL_CHARS - 3] + "..."
    lines = count_line_ends(middle) + 1
    return types.CompletionItem(
        label=prefix + shown or "(fimlsp)",
        kind=types.CompletionItemKind.Snippet,
        detail=f"fimlsp: {lines} line{'s' if lines > 1 else ''}, {tokens} tokens",
        documentation=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=f"```python\n{prefix}{middle}\n```"
        ),
        filter_text=prefix + middle,
        text_edit=types.TextEdit(
            range=types.Range(start=start, end=cursor), new_text=prefix + middle
        ),
        insert_text_format=types.InsertTextFormat.PlainText,
        sort_text="0",
        preselect=True,
    )
