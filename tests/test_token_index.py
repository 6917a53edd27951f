"""lsp_server.model.token_index against brute force.

Synthetic vocabularies over a small alphabet (UTF-8 leads, continuation bytes, 0x00 and
0xFF) with hypothesis, every query exhaustively; and every family's real token bytes,
as llama.cpp renders them, with sampled queries (each brute-force answer is a scan of
up to 262,144 tokens).
"""

# Fixtures imported from the fixture modules are requested by parameter name, which ruff
# reads as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from family_fixtures import (  # noqa: F401  (fixtures are used by name)
    FAMILY_NAMES,
    FamilyModel,
    family_model,
    family_path,
)
from hypothesis import given
from hypothesis import strategies as st
from model_fixtures import model_cache  # noqa: F401

from bench.token_index import main as bench_main
from lsp_server.completion import _Utf8Buffer
from lsp_server.model.token_index import TokenIndex

Get = Callable[[str], FamilyModel]


def _ids(array: np.ndarray) -> list[int]:
    return sorted(array.tolist())


def brute_starting(vocab: Sequence[bytes], q: bytes) -> list[int]:
    return [i for i, b in enumerate(vocab) if b.startswith(q)]


def brute_prefixes(vocab: Sequence[bytes], q: bytes, proper: bool = False) -> list[int]:
    return [i for i, b in enumerate(vocab) if b and q.startswith(b) and not (proper and b == q)]


def brute_owing(vocab: Sequence[bytes], q: bytes) -> list[int]:
    return [i for i, b in enumerate(vocab) if b.startswith(q) or (b and q.startswith(b) and b != q)]


def brute_continuing(
    vocab: Sequence[bytes], held: bytes, among: Sequence[int] | None = None
) -> list[int]:
    """The decoder's own test: the bytes still split into text and an unfinished tail
    (``among``: the tokens to try, all by default)."""
    ids = range(len(vocab)) if among is None else among
    return [i for i in ids if vocab[i] and _Utf8Buffer.split(held + vocab[i]) is not None]


def unfinished_characters(third: Sequence[int] = range(0x80, 0xC0)) -> list[bytes]:
    """Every start of a UTF-8 character that Python's decoder would wait on."""
    out = []
    for lead in range(0xC2, 0xF5):
        for rest in [b""] + [bytes([b]) for b in range(0x80, 0xC0)]:
            for more in [b""] + ([bytes([b]) for b in third] if rest and lead >= 0xF0 else []):
                held = bytes([lead]) + rest + more
                need = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
                try:
                    held.decode()
                except UnicodeDecodeError as exc:
                    if exc.reason == "unexpected end of data" and len(held) <= need:
                        out.append(held)
    return out


def check_against_brute_force(index: TokenIndex, vocab: Sequence[bytes], q: bytes) -> None:
    assert _ids(index.starting_with(q)) == brute_starting(vocab, q), q
    assert _ids(index.prefixes_of(q)) == brute_prefixes(vocab, q), q
    assert _ids(index.prefixes_of(q, proper=True)) == brute_prefixes(vocab, q, True), q
    if q:
        assert _ids(index.owing(q)) == brute_owing(vocab, q), q


ALPHABET = [0x00, 0x20, 0x61, 0x62, 0x7F, 0x80, 0x8D, 0xA9, 0xBF, 0xC3, 0xE2, 0xED, 0xF0, 0xFF]
tokens = st.binary(max_size=5).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b))


@given(vocab=st.lists(tokens, min_size=1, max_size=40), query=tokens)
def test_synthetic_vocabularies(vocab: list[bytes], query: bytes) -> None:
    index = TokenIndex(vocab)
    for q in {query, *vocab, *(a + b for a in vocab[:6] for b in vocab[:6])}:
        check_against_brute_force(index, vocab, q)
    for held in (b"\xc3", b"\xe2", b"\xe2\x82", b"\xe0", b"\xed", b"\xf0", b"\xf0\x9f\x90"):
        assert _ids(index.continuing(held)) == brute_continuing(vocab, held), held
    assert _ids(index.empty) == [i for i, b in enumerate(vocab) if not b]


