"""A llama.cpp context holding one sequence: incremental evaluation over a reused KV cache.

The high-level ``llama_cpp.Llama`` either keeps every position's logits
(``logits_all``) or saves and restores whole states; the decoder needs neither, only
the logits of the last position after each step.  :class:`LlamaContext` remembers
which tokens sequence 0 of the KV cache holds and decodes only what follows their
common prefix with the next prompt, so a keystroke costs the changed tail.  A long
prompt is decoded in chunks between which the caller may interrupt; the chunks read
stay in the cache for the next request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import Interrupted, ModelError
from .native import log_mark, native_errors

__all__ = ["INTERRUPTIBLE_CHUNK", "FloatArray", "Interrupt", "LlamaContext"]

#: Prompt tokens decoded between two polls of an ``interrupt`` callback: about a third of a
#: second for a 270M model on one CPU core, and large enough to keep batching efficient.
INTERRUPTIBLE_CHUNK = 64

FloatArray = npt.NDArray[np.float32]
#: Polled between prompt chunks; true means "stop now" (a cancel, a deadline).
Interrupt = Callable[[], bool]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class LlamaContext:
    """One llama.cpp context over a loaded model, evaluated one sequence at a time.

    Not thread-safe: one caller at a time.  ``n_decoded`` and ``n_decode_calls`` count
    the tokens sent to ``llama_decode`` and the calls, for tests and statistics.
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
        self._tokens: list[int] = []  # what sequence 0 of the KV cache holds, in order
        self._last_logits: FloatArray | None = None
        self.n_decoded = 0
        self.n_decode_calls = 0

    def _params(self, n_ctx: int, n_batch: int, flash_attn: bool | None) -> Any:
        """Context parameters: one sequence, batches of ``n_batch``, the thread count."""
        cparams = self._lib.llama_context_default_params()
        cparams.n_ctx = max(0, n_ctx)
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
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
        """Tokens currently held in the KV cache (sequence 0)."""
        return tuple(self._tokens)

    def reset(self) -> None:
        """Forget the KV cache."""
        self._require_open()
        self._clear_memory()

    def _clear_memory(self) -> None:
        if self._mem is not None:
            self._lib.llama_memory_clear(self._mem, True)
        else:  # pragma: no cover - llama-cpp-python < 0.3.16
            self._lib.llama_kv_self_clear(self._ctx)
        self._tokens = []
        self._last_logits = None

    def _truncate(self, n: int) -> int:
        """Drop cached tokens from position ``n`` on; return how many are really kept.

        Recurrent models cannot drop a partial sequence and sliding-window caches may have
        evicted early positions: then the whole cache goes and everything is re-decoded.
        """
        if n >= len(self._tokens):
            return len(self._tokens)
        lib = self._lib
        if self._mem is not None:
            ok = bool(lib.llama_memory_seq_rm(self._mem, 0, n, -1))
            if ok and n > 0 and lib.llama_memory_seq_pos_min(self._mem, 0) > 0:
                ok = False
        else:  # pragma: no cover - llama-cpp-python < 0.3.16
            ok = bool(lib.llama_kv_self_seq_rm(self._ctx, 0, n, -1))
        if not ok:
            self._clear_memory()
            return 0
        del self._tokens[n:]
        self._last_logits = None
        return n

    # ------------------------------------------------------------ evaluation

    def evaluate(self, tokens: Sequence[int], interrupt: Interrupt | None = None) -> FloatArray:
        """Logits (float32, n_vocab) after ``tokens``, decoding only what the cache lacks.

        The returned array is a copy the caller owns.  With ``interrupt``, the prompt is
        decoded in chunks of ``INTERRUPTIBLE_CHUNK`` tokens and ``interrupt`` is polled
        between them (a long prompt takes seconds on a CPU): ``Interrupted`` is raised
        when it returns true, and what was decoded stays cached for the next call.
        """
        self._require_open()
        tokens = list(tokens)
        if not tokens:
            raise ValueError("evaluate() needs at least one token")
        if len(tokens) > self.n_ctx:
            raise ModelError(f"{len(tokens)} tokens exceed the context of {self.n_ctx}")
        n = _common_prefix(self._tokens, tokens)
        if n == len(tokens) == len(self._tokens) and self._last_logits is not None:
            logits = self._last_logits
        else:
            if n == len(tokens):
                n -= 1  # the cache holds the last token but not its logits: decode it again
            n = self._truncate(n)
            chunk = None if interrupt is None else INTERRUPTIBLE_CHUNK
            logits = self._decode(tokens[n:], interrupt, chunk)
        out: FloatArray = logits.copy()
        return out

    def append(self, token: int) -> FloatArray:
        """Decode one more token after the cached ones (a generation step); its logits."""
        self._require_open()
        out: FloatArray = self._decode([token]).copy()
        return out

    def _decode(
        self,
        tokens: Sequence[int],
        interrupt: Interrupt | None = None,
        chunk_size: int | None = None,
    ) -> FloatArray:
        """Decode ``tokens`` after the cached ones in chunks; logits of the last.

        ``interrupt`` is polled before each chunk; when it says so, ``Interrupted`` is
        raised and the chunks decoded so far stay in the cache.
        """
        if len(self._tokens) + len(tokens) > self.n_ctx:
            raise ModelError(
                f"{len(self._tokens) + len(tokens)} tokens exceed the context of {self.n_ctx}"
            )
        size = self.n_batch if chunk_size is None else max(1, min(chunk_size, self.n_batch))
        for start in range(0, len(tokens), size):
            if interrupt is not None and interrupt():
                raise Interrupted(f"stopped after {start} of {len(tokens)} prompt tokens")
            chunk = tokens[start : start + size]
            self._decode_batch(chunk, wants_logits=start + size >= len(tokens))
        return self._logits()

    def _decode_batch(self, chunk: Sequence[int], wants_logits: bool) -> None:
        """One ``llama_decode`` call: ``chunk`` at the next positions of sequence 0."""
        batch = self._batch
        base = len(self._tokens)
        for i, tok in enumerate(chunk):
            if not 0 <= tok < self.n_vocab:
                raise ModelError(f"token id {tok} out of range (n_vocab={self.n_vocab})")
            batch.token[i] = tok
            batch.pos[i] = base + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 0
        if wants_logits:
            batch.logits[len(chunk) - 1] = 1
        batch.n_tokens = len(chunk)
        mark = log_mark()
        rc = self._lib.llama_decode(self._ctx, batch)
        self.n_decode_calls += 1
        if rc != 0:
            self._clear_memory()  # partial ubatches may remain: start over next time
            raise ModelError(f"llama_decode failed with code {rc}: {native_errors(mark)}")
        self._tokens.extend(chunk)
        self.n_decoded += len(chunk)

    def _logits(self) -> FloatArray:
        """The logits of the last decoded position (kept for a repeated prompt)."""
        ptr = self._lib.llama_get_logits_ith(self._ctx, -1)
        if not ptr:
            raise ModelError("llama.cpp returned no logits")
        logits: FloatArray = np.array(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)))
        self._last_logits = logits
        return logits
