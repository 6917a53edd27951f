"""Unit tests of the server's parts: documents and positions, settings, line mode."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from lexer.text import line_end_offsets
from lsp_server import documents
from lsp_server.completion_item import completion_item
from lsp_server.decoding.line_mode import opens_block
from lsp_server.documents import (
    Document,
    IndexedAhead,
    PositionEncoding,
    PositionError,
    cut_pieces,
    cut_pieces_of,
    position_encoding,
)
from lsp_server.lines import document_line_ends
from lsp_server.request import Request
from lsp_server.settings import Settings
from lsp_server.transport.guard import JsonRpcGuard
from quotient_parser.quotient import Quotient

# ----------------------------------------------------------------------------- documents


def test_lines_end_only_at_protocol_line_ends() -> None:
    # A form feed and U+2028 are not line ends for the protocol (str.splitlines says they are).
    doc = Document("u", "a\x0cb\u2028c\r\nd\re\nf")
    assert doc.line_starts == [0, 7, 9, 11]
    assert doc.offset_at(0, 3) == 3
    assert doc.offset_at(1, 0) == 7
    assert doc.offset_at(3, 1) == 12


@pytest.mark.parametrize(
    ("encoding", "column", "expected"),
    [
        ("utf-16", 3, 2),  # "é" is 1 unit, the snake 2 (a surrogate pair)
        ("utf-16", 4, 3),
        ("utf-8", 3, 2),  # "é" is 2 bytes, the snake 4
        ("utf-8", 7, 3),
        ("utf-32", 3, 3),
        ("utf-16", 2, 2),  # inside the surrogate pair: the start of the character
        ("utf-16", 99, 5),  # past the end of the line: the end of the line
    ],
)
def test_columns_in_code_units(encoding: PositionEncoding, column: int, expected: int) -> None:
    doc = Document("u", "xé🐍yz\nnext")
    assert doc.offset_at(0, column, encoding) == expected


def test_negotiated_encoding_names() -> None:
    assert [position_encoding(n) for n in ("utf-8", "utf-32", "utf-16")] == [
        "utf-8", "utf-32", "utf-16"
    ]  # fmt: skip
    assert position_encoding(None) == position_encoding("latin-1") == "utf-16"


def test_position_round_trip() -> None:
    text = "aé🐍\r\nb\n"
    doc = Document("u", text)
    for offset in range(len(text) + 1):
        if text[offset - 1 : offset + 1] == "\r\n":
            continue  # between \r and \n is not a position
        for encoding in ("utf-16", "utf-8", "utf-32"):
            line, column = doc.position_at(offset, encoding)
            assert doc.offset_at(line, column, encoding) == offset


def test_incremental_replace_and_errors() -> None:
    doc = Document("u", "x = 1\ny = 2\n")
    doc.replace((1, 4), (1, 5), "🐍 + 3")
    assert doc.text == "x = 1\ny = 🐍 + 3\n"
    doc.replace((1, 4), (1, 6), "")  # the surrogate pair: 2 UTF-16 units
    assert doc.text == "x = 1\ny =  + 3\n"
    with pytest.raises(PositionError):
        doc.offset_at(5, 0)


def test_a_range_the_text_does_not_have_is_clamped_as_vscode_does() -> None:
    """Never a lost document: positions clamped into the text, an inverted range swapped,
    and what was done returned for the log."""
    doc = Document("u", "x = 1\ny = 2\n")
    assert doc.replace((1, 3), (0, 0), "") is not None  # swapped: (0, 0)-(1, 3)
    assert doc.text == " 2\n"
    assert doc.replace((7, 0), (2**63, 4), "z\n") is not None  # past the end: appended
    assert doc.text == " 2\nz\n"
    assert doc.replace((-1, 0), (0, -5), "w") is not None  # before the start: prepended
    assert doc.text == "w 2\nz\n"
    assert doc.replace((0, 1), (0, 99), "") is None  # past a line's end: LSP says clamp
    assert doc.text == "w\nz\n"


def test_an_edit_records_where_it_ended() -> None:
    doc = Document("u", "x = 1\ny = 2\n")
    assert doc.edited_to is None
    doc.replace((1, 4), (1, 5), "🐍 + 3")
    assert doc.edited_to == doc.text.index(" + 3") + 4
    doc.replace((0, 0), (0, 2), "")  # a deletion ends where it began
    assert doc.edited_to == 0
    doc.set_text("z\n")
    assert doc.edited_to is None


def test_line_starts_found_a_piece_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "_PIECE", 3)
    monkeypatch.setattr(documents, "_PIECE_MAX", 6)
    for text in ["", "a", "ab\r\ncd\r\n", "a\rb\r\r\n\n", "abc\r\nx", "\n" * 7, "ab\r"]:
        assert Document("u", text).line_starts == [0, *line_end_offsets(text)], text
        pieces, _ = cut_pieces(text)
        assert "".join(pieces) == text
        assert all(not (a.endswith("\r") and b.startswith("\n")) for a, b in pairwise(pieces))


def test_a_document_indexed_ahead_answers_as_one_indexed_later() -> None:
    text = "a = 1\r\nb = 'é'\rc = 3\n" * 50
    ahead = IndexedAhead()
    key = ahead.put([text[:7], text[7:100], text[100:]])  # a \r\n split between parts
    assert key != text and ahead.take(text) is None  # a text sent as it is
    pieces = ahead.take(key)
    assert pieces is not None and "".join(pieces[0]) == text
    with pytest.raises(LookupError):
        ahead.take(key)  # taken once: a placeholder never passes for the text
    key = ahead.put([text])
    ahead.clear()  # the message was handled without taking it
    with pytest.raises(LookupError):
        ahead.take(key)
    indexed = Document("u", key, pieces=pieces)
    plain = Document("u", text)
    for doc in (indexed, plain):
        doc.replace((40, 2), (41, 1), "x\ny")
    assert indexed.text == plain.text and indexed.line_starts == plain.line_starts
    for offset in range(0, len(indexed.text), 37):
        assert indexed.position_at(offset) == plain.position_at(offset)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\r\né😀", max_size=12), max_size=8))
def test_pieces_cut_from_parts_are_the_pieces_of_their_join(parts: list[str]) -> None:
    pieces, ends = cut_pieces_of(parts)
    text = "".join(parts)
    assert "".join(pieces) == text
    assert all(not (a.endswith("\r") and b.startswith("\n")) for a, b in pairwise(pieces))
    assert ends == [line_end_offsets(piece) for piece in pieces]
    doc = Document("u", text, pieces=(pieces, ends))
    assert doc.line_starts == [0, *line_end_offsets(text)]


# ----------------------------------------------------------------------------- settings


def test_settings_merge_and_report_problems() -> None:
    settings, problems = Settings().merged(
        {"fimlsp": {"maxTokens": 12, "line_mode": "single", "topK": 0, "colour": "red"}}
    )
    assert settings.max_tokens == 12 and settings.line_mode == "single"
    assert settings.top_k == Settings().top_k  # the bad value is ignored ...
    assert any("topK" in p for p in problems)  # ... and reported
    assert any("colour" in p for p in problems)
    assert Settings().merged(None) == (Settings(), [])
    assert Settings().merged("nonsense")[1]


def test_model_spec_from_repo_and_file() -> None:
    settings, _ = Settings().merged({"modelRepo": "Qwen/X-GGUF", "modelFile": "x-q8_0.gguf"})
    assert settings.model_spec == ("Qwen/X-GGUF", "x-q8_0.gguf")
    changed, _ = settings.merged({"maxTokens": 5})
    assert changed.model_key == settings.model_key  # no reload for a decoding setting
    assert settings.merged({"threads": 4})[0].model_key != settings.model_key


# ----------------------------------------------------------------------------- line mode


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("def f(x):", "\n", True),
        ("if x:\n    pass\nelse:", "\n", True),
        ("class C:\n    def m(self):", "\n    pass\n", True),
        ("x = f(", ")\n", False),  # the rest of the line closes it
        ("x = 1", "\n", False),
        ("d = {", "\n}\n", False),  # a bracket is not a block
        ("def f(x): return", "\n", False),
    ],
)
def test_opens_block(left: str, right: str, expected: bool) -> None:
    assert opens_block(Quotient(left, right)) is expected


@pytest.mark.parametrize(
    ("left", "middle", "right", "expected"),
    [
        ("if x:", "\r\n    y = 1\r", "\n", "\n    y = 1\n"),  # the document uses \n
        ("if x:", "\n    y = 1", "\r\nz = 2\r\n", "\r\n    y = 1"),  # the document uses \r\n
        ("x = 1", "", "\n", ""),
    ],
)
def test_middles_take_the_document_line_ends(
    left: str, middle: str, right: str, expected: str
) -> None:
    quotient = Quotient(left, right)
    assert quotient.initial.feed(middle).complete
    assert document_line_ends(middle, quotient, left + right) == expected


# ----------------------------------------------------------------------------- completion items


@pytest.mark.parametrize(
    ("middle", "label", "detail"),
    [
        ("(values)\n", "sum(values)", "fimlsp: 2 lines, 3 tokens"),
        ("values)", "sumvalues)", "fimlsp: 1 line, 3 tokens"),
        ("\r\n    x = 1\r\n", "sumx = 1", "fimlsp: 3 lines, 3 tokens"),
        ("a\rb", "suma", "fimlsp: 2 lines, 3 tokens"),  # a lone \r ends a line too
        ("y" * 80, "sum" + "y" * 57 + "...", "fimlsp: 1 line, 3 tokens"),
    ],
)
def test_completion_item_replaces_the_word_before_the_cursor(
    middle: str, label: str, detail: str
) -> None:
    text = "total = sum\nprint(total)\n"
    offset = text.index("sum") + 3
    request = Request("file:///x.py", text, offset, Settings())
    item = completion_item(request, types.Position(0, 11), middle, 3, "utf-16")
    assert (item.label, item.detail) == (label, detail)
    assert isinstance(item.text_edit, types.TextEdit)
    assert item.text_edit.new_text == "sum" + middle
    edit_range = item.text_edit.range
    assert (edit_range.start.line, edit_range.start.character) == (0, 8)
    assert (edit_range.end.line, edit_range.end.character) == (0, 11)


def test_a_text_indexed_ahead_and_lost_closes_the_document_rather_than_keep_an_old_one() -> None:
    from lsp_server.server import create_server

    server = create_server()
    uri = "file:///lost.py"
    try:
        for lost_in in ("open", "change"):
            server.open_document(types.TextDocumentItem(uri, "python", 1, "x = 1\n"))
            key = server.indexed_ahead.put(["y = 2\n"])
            server.indexed_ahead.clear()  # its message was handled without taking it
            if lost_in == "open":
                server.open_document(types.TextDocumentItem(uri, "python", 2, key))
            else:
                server.change_document(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                        content_changes=[types.TextDocumentContentChangeWholeDocument(text=key)],
                    )
                )
            assert uri not in server.documents, lost_in
    finally:
        server.engine.shutdown(timeout=1)


def test_warm_up_makes_the_converters_functions_before_the_first_message() -> None:
    """cattrs makes a type's structuring function on first use, on the event loop; after
    ``warm_up`` a first ``didOpen`` is structured without making anything."""
    from lsp_server.server import create_server

    server = create_server()
    try:
        protocol = server.protocol
        assert isinstance(protocol, JsonRpcGuard)
        converter = protocol._converter
        dispatch: Any = converter._structure_func.dispatch  # an lru_cache
        protocol.warm_up()
        made = dispatch.cache_info().currsize
        assert made > 0
        did_open = {
            "jsonrpc": "2.0",
            "method": types.TEXT_DOCUMENT_DID_OPEN,
            "params": {
                "textDocument": {
                    "uri": "file:///a.py",
                    "languageId": "python",
                    "version": 1,
                    "text": "",
                }
            },
        }
        message = converter.structure(did_open, types.DidOpenTextDocumentNotification)
        assert message.params.text_document.uri == "file:///a.py"
        assert dispatch.cache_info().currsize == made  # nothing made at first use
    finally:
        server.engine.shutdown(timeout=1)
