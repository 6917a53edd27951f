"""The language server with ``model`` set to a real llama-server's URL, over stdio.

What an editor sees: completions from the server that parse in place; a server that
goes away or refuses the API key costs one ``window/showMessage`` and a ``fimlsp/status``
that says why, completions are off (answered at once, empty) until the server answers
again, and then they come back by themselves.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

import pytest_lsp
from lsp_fixtures import SERVER, Statuses, inline_items, open_doc, server_status
from model_fixtures import model_cache, stopping_model, tiny_factory  # noqa: F401
from pytest_lsp import LanguageClient, client_capabilities
from test_llama_server import llama_server_binary  # noqa: F401

from bench.llama_server import LlamaServer, free_port, start_llama_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = "def f(x):\n    return (x +\n\nprint(f(1))\n"
LINE, COLUMN = 1, len("    return (x +")


class Served:
    """A llama-server that a test can stop and start again on the same port."""

    def __init__(self, binary: Path, model: Path, log_dir: Path, **kwargs: Any) -> None:
        self.binary, self.model, self.log_dir, self.kwargs = binary, model, log_dir, kwargs
        self.running: LlamaServer = start_llama_server(
            binary, model, ctx_size=2048, log_dir=log_dir, **kwargs
        )
        self.url = self.running.url

    def stop(self) -> None:
        self.running.stop()

    def restart(self) -> None:
        self.running = start_llama_server(
            self.binary,
            self.model,
            ctx_size=2048,
            log_dir=self.log_dir,
            port=self.running.port,
            **self.kwargs,
        )


@pytest.fixture(scope="module")
def served(
    llama_server_binary: Path, stopping_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    server = Served(llama_server_binary, stopping_model, tmp_path_factory.mktemp("served"))
    yield server
    server.stop()


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, served: Served) -> Any:
    statuses = Statuses()
    lsp_client.feature("fimlsp/status")(statuses)
    lsp_client.statuses = statuses  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            # knownNames off: a random-weight model writes arbitrary names
            initialization_options={
                "model": served.url,
                "deadlineMs": 8000,
                "maxTokens": 32,
                "knownNames": False,
            },
        )
    )
    yield
    await lsp_client.shutdown_session()


async def state_becomes(
    client: LanguageClient, check: Callable[[str], bool], timeout: float = 60
) -> dict[str, Any]:
    """serverStatus once its engine state passes ``check`` (or fail)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await server_status(client)
        if check(status["state"]):
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"engine state stayed {status['state']}: {status['message']}")
        await asyncio.sleep(0.1)


def warnings(client: LanguageClient) -> list[str]:
    return [m.message for m in client.messages if m.type == types.MessageType.Warning]


async def completes(client: LanguageClient, uri: str) -> str:
    """A completion at the cursor that makes the document parse."""
    result = await inline_items(client, uri, LINE, COLUMN)
    assert result, client.statuses.items[-3:]  # type: ignore[attr-defined]
    middle = result[0].insert_text
    assert isinstance(middle, str) and middle
    offset = TEXT.index("+") + 1
    ast.parse(TEXT[:offset] + middle + TEXT[offset:])
    return middle


async def answered_empty_at_once(client: LanguageClient, uri: str) -> None:
    started = time.monotonic()
    assert not await inline_items(client, uri, LINE, COLUMN)
    assert time.monotonic() - started < 5


async def test_completions_come_from_the_server(client: LanguageClient, served: Served) -> None:
    status = await state_becomes(client, lambda s: s not in ("idle", "loading"))
    assert status["state"] == "ready", status["message"]
    assert served.url in status["message"] and "FIM" in status["message"]
    open_doc(client, "file:///served.py", TEXT)
    await completes(client, "file:///served.py")
    done = await client.statuses.wait_for(lambda s: "tokens" in s)  # type: ignore[attr-defined]
    assert done["complete"] is True


async def test_a_server_that_goes_away_and_comes_back(
    client: LanguageClient, served: Served
) -> None:
    uri = "file:///outage.py"
    open_doc(client, uri, TEXT)
    assert (await state_becomes(client, lambda s: s not in ("idle", "loading")))["state"] == "ready"
    shown = len(warnings(client))
    served.stop()
    await answered_empty_at_once(client, uri)  # the request that finds the server gone
    status = await state_becomes(client, lambda s: s == "unavailable", timeout=10)
    assert "completions are off" in status["message"], status["message"]
    for _ in range(3):  # while it is off: answered at once, nothing sent, no new message
        await answered_empty_at_once(client, uri)
    await asyncio.sleep(3.5)  # retries after 1 s and 2 s fail too
    assert (await server_status(client))["state"] == "unavailable"
    assert len(warnings(client)) == shown + 1, warnings(client)
    assert "completions are off" in warnings(client)[-1]
    served.restart()
    await state_becomes(client, lambda s: s == "ready", timeout=30)  # the next retry (4 s)
    await completes(client, uri)
    assert len(warnings(client)) == shown + 1


async def test_a_wrong_api_key_says_so_and_the_right_one_works(
    client: LanguageClient,
    served: Served,
    llama_server_binary: Path,
    stopping_model: Path,
    tmp_path: Path,
) -> None:
    keyed = Served(llama_server_binary, stopping_model, tmp_path, api_key="right-key")
    try:
        shown = len(warnings(client))
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimlsp": {"model": keyed.url, "apiKey": "wrong-key"}}
            )
        )
        status = await state_becomes(client, lambda s: s == "unavailable", timeout=30)
        assert "API key was rejected" in status["message"], status["message"]
        assert status["settings"]["api_key"] == "***"  # never echoed back
        await asyncio.sleep(0.3)
        assert len(warnings(client)) == shown + 1 and "API key" in warnings(client)[-1]
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimlsp": {"apiKey": "right-key"}})
        )
        await state_becomes(client, lambda s: s == "ready", timeout=30)
        uri = "file:///keyed.py"
        open_doc(client, uri, TEXT)
        await completes(client, uri)
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimlsp": {"model": served.url, "apiKey": None}}
            )
        )
        keyed.stop()


def _cli_complete(tmp_path: Path, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "cli.py"
    source.write_text(TEXT)
    return subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", "complete", str(source), "--line", "2",
         "--column", str(COLUMN + 1), "--model", url, "--max-tokens", "32",
         "--no-known-names", "--json"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip


async def test_the_command_line_completes_from_a_server(served: Served, tmp_path: Path) -> None:
    done = _cli_complete(tmp_path, served.url)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["complete"] is True
    offset = TEXT.index("+") + 1
    ast.parse(TEXT[:offset] + result["middle"] + TEXT[offset:])
    refused = _cli_complete(tmp_path, f"http://127.0.0.1:{free_port()}")
    assert refused.returncode == 2 and "fimlsp: error:" in refused.stderr, refused.stderr
