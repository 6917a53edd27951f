"""The order in which candidate tokens are tried: greedy, or sampled.

Greedy decoding tries the backend's ranking as it is.  Sampling (a temperature above 0)
scales the scores, keeps the nucleus (``top_p``) and perturbs the scores with Gumbel
noise: sorting by the perturbed scores draws a sample without replacement, so the
constrained loop can go down the list exactly as in the greedy case.

Usually the candidates are the backend's top k (:meth:`Ranker.order`).  While token
healing owes text or a character is unfinished, they are the tokens that can go on with
it, whatever their rank (:meth:`Ranker.order_among`, with ids from the vocabulary's
:class:`~lsp_server.model.token_index.TokenIndex`).
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
        return self._sample(top, ranking.scores(top))

    def order_among(self, ranking: TokenRanking, ids: IdArray) -> IdArray:
        """``ids`` (distinct) in the order to try them; those the backend does not know
        (score ``-inf``) are left out.  Greedy: best score first, ties by id."""
        ids = np.asarray(ids, dtype=np.intp)
        scores = ranking.scores(ids)
        known = np.isfinite(scores)
        if not known.all():
            ids, scores = ids[known], scores[known]
        by_score = np.lexsort((ids, -scores))
        ids, scores = ids[by_score], scores[by_score]
        if self.temperature <= 0:
            return ids
        return self._sample(ids, scores)

    def _sample(self, top: IdArray, scores: np.ndarray) -> IdArray:
        """A sample without replacement from ``top`` (best first, with their scores)."""
        scaled = scores / self.temperature
        if self.top_p < 1.0 and len(top):
            probs = np.exp(scaled - scaled[0])
            probs /= probs.sum()
            keep = int(np.searchsorted(np.cumsum(probs), self.top_p) + 1)
            top, scaled = top[:keep], scaled[:keep]
        gumbel = self.rng.gumbel(size=top.shape[0])
        ordered: IdArray = top[np.argsort(-(scaled + gumbel), kind="stable")]
        return ordered
