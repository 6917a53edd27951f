"""pygls' protocol, changed where fimlsp departs from its defaults.

* **Every message checked in one place.**  The protocol derives from
  :class:`~lsp_server.transport.guard.JsonRpcGuard`: a message that is not JSON, not a
  request, sent before ``initialize`` or after ``shutdown``, or whose params do
  not fit its method is answered with a JSON-RPC error (``-32602`` names the
  field) before any handler runs, so every handler, present and future, gets
  this for free; nothing reaches the user as a popup.
* **No second document store.**  pygls keeps its own copy of every document and splits
  lines with ``str.splitlines``, which also breaks at form feeds (common in the
  standard library), ``\\x1c``-``\\x1e``, U+2028 and U+2029, so its positions drift from
  the editor's.  The server keeps documents itself (:mod:`lsp_server.documents`); here
  ``didOpen``/``didChange``/``didClose`` go straight to its handlers.  A
  ``didChange`` is never lost: one whose version or positions no int32 holds is
  repaired (the version is informative; positions are clamped as VS Code's text model
  clamps them), and one that cannot be read at all leaves the document at its last
  good version; either is said in the log and ``fimlsp/status``.
* **Snapshots on arrival.**  A request handler that is a coroutine starts only on a
  later turn of the event loop, after the loop may have applied more changes.  A
  completion request is therefore captured (text and offset) and sent to the engine
  synchronously, when the message arrives.
* **Large documents indexed ahead.**  A large ``didOpen`` or whole-text ``didChange`` is
  parsed on a thread (:mod:`lsp_server.transport.serving`); its text's line index is made there
  too (:meth:`FimProtocol.prepare`), so the event loop never walks the whole text.
* **Cancellation reaches the engine.**  ``$/cancelRequest`` sets the request's cancel
  flag whether or not its coroutine started.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, cast

from lsprotocol import types
from pygls.protocol import lsp_method

from .documents import IndexedAhead
from .json_pieces import LongString
from .transport.guard import JsonRpcGuard
from .transport.messages import Parsed

__all__ = ["COMPLETION_METHODS", "FimProtocol"]

#: Requests answered by the engine, captured when they arrive.
COMPLETION_METHODS = (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.TEXT_DOCUMENT_COMPLETION)


class DocumentServer(Protocol):
    """What the protocol asks of the server it belongs to (:mod:`lsp_server.server`)."""

    indexed_ahead: IndexedAhead

    def capture(self, msg_id: Any, params: Any) -> None:
        """Snapshot a completion request's text and position when it arrives."""

    def cancel_in_flight(self, msg_id: Any) -> None:
        """Set a request's cancel flag, whether or not its handler started."""

    def note_document_problem(self, text: str) -> None:
        """Say in the log and the status that a document change was repaired."""


class FimProtocol(JsonRpcGuard):
    """pygls' protocol behind the guard, without its document store, capturing
    completion requests."""

    @property
    def fim_server(self) -> DocumentServer:
        return cast(DocumentServer, self.server)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: Any) -> Generator[Any, Any, None]:
        yield from self._user(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: Any) -> Generator[Any, Any, None]:
        yield from self._user(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: Any) -> Generator[Any, Any, None]:
        yield from self._user(types.TEXT_DOCUMENT_DID_CLOSE, params)

    def receive_body(self, data: bytes, parsed: Parsed | None = None) -> None:
        """The guard's handling; then the line indexes the message did not take go (a
        rejected ``didOpen`` would keep its text alive)."""
        try:
            super().receive_body(data, parsed)
        finally:
            self.fim_server.indexed_ahead.clear()

    def prepare(self, message: Any) -> None:
        """On the parsing thread: cut a large message's new text into indexed pieces,
        and put the key to them in its place (the text, kept in the pieces it was
        decoded in, is never joined: see :class:`~lsp_server.documents.IndexedAhead`)."""
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict):
            return
        holder = None
        if message.get("method") == types.TEXT_DOCUMENT_DID_OPEN:
            holder = params.get("textDocument")
        elif message.get("method") == types.TEXT_DOCUMENT_DID_CHANGE:
            changes = params.get("contentChanges")
            changes = changes if isinstance(changes, list) else []
            whole = [c for c in changes if isinstance(c, dict) and "range" not in c]
            holder = whole[-1] if whole else None
        text = holder.get("text") if isinstance(holder, dict) else None
        if isinstance(text, LongString | str):
            parts = text.parts if isinstance(text, LongString) else [text]
            holder["text"] = self.fim_server.indexed_ahead.put(parts)  # type: ignore[index]

    def on_request(self, msg_id: Any, method: str, params: Any) -> None:
        if method in COMPLETION_METHODS:
            self.fim_server.capture(msg_id, params)

    def on_cancel(self, msg_id: Any) -> None:
        self.fim_server.cancel_in_flight(msg_id)

    def repair(self, method: str, message: dict[str, Any]) -> dict[str, Any] | None:
        """A ``didChange`` whose version or positions no int32 holds (``2**63``, a
        negative line) still says which text changed how: the version is informative
        only, and a position is clamped into the protocol's range (then into the text,
        by :meth:`~lsp_server.documents.Document.replace`)."""
        if method != types.TEXT_DOCUMENT_DID_CHANGE:
            return None
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("textDocument"), dict):
            return None
        document = dict(params["textDocument"])
        if not _int32(document.get("version")):
            document["version"] = 0
        changes = params.get("contentChanges")
        if not isinstance(changes, list):
            return None
        fixed = [_clamped_change(change) for change in changes]
        return {**message, "params": {**params, "textDocument": document, "contentChanges": fixed}}

    def notification_repaired(self, method: str, params: Any, reason: str) -> None:
        super().notification_repaired(method, params, reason)
        self.fim_server.note_document_problem(f"a {method} was repaired: {reason}")

    def notification_rejected(self, method: str, params: Any, reason: str) -> None:
        """Say so in the log; a ``didChange`` that cannot be read at all leaves the
        document at its last good version, which the status says."""
        super().notification_rejected(method, params, reason)
        if method == types.TEXT_DOCUMENT_DID_CHANGE:
            self.fim_server.note_document_problem(
                f"a {method} could not be read ({reason}); the document stays at its last "
                "good version until the editor sends its whole text"
            )

    def _user(self, method: str, params: Any) -> Generator[Any, Any, None]:
        handler = self.fm.features.get(method)
        if handler is not None:
            yield handler, (params,), None


_INT32 = (-(2**31), 2**31 - 1)


def _int32(value: object) -> bool:
    return type(value) is int and _INT32[0] <= value <= _INT32[1]


def _clamped_change(change: Any) -> Any:
    """A content change whose range's numbers are clamped to ``0 .. 2**31 - 1``."""
    if not isinstance(change, dict) or not isinstance(change.get("range"), dict):
        return change
    rng = change["range"]

    def clamp(position: Any) -> Any:
        if not isinstance(position, dict):
            return position
        return {
            key: max(0, min(value, _INT32[1])) if type(value) is int else value
            for key, value in position.items()
        }

    return {**change, "range": {key: clamp(value) for key, value in rng.items()}}
