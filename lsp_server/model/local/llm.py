"""The in-process backend: a GGUF model run by llama.cpp's low-level API.

:class:`FimModel` puts the model layer's pieces together and offers them as a
:class:`~lsp_server.model.backend.Backend`:

* :mod:`.native`: the shared library and its log;
* :mod:`.vocabulary`: token bytes and tokenization;
* :mod:`.families`: FIM tokens and prompt layouts;
* :mod:`.prompt`: prompts cut to the context window;
* :mod:`.context`: evaluation over a reused KV cache.

A generation (:class:`LlamaGeneration`) ranks the whole vocabulary from the logits
and decodes each chosen token in the same context.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ..backend import FloatArray, Interrupt, LogitsRanking
from ..errors import ModelError
from ..families import (
    FimLayout,
    FimTokens,
    choose_layout,
    detected,
    find_fim_tokens,
    stop_tokens,
)
from ..native import library, log_mark, native_errors
from ..prompt import PromptBuilder, RepoContext
from ..token_index import TokenIndex
from ..vocabulary import LlamaVocabulary
from .context import READ_AHEAD_CHUNK, REUSE_MIN_CHUNK, LlamaContext

__all__ = ["FimModel", "LlamaGeneration"]


def _check_file(path: Path) -> None:
    """Turn the usual file problems into clear errors before llama.cpp sees the path."""
    if not path.exists():
        raise ModelError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelError(f"model path is not a file: {path}")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from exc
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file (bad magic {magic!r})")


def _load(lib: ModuleType, path: Path, n_gpu_layers: int, use_mmap: bool) -> Any:
    """The native model, or ``ModelError`` with what llama.cpp said."""
    params = lib.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers
    params.use_mmap = use_mmap
    mark = log_mark()
    model = lib.llama_model_load_from_file(os.fsencode(path), params)
    if not model:
        detail = native_errors(mark) or "no detail from llama.cpp"
        raise ModelError(f"cannot load model {path}: corrupt or unsupported ({detail})")
    return model


def _family(vocab: LlamaVocabulary, spm_infill: bool) -> tuple[FimTokens, FimLayout]:
    """The model's special tokens and prompt layout, from its vocabulary."""
    tokens = find_fim_tokens(vocab.reported_id, vocab.special_id)
    add_bos = vocab.wants_bos and tokens.bos is not None
    return tokens, choose_layout(tokens, vocab.token_text, add_bos, spm_infill, vocab.pre)


