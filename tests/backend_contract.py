"""What every model backend must do (lsp_server.model.backend), as reusable checks.

``check_generation`` runs one backend through the interface the decoding loop uses and
checks what any backend must guarantee, whatever it holds: the in-process llama.cpp
model (tests/test_backend.py) or a remote server (which knows only its top n).
``TopN`` turns a full-vocabulary backend into one that knows only the top n candidates
at each position, as a server that streams log-probabilities does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from lsp_server.model import Backend, Generation, TokenRanking
from lsp_server.model.backend import FloatArray, IdArray, Interrupt
from lsp_server.model.prompt import RepoContext
from lsp_server.model.token_index import TokenIndex


def check_ranking(ranking: TokenRanking, backend: Backend, k: int = 20) -> IdArray:
    """A ranking is ordered, its log-probabilities are probabilities, and its scores
    differ from them by one constant; returns its best ``k``."""
    best = ranking.best(k)
    assert 0 < len(best) <= k
    assert len(set(best.tolist())) == len(best)
    logprobs = [ranking.logprob(int(t)) for t in best]
    assert all(lp <= 1e-6 for lp in logprobs)
    assert all(a >= b - 1e-6 for a, b in itertools.pairwise(logprobs)), logprobs
    assert math.fsum(math.exp(lp) for lp in logprobs) <= 1 + 1e-4
    shift = ranking.scores(best) - np.array(logprobs, dtype=np.float64)
    np.testing.assert_allclose(shift, shift[0], atol=1e-3)
    end = ranking.end_logprob()
    assert end <= 1e-6
    for t in best:
        if backend.eog(int(t)):
            assert ranking.logprob(int(t)) <= end + 1e-6  # one end token is part of ending
    assert ranking.best(1).tolist() == best[:1].tolist()
    return best


def check_generation(backend: Backend, prompt: Sequence[int], steps: int = 4) -> list[int]:
    """Start, read rankings and advance by a token that is not the best one, then by the
    best; returns the tokens taken.  Checks every ranking on the way."""
    taken: list[int] = []
    with backend.start(prompt) as generation:
        for step in range(steps):
            best = check_ranking(generation.ranking(), backend)
            choices = [int(t) for t in best if not backend.eog(int(t))]
            assert choices, "no candidate that goes on"
            # the decoder's choice need not be the backend's favourite
            token = choices[min(1, len(choices) - 1)] if step % 2 == 0 else choices[0]
            generation.advance(token)
            taken.append(token)
        check_ranking(generation.ranking(), backend)
    return taken


class BackendWrapper:
    """A backend that passes everything on to ``inner``; subclasses change a part."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    @property
    def vocab_bytes(self) -> Sequence[bytes]:
        return self.inner.vocab_bytes

    @property
    def has_fim(self) -> bool:
        return self.inner.has_fim

    def eog(self, token: int) -> bool:
        return self.inner.eog(token)

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    @property
    def eog_ids(self) -> Sequence[int]:
        return self.inner.eog_ids

    def detected(self) -> dict[str, object]:
        return self.inner.detected()

    @property
    def token_index(self) -> TokenIndex:
        return self.inner.token_index

    def build_fim_prompt(
        self,
        prefix: str,
        suffix: str,
        max_new_tokens: int = 128,
        path: str = "",
        budget: int | None = None,
        *,
        context: RepoContext | None = None,
    ) -> list[int]:
        return self.inner.build_fim_prompt(
            prefix, suffix, max_new_tokens, path=path, budget=budget, context=context
        )

    def prefill(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        self.inner.prefill(prompt, interrupt)

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> Generation:
        return self.inner.start(prompt, interrupt)

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        """The wrapped backend belongs to the caller."""


class TopN(BackendWrapper):
    """A backend that passes on only the top ``n`` of each ranking (what a server sends)."""

    def __init__(self, inner: Backend, n: int) -> None:
        super().__init__(inner)
        self.n = n
        self.rankings = 0

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> TopNGeneration:
        return TopNGeneration(self, self.inner.start(prompt, interrupt))

    def describe(self) -> str:
        return f"top {self.n} of {self.inner.describe()}"


class TopNGeneration:
    def __init__(self, owner: TopN, inner: Generation) -> None:
        self.owner = owner
        self.inner = inner

    def ranking(self) -> TopNRanking:
        self.owner.rankings += 1
        return TopNRanking(self.inner.ranking(), self.owner.n)

    def advance(self, token: int) -> None:
        self.inner.advance(token)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> TopNGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TopNRanking:
    """The top ``n`` of a ranking; every other token is unknown (log-probability -inf)."""

    def __init__(self, inner: TokenRanking, n: int) -> None:
        self.inner = inner
        self.known = inner.best(n)
        self._known = set(self.known.tolist())

    def best(self, k: int) -> IdArray:
        return self.known[: max(1, k)]

    def scores(self, tokens: IdArray) -> FloatArray:
        out = np.array(self.inner.scores(tokens), dtype=np.float32)
        out[~np.isin(tokens, self.known)] = -np.inf
        return out

    def logprob(self, token: int) -> float:
        return self.inner.logprob(token) if token in self._known else -math.inf

    def end_logprob(self) -> float:
        return self.inner.end_logprob()
