"""The model backend interface: what the decoding loop asks of a language model.

The constrained decoder never needs a whole probability distribution, only the
candidates for the next token in the model's order, to try them against the quotient;
and it chooses every token itself.  So a backend is asked three things:

* **start** a generation from a prompt (reading the prompt may take seconds on a
  CPU, so it is interruptible);
* the **ranking** at the current position: token ids best first with their
  log-probabilities, and the probability of ending here.  "As many as you have": a
  backend that holds the logits ranks the whole vocabulary, a server that streams
  tokens knows the top n it sent;
* **advance** by the token the decoder chose.  A backend that decodes in process
  decodes it; a backend that reads a stream of tokens keeps reading if the chosen
  token is the one it streamed, and otherwise stops the stream and starts a new
  request whose prompt carries the accepted tokens.

Round trips, tokens decoded and the like are the backend's own business and are
counted there.  :class:`LogitsRanking` is the ranking of any backend that has the
full logits (llama.cpp in process: :class:`lsp_server.model.FimModel`).

A backend also knows its vocabulary (the bytes of every token id, which ids end a
generation, an index of the token bytes) and how to lay out a FIM prompt for its model
family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .prompt import RepoContext
from .token_index import TokenIndex

__all__ = [
    "Backend",
    "FloatArray",
    "Generation",
    "IdArray",
    "Interrupt",
    "LogitsRanking",
    "PromptCache",
    "TokenRanking",
    "top_k_ids",
]

IdArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float32]
#: Polled while the model works; true means "stop now" (a cancel, a deadline).
Interrupt = Callable[[], bool]


class TokenRanking(Protocol):
    """What a backend knows about the next token at one position of a generation."""

    def best(self, k: int) -> IdArray:
        """The ``k`` most likely token ids, most likely first; fewer when the backend
        knows fewer (a server sends its top n)."""
        ...

    def scores(self, tokens: IdArray) -> FloatArray:
        """Unnormalised log-probabilities of ``tokens`` (log-probability plus one constant
        for the whole position): what sampling divides by the temperature; ``-inf`` for
        a token the backend does not know (the decoder then passes it over)."""
        ...

    def logprob(self, token: int) -> float:
        """The log-probability of ``token``; ``-inf`` where the backend does not know it."""
        ...

    def end_logprob(self) -> float:
        """The log-probability that generation ends here (every end token together)."""
        ...


class Generation(Protocol):
    """A generation in progress: a position in the model's output, moved by the decoder.

    Close it (or use it as a context manager) when the decoder stops: a streaming
    backend stops its stream there.
    """

    def ranking(self) -> TokenRanking:
        """The ranking of the next token at the current position."""
        ...

    def advance(self, token: int) -> None:
        """Move past ``token``, the decoder's choice; it need not be the backend's best.
        May raise ``Interrupted`` when the generation's ``interrupt`` says so."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Generation: ...

    def __exit__(self, *exc: object) -> None: ...


