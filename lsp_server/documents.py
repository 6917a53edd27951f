"""Open documents, with LSP positions converted to string offsets.

The protocol counts columns in UTF-16 code units unless the client negotiates
UTF-8 or UTF-32, and ends lines only at ``\\n``, ``\\r\\n`` and ``\\r``.  Python's
``str.splitlines`` also breaks at form feeds, ``\\x1c``-``\\x1e``, ``\\x85``,
U+2028 and U+2029, which appear in real source files (the standard library has
form feeds), so lines are found here with the protocol's own rule.

A position past the end of its line means the end of the line, as the
specification says; a line past the end of the document is an error
(:class:`PositionError`), because a client that sends one has lost sync.  A
column inside a character (half a surrogate pair, part of a UTF-8 sequence)
means the start of that character: positions are clamped to code points.

Everything here runs on the server's event loop, so nothing may cost more than a
small constant per character of the line at hand: the line index is updated per
change from the lines the change touches (the line starts after it move by one
shift applied lazily, so typing in one place never walks the whole index), and
code units are counted by the codecs, not by a Python loop.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from typing import Literal, get_args

from lexer.text import line_end_offsets

__all__ = [
    "Document",
    "IndexedAhead",
    "PositionEncoding",
    "PositionError",
    "line_starts",
    "position_encoding",
]

#: How columns are counted; UTF-16 code units are the protocol's default.
PositionEncoding = Literal["utf-8", "utf-16", "utf-32"]
_ENCODINGS: tuple[PositionEncoding, ...] = get_args(PositionEncoding)


def position_encoding(name: object) -> PositionEncoding:
    """The encoding a negotiated name stands for; the protocol's default otherwise."""
    for encoding in _ENCODINGS:
        if name == encoding:
            return encoding
    return "utf-16"


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


class PositionError(ValueError):
    """A position that does not exist in the document."""


