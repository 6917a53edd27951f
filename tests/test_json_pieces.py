"""Large bodies decoded in pieces give exactly what ``json.loads`` gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server import json_pieces
from lsp_server.json_pieces import LongString, join_long_strings, loads_in_pieces

# Characters that meet every cut: escapes (quote, backslash, controls, a lone
# surrogate, written \uXXXX), UTF-8 of two, three and four bytes.
_CHARS = st.sampled_from(["a", '"', "\\", "\n", "\x00", "é", "€", "😀", "\ud83d", "u", "/", " "])
_TEXTS = st.lists(_CHARS, max_size=60).map("".join)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXTS, inner, max_size=4),
    max_leaves=12,
)


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:
        return "error"


def _pieces(data: bytes) -> Any:
    try:
        return loads_in_pieces(data)
    except ValueError:
        return "error"


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of 8 bytes, so that every string of the examples is cut many times."""
    monkeypatch.setattr(json_pieces, "PIECE", 8)


@settings(max_examples=400, deadline=None)
@given(_VALUES, st.booleans())
def test_the_same_value_as_json_loads(value: Any, ascii_only: bool) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert _pieces(data) == _loads(data)


def _long_strings(value: Any) -> list[LongString]:
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, LongString):
            found.append(node)
        elif isinstance(node, dict):
            assert all(isinstance(key, str) for key in node)  # keys are always joined
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    return found


@settings(max_examples=400, deadline=None)
@given(_VALUES, st.booleans())
def test_long_strings_kept_in_pieces_join_to_the_same_value(value: Any, ascii_only: bool) -> None:
    """``pieces=True``: each long string is left as its pieces (none longer than a
    piece's bytes), and joined they give ``json.loads``'s value."""
    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        kept = loads_in_pieces(data, pieces=True)
    except ValueError:
        assert _loads(data) == "error"
        return
    for long_string in _long_strings(kept):
        assert all(len(part) <= json_pieces.PIECE for part in long_string.parts)
    joined = join_long_strings(kept)
    assert joined == _loads(data)
    assert not _long_strings(joined)


@settings(max_examples=400, deadline=None)
@given(_TEXTS, st.integers(min_value=0), st.sampled_from(list(b'"\\u{}[] x\xc3\x80')))
def test_the_same_verdict_on_a_damaged_body(text: str, at: int, byte: int) -> None:
    body = json.dumps({"text": text, "n": [1, text]}, ensure_ascii=False)
    data = bytearray(body.encode("utf-8", "surrogatepass"))
    data[at % len(data)] = byte
    assert _pieces(bytes(data)) == _loads(bytes(data))


def test_a_surrogate_pair_cut_between_its_escapes_is_one_character() -> None:
    for prefix in range(12):
        data = json.dumps({"t": "a" * prefix + "😀" * 3}).encode()  # \ud83d\ude00 escapes
        assert loads_in_pieces(data) == {"t": "a" * prefix + "😀" * 3}


def test_a_placeholder_lookalike_stays_as_sent() -> None:
    value = {"\u0000": "x" * 40, "k": ["\u0000" + "0" * 16 + ":0", "y" * 40]}
    assert loads_in_pieces(json.dumps(value).encode()) == value


def test_an_escaped_backslash_before_u_is_no_escape_to_cut_before() -> None:
    """``\\\\u`` is an escaped backslash and a plain ``u``: a cut after it is safe.  Taken
    for a ``\\uXXXX``, it sent the cut back to the piece's start and the rest of the
    string was decoded whole (one long call holding the GIL)."""
    value = "\\uaaa\x00aaa" * 3
    kept = loads_in_pieces(json.dumps(value).encode(), pieces=True)
    assert isinstance(kept, LongString) and len(kept.parts) > 1
    assert all(len(part) <= json_pieces.PIECE for part in kept.parts)
    assert kept.join() == value