class Backend(Protocol):
    """A language model as the decoding loop sees it."""

    @property
    def vocab_bytes(self) -> Sequence[bytes]:
        """The bytes of every token id (b"" for control tokens), indexed by id."""
        ...

    @property
    def has_fim(self) -> bool:
        """Whether prompts carry the text after the cursor (the model has FIM tokens)."""
        ...

    def eog(self, token: int) -> bool:
        """Whether ``token`` ends a generation."""
        ...

    def detected(self) -> dict[str, object]:
        """What was detected about the model: family, prompt layout, end tokens
        (:func:`lsp_server.model.families.detected`)."""
        ...

    @property
    def eog_ids(self) -> Sequence[int]:
        """Every token id that ends a generation (``eog`` is true exactly for these)."""
        ...

    @property
    def token_index(self) -> TokenIndex:
        """The vocabulary's :class:`~lsp_server.model.token_index.TokenIndex` (built on
        first use, then cached on disk): the candidates while token healing owes text
        or a character is unfinished, found without scanning the vocabulary."""
        ...

    def tokenize(self, text: str) -> list[int]:
        """Token ids of plain text (special-token texts stay text)."""
        ...

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
        """The prompt for text around the cursor, cut to fit with room to generate, and to
        ``budget`` tokens of text when given (whole lines, nearest the cursor first);
        ``path`` (the file's path, may be empty) for families whose prompts name the file;
        ``context``: other files of the project, at the prompt's head (outside the budget)
        for families with a repository-level format, ignored by others."""
        ...

    def prefill(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        """Read ``prompt`` ahead of a generation, so that starting from it is quick.
        ``Interrupted`` as for :meth:`start`."""
        ...

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> Generation:
        """A generation after ``prompt``, with the first position's ranking ready.

        ``interrupt`` is polled while the prompt is read (and, by backends that wait on
        others, while a token is awaited); when it returns true ``Interrupted`` is raised,
        and what was read may be kept for the next request.
        """
        ...

    def describe(self) -> str:
        """A short description for users: the model's name, FIM or not, its context."""
        ...

    def close(self) -> None:
        """Release the model; the backend is unusable afterwards."""
        ...


@runtime_checkable
class PromptCache(Protocol):
    """What a backend that keeps the prompts it has read can say and do (optional).

    The planner sizes a prompt by what reading it costs (``uncached``), and the engine's
    read-ahead reads the prompt the next request will likely need when the model has
    nothing else to do (``read_ahead``).  A backend without these gets prompts sized for
    a cold read, and read-ahead through :meth:`Backend.prefill`.
    """

    def uncached(self, prompt: Sequence[int]) -> int:
        """How many of ``prompt``'s tokens reading it would cost (not cached)."""
        ...

    def read_ahead(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        """Read ``prompt`` speculatively, in short interruptible chunks, without losing the
        prompt the last generation used.  ``Interrupted`` as for :meth:`Backend.start`."""
        ...


#: Above this many tokens, ``LogitsRanking.best`` first finds a threshold on a strided
#: sample of the logits (see there).
_SAMPLED_TOP_K = 1 << 14
_SAMPLE_STRIDE = 64


def top_k_ids(logits: FloatArray, k: int) -> IdArray:
    """The ``k`` highest logits' ids, highest first (ties by id).

    ``np.argpartition`` over a whole 262,144-token vocabulary takes milliseconds, so a
    large vocabulary is narrowed first: the k-th highest value of every 64th logit is a
    threshold that at least k logits reach (those k sampled ones), and every one of the
    true top k reaches it too.  One comparison over the vector leaves a few thousand
    candidates to partition.  The answer is exact.
    """
    n = logits.shape[0]
    k = max(1, min(k, n))
    if n >= _SAMPLED_TOP_K and k * _SAMPLE_STRIDE * 4 <= n:
        sample = logits[::_SAMPLE_STRIDE]
        threshold = np.partition(sample, sample.shape[0] - k)[sample.shape[0] - k]
        pool: IdArray = np.flatnonzero(logits >= threshold)
    else:
        pool = np.arange(n)
    values = logits[pool]
    if pool.shape[0] > k:
        keep = np.argpartition(values, pool.shape[0] - k)[pool.shape[0] - k :]
        pool, values = pool[keep], values[keep]
    ordered: IdArray = pool[np.lexsort((pool, -values))]
    return ordered


class LogitsRanking:
    """The ranking of a backend that has the logits over the whole vocabulary.

    A log-probability is the logit less the log of the partition function, one scalar
    per position, computed on first use.
    """

    __slots__ = ("_log_z", "end_ids", "logits")

    def __init__(self, logits: FloatArray, end_ids: Sequence[int]) -> None:
        self.logits = logits
        self.end_ids = end_ids
        self._log_z: float | None = None

    def best(self, k: int) -> IdArray:
        return top_k_ids(self.logits, k)

    def scores(self, tokens: IdArray) -> FloatArray:
        out: FloatArray = self.logits[tokens]
        return out

    def log_z(self) -> float:
        """log(sum(exp(logits))), computed stably once."""
        if self._log_z is None:
            logits = self.logits
            top = float(np.max(logits))
            self._log_z = top + math.log(float(np.sum(np.exp(logits - top), dtype=np.float64)))
        return self._log_z

    def logprob(self, token: int) -> float:
        return float(self.logits[token]) - self.log_z()

    def end_logprob(self) -> float:
        if not len(self.end_ids):
            return -math.inf
        ends = self.logits[self.end_ids].astype(np.float64)
        return float(np.logaddexp.reduce(ends)) - self.log_z()
