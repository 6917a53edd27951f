"""The model behind an inference server: :mod:`.backend` implements the decoder's
backend interface over :mod:`.server_api`, the HTTP client of llama-server's and the
OpenAI-compatible APIs."""

from __future__ import annotations

from .backend import (
    DEFAULT_WIDE_PROBS,
    RemoteBackend,
    RemoteCounters,
    RemoteGeneration,
    RemoteRanking,
    is_server_url,
    open_remote,
)

__all__ = [
    "DEFAULT_WIDE_PROBS",
    "RemoteBackend",
    "RemoteCounters",
    "RemoteGeneration",
    "RemoteRanking",
    "is_server_url",
    "open_remote",
]
