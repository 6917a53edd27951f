"""JSON decoding of large bodies in pieces, so that no single C call holds the GIL long.

``json.loads`` of a 5 MB ``didOpen`` is one C call of about 10 ms: run on a thread, it
still holds the GIL (and so stops the event loop) for all of it.  A large body's bulk
is its long strings (the document's text), so :func:`loads_in_pieces` gives the same
value as ``json.loads`` while every C call it makes covers at most about
:data:`PIECE` bytes but one: each long string is found in the bytes with a bounded
search and decoded a piece at a time (cut where no UTF-8 character or escape is split,
surrogate pairs joined again), and the rest, with each long string replaced by a
placeholder, is parsed whole.  Between the calls the interpreter can switch threads, so
the event loop waits at most one piece for the GIL.

Joining a long string's pieces into one ``str`` is one C call over the whole text, and
the slowest one here: 5 M characters with an emoji are a fresh 20 MB block, whose page
faults make the copy take about 10 ms.  A caller that can use the pieces as they are
(a server keeps a document's text in pieces) asks for them (``pieces=True``): each long
string value then comes as a :class:`LongString`, and :func:`join_long_strings` joins
the ones it did not take.

What stays one call: a body whose bulk is not long strings (a huge array of small
values), which no client sends for a document.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

__all__ = ["PIECE", "LongString", "join_long_strings", "loads_in_pieces"]

#: The most bytes one C call works on (well under a millisecond).
PIECE = 1 << 17

# The bytes of a JSON string up to its closing quote (or the search's end): runs of
# plain bytes and whole escapes, never an escape cut in two.  Quotes and backslashes
# are ASCII, so in UTF-8 they are never part of another character.
_STRING_BODY_RE = re.compile(rb'[^"\\]*(?:\\[\s\S][^"\\]*)*')


def _string_end(data: bytes, start: int) -> int | None:
    """The index of the closing quote of the string whose content begins at ``start``
    (None: the body ends inside it)."""
    pos = start
    while pos < len(data):
        found = _STRING_BODY_RE.match(data, pos, min(len(data), pos + PIECE))
        assert found is not None  # the pattern matches the empty string
        end = found.end()
        if end < len(data) and data[end] == ord('"'):
            return end
        if end == pos:  # a lone backslash at the end of the body
            return None
        pos = end
    return None


def _safe_cut(data: bytes, cut: int, lo: int) -> int:
    """A cut at or before ``cut`` (after ``lo``) that splits neither a UTF-8 character
    nor an escape."""
    while cut > lo and data[cut] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        cut -= 1
    while cut > lo:
        window = data[lo:cut]
        if (len(window) - len(window.rstrip(b"\\"))) % 2:
            cut -= 1  # the byte at the cut is escaped: cut before its backslash
            continue
        escape = data.rfind(b"\\u", max(lo, cut - 5), cut)
        if escape < 0:
            return cut
        before = data[lo:escape]
        if (len(before) - len(before.rstrip(b"\\"))) % 2:
            return cut  # the tail of an escaped backslash and a plain 'u': no escape here
        cut = escape  # a \uXXXX may span the cut
    return lo


class LongString:
    """A long JSON string's value, as the pieces it was decoded in (not joined)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts

    def join(self) -> str:
        return "".join(self.parts)

    def __repr__(self) -> str:
        return f"LongString({sum(map(len, self.parts))} characters in {len(self.parts)} pieces)"


def _decode_string(data: bytes, start: int, end: int) -> list[str]:
    """The value of the JSON string whose content is ``data[start:end]``, decoded a
    piece at a time: its pieces, in order."""
    parts: list[str] = []
    pos = start
    while pos < end:
        cut = end if end - pos <= PIECE else _safe_cut(data, pos + PIECE, pos)
        if cut <= pos:  # a piece that is all escapes cut nowhere: take the rest whole
            cut = end
        part = json.loads('"' + data[pos:cut].decode("utf-8") + '"')
        # A surrogate pair's two escapes may fall on either side of a cut; json.loads
        # would have joined them into one character.
        if parts and part and "\udc00" <= part[0] <= "\udfff":
            last = parts[-1]
            if last and "\ud800" <= last[-1] <= "\udbff":
                pair = (last[-1] + part[0]).encode("utf-16-le", "surrogatepass")
                parts[-1] = last[:-1] + pair.decode("utf-16-le")
                part = part[1:]
        parts.append(part)
        pos = cut
    return parts


def loads_in_pieces(data: bytes, pieces: bool = False) -> Any:
    """``json.loads(data.decode("utf-8"))``, in pieces (see the module docstring);
    ``pieces``: each long string value (not a key) is left as a :class:`LongString`.

    Raises what that raises (``ValueError``, ``UnicodeDecodeError`` included); the
    position in an error counts placeholders, not the long strings they stand for.
    """
    nonce = os.urandom(8).hex()
    long_strings: dict[str, list[str]] = {}
    skeleton: list[bytes] = []
    copied = pos = 0
    while True:
        quote = data.find(b'"', pos)
        if quote < 0:
            break
        end = _string_end(data, quote + 1)
        if end is None:
            break  # unterminated: json.loads says so
        if end - quote > PIECE:
            placeholder = f"\\u0000{nonce}:{len(long_strings)}"
            long_strings[json.loads(f'"{placeholder}"')] = _decode_string(data, quote + 1, end)
            skeleton += (data[copied : quote + 1], placeholder.encode())
            copied = end
        pos = end + 1
    if not long_strings:
        return json.loads(data.decode("utf-8"))
    skeleton.append(data[copied:])
    value = json.loads(b"".join(skeleton).decode("utf-8"))

    def put_back(item: Any) -> Any:
        parts = long_strings.get(item) if isinstance(item, str) else None
        if parts is None:
            return item
        return LongString(parts) if pieces else "".join(parts)

    def put_back_key(key: str) -> str:
        parts = long_strings.get(key)
        return key if parts is None else "".join(parts)

    return _map_leaves(value, put_back, put_back_key)


def join_long_strings(value: Any) -> Any:
    """``value`` with every :class:`LongString` in it joined into a ``str``."""
    return _map_leaves(value, lambda item: item.join() if isinstance(item, LongString) else item)


def _map_leaves(
    value: Any, leaf: Callable[[Any], Any], key: Callable[[str], str] | None = None
) -> Any:
    """``value`` (changed in place) with every item that is not an array or an object
    replaced by ``leaf(item)`` and every key by ``key(key)``; iterative, since a JSON
    value may nest deeper than Python's recursion limit."""
    if not isinstance(value, dict | list):
        return leaf(value)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if key is not None:
                for old in list(node):
                    new = key(old)
                    if new is not old:
                        node[new] = node.pop(old)
            items = node.items()
        else:
            items = enumerate(node)  # type: ignore[assignment]
        for at, item in list(items):
            if isinstance(item, dict | list):
                stack.append(item)
            else:
                new = leaf(item)
                if new is not item:
                    node[at] = new
    return value
