"""The middle as a ``textDocument/completion`` item, for clients without inline completion."""

from __future__ import annotations

import re

from lsprotocol import types

from lexer.text import count_line_ends, first_line

from .documents import Document, PositionEncoding
from .request import Request

__all__ = ["WORD_BEFORE_CURSOR", "completion_item"]

#: The word the item replaces with itself plus the middle (clients filter by it).
WORD_BEFORE_CURSOR = re.compile(r"\w*\Z")
_LABEL_CHARS = 60


def completion_item(
    request: Request, middle: str, tokens: int, encoding: PositionEncoding
) -> types.CompletionItem:
    """One completion item that inserts ``middle``; it replaces the word before the
    cursor with itself plus the middle, so that clients filtering by that word keep it."""
    word = WORD_BEFORE_CURSOR.search(request.left)
    prefix = word.group() if word else ""
    doc = Document(request.uri, request.text)
    start = types.Position(*doc.position_at(request.offset - len(prefix), encoding))
    end = types.Position(*doc.position_at(request.offset, encoding))
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
        text_edit=types.TextEdit(range=types.Range(start=start, end=end), new_text=prefix + middle),
        insert_text_format=types.InsertTextFormat.PlainText,
        sort_text="0",
        preselect=True,
    )
