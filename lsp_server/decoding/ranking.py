"""The order in which candidate tokens are tried: greedy, or sampled.

Greedy decoding tries the backend's ranking as it is.  Sampling (a temperature above 0)
scales the scores, keeps the nucleus (``top_p``) and perturbs the scores with Gumbel
noise: sorting by the perturbed scores draws a sample without replacement, so the
constrained loop can go down the list exactly as in the greedy case.
"""

from __future__ import annotations

import numpy as np

from lsp_server.model.backend import IdArray, TokenRanking

from .options import DecodeOptions

__all__ = ["Ranker"]


class Ranker:
    """Orders candidate tokens for one generation (its random state is the seed's)."""

    def __init__(self, options: DecodeOptions):
        self.temperature = options.temperature
        self.top_p = options.top_p
        self.rng = np.random.default_rng(options.seed)

    def order(self, ranking: TokenRanking, k: int) -> IdArray:
        """Up to ``k`` candidates in the order to try them."""
        top = ranking.best(k)
        if self.temperature <= 0:
            return top
        scaled = ranking.scores(top) / self.temperature
        if self.top_p < 1.0:
            probs = np.exp(scaled - scaled[0])
            probs /= probs.sum()
            keep = int(np.searchsorted(np.cumsum(probs), self.top_p) + 1)
            top, scaled = top[:keep], scaled[:keep]
        gumbel = self.rng.gumbel(size=top.shape[0])
        ordered: IdArray = top[np.argsort(-(scaled + gumbel), kind="stable")]
        return ordered
