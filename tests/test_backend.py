"""The model backend interface through the real llama.cpp tiny model.

The in-process backend keeps the contract every backend must keep (backend_contract.py),
its rankings are the model's distribution, advancing decodes the decoder's choice, a
prompt read ahead is not read again, reading a prompt can be interrupted, and the
decoding loop gives the same middles when the backend knows only its top n candidates
(as a server that streams log-probabilities does).
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from backend_contract import TopN, check_generation, check_ranking
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    model_cache,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)

from bench.grammar_coverage import Oracle, discover, stdlib_root
from bench.quotient_check import Corpus, make_cuts
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model import FimModel, Interrupted
from lsp_server.model.local.context import INTERRUPTIBLE_CHUNK
from lsp_server.modes import Mode

LEFT, RIGHT = "def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n"


def test_in_process_backend_keeps_the_contract(tiny_model: FimModel) -> None:
    prompt = tiny_model.build_fim_prompt(LEFT, RIGHT)
    taken = check_generation(tiny_model, prompt)
    assert tiny_model.cache.cached_tokens == (*prompt, *taken)


def test_ranking_is_the_model_distribution(tiny_model: FimModel) -> None:
    prompt = tiny_model.build_fim_prompt(LEFT, RIGHT)
    with tiny_model.start(prompt) as generation:
        ranking = generation.ranking()
        logits = tiny_model.cache.evaluate(prompt)  # the same position, read from the cache
    every = ranking.best(tiny_model.vocab.n_vocab)
    assert len(every) == tiny_model.vocab.n_vocab  # in process: the whole vocabulary
    assert every[:10].tolist() == np.argsort(-logits, kind="stable")[:10].tolist()
    logprobs = np.array([ranking.logprob(int(t)) for t in every], dtype=np.float64)
    assert math.isclose(float(np.exp(logprobs).sum()), 1.0, rel_tol=1e-3)
    ends = tiny_model.eog_ids
    expected_end = math.log(sum(math.exp(ranking.logprob(t)) for t in ends))
    assert math.isclose(ranking.end_logprob(), expected_end, abs_tol=1e-4)
    check_ranking(ranking, tiny_model, k=tiny_model.vocab.n_vocab)


def test_advance_decodes_the_chosen_token(tiny_model: FimModel, tiny_model_path: Path) -> None:
    prompt = tiny_model.build_fim_prompt(LEFT, RIGHT)
    with tiny_model.start(prompt) as generation:
        second_best = int(generation.ranking().best(2)[1])
        generation.advance(second_best)
        after = generation.ranking()
    with FimModel(tiny_model_path, n_ctx=1024) as fresh, fresh.start([*prompt, second_best]) as g:
        expected = g.ranking()
        assert after.best(10).tolist() == expected.best(10).tolist()
        for token in expected.best(10):
            assert math.isclose(after.logprob(int(token)), expected.logprob(int(token)),
                                abs_tol=1e-4)  # fmt: skip


def test_prefilled_prompt_is_not_read_again(tiny_model: FimModel) -> None:
    prompt = tiny_model.build_fim_prompt(LEFT * 20, RIGHT)
    tiny_model.prefill(prompt)
    assert tiny_model.cache.cached_tokens == tuple(prompt)
    before = tiny_model.cache.n_decoded
    with tiny_model.start(prompt) as generation:
        generation.ranking().best(5)
    assert tiny_model.cache.n_decoded == before


def test_reading_the_prompt_is_interruptible(tiny_model: FimModel) -> None:
    prompt = tiny_model.build_fim_prompt(LEFT * 40, RIGHT)
    assert len(prompt) > 2 * INTERRUPTIBLE_CHUNK
    polls: list[int] = []

    def after_one_chunk() -> bool:
        polls.append(len(tiny_model.cache.cached_tokens))
        return len(polls) > 1

    with pytest.raises(Interrupted):
        tiny_model.start(prompt, interrupt=after_one_chunk)
    assert tiny_model.cache.cached_tokens == tuple(prompt[:INTERRUPTIBLE_CHUNK])
    with pytest.raises(Interrupted):
        tiny_model.prefill(prompt, interrupt=lambda: True)
    assert tiny_model.cache.cached_tokens == tuple(prompt[:INTERRUPTIBLE_CHUNK])  # kept


@pytest.fixture(scope="module")
def cuts() -> list[tuple[str, str]]:
    root = stdlib_root()
    names = ("bisect.py", "colorsys.py", "fnmatch.py", "textwrap.py")
    files = discover([str(root / n) for n in names if (root / n).is_file()])
    if not files:
        pytest.skip(f"standard library sources not found under {root}")
    with Oracle() as oracle:
        corpus = Corpus(files, oracle)
        out = []
        for kind in ("boundary", "randspan"):
            for cut in make_cuts(corpus, kind, 6, 11):
                source = corpus.by_name(cut.file)
                assert source is not None
                out.append((source.text[: cut.left_end], source.text[cut.middle_end :]))
    return out


@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_decoder_needs_only_the_top_k(
    tiny_session_model: FimModel, cuts: list[tuple[str, str]], target: tuple[int, int], mode: Mode
) -> None:
    """Greedy decoding tries the top k candidates: a backend that knows only those (a
    server's top n) gives the same middles as one that ranks the whole vocabulary
    (without looking further down the ranking, which only the latter can answer)."""
    options = DecodeOptions(mode=mode, max_tokens=12, top_k=10, token_healing=False, further_down=0)
    server_like = TopN(tiny_session_model, 10)
    for left, right in cuts:
        full = generate(tiny_session_model, left, right, options, target=target)
        partial = generate(server_like, left, right, options, target=target)
        assert (partial.middle, partial.stop_reason, partial.complete, partial.tokens) == (
            full.middle, full.stop_reason, full.complete, full.tokens
        ), (left[-30:], right[:30])  # fmt: skip
    assert server_like.rankings >= len(cuts)


def test_decoder_with_fewer_candidates_than_it_asks_for(
    tiny_session_model: FimModel,
    cuts: list[tuple[str, str]],
    target: tuple[int, int],
    ast_accepts: Callable[[str], bool],
) -> None:
    """A backend that knows 3 candidates where the decoder would try 50: the decoder
    works with what it gets, and every middle it calls complete parses."""
    options = DecodeOptions(max_tokens=12, top_k=50)
    server_like = TopN(tiny_session_model, 3)
    for left, right in cuts:
        r = generate(server_like, left, right, options, target=target)
        assert r.tokens <= 12
        if r.complete:
            assert ast_accepts(left + r.middle + right), (left[-30:], r.middle, right[:30])
