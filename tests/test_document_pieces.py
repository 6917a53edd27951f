"""The piece document against a plain string: random edits, then every position.

Pieces are made tiny here (3 to 6 characters) so that edits, line ends and surrogate
pairs fall on and across piece boundaries; the reference is a ``str`` with its lines
found by :func:`lexer.text.line_end_offsets` and its columns by the codecs.
"""

from __future__ import annotations

import hashlib
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexer.text import line_end_offsets
from lsp_server import documents
from lsp_server.documents import Document, PositionEncoding, chars_for_units, code_units

ALPHABET = st.sampled_from(["a", "b", " ", "\n", "\r", "\r\n", "é", "🐍", "\ud83d", "\x0c"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)
ENCODINGS: list[PositionEncoding] = ["utf-16", "utf-8", "utf-32"]


@pytest.fixture(autouse=True)
def tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "_PIECE", 3)
    monkeypatch.setattr(documents, "_PIECE_MAX", 6)


def reference_position(text: str, offset: int, encoding: PositionEncoding) -> tuple[int, int]:
    starts = [0, *line_end_offsets(text)]
    line = max(i for i, start in enumerate(starts) if start <= offset)
    return line, code_units(text[starts[line] : offset], encoding)


def check_against(doc: Document, text: str) -> None:
    assert doc.text == text and doc.length == len(text)
    assert doc.line_starts == [0, *line_end_offsets(text)]
    assert doc.sha256() == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    starts = doc.line_starts
    for encoding in ENCODINGS:
        for line, start in enumerate(starts):  # inside a pair: its start
            if text[start : start + 1] == "🐍" and encoding == "utf-16":
                assert doc.offset_at(line, 1, encoding) == start
            # every column, inside characters and past the end, against the whole line
            end = starts[line + 1] if line + 1 < len(starts) else len(text)
            whole = text[start:end].rstrip("\r\n")
            for column in range(code_units(whole, encoding) + 2):
                expected = start + chars_for_units(whole, column, encoding)
                assert doc.offset_at(line, column, encoding) == expected
        for offset in range(len(text) + 1):
            line, column = doc.position_at(offset, encoding)
            assert (line, column) == reference_position(text, offset, encoding)
            if not offset or text[offset - 1 : offset + 1] != "\r\n":
                assert doc.offset_at(line, column, encoding) == offset
    pieces = doc.snapshot()._pieces
    assert all(not (a.endswith("\r") and b.startswith("\n")) for a, b in pairwise(pieces))
    assert all(pieces) or pieces == ("",)


@settings(max_examples=400)  # cheap examples; piece boundaries need many
@given(
    TEXTS,
    st.lists(
        st.tuples(st.integers(0, 60), st.integers(0, 60), TEXTS, st.booleans()),
        max_size=8,
    ),
)
def test_random_edits_match_a_plain_string(
    initial: str, edits: list[tuple[int, int, str, bool]]
) -> None:
    doc, text = Document("u", initial), initial
    check_against(doc, text)
    for a, b, new, whole in edits:
        if whole:
            doc.set_text(new)
            text = new
        else:
            begin, finish = sorted((min(a, len(text)), min(b, len(text))))
            if text[begin - 1 : begin + 1] == "\r\n" or text[finish - 1 : finish + 1] == "\r\n":
                continue  # between \r and \n is not a position
            start, end = doc.position_at(begin), doc.position_at(finish)
            assert (doc.offset_at(*start), doc.offset_at(*end)) == (begin, finish)
            doc.replace(start, end, new)
            text = text[:begin] + new + text[finish:]
            assert doc.edited_to == begin + len(new)
        check_against(doc, text)