class FimModel:
    """A GGUF model loaded through llama.cpp, driven one sequence at a time.

    Not thread-safe: one caller at a time (the LSP's single decode worker). Free the native
    memory with ``close()`` or a ``with`` block; it is also released on garbage collection.

    ``flash_attn`` None means off on the CPU and llama.cpp's choice on a GPU: CPU flash
    attention makes logits depend on how the prompt was split into batches (~1e-3), so a
    completion would depend on the editing history that shaped the KV cache; without it
    reuse is bit-exact.  ``suffix_share``, ``align_lines``: see
    :class:`~lsp_server.model.prompt.PromptBuilder`; ``spm_infill``: suffix-first prompts;
    ``reuse_min``: the shortest chunk of a cached prompt kept by shifting it to where a new
    prompt has it (0: only the common prefix; see :mod:`lsp_server.model.local.context`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_threads: int = 1,
        n_batch: int = 512,
        n_gpu_layers: int | None = None,
        use_mmap: bool = True,
        flash_attn: bool | None = None,
        suffix_share: float = 0.25,
        align_lines: int = 1,
        spm_infill: bool = False,
        reuse_min: int = REUSE_MIN_CHUNK,
    ) -> None:
        self._model: Any = None
        self.path = Path(path)
        _check_file(self.path)
        lib = self._lib = library()
        if n_gpu_layers is None:
            n_gpu_layers = -1 if lib.llama_supports_gpu_offload() else 0
        if flash_attn is None and n_gpu_layers == 0:
            flash_attn = False
        self.n_gpu_layers = n_gpu_layers
        self._model = _load(lib, self.path, n_gpu_layers, use_mmap)
        name = str(self.path)
        try:
            self.vocab = LlamaVocabulary(lib, self._model, name, self.path)
            self.cache = LlamaContext(
                lib,
                self._model,
                self.vocab.n_vocab,
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_threads=n_threads,
                flash_attn=flash_attn,
                name=name,
                reuse_min=reuse_min,
            )
        except ModelError:
            self.close()
            raise
        self.n_ctx = self.cache.n_ctx
        self.fim_tokens, self.layout = _family(self.vocab, spm_infill)
        self.prompts = PromptBuilder(
            self.vocab,
            self.layout,
            self.fim_tokens,
            self.n_ctx,
            suffix_share=suffix_share,
            align_lines=align_lines,
        )
        self._stop_ids = stop_tokens(self.fim_tokens)
        #: Every id that ends generation: rankings sum their probability.  llama.cpp ends
        #: generation only at control tokens (which render as no bytes) and at the
        #: metadata's end ids, so only those are asked.
        ends = {t for t, data in enumerate(self.vocab.token_bytes) if not data}
        ends |= self._stop_ids
        self.eog_ids = sorted(t for t in ends if self._ends(t))
        self._eog_set = frozenset(self.eog_ids)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Free the context and the model; the object is unusable afterwards."""
        for part in (getattr(self, "vocab", None), getattr(self, "cache", None)):
            if part is not None:
                part.close()
        if self._model is not None:
            self._lib.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> FimModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit modules may be gone
            self.close()

    def describe(self) -> str:
        fim = "FIM" if self.has_fim else "no FIM tokens: left context only"
        return f"{self.path.name} ({fim}, {self.n_ctx} context)"

    # ------------------------------------------------------------ vocabulary

    @property
    def vocab_bytes(self) -> list[bytes]:
        """Bytes of every token id, indexed by id (shared list: do not modify)."""
        return self.vocab.token_bytes

    def tokenize(
        self, text: str, add_special: bool = False, parse_special: bool = False
    ) -> list[int]:
        """See :meth:`LlamaVocabulary.tokenize`."""
        return self.vocab.tokenize(text, add_special, parse_special)

    @property
    def has_fim(self) -> bool:
        """True when prompts carry the suffix (the model has usable FIM tokens)."""
        return self.layout.has_fim

    def detected(self) -> dict[str, object]:
        """The detected family, layout and end tokens (see ``families.detected``)."""
        return detected(self.layout, self.eog_ids, self.vocab.token_text)

    def eog(self, token: int) -> bool:
        """Whether generation should stop at ``token``: llama.cpp's end-of-generation set
        plus EOS/EOT and the FIM markers, which a FIM model emits only when it is done;
        not a token the file calls ordinary text that llama.cpp ends at for its text
        (``LlamaVocabulary.ordinary_ids``), unless it is the metadata's EOS or EOT."""
        return token in self._eog_set

    def _ends(self, token: int) -> bool:
        if token in self._stop_ids:
            return True
        return self.vocab.native_eog(token) and token not in self.vocab.ordinary_ids

    @functools.cached_property
    def token_index(self) -> TokenIndex:
        """The index of the token bytes (sorted once per vocabulary, cached on disk)."""
        return TokenIndex.cached(self.vocab_bytes)

    # ------------------------------------------------------------ prompts

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
        """Token ids of the FIM prompt for text around the cursor, cut to ``budget`` tokens
        of text (the context window with room for ``max_new_tokens`` at most; see
        :mod:`lsp_server.model.prompt`); ``path`` names the file for families whose prompts
        carry it (Mellum); ``context``: other files of the project, at the head of the
        prompt for families with a repository format."""
        return self.prompts.for_request(
            prefix, suffix, max_new_tokens, path, budget, margin, context=context
        )

    # ------------------------------------------------------------ generation

    def prefill(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        """Read ``prompt`` into the KV cache for the generation that follows."""
        self.cache.evaluate(prompt, interrupt)

    def uncached(self, prompt: Sequence[int]) -> int:
        """How many of ``prompt``'s tokens reading it would decode."""
        return self.cache.uncached(prompt)

    def read_ahead(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> None:
        """Read ``prompt`` before anyone asks for it, in short chunks, keeping the prompt
        the last generation used (see :meth:`LlamaContext.evaluate`)."""
        self.cache.evaluate(prompt, interrupt, ahead=True, chunk=READ_AHEAD_CHUNK)

    def start(self, prompt: Sequence[int], interrupt: Interrupt | None = None) -> LlamaGeneration:
        """A generation after ``prompt``; only what the KV cache lacks is decoded."""
        return LlamaGeneration(self.cache, self.cache.evaluate(prompt, interrupt), self.eog_ids)


class LlamaGeneration:
    """A generation in a :class:`LlamaContext`: every chosen token is decoded in place."""

    def __init__(self, context: LlamaContext, logits: FloatArray, end_ids: list[int]) -> None:
        self._context = context
        self._end_ids = end_ids
        self._ranking = LogitsRanking(logits, end_ids)

    def ranking(self) -> LogitsRanking:
        return self._ranking

    def advance(self, token: int) -> None:
        self._ranking = LogitsRanking(self._context.append(token), self._end_ids)

    def close(self) -> None:
        """Nothing to release: the tokens stay in the KV cache for the next prompt."""

    def __enter__(self) -> LlamaGeneration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
