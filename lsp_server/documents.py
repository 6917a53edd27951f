"""Open documents, with LSP positions converted to string offsets.

The protocol counts columns in UTF-16 code units unless the client negotiates
UTF-8 or UTF-32, and ends lines only at ``\\n``, ``\\r\\n`` and ``\\r``.  Python's
``str.splitlines`` also breaks at form feeds, ``\\x1c``-``\\x1e``, ``\\x85``,
U+2028 and U+2029, which appear in real source files (the standard library has
form feeds), so lines are found here with the protocol's own rule.

A position past the end of its line means the end of the line, as the
specification says; a line past the end of the document is an error
(:class:`PositionError`), because a client that sends one has lost sync.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal, get_args

from lexer.text import line_end_offsets

__all__ = ["Document", "PositionEncoding", "PositionError", "position_encoding"]

#: How columns are counted; UTF-16 code units are the protocol's default.
PositionEncoding = Literal["utf-8", "utf-16", "utf-32"]
_ENCODINGS: tuple[PositionEncoding, ...] = get_args(PositionEncoding)


def position_encoding(name: object) -> PositionEncoding:
    """The encoding a negotiated name stands for; the protocol's default otherwise."""
    for encoding in _ENCODINGS:
        if name == encoding:
            return encoding
    return "utf-16"


class PositionError(ValueError):
    """A position that does not exist in the document."""


def _units(text: str, encoding: PositionEncoding) -> int:
    """Length of ``text`` in the encoding's code units."""
    if encoding == "utf-32" or text.isascii():
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", errors="surrogatepass"))
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _chars_for_units(line: str, units: int, encoding: PositionEncoding) -> int:
    """Characters of ``line`` covered by ``units`` code units (clamped to the line).

    A count that falls inside a character (half a surrogate pair, part of a
    UTF-8 sequence) rounds down to the start of that character.
    """
    if units <= 0:
        return 0
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    width = 1
    used = 0
    for index, char in enumerate(line):
        code = ord(char)
        if encoding == "utf-8":
            width = 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
        else:
            width = 2 if code > 0xFFFF else 1
        if used + width > units:
            return index
        used += width
    return len(line)


@dataclass
class Document:
    """The text of one open document and its version."""

    uri: str
    text: str
    version: int = 0
    language_id: str = "python"
    _line_starts: list[int] | None = field(default=None, repr=False)

    # -- lines ---------------------------------------------------------------

    @property
    def line_starts(self) -> list[int]:
        """Offset of the first character of every line (computed once per text)."""
        if self._line_starts is None:
            self._line_starts = [0, *line_end_offsets(self.text)]
        return self._line_starts

    def _line_text(self, line: int) -> str:
        """Line ``line`` without its line end."""
        starts = self.line_starts
        start = starts[line]
        end = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        text = self.text[start:end]
        return text.rstrip("\r\n") if line + 1 < len(starts) else text

    # -- positions -----------------------------------------------------------

    def offset_at(self, line: int, character: int, encoding: PositionEncoding = "utf-16") -> int:
        """The string offset of an LSP position."""
        starts = self.line_starts
        if line < 0 or character < 0:
            raise PositionError(f"negative position {line}:{character}")
        if line >= len(starts):
            # The position just after a final line end is line len(starts) - 1 ... unless
            # the client asks for the (empty) line after it, which some clients do at EOF.
            raise PositionError(
                f"line {line} is past the end of the document ({len(starts)} lines)"
            )
        text = self._line_text(line)
        return starts[line] + _chars_for_units(text, character, encoding)

    def position_at(self, offset: int, encoding: PositionEncoding = "utf-16") -> tuple[int, int]:
        """The LSP position (line, character) of a string offset."""
        offset = max(0, min(offset, len(self.text)))
        starts = self.line_starts
        line = bisect.bisect_right(starts, offset) - 1
        # An offset between "\r" and "\n" belongs to the line the pair ends.
        line_text = self.text[starts[line] : offset]
        return line, _units(line_text, encoding)

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
        self.set_text(self.text[:begin] + new_text + self.text[finish:])

    def set_text(self, text: str) -> None:
        self.text = text
        self._line_starts = None
