"""Helpers for the language-server tests: a real ``fimlsp --stdio`` under pytest-lsp.

The server runs in a subprocess with a tiny random-weight model that wants to stop
(``stopping_model`` of model_fixtures), so constrained decoding ends at the first
complete middle and the tests see completions; with plain random weights almost none
would end in time.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections.abc import Callable
from typing import Any

import pytest
from lsprotocol import types

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from model_fixtures import stopping_model  # noqa: F401  (the tests take the fixture from here)
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "lsp_server.cli", "--stdio"])


class Statuses:
    """Collects ``fimlsp/status`` notifications."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def __call__(self, params: Any) -> None:
        self.items.append(_plain(params))

    async def wait_for(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        seen = 0
        while True:
            for item in self.items[seen:]:
                if check(item):
                    return item
            seen = len(self.items)
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no matching fimlsp/status; got {self.items[-5:]}")
            await asyncio.sleep(0.05)


def _plain(value: Any) -> Any:
    """pygls hands custom params over as named tuples; make them dicts."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=text
            )
        )
    )


def inline_params(
    uri: str,
    line: int,
    character: int,
    trigger: types.InlineCompletionTriggerKind = types.InlineCompletionTriggerKind.Automatic,
) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=trigger),
    )


async def inline_items(
    client: LanguageClient,
    uri: str,
    line: int,
    character: int,
    trigger: types.InlineCompletionTriggerKind = types.InlineCompletionTriggerKind.Automatic,
) -> list[types.InlineCompletionItem]:
    """The items of an inline completion request, whichever form the server answers in."""
    params = inline_params(uri, line, character, trigger)
    result = await client.text_document_inline_completion_async(params)
    if result is None:
        return []
    return list(result.items if isinstance(result, types.InlineCompletionList) else result)


async def wait_ready(client: LanguageClient, timeout: float = 60) -> dict[str, Any]:
    """Poll ``fimlsp/serverStatus`` until the model has loaded (or failed)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = _plain(await client.protocol.send_request_async("fimlsp/serverStatus", {}))
        if status["state"] in ("ready", "error", "disabled"):
            return dict(status)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"model not loaded: {status}")
        await asyncio.sleep(0.1)


async def server_status(client: LanguageClient, uri: str | None = None) -> dict[str, Any]:
    params = {"uri": uri} if uri else {}
    return dict(_plain(await client.protocol.send_request_async("fimlsp/serverStatus", params)))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
