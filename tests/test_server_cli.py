"""The server's command line and its handling of raw, malformed protocol traffic."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsp_fixtures import SERVER


def test_malformed_messages_do_not_kill_the_server() -> None:
    """Raw bytes over stdio: garbage JSON and a request before initialize get errors;
    then a real initialize is answered."""

    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    messages = [
        frame(b"{not json"),
        frame(b'{"jsonrpc": "2.0", "id": 1, "method": "no/suchMethod", "params": {}}'),
        frame(
            b'{"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"capabilities": {}}}'
        ),
        # Not UTF-8 inside a string: the message is dropped, the server goes on.
        frame(
            b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument":'
            b' {"uri": "file:///b.py", "languageId": "python", "version": 1, "text": "x\xff"}}}'
        ),
        frame(b'{"jsonrpc": "2.0", "id": 4, "method": "fimlsp/serverStatus", "params": {}}'),
        frame(b'{"jsonrpc": "2.0", "id": 3, "method": "shutdown"}'),
        frame(b'{"jsonrpc": "2.0", "method": "exit"}'),
    ]
    proc = subprocess.run(
        SERVER.server_command,
        input=b"".join(messages),
        capture_output=True,
        timeout=60,
    )
    out = proc.stdout
    assert b'"id": null' in out and b"-32700" in out  # not JSON, its id unreadable
    assert b'"id": 1' in out and b"-32002" in out  # not initialized yet
    assert b'"id": 2' in out and b"inlineCompletionProvider" in out
    assert b'"id": 4' in out and b'"documents"' in out
    assert b'"enginePid": ' in out and b'"enginePid": 0' not in out  # the engine runs
    assert b'"id": 3' in out
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]


def test_cli_flags() -> None:
    run = [sys.executable, "-m", "lsp_server.cli"]
    version = subprocess.run([*run, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("fimlsp ")
    usage = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=60)
    for flag in ("--stdio", "--tcp", "--port", "--log-file", "--log-level"):
        assert flag in usage.stdout
    refused = subprocess.run([*run, "--port", "soon"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--port" in refused.stderr


def test_tcp_transport() -> None:
    """``fimlsp --tcp``: a client connects, initializes and shuts the server down."""
    import json
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*SERVER.server_command[:-1], "--tcp", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.1)
        with conn:
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
            ).encode()
            conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            received = b""
            while b"inlineCompletionProvider" not in received:
                chunk = conn.recv(65536)
                assert chunk, received
                received += chunk
    finally:
        server.terminate()
        server.wait(timeout=10)
