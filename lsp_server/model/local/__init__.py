"""The model in this process: llama.cpp through its C API (:mod:`.llm`'s ``FimModel``,
the decoder's backend), over a KV cache reused across requests (:mod:`.context`), with
as many threads as the machine's cores suit (:mod:`.threads`)."""

from __future__ import annotations

from .llm import FimModel, LlamaGeneration

__all__ = ["FimModel", "LlamaGeneration"]
