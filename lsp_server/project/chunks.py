"""Pieces of other documents chosen by how much they look like the code at the cursor.

As llama.vim does, documents are cut into chunks of whole lines and each is compared
with the text around the cursor by the Jaccard index of their identifier sets.  Two
kinds of chunk are left out: one too similar to the cursor's own code (above
:data:`TOO_SIMILAR`: the model tends to copy it instead of completing), and one whose
lines the current file mostly has already (:func:`repeats_file`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CHUNK_LINES",
    "TOO_SIMILAR",
    "Chunk",
    "chunks_of",
    "cursor_window",
    "identifiers",
    "jaccard",
    "line_set",
    "repeats_file",
]

#: Lines of a chunk.
CHUNK_LINES = 24
#: A chunk at least this similar to the cursor's window is left out.
TOO_SIMILAR = 0.6
#: Lines of the cursor's window before and after the cursor.
WINDOW_BEFORE, WINDOW_AFTER = 24, 8
#: A chunk more than this share of whose significant lines the current file has is left out.
REPEATED_SHARE = 0.5

_IDENTIFIER_RE = re.compile(r"[A-Za-z_]\w+")


@dataclass(frozen=True)
class Chunk:
    """Lines ``start``..``end`` (0-based, end exclusive) of a document, and their text."""

    start: int
    end: int
    text: str


def identifiers(text: str) -> frozenset[str]:
    """The identifiers (two characters or more) a text uses."""
    return frozenset(_IDENTIFIER_RE.findall(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def cursor_window(left: str, right: str) -> str:
    """The text around the cursor that chunks are compared with."""
    before = left.split("\n")[-WINDOW_BEFORE:]
    after = right.split("\n")[:WINDOW_AFTER]
    return "\n".join(before) + "\n".join(after)


def chunks_of(text: str, lines: int = CHUNK_LINES) -> list[Chunk]:
    """``text`` cut into chunks of ``lines`` lines (blank chunks left out)."""
    all_lines = text.splitlines(keepends=True)
    out = []
    for start in range(0, len(all_lines), lines):
        piece = "".join(all_lines[start : start + lines])
        if piece.strip():
            out.append(Chunk(start, min(len(all_lines), start + lines), piece))
    return out


def chunk_around(text: str, offset: int, lines: int = CHUNK_LINES) -> Chunk | None:
    """The chunk of ``lines`` lines centred on the line holding ``offset``."""
    line = text.count("\n", 0, max(0, min(offset, len(text))))
    all_lines = text.splitlines(keepends=True)
    start = max(0, min(line - lines // 2, len(all_lines) - lines))
    piece = "".join(all_lines[start : start + lines])
    return Chunk(start, min(len(all_lines), start + lines), piece) if piece.strip() else None


def line_set(text: str) -> frozenset[str]:
    """The significant lines of a text (stripped, more than a few characters)."""
    return frozenset(s for line in text.splitlines() if len(s := line.strip()) > 3)


def repeats_file(chunk_text: str, file_lines: frozenset[str]) -> bool:
    """Whether the current file already has most of the chunk's significant lines."""
    lines = [s for line in chunk_text.splitlines() if len(s := line.strip()) > 3]
    if not lines:
        return True
    return sum(line in file_lines for line in lines) > REPEATED_SHARE * len(lines)


def most_similar(
    chunks: Iterable[tuple[str, Chunk]], window: str, file_lines: frozenset[str]
) -> list[tuple[float, str, Chunk]]:
    """(similarity, path, chunk), most similar first, without the chunks left out (see
    the module docstring) or sharing nothing with the window."""
    query = identifiers(window)
    scored = []
    for path, chunk in chunks:
        score = jaccard(query, identifiers(chunk.text))
        if 0.0 < score < TOO_SIMILAR and not repeats_file(chunk.text, file_lines):
            scored.append((score, path, chunk))
    scored.sort(key=lambda item: (-item[0], item[1], item[2].start))
    return scored
