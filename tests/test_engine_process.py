"""The engine in its own process: killed with SIGKILL in the middle of a request and in
the middle of a model load, the real server (over stdio, tiny llama.cpp models) answers
the pending request with an error within a second, says so once in ``fimlsp/status``,
starts a new engine and serves the next request; the documents it holds are intact.
The engine never outlives the front, whether the front shuts down or is killed."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

import pytest_lsp
from lsp_fixtures import (
    SERVER,
    Statuses,
    inline_items,
    inline_params,
    open_doc,
    server_status,
    sha256,
    stopping_model,
    wait_ready,
)
from model_fixtures import model_cache, tiny_factory
from pytest_lsp import LanguageClient, client_capabilities

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name


#: Long enough that building its quotient takes a good second (the request is running
#: when the engine is killed).
BIG = "".join(f"def f{i}(x):\n    return x * {i} + len('{i}')\n\n" for i in range(1500))
BIG += "def g(x):\n    return (x +\n"
SMALL = "def f(x):\n    return (x +\n\nprint(f(1))\n"
TYPED = SMALL.replace("f(1)", "f(2)")
STOPPED = "completion engine stopped"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie is gone too: only its parent's wait() is missing
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, stopping_model: Path) -> Any:
    statuses = Statuses()
    lsp_client.feature("fimlsp/status")(statuses)
    lsp_client.statuses = statuses  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options={
                "model": str(stopping_model),
                "deadlineMs": 20000,
                "maxTokens": 48,
                # a random-weight model writes arbitrary names (model_fixtures.syntax_options)
                "knownNames": False,
            },
        )
    )
    assert (await wait_ready(lsp_client))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


def _stops(client: LanguageClient) -> int:
    items = client.statuses.items  # type: ignore[attr-defined]
    return sum(STOPPED in str(item.get("message")) for item in items)


async def _answered_within(future: Any, seconds: float) -> tuple[float, Exception | None]:
    """Seconds until ``future`` was answered (result or error response)."""
    started = time.perf_counter()
    try:
        await asyncio.wait_for(asyncio.wrap_future(future), seconds)
    except asyncio.TimeoutError:
        raise AssertionError(f"no answer within {seconds} s") from None
    except Exception as exc:  # the error response
        return time.perf_counter() - started, exc
    return time.perf_counter() - started, None


async def _next_completion(client: LanguageClient, uri: str, line: int, column: int) -> None:
    """Once the new engine is ready, a request gets a completion."""
    status = await wait_ready(client)
    assert status["state"] == "ready", status
    items = await inline_items(client, uri, line, column)
    assert items and items[0].insert_text, client.statuses.items[-1]  # type: ignore[attr-defined]


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_in_the_middle_of_a_request(client: LanguageClient) -> None:
    open_doc(client, "file:///small.py", SMALL)
    open_doc(client, "file:///typed.py", SMALL)
    open_doc(client, "file:///big.py", BIG)
    pid = (await server_status(client))["enginePid"]
    stops = _stops(client)
    at_end = inline_params("file:///big.py", BIG.count("\n") - 1, 15)
    future = client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, at_end)
    await asyncio.sleep(0.3)  # the quotient of 1,500 functions is being built
    assert not future.done(), "answered before the kill: make BIG larger"
    os.kill(pid, signal.SIGKILL)
    seconds, error = await _answered_within(future, 1.0)
    assert error is not None and STOPPED in str(error), error
    assert seconds < 1.0
    # Typed while the new engine starts: kept by the front.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri="file:///typed.py", version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=TYPED)],
        )
    )
    await _next_completion(client, "file:///small.py", 1, 15)
    assert _stops(client) == stops + 1  # said once
    status = await server_status(client, "file:///typed.py")
    assert status["enginePid"] not in (0, pid) and status["engineRestarts"] >= 1
    assert status["document"]["sha256"] == sha256(TYPED)
    assert (await server_status(client, "file:///big.py"))["document"]["sha256"] == sha256(BIG)


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_in_the_middle_of_a_model_load(
    client: LanguageClient, stopping_model: Path, tmp_path: Path
) -> None:
    open_doc(client, "file:///during-load.py", SMALL)
    other = tmp_path / "another-stopping.gguf"  # another model: a load
    shutil.copyfile(stopping_model, other)
    pid = (await server_status(client))["enginePid"]
    statuses = client.statuses  # type: ignore[attr-defined]
    seen = len(statuses.items)
    stops = _stops(client)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(other)}})
    )
    await statuses.wait_for(lambda s: s.get("state") == "loading", timeout=10)
    future = client.protocol.send_request(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params("file:///during-load.py", 1, 15)
    )
    os.kill(pid, signal.SIGKILL)
    assert not any(s.get("state") == "ready" for s in statuses.items[seen:]), "loaded already"
    seconds, _ = await _answered_within(future, 1.0)  # an error, or "still loading"
    assert seconds < 1.0
    await _next_completion(client, "file:///during-load.py", 1, 15)
    assert _stops(client) == stops + 1
    status = await server_status(client, "file:///during-load.py")
    assert status["settings"]["model"] == str(other)  # the new engine got the settings
    assert status["document"]["sha256"] == sha256(SMALL)


# ---------------------------------------------------------------- no orphan


class RawClient:
    """Just enough LSP over the server's pipes to start it and read its answers."""

    def __init__(self, model: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lsp_server.cli", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.ids = 0
        self.request("initialize", {"capabilities": {}, "initializationOptions": {
            "model": str(model)}})  # fmt: skip
        self.notify("initialized", {})

    def notify(self, method: str, params: Any) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()
        self._write(body)

    def _write(self, body: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def request(self, method: str, params: Any) -> Any:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        self._write(json.dumps(body).encode())
        assert self.process.stdout is not None
        while True:
            length = 0
            while (line := self.process.stdout.readline().strip()) != b"":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(self.process.stdout.read(length))
            if message.get("id") == self.ids and "method" not in message:
                return message.get("result")

    def engine_pid(self) -> int:
        deadline = time.monotonic() + 60
        while True:
            status = self.request("fimlsp/serverStatus", {})
            if status["state"] == "ready":
                return int(status["enginePid"])
            assert time.monotonic() < deadline, status
            time.sleep(0.1)


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        assert time.monotonic() < deadline, f"engine {pid} outlived the front"
        time.sleep(0.02)


def test_the_engine_stops_with_a_shutdown(stopping_model: Path) -> None:
    raw = RawClient(stopping_model)
    pid = raw.engine_pid()
    raw.request("shutdown", None)
    _wait_gone(pid, 3.0)  # stopped by the shutdown, before the exit
    raw.notify("exit", None)
    assert raw.process.wait(10) == 0


def test_a_model_load_does_not_delay_shutdown(stopping_model: Path, tmp_path: Path) -> None:
    other = tmp_path / "loading.gguf"  # a model the engine has to load
    shutil.copyfile(stopping_model, other)
    raw = RawClient(stopping_model)
    pid = raw.engine_pid()
    raw.notify("workspace/didChangeConfiguration", {"settings": {"fimlsp": {"model": str(other)}}})
    assert raw.request("fimlsp/serverStatus", {})["state"] == "loading"
    started = time.perf_counter()
    raw.request("shutdown", None)
    assert time.perf_counter() - started < 0.5
    raw.notify("exit", None)
    assert raw.process.wait(10) == 0
    _wait_gone(pid, 1.0)


def test_the_engine_does_not_outlive_a_killed_front(stopping_model: Path) -> None:
    raw = RawClient(stopping_model)
    pid = raw.engine_pid()
    raw.process.kill()
    raw.process.wait(10)
    _wait_gone(pid, 2.0)  # its end of the pipe closed


# ---------------------------------------------------------------- the channel


def test_a_text_goes_once_per_version_and_an_edit_sends_its_pieces() -> None:
    """Over a real socket pair: a snapshot arrives whole the first time, the next
    version of the document brings only its new pieces, a snapshot sent before comes
    back as the same object, and each document keeps its own."""
    import socket
    from concurrent.futures import ThreadPoolExecutor
    from multiprocessing.connection import Connection

    from lsp_server.documents import Document
    from lsp_server.engine_protocol import Channel, DocumentChanged, Forget

    ours, theirs = socket.socketpair()
    front, engine = Channel(Connection(ours.detach())), Channel(Connection(theirs.detach()))
    doc = Document("file:///a.py", "".join(f"x_{i} = {i}\n" for i in range(20_000)))
    first = doc.snapshot()
    doc.replace((10, 0), (10, 0), "y = 1\n", "utf-16")
    second = doc.snapshot()
    assert len(first.pieces) > 10
    sizes, received = [], []
    for snapshot in (first, second, second):
        before = front.bytes_sent
        with ThreadPoolExecutor(1) as reader:  # a message may be larger than the pipe holds
            arriving = reader.submit(engine.recv)
            front.send(DocumentChanged("file:///a.py", snapshot, None))
            received.append(arriving.result(10).source)
        sizes.append(front.bytes_sent - before)
        assert received[-1].text == snapshot.text
    assert sizes[0] > len(first.text)  # whole
    assert sizes[1] < sizes[0] / 10  # the edited piece, and references to the rest
    assert sizes[2] < 200 and received[2] is received[1]  # the same version: the same object
    with ThreadPoolExecutor(1) as reader:
        arriving = reader.submit(lambda: [engine.recv() for _ in range(3)])
        front.send(DocumentChanged("file:///b.py", second, None))  # its own document
        front.send(Forget("file:///a.py"))
        front.send(DocumentChanged("file:///a.py", first, None))  # whole again after a Forget
        other, forgotten, again = arriving.result(10)
    assert other.source.text == second.text and isinstance(forgotten, Forget)
    assert again.source.text == first.text
    front.close()
    engine.close()
