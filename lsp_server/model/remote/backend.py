"""The remote backend: a model behind llama-server or an OpenAI-compatible engine.

No server can check the quotient (its grammars cannot express the right context), so the
check stays here and the tokens come from the server, by *validated speculative
decoding over the wire*:

* :meth:`RemoteBackend.start` opens a stream: the prompt as token ids (``cache_prompt``,
  so the server's prompt cache keeps what it read), greedy, each token with its top
  ``n_probs`` alternatives;
* the decoder reads one position at a time (:meth:`RemoteGeneration.ranking`: the
  streamed token's alternatives) and chooses a token.  The streamed token itself
  (accepted): the stream goes on.  Another one (the streamed one was not viable, or an
  end where the middle is not complete): the stream is closed at once and the next
  position opens a new request whose prompt carries every accepted token, which the
  server finds in its cache, so a rejection costs one round trip and one token of work;
* two cases need the ranking of a position by a request of its own (a *probe*:
  ``n_predict`` 1 after the accepted tokens): llama-server sends no alternatives for a
  token that ends inside a UTF-8 character (the next event carries both), and the decoder
  looks beyond the top n while token healing owes text or a character is unfinished
  (``best(k)`` with k larger than what is known: the top ``wide_probs``).  A probe bans
  the tokens that end inside a character (``logit_bias``), which changes what it samples
  but not the alternatives it reports (llama.cpp reports the raw logits).

Cancellation and the deadline are polled while waiting (``interrupt``) and close the
connection at once; a server that fails raises a :class:`~.server_api.ServerError`.
Everything the decoder needs besides the rankings (the token table, FIM prompts, end
tokens) comes from the server's model (:mod:`.server_api.vocab`): a local copy of its
vocabulary when one is given (``modelVocab``), else the server's own answers.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..backend import FloatArray, IdArray, Interrupt
from ..errors import Interrupted, ModelError
from ..families import FimLayout, FimTokens, detected
from ..prompt import PromptBuilder, RepoContext, Tokenizer
from ..token_index import TokenIndex
from ..vocabulary import tokenize_without_dummy_space
from .server_api import (
    LLAMA_CPP,
    Candidate,
    CompletionStream,
    ServerApi,
    ServerClient,
    ServerProtocolError,
    ServerVocab,
    Step,
)
from .server_api.client import incomplete_utf8_tail
from .server_api.vocab import LocalVocabulary

__all__ = [
    "RemoteBackend",
    "RemoteCounters",
    "RemoteGeneration",
    "RemoteRanking",
    "is_server_url",
    "open_remote",
]

#: Alternatives asked for with every streamed token: the decoder's default top k.
DEFAULT_N_PROBS = 50
#: The most alternatives a stream is asked for when the decoder's top k is larger.
MAX_STREAM_PROBS = 256
#: Alternatives a probe asks for when the decoder looks beyond the top n.
DEFAULT_WIDE_PROBS = 1000
#: Tokens one stream asks for; the decoder closes it as soon as it stops.
RUN_TOKENS = 256


def is_server_url(spec: object) -> bool:
    """Whether a model setting names an inference server (``http://``, ``https://``)."""
    return isinstance(spec, str) and spec.strip().lower().startswith(("http://", "https://"))


@dataclass
class RemoteCounters:
    """What a remote backend sent and received, cumulative (a benchmark takes differences).

    ``requests`` is every completion request: ``streams`` (the first of a generation, one
    after each ``rejected`` token, after a stream ran out: ``refills``) plus ``probes``
    (of which ``wide`` looked beyond the top n, ``held_back`` stood in for a token
    llama-server sent no alternatives for) plus ``prefills``.
    """

    generations: int = 0
    requests: int = 0
    streams: int = 0
    rejected: int = 0
    refills: int = 0
    probes: int = 0
    wide: int = 0
    held_back: int = 0
    prefills: int = 0
    streamed: int = 0  # positions read from streams
    accepted: int = 0  # streamed tokens the decoder took

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


class ServerTokenizer:
    """Tokenization by the server (llama-server's ``/tokenize``), for prompts and token
    healing when there is no local copy of the vocabulary."""

    def __init__(self, client: ServerClient, token_bytes: Sequence[bytes], space_prefix: bool):
        self._client = client
        self._token_bytes = token_bytes
        self._space_prefix = space_prefix

    @property
    def token_bytes(self) -> Sequence[bytes]:
        return self._token_bytes

    def tokenize(self, text: str) -> list[int]:
        return self._client.tokenize(text) if text else []

    def tokenize_infill(self, text: str) -> list[int]:
        return tokenize_without_dummy_space(
            text, self.tokenize, self._token_bytes, self._space_prefix
        )

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        table = self._token_bytes
        return b"".join(table[t] for t in tokens)


class RemoteRanking:
    """The alternatives a server sent for one position, best first.

    Tokens it did not send have log-probability ``-inf``; ``end_logprob`` estimates the
    end tokens it did not send (see there).  Asked for more than it knows, it fetches the
    top ``k`` once through ``widen`` (see the module docstring), when given.
    """

    __slots__ = ("_eog", "_ids", "_logprobs", "_lookup", "_n_vocab", "_widen")

    def __init__(
        self,
        top: Sequence[Candidate],
        eog: frozenset[int],
        n_vocab: int,
        widen: Callable[[int], Sequence[Candidate] | None] | None = None,
    ) -> None:
        self._eog = eog
        self._n_vocab = n_vocab
        self._widen = widen
        self._set(top)

    def _set(self, top: Sequence[Candidate]) -> None:
        seen: dict[int, float] = {}
        for cand in top:
            if cand.token is not None and cand.token not in seen:
                seen[cand.token] = cand.logprob
        self._lookup = seen
        self._ids: IdArray = np.fromiter(seen.keys(), dtype=np.intp, count=len(seen))
        self._logprobs = np.fromiter(seen.values(), dtype=np.float64, count=len(seen))

    def _widened(self, k: int) -> None:
        """Fetch the top ``k`` (once; see the module docstring)."""
        if self._widen is not None:
            widen, self._widen = self._widen, None
            wider = widen(k)
            if wider is not None:
                self._set(wider)

    def best(self, k: int) -> IdArray:
        if k > len(self._ids):
            self._widened(k)
        out: IdArray = self._ids[: max(1, k)]
        return out

    def scores(self, tokens: IdArray) -> FloatArray:
        """Log-probabilities of ``tokens``; asked for tokens it was not sent (the loop's
        candidates while token healing owes text), it fetches the widest top first."""
        lookup = self._lookup
        if self._widen is not None and any(int(t) not in lookup for t in tokens):
            self._widened(self._n_vocab)
            lookup = self._lookup
        out: FloatArray = np.array(
            [lookup.get(int(t), -math.inf) for t in tokens], dtype=np.float64
        )
        return out

    def logprob(self, token: int) -> float:
        return self._lookup.get(token, -math.inf)

    def end_logprob(self) -> float:
        """The end tokens the server sent, plus an estimate of those it did not: each as
        likely as the average token not sent.  Exact when every end token was sent."""
        lookup, eog = self._lookup, self._eog
        if not lookup:
            return -math.inf
        known = sum(math.exp(lp) for t, lp in lookup.items() if t in eog)
        unsent = len(eog) - sum(1 for t in lookup if t in eog)
        rest = max(0.0, 1.0 - float(np.exp(self._logprobs).sum()))
        mass = known + unsent * rest / max(1, self._n_vocab - len(lookup))
        return math.log(mass) if mass > 0 else -math.inf


class RemoteGeneration:
    """One generation against the server: a stream read position by position, a new
    request where the decoder leaves it (see the module docstring).

    ``ranking()`` waits for the server; when the generation's ``interrupt`` fires during
    that wait, the stream is closed and the ranking is empty (the decoder then stops);
    ``advance`` never waits.
    """

    def __init__(
        self, backend: RemoteBackend, prompt: Sequence[int], interrupt: Interrupt | None
    ) -> None:
        self._backend = backend
        self._prompt = [int(t) for t in prompt]
        self._accepted: list[int] = []
        self._interrupt = interrupt
        self._stream: CompletionStream | None = None
        self._stream_base = 0  # accepted tokens the open stream's prompt carried
        self._streamed: int | None = None  # the server's token at the current position
        self._ranking: RemoteRanking | None = None
        self.interrupted = False
        backend.counters.generations += 1
        # Read the prompt now (the longest wait): a cancel here raises, as the protocol says.
        self._ranking = self._read()
        if self.interrupted:
            self.close()
            raise Interrupted("the request was cancelled while the server read the prompt")

    # -- the protocol -------------------------------------------------------

    def ranking(self) -> RemoteRanking:
        if self._ranking is None:
            self._ranking = self._read()
        return self._ranking

    def advance(self, token: int) -> None:
        counters = self._backend.counters
        if self._stream is not None and token == self._streamed:
            counters.accepted += 1
        elif self._stream is not None:
            counters.rejected += 1
            self._close_stream()
        self._accepted.append(int(token))
        self._streamed = None
        self._ranking = None

    def close(self) -> None:
        """Close the stream, so the server stops generating for it."""
        self._close_stream()

    def __enter__(self) -> RemoteGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ------------------------------------------------------------

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _context_left(self) -> int:
        return self._backend.n_ctx - len(self._prompt) - len(self._accepted) - 1

    def _read(self) -> RemoteRanking:
        """The ranking at the current position: the open stream's next step, a new
        stream's first, or a probe's where the server does not report this position."""
        backend = self._backend
        refilled = False
        while True:
            if self._stream is None:
                n_predict = min(RUN_TOKENS, self._context_left())
                if n_predict <= 0:
                    return backend.no_ranking()  # the context is full
                self._stream = backend.open_stream(
                    self._prompt + self._accepted, n_predict, self._interrupt
                )
                self._stream_base = len(self._accepted)
            stream = self._stream
            step = next(stream, None)
            if step is None:
                end = stream.end
                self._stream = None
                if end is not None and end.stop in ("cancelled", "deadline"):
                    self.interrupted = True
                    return backend.no_ranking()
                if end is not None and end.stop == "limit" and stream.steps_seen and not refilled:
                    backend.counters.refills += 1  # the run is spent: go on in a new one
                    refilled = True
                    continue
                # Generated but not reported (it ends inside a character), or ended: ask.
                backend.counters.held_back += 1
                return self._probe(backend.n_probs)
            backend.counters.streamed += 1
            if self._stream_base + step.position != len(self._accepted) or step.token is None:
                # The server held this position back (it ends inside a character), or
                # named its token by a text that maps to no single id: ask for it alone.
                self._close_stream()
                backend.counters.held_back += 1
                return self._probe(backend.n_probs)
            self._streamed = step.token
            return self._ranked(step, wide=True)

    def _ranked(self, step: Step, wide: bool) -> RemoteRanking:
        position = len(self._accepted)

        def widen(k: int) -> Sequence[Candidate] | None:
            if len(self._accepted) != position or self.interrupted:
                return None  # the generation moved on
            self._close_stream()  # one slot may serve this client: free it
            self._streamed = None
            self._backend.counters.wide += 1
            self._backend.ask_for(k)
            probed = self._probe_step(min(k, self._backend.wide_probs))
            if probed is None:
                return None
            self._backend.learn(probed.top)
            return probed.top

        self._backend.learn(step.top)
        return self._backend.ranking(step.top, widen if wide else None)

    def _probe(self, n_probs: int) -> RemoteRanking:
        step = self._probe_step(n_probs)
        if step is None:
            return self._backend.no_ranking()
        return self._ranked(step, wide=True)

    def _probe_step(self, n_probs: int) -> Step | None:
        """The step a one-token request reports at the current position (None when
        interrupted, or when the context is full)."""
        if self._context_left() <= 0:
            return None
        answer = self._backend.probe(self._prompt + self._accepted, n_probs, self._interrupt)
        if answer is None:
            self.interrupted = True
            return None
        return answer


class RemoteBackend:
    """A model served by an inference server, as the decoding loop's :class:`Backend`.

    Build it with :func:`open_remote`.  ``n_probs`` alternatives come with every streamed
    token (raised up to :data:`MAX_STREAM_PROBS` when the decoder asks for more);
    ``wide_probs`` is what a probe asks for when the decoder looks further.  Not
    thread-safe: one generation at a time (the language server's model worker).
    """

    def __init__(
        self,
        client: ServerClient,
        vocab: ServerVocab,
        *,
        n_ctx: int,
        name: str,
        local: LocalVocabulary | None = None,
        n_probs: int = DEFAULT_N_PROBS,
        wide_probs: int = DEFAULT_WIDE_PROBS,
    ) -> None:
        self.client = client
        self.vocab = vocab
        self.local = local
        self.n_ctx = n_ctx
        self.name = name
        self.n_probs = n_probs
        self.wide_probs = max(wide_probs, n_probs)
        self.counters = RemoteCounters()
        self.fim_tokens: FimTokens = vocab.fim
        self.layout: FimLayout = vocab.layout
        self.eog_ids: tuple[int, ...] = tuple(sorted(vocab.eog))
        self._eog_set = frozenset(vocab.eog)
        self._index: TokenIndex | None = None  # built on first use, again after learning
        if local is not None:  # exact: the table llama.cpp renders generated text with
            self._table = list(local.tokens.token_bytes)
            tokenizer: Tokenizer = local.tokens
            self._learning = False
        else:  # control tokens found so far; the server's alternatives tell the rest
            self._table = vocab.text_bytes()
            tokenizer = ServerTokenizer(client, self._table, vocab.space_prefix)
            self._learning = True
        self.tokenizer = tokenizer
        self.prompts = PromptBuilder(tokenizer, vocab.layout, vocab.fim, n_ctx)
        #: Tokens a probe must not sample: llama-server reports nothing for them.
        self._partial = {
            t: -math.inf for t, piece in enumerate(self._table) if incomplete_utf8_tail(piece)
        }

    # -- the Backend protocol -------------------------------------------------

    @property
    def vocab_bytes(self) -> list[bytes]:
        """Bytes of every token as generated text renders them (shared list)."""
        return self._table

    @property
    def has_fim(self) -> bool:
        return self.layout.has_fim

    def eog(self, token: int) -> bool:
        return token in self._eog_set

    def detected(self) -> dict[str, object]:
        """The detected family, layout and end tokens (see ``families.detected``)."""
        table = self._table
        return detected(self.layout, self.eog_ids, lambda t: table[t].decode("utf-8", "replace"))

    @property
    def token_index(self) -> TokenIndex:
        """The index of the token bytes as known now (see ``learn``)."""
        if self._index is None:
            self._index = TokenIndex.cached(self._table)
        return self._index

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer.tokenize(text)

    def build_fim_prompt(
        self,
        prefix: str,
        suffix: str,
        max_new_tokens: int = 128,
        path: str = "",
        budget: int | None = None,
        margin: int = 8,
        *,
        context: RepoContext | None = None,
    ) -> list[int]:
        """As ``FimModel.build_fim_prompt``: cut to ``budget`` tokens of text, within the
        server's context with room for ``max_new_tokens``, after ``context``."""
        return self.prompts.for_request(
            prefix, suffix, max_new_tokens, path, budget, margin, context=context
        )

    def prefill(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        """Have the server read ``prompt`` into its cache, generating nothing (what
        llama.vim sends ahead of a request)."""
        self.counters.requests += 1
        self.counters.prefills += 1
        n_predict = 0 if self.client.api == LLAMA_CPP else 1
        answer = self.client.complete(prompt, n_predict=n_predict, cancel=interrupt)
        if answer.end.stop in ("cancelled", "deadline"):
            raise Interrupted("the request was cancelled while the server read the prompt")

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> RemoteGeneration:
        return RemoteGeneration(self, prompt, interrupt)

    def describe(self) -> str:
        fim = "FIM" if self.has_fim else "no FIM tokens: left context only"
        return f"{self.name} on {self.client.url} ({fim}, {self.n_ctx} context)"

    def close(self) -> None:
        self.client.close()
        if self.local is not None:
            self.local.close()

    def __enter__(self) -> RemoteBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests (for RemoteGeneration) --------------------------------------

    def open_stream(
        self, prompt: Sequence[int], n_predict: int, interrupt: Interrupt | None
    ) -> CompletionStream:
        self.counters.requests += 1
        self.counters.streams += 1
        return self.client.stream(
            prompt, n_predict=n_predict, n_probs=self.n_probs, cancel=interrupt
        )

    def probe(
        self, prompt: Sequence[int], n_probs: int, interrupt: Interrupt | None
    ) -> Step | None:
        """The first generated position's step after ``prompt`` with its top ``n_probs``;
        None when interrupted (or the server reports no step)."""
        self.counters.requests += 1
        self.counters.probes += 1
        answer = self.client.complete(
            prompt, n_predict=1, n_probs=n_probs, logit_bias=self._partial, cancel=interrupt
        )
        if answer.end.stop in ("cancelled", "deadline") or not answer.steps:
            return None
        return answer.steps[0]

    def ranking(
        self,
        top: Sequence[Candidate],
        widen: Callable[[int], Sequence[Candidate] | None] | None = None,
    ) -> RemoteRanking:
        """A ranking of the alternatives ``top`` the server sent."""
        return RemoteRanking(top, self._eog_set, len(self._table), widen)

    def no_ranking(self) -> RemoteRanking:
        """The ranking where nothing can come (interrupted, or the context is full)."""
        return self.ranking(())

    def learn(self, top: Sequence[Candidate]) -> None:
        """Take the bytes of alternatives the server named from its answer: llama-server
        renders them as generated text does, so control tokens show as b""."""
        if not self._learning:
            return
        table = self._table
        for cand in top:
            token = cand.token
            if token is not None and 0 <= token < len(table) and table[token] != cand.piece:
                table[token] = cand.piece
                self._index = None

    def ask_for(self, k: int) -> None:
        """The decoder tries ``k`` candidates: stream that many alternatives from now on
        (up to :data:`MAX_STREAM_PROBS`)."""
        if self.n_probs < k <= MAX_STREAM_PROBS:
            self.n_probs = k


def open_remote(
    url: str,
    *,
    api_key: str | None = None,
    server_api: ServerApi = "auto",
    model_vocab: str | os.PathLike[str] | None = None,
    n_ctx: int | None = None,
    n_probs: int = DEFAULT_N_PROBS,
    wide_probs: int = DEFAULT_WIDE_PROBS,
    timeout: float = 60.0,
) -> RemoteBackend:
    """Connect to the server at ``url`` and learn its model: API, vocabulary (or the local
    copy ``model_vocab``), FIM layout and context size (a slot's, at most ``n_ctx``; ``n_ctx``
    where the server does not say, as llama-cpp-python's does not).
    Raises :class:`~.server_api.ServerError` when the server does not answer as it should,
    :class:`ModelError` when the vocabulary cannot be had."""
    local = LocalVocabulary(os.path.expanduser(model_vocab)) if model_vocab else None
    client = ServerClient(
        url,
        api_key=api_key,
        server_api=server_api,
        vocab=local.vocab if local is not None else None,
    )
    try:
        deadline = time.perf_counter() + timeout
        client.detect(deadline=deadline)
        vocab = client.vocabulary(deadline=deadline)
        slot_ctx = _server_n_ctx(client, n_ctx)
        name = _model_name(client)
    except BaseException:
        client.close()
        if local is not None:
            local.close()
        raise
    if local is not None and local.vocab.n_vocab != _server_n_vocab(client, local.vocab.n_vocab):
        client.close()
        local.close()
        raise ModelError(
            f"the modelVocab file has {local.vocab.n_vocab} tokens but the model on {url} "
            "has a different vocabulary"
        )
    return RemoteBackend(
        client,
        vocab,
        n_ctx=min(slot_ctx, n_ctx) if n_ctx else slot_ctx,
        name=name,
        local=local,
        n_probs=n_probs,
        wide_probs=wide_probs,
    )


def _server_n_ctx(client: ServerClient, n_ctx: int | None) -> int:
    """The context of one request as the server reports it, else ``n_ctx``."""
    try:
        return client.n_ctx()
    except ServerProtocolError:
        if n_ctx is None:
            raise
        return n_ctx


def _model_name(client: ServerClient) -> str:
    """The model's file name (llama-server) or id (OpenAI's ``/v1/models``)."""
    if client.api == LLAMA_CPP:
        path = client.props().get("model_path")
        if isinstance(path, str) and path:
            return os.path.basename(path)
    return client.model_name()


def _server_n_vocab(client: ServerClient, fallback: int) -> int:
    """The vocabulary size the server reports (llama-server's ``meta``), else ``fallback``."""
    try:
        meta = client.models()[0].get("meta") or {}
    except ModelError:
        return fallback
    n_vocab = meta.get("n_vocab") if isinstance(meta, dict) else None
    return n_vocab if isinstance(n_vocab, int) else fallback
