"""A llama.cpp context holding a few prompts: incremental evaluation over a reused KV cache.

The high-level ``llama_cpp.Llama`` either keeps every position's logits
(``logits_all``) or saves and restores whole states; the decoder needs neither, only
the logits of the last position after each step.  :class:`LlamaContext` remembers
which tokens each sequence of the KV cache holds and decodes only what a new prompt
does not share with one of them:

* the **common prefix** is kept as it is (exact: flash attention is off on the CPU, so
  the logits do not depend on how the prompt was split into batches);
* after it, **chunks that merely moved** (text deleted before them, the prompt's window
  sliding down the file as the cursor moves) are kept by shifting their positions
  (``llama_memory_seq_add``, as llama-server's ``cache_reuse`` does) instead of being
  read again.  Only moves to earlier positions are possible: llama.cpp appends a
  sequence's new tokens at consecutive positions after its last one.  A shifted chunk
  is an approximation: its keys are rotated to the new positions (RoPE), but what its
  deeper layers computed still reflects the text that preceded it when it was read.

A long prompt is decoded in chunks between which the caller may interrupt; the chunks
read stay in the cache for the next request.

The context holds :data:`SEQUENCES` sequences in one unified cache of ``n_ctx`` cells:
the *live* one, which the last generation used, and a spare that read-ahead fills
(:meth:`LlamaContext.evaluate` with ``ahead=True``) with a prompt the next request is
likely to need, without losing the live one while it does.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..backend import FloatArray, Interrupt
from ..errors import Interrupted, ModelError
from ..native import log_mark, native_errors

__all__ = [
    "INTERRUPTIBLE_CHUNK",
    "READ_AHEAD_CHUNK",
    "REUSE_MIN_CHUNK",
    "SEQUENCES",
    "FloatArray",
    "Interrupt",
    "LlamaContext",
    "ReusePlan",
    "plan_reuse",
]

#: Prompt tokens decoded between two polls of an ``interrupt`` callback: about an eighth
#: of a second for a 270M model on one CPU core (as fast per token as 64, measured).
INTERRUPTIBLE_CHUNK = 32
#: The same for read-ahead, which a request preempts between chunks: a request waits for
#: at most one such chunk (about 70 ms there, at 90% of the speed of larger chunks).
READ_AHEAD_CHUNK = 16
#: The shortest run of tokens worth keeping by shifting it: shorter ones are read again.
REUSE_MIN_CHUNK = 16
#: Sequences in the cache: the live prompt and one that read-ahead fills.
SEQUENCES = 2
#: Read-ahead may go on in the live sequence (rather than the spare) when it throws away
#: at most this many of the live prompt's tokens: the word being typed, re-tokenized.
AHEAD_MAY_DISCARD = 8


@dataclass(frozen=True)
class ReusePlan:
    """How a prompt reuses a cached sequence: the common prefix, then moved chunks.

    ``moves`` are (cached position, prompt position, length), in order, each to a
    position no later than where it was; ``kept`` prompt tokens are in the cache after
    the plan is applied (prefix and moves, contiguous), the rest must be decoded.
    """

    prefix: int
    moves: tuple[tuple[int, int, int], ...]
    kept: int

    @property
    def shifted(self) -> int:
        """Tokens kept by moving them."""
        return sum(length for _, _, length in self.moves)


def _as_bytes(tokens: Sequence[int]) -> bytes:
    return array("i", tokens).tobytes()


def _common_prefix(a: bytes, b: bytes) -> int:
    """Tokens two token byte strings share from the start."""
    n = min(len(a), len(b)) // 4
    if a[: 4 * n] == b[: 4 * n]:
        return n
    lo, hi = 0, n  # the first difference lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[4 * lo : 4 * mid] == b[4 * lo : 4 * mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _find(haystack: bytes, needle: bytes, start: int) -> int:
    """The first token index >= ``start`` where ``needle`` occurs in ``haystack``, or -1."""
    at = haystack.find(needle, 4 * start)
    while at >= 0 and at % 4:
        at = haystack.find(needle, at + 1)
    return at // 4 if at >= 0 else -1


def plan_reuse(
    cached: Sequence[int], prompt: Sequence[int], min_chunk: int, limit: int | None = None
) -> ReusePlan:
    """How much of ``prompt[:limit]`` a sequence holding ``cached`` can keep.

    After the common prefix, the cache is scanned forward for the next ``min_chunk``
    tokens of the prompt; a match found further on is kept by moving it back, cached
    tokens skipped over are dropped, and the scan goes on after it (llama-server's
    ``cache_reuse``).  ``min_chunk`` 0 keeps the common prefix only.
    """
    end = len(prompt) if limit is None else min(limit, len(prompt))
    c, p = _as_bytes(cached), _as_bytes(prompt[:end])
    prefix = _common_prefix(c, p)
    kept = prefix
    moves: list[tuple[int, int, int]] = []
    if min_chunk > 0:
        head_c = prefix
        while kept + min_chunk <= end and head_c + min_chunk <= len(cached):
            found = _find(c, p[4 * kept : 4 * (kept + min_chunk)], head_c)
            if found < 0:
                break
            length = min_chunk + _common_prefix(
                c[4 * (found + min_chunk) :], p[4 * (kept + min_chunk) :]
            )
            moves.append((found, kept, length))
            head_c = found + length
            kept += length
    return ReusePlan(prefix, tuple(moves), kept)


@dataclass
class _Sequence:
    """One sequence of the KV cache: its id, its tokens, the logits after the last."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    logits: FloatArray | None = None
    #: Tokens that came from a prompt (what follows them was generated).
    prompt_length: int = 0
    #: When it was last used (a counter), to pick the spare.
    used: int = 0


