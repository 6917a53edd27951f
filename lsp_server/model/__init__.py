"""The model layer: find or fetch a GGUF model and drive it through llama.cpp for FIM.

``resolve_model`` turns the user's setting into a local file, ``FimModel`` loads it and
exposes what the constrained decoder needs (token bytes, FIM prompts, incremental logits),
and ``tiny`` builds random-weight models with real tokenizers for tests.
"""

from __future__ import annotations

import os
from typing import Any

from .download import DEFAULT_MODEL_SPEC, ProgressHook, resolve_model
from .errors import Interrupted, ModelError
from .llm import FimLayout, FimModel, FimTokens

__all__ = [
    "DEFAULT_MODEL_SPEC",
    "FimLayout",
    "FimModel",
    "FimTokens",
    "Interrupted",
    "ModelError",
    "ProgressHook",
    "open_model",
    "resolve_model",
]


def open_model(
    spec: str | os.PathLike[str] | tuple[str, str] | None = None,
    *,
    progress: ProgressHook | None = None,
    **kwargs: Any,
) -> FimModel:
    """Resolve ``spec`` (path, hf://..., or the embedded default) and load it."""
    return FimModel(resolve_model(spec, progress=progress), **kwargs)
