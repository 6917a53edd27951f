"""The model layer: find or fetch a GGUF model and offer it to the decoder as a backend.

``resolve_model`` turns the user's setting into a local file (:mod:`.download`, named
models from :mod:`.catalog`).  Two wings implement the :class:`~.backend.Backend`
interface the decoding loop talks to: :mod:`.local` (``FimModel``: llama.cpp in this
process, over a reused KV cache) and :mod:`.remote` (a model behind llama-server or an
OpenAI-compatible server).  Shared by both, one job each: :mod:`.native` (the shared
library and its log), :mod:`.vocabulary` (token bytes, tokenization), :mod:`.families`
(FIM tokens and layouts), :mod:`.prompt` (prompts cut to a token budget),
:mod:`.token_index` (tokens by their text).  The tests' random-weight models are built
outside the package, by the repository's ``testmodels``.
"""

from __future__ import annotations

from typing import Any

from .backend import Backend, Generation, LogitsRanking, TokenRanking
from .download import DEFAULT_MODEL_SPEC, ModelSpec, ProgressHook, describe_spec, resolve_model
from .errors import Interrupted, ModelError
from .families import FimLayout, FimTokens
from .local.llm import FimModel

__all__ = [
    "DEFAULT_MODEL_SPEC",
    "Backend",
    "FimLayout",
    "FimModel",
    "FimTokens",
    "Generation",
    "Interrupted",
    "LogitsRanking",
    "ModelError",
    "ModelSpec",
    "ProgressHook",
    "TokenRanking",
    "describe_spec",
    "open_model",
    "resolve_model",
]


def open_model(
    spec: ModelSpec = None,
    *,
    progress: ProgressHook | None = None,
    **kwargs: Any,
) -> FimModel:
    """Resolve ``spec`` (path, hf://..., or the embedded default) and load it."""
    return FimModel(resolve_model(spec, progress=progress), **kwargs)
