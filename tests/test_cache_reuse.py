"""The KV cache's reuse: the common prefix, chunks kept by shifting them, two sequences.

Shifting a chunk rotates its cached keys to the new positions (llama.cpp's K-shift); the
keys are stored as f16, so a shifted key differs from one computed at its new position
by f16 rounding (a relative 2^-11, twice).  With one layer, where a key depends only on
its token and its position, that is the whole difference: the logits agree within 1e-2
(1.2e-3 measured, on logits up to about 19).  With more layers a shifted chunk also
carries what its deeper layers computed from the text that preceded it when it was
read, so reuse by shifting is an approximation there (as in llama-server's
``cache_reuse``); the common prefix stays exact.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    TinyFactory,
    model_cache,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)

from lsp_server.model import FimModel, Interrupted
from lsp_server.model.local.context import READ_AHEAD_CHUNK, ReusePlan, plan_reuse

CODE = "".join(f"def f{i}(x):\n    return x * {i} + len('{i}')\n\n" for i in range(60))

# ---------------------------------------------------------------- planning


def test_plan_keeps_the_common_prefix() -> None:
    assert plan_reuse([1, 2, 3, 4], [1, 2, 3, 9, 9], 0) == ReusePlan(3, (), 3)
    assert plan_reuse([], [1, 2], 4) == ReusePlan(0, (), 0)
    assert plan_reuse([1, 2, 3], [1, 2, 3], 2, limit=2) == ReusePlan(2, (), 2)


def test_plan_moves_a_chunk_back_over_dropped_tokens() -> None:
    cached = [0, 10, 11, 12, *range(100, 120), 7]
    prompt = [0, *range(100, 120), 8, 9]  # 10, 11, 12 deleted; the tail changed
    plan = plan_reuse(cached, prompt, 4)
    assert plan == ReusePlan(1, ((4, 1, 20),), 21)
    assert plan.shifted == 20
    assert plan_reuse(cached, prompt, 21).kept == 1  # the chunk is shorter than asked


def test_plan_moves_several_chunks_in_order() -> None:
    a, b = list(range(100, 110)), list(range(200, 210))
    cached = [0, 1, *a, 2, 3, *b]
    prompt = [0, *a, *b, 5]
    plan = plan_reuse(cached, prompt, 5)
    assert plan.moves == ((2, 1, 10), (14, 11, 10))
    assert plan.kept == 21
    # a chunk can only move back: text inserted before it ends the reuse there
    assert plan_reuse([0, *a], [0, 9, *a], 5).kept == 1


def test_plan_never_reads_past_its_limit() -> None:
    cached = [0, 5, *range(100, 120)]
    plan = plan_reuse(cached, [0, *range(100, 120)], 4, limit=15)
    assert plan.kept == 15 and plan.moves == ((2, 1, 14),)


# ---------------------------------------------------------------- shifting


@pytest.fixture(scope="module")
def one_layer(tiny_factory: TinyFactory) -> Path:
    return tiny_factory("one-layer", n_layer=1)


def test_shifted_reuse_matches_a_fresh_evaluation(one_layer: Path) -> None:
    """One layer: a shifted key differs from a fresh one by f16 rounding only."""
    with FimModel(one_layer, n_ctx=1024) as m, FimModel(one_layer, n_ctx=1024) as fresh:
        tokens = m.tokenize(CODE)
        first = tokens[:300]
        moved = tokens[80:360]  # the window slid down: 80 tokens gone, 60 new
        m.cache.evaluate(first)
        before = m.cache.n_decoded
        logits = m.cache.evaluate(moved)
        assert m.cache.n_decoded - before == 60  # only the new tokens
        assert m.cache.n_shifted == 220
        assert m.cache.cached_tokens == tuple(moved)
        expected = fresh.cache.evaluate(moved)
        np.testing.assert_allclose(logits, expected, atol=1e-2, rtol=0)
        assert logits.argsort()[-10:].tolist() == expected.argsort()[-10:].tolist()
        for token in tokens[360:368]:  # and generation goes on from the shifted cache
            np.testing.assert_allclose(
                m.cache.append(token), fresh.cache.append(token), atol=1e-2, rtol=0
            )


def test_the_common_prefix_stays_bit_exact(one_layer: Path) -> None:
    with FimModel(one_layer, n_ctx=1024, reuse_min=0) as m, FimModel(one_layer) as fresh:
        tokens = m.tokenize(CODE)
        m.cache.evaluate(tokens[:200])
        before = m.cache.n_decoded
        logits = m.cache.evaluate(tokens[80:360])  # without shifting: read again
        assert m.cache.n_decoded - before == 280 and m.cache.n_shifted == 0
        np.testing.assert_array_equal(logits, fresh.cache.evaluate(tokens[80:360]))


def test_shifting_is_an_approximation_with_more_layers(tiny_model: FimModel) -> None:
    """Two layers: what a kept chunk's second layer read included the dropped text."""
    tokens = tiny_model.tokenize(CODE)
    tiny_model.cache.evaluate(tokens[:300])
    shifted = tiny_model.cache.evaluate(tokens[80:360])
    assert tiny_model.cache.n_shifted == 220
    tiny_model.cache.reset()
    fresh = tiny_model.cache.evaluate(tokens[80:360])
    assert not np.allclose(shifted, fresh, atol=1e-2)


# ---------------------------------------------------------------- two sequences


@pytest.fixture
def model(tiny_model_path: Path) -> Iterator[FimModel]:
    with FimModel(tiny_model_path, n_ctx=1024) as m:
        yield m


def test_read_ahead_keeps_the_live_prompt(model: FimModel) -> None:
    tokens = model.tokenize(CODE)
    live = tokens[200:300]
    model.prefill(live)
    other = tokens[:250]  # another prompt: reading it in the live sequence would drop most
    model.read_ahead(other)
    assert model.cache.cached_tokens == tuple(live)
    assert sorted(model.cache.sequences) == sorted([tuple(live), tuple(other)])
    assert model.uncached(live) == 0 and model.uncached(other) == 0
    before = model.cache.n_decoded
    model.prefill(other)  # a request for it takes the sequence read ahead
    assert model.cache.n_decoded == before
    assert model.cache.cached_tokens == tuple(other)


def test_read_ahead_extends_the_live_prompt(model: FimModel) -> None:
    tokens = model.tokenize(CODE)
    model.prefill(tokens[:100])
    model.read_ahead(tokens[:160])  # the same prompt, longer: no spare needed
    assert model.cache.cached_tokens == tuple(tokens[:160])
    assert model.cache.sequences[1] == ()


def test_read_ahead_stops_between_short_chunks(model: FimModel) -> None:
    tokens = model.tokenize(CODE)[:200]
    polls: list[int] = []

    def second_poll() -> bool:
        polls.append(model.cache.n_decoded)
        return len(polls) >= 2

    with pytest.raises(Interrupted):
        model.read_ahead(tokens, second_poll)
    assert polls == [0, READ_AHEAD_CHUNK]
    assert model.uncached(tokens) == len(tokens) - READ_AHEAD_CHUNK  # what it read is kept


def test_a_full_cache_drops_the_other_sequence(tiny_model_path: Path) -> None:
    with FimModel(tiny_model_path, n_ctx=256) as m:
        tokens = m.tokenize(CODE)
        m.prefill(tokens[:150])
        m.read_ahead(tokens[300:450])  # 300 tokens in 256 cells: the live one goes
        assert m.cache.cached_tokens == ()
        assert m.cache.sequences[1] == tuple(tokens[300:450])
        assert m.uncached(tokens[300:450]) == 0
