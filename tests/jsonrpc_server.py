"""The real fimlsp server started through :mod:`lsp_server.jsonrpc` (for the tests and
``bench.lsp_fuzz --server``), until ``lsp_server/server.py`` adopts the layer itself.

Usage: ``python tests/jsonrpc_server.py [--tcp --host H --port N]``

It does at run time what the server's own code will say in a few lines: the
protocol class gets :class:`~lsp_server.jsonrpc.JsonRpcGuard` as a base, a
``didChange`` that cannot be applied makes the server forget the document (so it
never answers for a text the client does not have), and the process exits with
the code the layer returns.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lsprotocol import types

from lsp_server.jsonrpc import JsonRpcGuard, harden, serve_stdio, serve_tcp
from lsp_server.server import FimLanguageServer, create_server


def forget_unsynced_documents(server: FimLanguageServer) -> None:
    """A rejected ``didChange`` leaves the server's copy behind: forget the document."""
    protocol = server.protocol
    assert isinstance(protocol, JsonRpcGuard)
    rejected = protocol.notification_rejected

    def notification_rejected(method: str, params: Any, reason: str) -> None:
        rejected(method, params, reason)
        document = params.get("textDocument") if isinstance(params, dict) else None
        uri = document.get("uri") if isinstance(document, dict) else None
        if method == types.TEXT_DOCUMENT_DID_CHANGE and isinstance(uri, str):
            server.documents.pop(uri, None)
            server.engine.forget(uri)

    protocol.notification_rejected = notification_rejected  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tcp", action="store_true")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=2087)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = create_server()
    harden(server)
    forget_unsynced_documents(server)
    if args.tcp:
        return serve_tcp(server, args.host, args.port)
    return serve_stdio(server)


if __name__ == "__main__":
    sys.exit(main())