def code_units(text: str, encoding: PositionEncoding) -> int:
    """Length of ``text`` in the encoding's code units (a lone surrogate is one UTF-16
    unit and three UTF-8 bytes, as the client's own string would count it)."""
    if encoding == "utf-32" or text.isascii():
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def chars_for_units(line: str, units: int, encoding: PositionEncoding) -> int:
    """Characters of ``line`` covered by ``units`` code units (clamped to the line).

    A count that falls inside a character (half a surrogate pair, part of a
    UTF-8 sequence) rounds down to the start of that character.
    """
    if units <= 0:
        return 0
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    if _SURROGATE_RE.search(line) is not None:  # lone surrogates: a codec would pair them
        return _chars_for_units_slowly(line, units, encoding)
    if encoding == "utf-8":
        data = line.encode("utf-8", "surrogatepass")
        if units >= len(data):
            return len(line)
        try:
            return len(data[:units].decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError as cut:  # inside a character: only at the end
            return len(data[: cut.start].decode("utf-8", "surrogatepass"))
    data = line.encode("utf-16-le")
    if 2 * units >= len(data):
        return len(line)
    covered = data[: 2 * units].decode("utf-16-le", "surrogatepass")
    # The first half of a pair decodes to a lone high surrogate: round down.
    return len(covered) - 1 if "\ud800" <= covered[-1] <= "\udbff" else len(covered)


def _chars_for_units_slowly(line: str, units: int, encoding: PositionEncoding) -> int:
    """:func:`chars_for_units` a character at a time (for lines with lone surrogates,
    which only a hostile client sends)."""
    used = 0
    for index, char in enumerate(line):
        code = ord(char)
        if encoding == "utf-8":
            used += 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
        else:
            used += 2 if code > 0xFFFF else 1
        if used > units:
            return index
    return len(line)


#: Characters indexed per C call by :func:`line_starts`.
_INDEX_PIECE = 1 << 17


def line_starts(text: str) -> list[int]:
    """The offset of every line's first character, found a piece of the text at a time
    (run on a thread, it never holds the GIL for long)."""
    starts = [0]
    pos = 0
    while pos < len(text):
        cut = min(len(text), pos + _INDEX_PIECE)
        if text[cut - 1] == "\r":  # keep a \r\n in one piece
            cut = min(len(text), cut + 1)
        starts += [pos + end for end in line_end_offsets(text[pos:cut])]
        pos = cut
    return starts


class IndexedAhead:
    """Line indexes of texts about to be opened, computed off the event loop (while a
    large message was parsed); a document takes the one made for its very text, and
    what the message did not take is dropped once it was handled (``clear``)."""

    def __init__(self) -> None:
        self._indexes: dict[int, tuple[str, list[int]]] = {}  # by id(text)

    def put(self, text: str) -> None:
        self._indexes[id(text)] = (text, line_starts(text))

    def take(self, text: str) -> list[int] | None:
        entry = self._indexes.pop(id(text), None)
        return entry[1] if entry is not None and entry[0] is text else None

    def clear(self) -> None:
        self._indexes.clear()


class Document:
    """The text of one open document, its version and its line index."""

    __slots__ = (
        "_digest",
        "_shift",
        "_shift_from",
        "_starts",
        "edited_to",
        "language_id",
        "text",
        "uri",
        "version",
    )

    def __init__(
        self,
        uri: str,
        text: str,
        version: int = 0,
        language_id: str = "python",
        starts: list[int] | None = None,
    ):
        """``starts``: the text's line starts when they were found ahead
        (:func:`line_starts`); else they are found when first needed."""
        self.uri = uri
        self.text = text
        self.version = version
        self.language_id = language_id
        #: Line starts; those at index ``_shift_from`` and after are ``_shift`` short.
        self._starts: list[int] | None = starts
        self._shift_from = 0 if starts is None else len(starts)
        self._shift = 0
        self._digest: str | None = None
        #: Where the last incremental change ended in ``text`` (None after a whole new
        #: text): the cursor read-ahead works for, known without comparing texts.
        self.edited_to: int | None = None

    # -- lines ---------------------------------------------------------------

    @property
    def line_starts(self) -> list[int]:
        """Offset of the first character of every line (a copy, for inspection)."""
        self._settle(len(self._index()))
        return list(self._index())

    def _index(self) -> list[int]:
        if self._starts is None:
            self._starts = [0, *line_end_offsets(self.text)]
            self._shift_from, self._shift = len(self._starts), 0
        return self._starts

    def _start(self, line: int) -> int:
        start = self._index()[line]
        return start + self._shift if line >= self._shift_from else start

    def _settle(self, line: int) -> None:
        """Apply the lazy shift to the starts from ``_shift_from`` up to ``line``, or
        down to it: afterwards the shift begins at ``line``."""
        starts, first, shift = self._index(), self._shift_from, self._shift
        if shift and first < line:
            end = min(line, len(starts))
            starts[first:end] = [s + shift for s in starts[first:end]]
        elif shift and line < first:
            starts[line:first] = [s - shift for s in starts[line:first]]
        self._shift_from = line

    @property
    def line_count(self) -> int:
        return len(self._index())

    def _line_of(self, offset: int) -> int:
        """The line holding ``offset`` (an offset between ``\\r`` and ``\\n`` belongs to
        the line the pair ends)."""
        starts, first = self._index(), self._shift_from
        line = bisect.bisect_right(starts, offset, 0, first) - 1
        if line == first - 1 and first < len(starts):
            shifted = bisect.bisect_right(starts, offset - self._shift, first) - 1
            if shifted >= first:
                line = shifted
        return line

    def _line_text(self, line: int) -> str:
        """Line ``line`` without its line end."""
        start = self._start(line)
        if line + 1 < self.line_count:
            return self.text[start : self._start(line + 1)].rstrip("\r\n")
        return self.text[start:]

    # -- positions -----------------------------------------------------------

    def offset_at(self, line: int, character: int, encoding: PositionEncoding = "utf-16") -> int:
        """The string offset of an LSP position."""
        if line < 0 or character < 0:
            raise PositionError(f"negative position {line}:{character}")
        if line >= self.line_count:
            raise PositionError(
                f"line {line} is past the end of the document ({self.line_count} lines)"
            )
        return self._start(line) + chars_for_units(self._line_text(line), character, encoding)

    def position_at(self, offset: int, encoding: PositionEncoding = "utf-16") -> tuple[int, int]:
        """The LSP position (line, character) of a string offset."""
        offset = max(0, min(offset, len(self.text)))
        line = self._line_of(offset)
        return line, code_units(self.text[self._start(line) : offset], encoding)

    # -- edits ---------------------------------------------------------------

    def replace(
        self,
        start: tuple[int, int],
        end: tuple[int, int],
        new_text: str,
        encoding: PositionEncoding = "utf-16",
    ) -> None:
        """Replace the text between two positions (an incremental change)."""
        begin = self.offset_at(*start, encoding)
        finish = self.offset_at(*end, encoding)
        if finish < begin:
            raise PositionError(f"range end {end} is before its start {start}")
        self._splice(begin, finish, new_text)

    def _splice(self, begin: int, finish: int, new_text: str) -> None:
        """``text[begin:finish] = new_text``, with the lines it touches indexed again.

        The lines from the one holding ``begin`` to the one holding ``finish`` are
        read again, from the line end before them (a ``\\r`` there may now pair with a
        ``\\n``) to the next line start (its line end is untouched, and so is every
        later line, which only moves).
        """
        old = self.text
        # One join: ``a + b + c`` converts twice when the parts' widths differ (a
        # 5 MB text with one emoji in its second half: 29 ms against 3 ms).
        self.text = "".join((old[:begin], new_text, old[finish:]))
        self._digest = None
        self.edited_to = begin + len(new_text)
        if self._starts is None:
            return
        first_line = self._line_of(begin)
        after = self._line_of(finish) + 1  # the first line start past the change
        delta = len(new_text) - (finish - begin)
        self._settle(after)
        starts = self._starts
        lo = starts[first_line] - 1 if first_line else 0
        if after < len(starts):  # that start only moves: it is not read again
            hi = starts[after] + self._shift + delta
            region = [lo + s for s in line_end_offsets(self.text[lo:hi]) if lo + s < hi]
        else:
            region = [lo + s for s in line_end_offsets(self.text[lo:])]
        if not first_line:
            region.insert(0, 0)
        starts[first_line:after] = region
        self._shift_from = first_line + len(region)
        self._shift += delta

    def set_text(self, text: str, starts: list[int] | None = None) -> None:
        """A whole new text (``starts``: its line starts, when found ahead)."""
        self.text = text
        self._starts = starts
        self._shift_from, self._shift = (0, 0) if starts is None else (len(starts), 0)
        self._digest = None
        self.edited_to = None

    # -- identity ------------------------------------------------------------

    def sha256(self) -> str:
        """SHA-256 of the text in UTF-8 (lone surrogates as they would be encoded),
        computed once per text."""
        digest = self._digest
        if digest is None:
            data = self.text.encode("utf-8", "surrogatepass")
            digest = self._digest = hashlib.sha256(data).hexdigest()
        return digest
