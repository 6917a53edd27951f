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
small constant per character of the line at hand: the text is kept in pieces of at
most 32 K characters, each with its own line ends (:class:`Document`), an edit re-cuts
only the pieces it touches, the whole ``str`` is joined only off the loop, from a
:class:`TextSnapshot`, and code units are counted by the codecs, not by a Python loop.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
from collections.abc import Iterable
from itertools import accumulate
from typing import Literal, get_args

from lexer.text import line_end_offsets

__all__ = [
    "Document",
    "IndexedAhead",
    "PositionEncoding",
    "PositionError",
    "TextSnapshot",
    "cut_pieces",
    "cut_pieces_of",
    "length_of",
    "position_encoding",
    "same_text",
    "text_of",
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


#: A piece of a document's text holds at most this many characters, and a run of text
#: is cut into pieces of ``_PIECE`` (so an edit re-reads at most a few pieces).
_PIECE = 1 << 14
_PIECE_MAX = 2 * _PIECE


def cut_pieces(text: str) -> tuple[list[str], list[list[int]]]:
    """``text`` cut into pieces of about ``_PIECE`` characters (never inside a
    ``\\r\\n``), each with the offsets just after its own line ends."""
    if len(text) <= _PIECE_MAX:
        pieces = [text]
    else:
        pieces = []
        pos = 0
        while pos < len(text):
            cut = min(len(text), pos + _PIECE)
            if text[cut - 1] == "\r" and text[cut : cut + 1] == "\n":  # keep a \r\n whole
                cut += 1
            pieces.append(text[pos:cut])
            pos = cut
    return pieces, [line_end_offsets(piece) for piece in pieces]


def cut_pieces_of(parts: Iterable[str]) -> tuple[list[str], list[list[int]]]:
    """:func:`cut_pieces` of ``"".join(parts)``, without joining them (a 5 M character
    text joined is a copy of up to 20 MB in one C call: see
    :mod:`lsp_server.json_pieces`); a ``\r\n`` split between two parts stays whole."""
    pieces: list[str] = []
    ends: list[list[int]] = []
    carried = ""
    for part in parts:
        part = carried + part
        carried = ""
        if part.endswith("\r"):  # its \n may begin the next part
            part, carried = part[:-1], "\r"
        if part:
            more, more_ends = cut_pieces(part)
            pieces += more
            ends += more_ends
    if carried or not pieces:
        more, more_ends = cut_pieces(carried)
        pieces += more
        ends += more_ends
    return pieces, ends


class IndexedAhead:
    """Texts about to be opened, cut into indexed pieces off the event loop (while a
    large message was parsed).

    The parsing thread puts a text's pieces here and puts the key it gets in the
    message instead of the text (a short placeholder: the whole text is never joined
    into one ``str``); the document the message opens or changes takes its pieces by
    that key.  What the message did not take is dropped once it was handled
    (``clear``).
    """

    def __init__(self) -> None:
        self._prefix = f"\x00fimlsp-indexed-text:{os.urandom(8).hex()}:"
        self._count = 0
        self._indexes: dict[str, tuple[list[str], list[list[int]]]] = {}

    def put(self, parts: Iterable[str]) -> str:
        """Cut the text made of ``parts``; the key that stands for it."""
        self._count += 1
        key = f"{self._prefix}{self._count}"
        self._indexes[key] = cut_pieces_of(parts)
        return key

    def take(self, text: str) -> tuple[list[str], list[list[int]]] | None:
        """The pieces ``text`` stands for; None for a text sent as it is.  Raises
        ``LookupError`` for a key whose pieces are gone (never answer for a
        placeholder as if it were the client's text)."""
        if not text.startswith(self._prefix):
            return None
        entry = self._indexes.pop(text, None)
        if entry is None:
            raise LookupError("a text indexed ahead was taken twice or after its message")
        return entry

    def clear(self) -> None:
        self._indexes.clear()


class TextSnapshot:
    """A document's text at one version, as its pieces: joined into one ``str`` only
    when first read (on the worker), hashed piece by piece."""

    __slots__ = ("_digest", "_pieces", "_text", "length")

    def __init__(self, pieces: tuple[str, ...], length: int) -> None:
        self._pieces = pieces
        self._text: str | None = pieces[0] if len(pieces) == 1 else None
        self._digest: str | None = None
        self.length = length

    @property
    def text(self) -> str:
        text = self._text
        if text is None:
            text = self._text = "".join(self._pieces)
        return text

    @property
    def pieces(self) -> tuple[str, ...]:
        return self._pieces

    def __reduce__(self) -> tuple[type[TextSnapshot], tuple[tuple[str, ...], int]]:
        """Pickled as its pieces (never also as the joined text)."""
        return (TextSnapshot, (self._pieces, self.length))

    def sha256(self) -> str:
        """SHA-256 of the text in UTF-8 (lone surrogates as they would be encoded)."""
        if self._digest is None:
            digest = hashlib.sha256()
            for piece in self._pieces:
                digest.update(piece.encode("utf-8", "surrogatepass"))
            self._digest = digest.hexdigest()
        return self._digest


def text_of(source: str | TextSnapshot) -> str:
    """The text of a snapshot or of a plain string."""
    return source if isinstance(source, str) else source.text


def length_of(source: str | TextSnapshot) -> int:
    """The length of a snapshot's text (without joining it) or of a plain string."""
    return len(source) if isinstance(source, str) else source.length


def same_text(a: str | TextSnapshot, b: str | TextSnapshot) -> bool:
    """Whether two texts are known equal without joining pieces: snapshots by identity
    (a document hands out one snapshot per version), strings by value."""
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b


class Document:
    """The text of one open document, its version and its line index.

    The text is kept in pieces (:func:`cut_pieces`), each with its own line ends, and
    running totals of characters and line ends per piece: an edit re-cuts the pieces
    it touches and rebuilds the totals (one short list per piece, a few hundred at
    5 MB), so it costs in proportion to the edit and a piece, never the document.
    """

    __slots__ = (
        "_chars_before",
        "_ends",
        "_ends_through",
        "_pieces",
        "_snapshot",
        "_units",
        "edited_to",
        "language_id",
        "length",
        "uri",
        "version",
    )

    def __init__(
        self,
        uri: str,
        text: str,
        version: int = 0,
        language_id: str = "python",
        pieces: tuple[list[str], list[list[int]]] | None = None,
    ):
        """``pieces``: the text cut ahead (:func:`cut_pieces`); else it is cut here."""
        self.uri = uri
        self.version = version
        self.language_id = language_id
        self._pieces: list[str] = []
        self._ends: list[list[int]] = []
        self._chars_before: list[int] = []
        self._ends_through: list[int] = []
        self._snapshot: TextSnapshot | None = None
        #: Per encoding, each piece's length in code units (-1 until first asked).
        self._units: dict[PositionEncoding, list[int]] = {}
        self.length = 0
        #: Where the last incremental change ended in the text (None after a whole new
        #: text): the cursor read-ahead works for, known without comparing texts.
        self.edited_to: int | None = None
        self.set_text(text, pieces)

    # -- the text ------------------------------------------------------------

    def snapshot(self) -> TextSnapshot:
        """The text as it is now (one object per version; O(pieces) to make)."""
        snapshot = self._snapshot
        if snapshot is None:
            snapshot = self._snapshot = TextSnapshot(tuple(self._pieces), self.length)
        return snapshot

    @property
    def text(self) -> str:
        """The whole text (joined once per version: not for the event loop)."""
        return self.snapshot().text

    def sha256(self) -> str:
        return self.snapshot().sha256()

    def _totals(self) -> None:
        self._chars_before = [0, *accumulate(map(len, self._pieces))]
        self._ends_through = list(accumulate(map(len, self._ends)))
        self.length = self._chars_before[-1]
        self._snapshot = None

    def _piece_at(self, offset: int) -> int:
        """The piece holding the character at ``offset`` (the last one at the end)."""
        return min(bisect.bisect_right(self._chars_before, offset) - 1, len(self._pieces) - 1)

    def _slice(self, begin: int, end: int) -> str:
        """``text[begin:end]``, read from the pieces it spans."""
        if begin >= end:
            return ""
        first, last = self._piece_at(begin), self._piece_at(end - 1)
        base = self._chars_before
        if first == last:
            return self._pieces[first][begin - base[first] : end - base[first]]
        parts = [self._pieces[first][begin - base[first] :]]
        parts += self._pieces[first + 1 : last]
        parts.append(self._pieces[last][: end - base[last]])
        return "".join(parts)

    # -- lines ---------------------------------------------------------------

    @property
    def line_starts(self) -> list[int]:
        """Offset of the first character of every line (for inspection)."""
        starts = [0]
        for base, ends in zip(self._chars_before, self._ends):
            starts += [base + end for end in ends]
        return starts

    @property
    def line_count(self) -> int:
        return 1 + self._ends_through[-1]

    def _start(self, line: int) -> int:
        if line == 0:
            return 0
        piece = bisect.bisect_left(self._ends_through, line)  # holds the line's end
        before = self._ends_through[piece - 1] if piece else 0
        return self._chars_before[piece] + self._ends[piece][line - before - 1]

    def _line_of(self, offset: int) -> int:
        """The line holding ``offset`` (an offset between ``\\r`` and ``\\n`` belongs to
        the line the pair ends)."""
        piece = self._piece_at(offset)
        before = self._ends_through[piece - 1] if piece else 0
        return before + bisect.bisect_right(self._ends[piece], offset - self._chars_before[piece])

    def _line_end(self, line: int) -> int:
        """The offset where line ``line``'s text ends (before its line end)."""
        if line + 1 >= self.line_count:
            return self.length
        end = self._start(line + 1)
        return end - (2 if self._slice(max(0, end - 2), end) == "\r\n" else 1)

    def _piece_units(self, piece: int, encoding: PositionEncoding) -> int:
        """Piece ``piece``'s length in code units (counted once per piece and encoding)."""
        units = self._units.get(encoding)
        if units is None:
            units = self._units[encoding] = [-1] * len(self._pieces)
        count = units[piece]
        if count < 0:
            count = units[piece] = code_units(self._pieces[piece], encoding)
        return count

    def _segments(self, begin: int, end: int) -> Iterable[tuple[int, int, str | None]]:
        """``text[begin:end]`` piece by piece: (piece, offset of the part, the part, or
        None where it is the whole piece, whose code units are counted once)."""
        base = self._chars_before
        for piece in range(self._piece_at(begin), len(self._pieces)):
            low, high = max(begin, base[piece]), min(end, base[piece + 1])
            if low >= high:
                return
            whole = low == base[piece] and high == base[piece + 1]
            yield (
                piece,
                low,
                None if whole else self._pieces[piece][low - base[piece] : high - base[piece]],
            )

    # -- positions -----------------------------------------------------------

    def offset_at(self, line: int, character: int, encoding: PositionEncoding = "utf-16") -> int:
        """The string offset of an LSP position.

        The line is read piece by piece, each whole piece's code units counted once:
        a position on a line of millions of characters costs a piece, not the line.
        """
        if line < 0 or character < 0:
            raise PositionError(f"negative position {line}:{character}")
        if line >= self.line_count:
            raise PositionError(
                f"line {line} is past the end of the document ({self.line_count} lines)"
            )
        start, end = self._start(line), self._line_end(line)
        left = character
        for piece, at, part in self._segments(start, end):
            units = (
                self._piece_units(piece, encoding) if part is None else code_units(part, encoding)
            )
            if left < units:
                text = self._pieces[piece] if part is None else part
                return at + chars_for_units(text, left, encoding)
            left -= units
        return end

    def position_at(self, offset: int, encoding: PositionEncoding = "utf-16") -> tuple[int, int]:
        """The LSP position (line, character) of a string offset."""
        offset = max(0, min(offset, self.length))
        line = self._line_of(offset)
        units = 0
        for piece, _at, part in self._segments(self._start(line), offset):
            units += (
                self._piece_units(piece, encoding) if part is None else code_units(part, encoding)
            )
        return line, units

    # -- edits ---------------------------------------------------------------

    def replace(
        self,
        start: tuple[int, int],
        end: tuple[int, int],
        new_text: str,
        encoding: PositionEncoding = "utf-16",
    ) -> str | None:
        """Replace the text between two positions (an incremental change).

        A range the text does not have is applied as VS Code's own text model applies
        it: each position clamped into the text (a line before the first is its start, a
        line past the last is the end, a character past its line is the line's end) and
        an end before its start swapped with it.  Returns what was clamped, to report;
        None when the range fit.
        """
        begin, begin_fits = self._clamped_offset(*start, encoding)
        finish, finish_fits = self._clamped_offset(*end, encoding)
        problems = [] if begin_fits and finish_fits else [f"range {start}-{end} clamped"]
        if finish < begin:
            begin, finish = finish, begin
            problems.append(f"range end {end} is before its start {start}: swapped")
        self._splice(begin, finish, new_text)
        return "; ".join(problems) or None

    def _clamped_offset(
        self, line: int, character: int, encoding: PositionEncoding
    ) -> tuple[int, bool]:
        """The offset of a position clamped into the text, and whether its line was in
        the text (a character past its line's end is the line's end, as LSP says)."""
        if line < 0:
            return 0, False
        if line >= self.line_count:
            return self.length, False
        return self.offset_at(line, max(character, 0), encoding), character >= 0

    def _splice(self, begin: int, finish: int, new_text: str) -> None:
        """``text[begin:finish] = new_text``, with the pieces it touches cut again.

        The pieces from the one holding the character before ``begin`` to the one
        holding the character at ``finish`` are joined, edited and cut again: their
        first and last characters stay, so a ``\\r\\n`` never spans the new cuts' ends.
        """
        first = self._piece_at(begin - 1) if begin else 0
        last = self._piece_at(finish)
        base = self._chars_before[first]
        region = "".join(
            (
                self._slice(base, begin),
                new_text,
                self._slice(finish, self._chars_before[last + 1]),
            )
        )
        pieces, ends = cut_pieces(region)  # empty only when the whole text went
        self._pieces[first : last + 1] = pieces
        self._ends[first : last + 1] = ends
        for units in self._units.values():
            units[first : last + 1] = [-1] * len(pieces)
        self._totals()
        self.edited_to = begin + len(new_text)

    def set_text(self, text: str, pieces: tuple[list[str], list[list[int]]] | None = None) -> None:
        """A whole new text (``pieces``: the text cut ahead, :func:`cut_pieces`)."""
        self._pieces, self._ends = cut_pieces(text) if pieces is None else pieces
        self._units = {}
        self._totals()
        self.edited_to = None