class LlamaContext:
    """One llama.cpp context over a loaded model, holding up to :data:`SEQUENCES` prompts.

    Not thread-safe: one caller at a time.  ``n_decoded`` and ``n_decode_calls`` count
    the tokens sent to ``llama_decode`` and the calls, ``n_shifted`` the tokens kept by
    moving them, for tests and statistics.
    """

    def __init__(
        self,
        lib: ModuleType,
        model: Any,
        n_vocab: int,
        *,
        n_ctx: int,
        n_batch: int,
        n_threads: int,
        flash_attn: bool | None,
        name: str,
        reuse_min: int = REUSE_MIN_CHUNK,
    ) -> None:
        self._lib = lib
        self.n_vocab = n_vocab
        self.n_threads = max(1, n_threads)
        n_batch = max(1, n_batch)
        mark = log_mark()
        ctx = lib.llama_init_from_model(model, self._params(n_ctx, n_batch, flash_attn))
        if not ctx:
            detail = native_errors(mark) or "out of memory?"
            raise ModelError(f"cannot create a context for {name} (n_ctx={n_ctx}: {detail})")
        self._ctx: Any = ctx
        self._mem = lib.llama_get_memory(ctx) if hasattr(lib, "llama_get_memory") else None
        self.n_ctx: int = lib.llama_n_ctx(ctx)
        self.n_batch = min(n_batch, lib.llama_n_batch(ctx))  # llama.cpp caps it at n_ctx
        self._batch: Any = lib.llama_batch_init(self.n_batch, 0, 1)
        n_seq = lib.llama_n_seq_max(ctx) if hasattr(lib, "llama_n_seq_max") else 1
        self._seqs = [_Sequence(i) for i in range(max(1, min(SEQUENCES, n_seq)))]
        self._live = self._seqs[0]
        can_shift = self._mem is not None and bool(lib.llama_memory_can_shift(self._mem))
        #: The shortest chunk kept by shifting; 0 when the cache cannot shift positions.
        self.reuse_min = max(0, reuse_min) if can_shift else 0
        self._clock = 0
        self.n_decoded = 0
        self.n_decode_calls = 0
        self.n_shifted = 0

    def _params(self, n_ctx: int, n_batch: int, flash_attn: bool | None) -> Any:
        """Context parameters: the sequences in one cache, batches of ``n_batch``, the
        thread count."""
        cparams = self._lib.llama_context_default_params()
        cparams.n_ctx = max(0, n_ctx)
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = SEQUENCES
        if hasattr(cparams, "kv_unified"):
            cparams.kv_unified = True  # every sequence may use the whole context
        else:  # pragma: no cover - older llama-cpp-python: one sequence
            cparams.n_seq_max = 1
        cparams.n_threads = self.n_threads
        cparams.n_threads_batch = self.n_threads
        if hasattr(cparams, "flash_attn_type"):
            cparams.flash_attn_type = -1 if flash_attn is None else int(flash_attn)
        elif flash_attn is not None:  # pragma: no cover - older llama-cpp-python
            cparams.flash_attn = flash_attn
        if hasattr(cparams, "swa_full"):
            cparams.swa_full = True  # keep sliding-window layers' cache whole: prefix reuse
        return cparams

    def close(self) -> None:
        """Free the batch and the context; the object is unusable afterwards."""
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            self._lib.llama_free(self._ctx)
            self._ctx = None

    def _require_open(self) -> None:
        if self._ctx is None:
            raise ModelError("model is closed")

    # ------------------------------------------------------------ the cache

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        """Tokens the live sequence holds (the last generation's prompt and output)."""
        return tuple(self._live.tokens)

    @property
    def sequences(self) -> list[tuple[int, ...]]:
        """Tokens of every sequence, the live one first."""
        return [tuple(s.tokens) for s in sorted(self._seqs, key=lambda s: s is not self._live)]

    def reset(self) -> None:
        """Forget the KV cache."""
        self._require_open()
        if self._mem is not None:
            self._lib.llama_memory_clear(self._mem, True)
        else:  # pragma: no cover - llama-cpp-python < 0.3.16
            self._lib.llama_kv_self_clear(self._ctx)
        for seq in self._seqs:
            self._forget(seq)
        self._live = self._seqs[0]

    @staticmethod
    def _forget(seq: _Sequence) -> None:
        seq.tokens = []
        seq.logits = None
        seq.prompt_length = 0

    def _clear(self, seq: _Sequence) -> None:
        """Drop one sequence's cells."""
        if seq.tokens:
            self._remove(seq, 0)
        self._forget(seq)

    def _remove(self, seq: _Sequence, start: int, end: int = -1) -> bool:
        lib = self._lib
        if self._mem is not None:
            return bool(lib.llama_memory_seq_rm(self._mem, seq.seq_id, start, end))
        return bool(lib.llama_kv_self_seq_rm(self._ctx, seq.seq_id, start, end))  # pragma: no cover

    def _apply(self, seq: _Sequence, prompt: Sequence[int], plan: ReusePlan) -> int:
        """Make ``seq`` hold the plan's kept tokens of ``prompt``; return how many it kept.

        Recurrent models cannot drop part of a sequence and sliding-window caches may have
        evicted early positions: then the whole sequence goes and everything is re-decoded.
        """
        if plan.kept == len(seq.tokens) and not plan.moves:
            return plan.kept
        lib = self._lib
        ok = True
        for cached_at, prompt_at, length in plan.moves:
            ok = ok and self._remove(seq, prompt_at, cached_at)
            if ok:
                lib.llama_memory_seq_add(
                    self._mem, seq.seq_id, cached_at, cached_at + length, prompt_at - cached_at
                )
        ok = ok and self._remove(seq, plan.kept)
        if ok and plan.kept > 0 and self._mem is not None:
            ok = lib.llama_memory_seq_pos_min(self._mem, seq.seq_id) == 0
        if not ok:
            self._clear(seq)
            return 0
        seq.tokens = list(prompt[: plan.kept])
        seq.logits = None
        seq.prompt_length = min(seq.prompt_length, plan.kept)
        self.n_shifted += plan.shifted
        return plan.kept

    def _plan(self, seq: _Sequence, prompt: Sequence[int]) -> ReusePlan:
        """The plan for ``prompt`` in ``seq``, keeping back the last token when its logits
        are not at hand (it is decoded again to get them)."""
        plan = plan_reuse(seq.tokens, prompt, self.reuse_min)
        if plan.kept == len(prompt) and not (
            plan.prefix == len(prompt) == len(seq.tokens) and seq.logits is not None
        ):
            plan = plan_reuse(seq.tokens, prompt, self.reuse_min, limit=len(prompt) - 1)
        return plan

    def uncached(self, prompt: Sequence[int]) -> int:
        """How many of ``prompt``'s tokens evaluating it would decode (the best sequence)."""
        return min(len(prompt) - self._plan(seq, prompt).kept for seq in self._seqs)

    def _choose(self, prompt: Sequence[int], ahead: bool) -> tuple[_Sequence, ReusePlan]:
        """The sequence to evaluate ``prompt`` in, and its plan.

        A request takes the sequence that keeps the most (the live one on a tie).
        Read-ahead takes the same, except that it does not throw away much of the live
        prompt: then it takes the best of the others.
        """
        plans = [(seq, self._plan(seq, prompt)) for seq in self._seqs]
        if ahead:
            live = self._live
            spared = [
                (seq, plan)
                for seq, plan in plans
                if seq is not live or live.prompt_length - plan.kept <= AHEAD_MAY_DISCARD
            ]
            plans = spared or plans  # a single sequence: read-ahead has no spare
        return max(plans, key=lambda sp: (sp[1].kept, sp[0] is self._live, sp[0].used))

    # ------------------------------------------------------------ evaluation

    def evaluate(
        self,
        tokens: Sequence[int],
        interrupt: Interrupt | None = None,
        *,
        ahead: bool = False,
        chunk: int | None = None,
    ) -> FloatArray:
        """Logits (float32, n_vocab) after ``tokens``, decoding only what the cache lacks.

        The returned array is a copy the caller owns.  With ``interrupt``, the prompt is
        decoded in chunks of ``chunk`` tokens (``INTERRUPTIBLE_CHUNK`` by default) and
        ``interrupt`` is polled before each: ``Interrupted`` is raised when it returns
        true, and what was decoded stays cached for the next call.  ``ahead``: read-ahead
        (see :meth:`_choose`); the sequence used becomes the live one otherwise.
        """
        self._require_open()
        tokens = list(tokens)
        if not tokens:
            raise ValueError("evaluate() needs at least one token")
        if len(tokens) > self.n_ctx:
            raise ModelError(f"{len(tokens)} tokens exceed the context of {self.n_ctx}")
        seq, plan = self._choose(tokens, ahead)
        self._clock += 1
        seq.used = self._clock
        if not ahead:
            self._live = seq
        if plan.kept == len(tokens):  # the same prompt again: its logits are at hand
            assert seq.logits is not None
            logits = seq.logits
        else:
            kept = self._apply(seq, tokens, plan)
            size = INTERRUPTIBLE_CHUNK if chunk is None else chunk
            try:
                logits = self._decode(seq, tokens[kept:], interrupt, size if interrupt else None)
            finally:
                seq.prompt_length = len(seq.tokens)  # what was read, interrupted or not
        out: FloatArray = logits.copy()
        return out

    def append(self, token: int) -> FloatArray:
        """Decode one more token after the live sequence (a generation step); its logits."""
        self._require_open()
        out: FloatArray = self._decode(self._live, [token]).copy()
        return out

    def _make_room(self, seq: _Sequence, n: int) -> None:
        """Free cells for ``n`` more tokens of ``seq``: the other sequences go, least
        recently used first, while the cache would overflow."""
        others = sorted((s for s in self._seqs if s is not seq), key=lambda s: s.used)
        for other in others:
            if sum(len(s.tokens) for s in self._seqs) + n <= self.n_ctx:
                return
            self._clear(other)

    def _decode(
        self,
        seq: _Sequence,
        tokens: Sequence[int],
        interrupt: Interrupt | None = None,
        chunk_size: int | None = None,
    ) -> FloatArray:
        """Decode ``tokens`` after ``seq``'s cached ones in chunks; logits of the last.

        ``interrupt`` is polled before each chunk; when it says so, ``Interrupted`` is
        raised and the chunks decoded so far stay in the cache.
        """
        if len(seq.tokens) + len(tokens) > self.n_ctx:
            raise ModelError(
                f"{len(seq.tokens) + len(tokens)} tokens exceed the context of {self.n_ctx}"
            )
        self._make_room(seq, len(tokens))
        size = self.n_batch if chunk_size is None else max(1, min(chunk_size, self.n_batch))
        for start in range(0, len(tokens), size):
            if interrupt is not None and interrupt():
                raise Interrupted(f"stopped after {start} of {len(tokens)} prompt tokens")
            chunk = tokens[start : start + size]
            self._decode_batch(seq, chunk, wants_logits=start + size >= len(tokens))
        return self._logits(seq)

    def _decode_batch(self, seq: _Sequence, chunk: Sequence[int], wants_logits: bool) -> None:
        """One ``llama_decode`` call: ``chunk`` at the next positions of ``seq``."""
        batch = self._batch
        base = len(seq.tokens)
        for i, tok in enumerate(chunk):
            if not 0 <= tok < self.n_vocab:
                raise ModelError(f"token id {tok} out of range (n_vocab={self.n_vocab})")
            batch.token[i] = tok
            batch.pos[i] = base + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq.seq_id
            batch.logits[i] = 0
        if wants_logits:
            batch.logits[len(chunk) - 1] = 1
        batch.n_tokens = len(chunk)
        mark = log_mark()
        rc = self._lib.llama_decode(self._ctx, batch)
        self.n_decode_calls += 1
        if rc != 0:
            self.reset()  # partial ubatches may remain: start over next time
            raise ModelError(f"llama_decode failed with code {rc}: {native_errors(mark)}")
        seq.tokens.extend(chunk)
        seq.logits = None
        self.n_decoded += len(chunk)

    def _logits(self, seq: _Sequence) -> FloatArray:
        """The logits of the last decoded position (kept for a repeated prompt)."""
        ptr = self._lib.llama_get_logits_ith(self._ctx, -1)
        if not ptr:
            raise ModelError("llama.cpp returned no logits")
        logits: FloatArray = np.array(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)))
        seq.logits = logits
        return logits