def test_every_unfinished_character() -> None:
    """Exhaustively: every unfinished character against a vocabulary of every short
    continuation."""
    vocab = [b"", b"a", b"\xc3\xa9", *(bytes([b]) for b in range(0x80, 0xC0))]
    vocab += [bytes([b, c]) for b in (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF) for c in (0x41, 0x80)]
    vocab += [b"\x80\x80\x80", b"\x80\x80\x80a", b"\xbf\xbfa", b"\x80\xc3", b"\x80\xff"]
    index = TokenIndex(vocab)
    helds = unfinished_characters(third=(0x80, 0xBF))
    assert len(helds) > 1000
    for held in helds:
        assert _ids(index.continuing(held)) == brute_continuing(vocab, held), held


@pytest.mark.parametrize("held", [b"", b"a", b"\xc3\xa9", b"\x80", b"\xc0", b"\xe0\x80", b"\xf5"])
def test_continuing_rejects_what_is_not_an_unfinished_character(held: bytes) -> None:
    with pytest.raises(ValueError):
        TokenIndex([b"a", b"\x80"]).continuing(held)


def test_cached_tables(tmp_path: Path) -> None:
    vocab = [b"ab", b"a", b"", b"b", b"\xc3", b"\xa9x", b"a"]
    first = TokenIndex.cached(vocab, tmp_path)
    files = list(tmp_path.glob("*.npy"))
    assert len(files) == 1
    again = TokenIndex.cached(vocab, tmp_path)
    assert np.array_equal(again._tables, first._tables)
    files[0].write_bytes(b"not an array")  # a damaged cache entry is rebuilt
    rebuilt = TokenIndex.cached(vocab, tmp_path)
    assert np.array_equal(rebuilt._tables, first._tables)
    other = TokenIndex.cached([*vocab, b"c"], tmp_path)  # another vocabulary, another key
    assert len(list(tmp_path.glob("*.npy"))) == 2 and other.n_vocab == len(vocab) + 1
    assert _ids(again.prefixes_of(b"abc")) == [0, 1, 6]


def test_answers_are_read_only() -> None:
    index = TokenIndex([b"a", b"ab", b"\x80"])
    for answer in (index.starting_with(b"a"), index.prefixes_of(b"ab"), index.continuing(b"\xc3")):
        with pytest.raises(ValueError):
            answer[:1] = 0


#: One family per distinct vocabulary (qwen3 and mellum differ from qwen2.5-coder and
#: starcoder2 by a few control tokens' texts).
DISTINCT = [n for n in FAMILY_NAMES if n not in ("qwen3", "mellum")]


@pytest.mark.parametrize("name", DISTINCT)
def test_real_vocabularies(family_model: Get, name: str) -> None:
    vocab = family_model(name).model.vocab_bytes
    index = TokenIndex(vocab)
    rng = random.Random(name)
    words = [b for b in vocab if b.strip().isalnum()]
    queries = {b"pri", b" pri", b"\n", b"    ", b"self", b"\xff", b"\xf0\x9f", b"zzzzzzzzzzzz"}
    queries |= {rng.choice(words) for _ in range(6)}
    queries |= {rng.choice(vocab) + rng.choice(vocab) for _ in range(4)}
    for q in queries:
        check_against_brute_force(index, vocab, q)
    helds = [h for h in unfinished_characters(third=(0x80,)) if len(h) == 1]
    helds += rng.sample([h for h in unfinished_characters(third=(0x80,)) if len(h) > 1], 6)
    # An unfinished character goes on only with a continuation byte: try just those tokens
    # (the check of all of them for one character is in test_every_unfinished_character).
    led = [i for i, b in enumerate(vocab) if b and 0x80 <= b[0] <= 0xBF]
    assert brute_continuing(vocab, b"\xe2") == brute_continuing(vocab, b"\xe2", led)
    for held in helds:
        assert _ids(index.continuing(held)) == brute_continuing(vocab, held, led), held
    assert _ids(index.empty) == [i for i, b in enumerate(vocab) if not b]


def test_benchmark_runs(model_cache: Path) -> None:
    """bench.token_index on the bundled vocabulary: its trie agrees with the index (the
    benchmark checks that) and every figure is there."""
    out = io.StringIO()
    args = ["--families", "starcoder2", "--n", "20", "--repeat", "1", "--json"]
    assert bench_main(args, out) == 0
    (result,) = json.loads(out.getvalue())["families"]
    assert result["vocab_size"] == 49152
    for figure in (result["owing_us"]["index"], result["step_us"]["scan_today"]):
        assert figure["median"] is not None and figure["median"] > 0
