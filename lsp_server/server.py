"""The language server: syntax-guaranteed fill-in-the-middle over LSP.

Built on pygls.  What it adds to pygls' defaults:

* Documents are kept by :mod:`lsp_server.documents`, which splits lines as the
  protocol does (pygls' own store uses ``str.splitlines``, which also breaks at
  form feeds and U+2028) and converts UTF-16, UTF-8 or UTF-32 columns.
* ``textDocument/inlineCompletion`` is advertised (pygls does not by default)
  and served by the model worker of :mod:`lsp_server.engine`;
  ``textDocument/completion`` offers the same middle as one completion item for
  clients without inline completion.
* ``$/cancelRequest`` reaches a running generation between tokens, and a newer
  request for a document cancels the older one.
* Settings come from ``initializationOptions``, ``workspace/configuration``
  (section ``fimlsp``) and ``workspace/didChangeConfiguration``.
* Model loading reports ``$/progress``; a model that cannot load is shown with
  ``window/showMessage`` and completions stay off until the settings change.
* After each completion the server sends ``fimlsp/status``; the request
  ``fimlsp/serverStatus`` returns what the server holds (documents, queued and
  running requests, memory), for tests, benchmarks and curious users.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Generator
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from . import __version__
from .documents import Document, PositionError
from .engine import Engine
from .request import Answer, Request
from .settings import Settings

__all__ = ["SERVER_STATUS_REQUEST", "STATUS_NOTIFICATION", "FimLanguageServer", "create_server"]

log = logging.getLogger(__name__)

STATUS_NOTIFICATION = "fimlsp/status"
SERVER_STATUS_REQUEST = "fimlsp/serverStatus"
_WORD_TAIL = re.compile(r"\w*\Z")
_COMPLETION_METHODS = (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.TEXT_DOCUMENT_COMPLETION)


class _Protocol(LanguageServerProtocol):
    """pygls' protocol without its document store: :class:`FimLanguageServer` keeps its own."""

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: Any) -> Generator[Any, Any, None]:
        yield from self._user(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: Any) -> Generator[Any, Any, None]:
        yield from self._user(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: Any) -> Generator[Any, Any, None]:
        yield from self._user(types.TEXT_DOCUMENT_DID_CLOSE, params)

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        # A completion reads the document *now*: its handler is a coroutine that starts
        # later, after the loop may have applied more changes from the client.
        if method_name in _COMPLETION_METHODS:
            server = self._server
            assert isinstance(server, FimLanguageServer)
            server.capture(msg_id, params)
        super()._handle_request(msg_id, method_name, params)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        server = self._server
        assert isinstance(server, FimLanguageServer)
        server.cancel_captured(msg_id)
        super()._handle_cancel_notification(msg_id)

    def _user(self, method: str, params: Any) -> Generator[Any, Any, None]:
        handler = self.fm.features.get(method)
        if handler is not None:
            yield handler, (params,), None


class FimLanguageServer(LanguageServer):
    """Holds the documents, the settings and the model worker."""

    def __init__(self) -> None:
        super().__init__("fimlsp", __version__, protocol_cls=_Protocol)
        self.documents: dict[str, Document] = {}
        self._captured: dict[Any, Request | Exception] = {}  # requests not yet awaited
        self._running: dict[Any, Request] = {}  # requests being awaited, by message id
        self.settings = Settings()
        # Settings layers, later ones win: initializationOptions, workspace/configuration,
        # the last settings pushed with didChangeConfiguration.
        self._init_options: object = None
        self._pulled: object = None
        self._pushed: object = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._progress = _LoadProgress(self)
        self._shown_error: str | None = None
        self.engine = Engine(on_state=self._engine_state, on_progress=self._engine_progress)

    # ---------------------------------------------------------------- helpers

    @property
    def position_encoding(self) -> str:
        caps = self.protocol.server_capabilities
        encoding = getattr(caps, "position_encoding", None) if caps is not None else None
        if encoding is None:
            return "utf-16"
        return str(getattr(encoding, "value", encoding))

    def _threadsafe(self, call: Callable[[], None]) -> None:
        """Run ``call`` on the server's event loop (the model worker is another thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.current_thread() is threading.main_thread():
            call()
        else:
            loop.call_soon_threadsafe(call)

    def log_to_client(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self._threadsafe(
            lambda: self.window_log_message(types.LogMessageParams(type=kind, message=message))
        )

    def send_status(self, status: dict[str, Any]) -> None:
        self._threadsafe(lambda: self.protocol.notify(STATUS_NOTIFICATION, status))

    def document(self, uri: str) -> Document:
        doc = self.documents.get(uri)
        if doc is None:
            raise JsonRpcInvalidParams(f"document is not open: {uri}")
        return doc

    def offset(self, doc: Document, position: types.Position) -> int:
        try:
            return doc.offset_at(position.line, position.character, self.position_encoding)
        except PositionError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None

    # ---------------------------------------------------------------- settings

    def apply_settings(self, *layers: object) -> None:
        settings = Settings()
        for layer in (self._init_options, *layers):
            settings, problems = settings.merged(layer)
            for problem in problems:
                self.log_to_client(f"fimlsp: {problem}", types.MessageType.Warning)
        self.settings = settings
        if self.engine.configure(settings):
            self.begin_progress()
        if settings.enable:
            self.send_status({"state": self.engine.state, "message": self.engine.state_message})

    async def pull_settings(self) -> None:
        """Ask the client for section ``fimlsp`` when it supports workspace/configuration."""
        caps = self.client_capabilities.workspace
        if caps is None or not caps.configuration:
            self.apply_settings(self._pulled, self._pushed)
            return
        try:
            result = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="fimlsp")])
            )
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            result = [None]
        self._pulled = result[0] if result else None
        self.apply_settings(self._pulled, self._pushed)

    # ---------------------------------------------------------------- engine hooks

    def _engine_state(self, state: str, message: str) -> None:
        log.info("model %s: %s", state, message)
        self.send_status({"state": state, "message": message})
        if state == "error" and message != self._shown_error:
            self._shown_error = message
            self._threadsafe(
                lambda: self.window_show_message(
                    types.ShowMessageParams(
                        type=types.MessageType.Error,
                        message=f"fimlsp: {message}. Completions are off until the model "
                        "setting is fixed.",
                    )
                )
            )
        elif state == "ready":
            self._shown_error = None
            self.log_to_client(f"fimlsp: model ready: {message}", types.MessageType.Info)
        if state in ("ready", "error"):
            self._threadsafe(lambda: self._progress.finish(state))

    def _engine_progress(self, percent: int, message: str) -> None:
        self._threadsafe(lambda: self._progress.report(percent, message))

    def begin_progress(self) -> None:
        """Open a work-done progress for a model load, if the client shows them."""
        window = self.client_capabilities.window
        if window is not None and window.work_done_progress:
            self._progress.start()

    # ---------------------------------------------------------------- completion

    def capture(self, msg_id: Any, params: Any) -> None:
        """Snapshot the document for a completion request and queue it on the worker."""
        try:
            doc = self.document(params.text_document.uri)
            offset = self.offset(doc, params.position)
        except JsonRpcInvalidParams as exc:
            self._captured[msg_id] = exc
            return
        context = getattr(params, "context", None)
        invoked = isinstance(context, types.InlineCompletionContext) and (
            context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        )
        self._captured[msg_id] = self.engine.submit(
            doc.uri, doc.text, offset, self.settings, alternatives=invoked
        )

    def cancel_captured(self, msg_id: Any) -> None:
        """``$/cancelRequest``: stop the worker on it, whether or not its handler started."""
        captured = self._captured.pop(msg_id, None)
        if isinstance(captured, Request):
            captured.cancel.set()
        request = self._running.get(msg_id)
        if request is not None:
            request.cancel.set()

    async def complete(self) -> tuple[Request, Answer]:
        """Wait for the request captured for the message being handled."""
        captured = self._captured.pop(self.protocol.msg_id, None)
        if captured is None:
            raise JsonRpcInvalidParams("no document snapshot for this request")
        if isinstance(captured, Exception):
            raise captured
        request = captured
        msg_id = self.protocol.msg_id
        self._running[msg_id] = request
        try:
            answer = await asyncio.wrap_future(request.future)
        except asyncio.CancelledError:
            request.cancel.set()  # $/cancelRequest: stop generating at the next token
            raise
        finally:
            self._running.pop(msg_id, None)
        self.send_status(answer.status)
        return request, answer


class _LoadProgress:
    """``$/progress`` for one model load; every method runs on the event loop.

    The client must answer ``window/workDoneProgress/create`` before the server may
    begin, while the model worker reports as it goes: reports that come before the
    begin are held (the last one is sent after it), and a load that finishes first
    is ended right after the begin.
    """

    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        self.token: str | None = None
        self.begun = False
        self.pending: tuple[int, str] | None = None
        self.finished: str | None = None

    def start(self) -> None:
        if self.token is not None:
            return
        token = self.token = f"fimlsp-load-{uuid.uuid4().hex[:8]}"
        self.begun, self.pending, self.finished = False, None, None

        def created(*_: object) -> None:
            if self.token != token:
                return
            progress = self.server.work_done_progress
            progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title="fimlsp", message="loading the model", percentage=0
                ),
            )
            self.begun = True
            if self.pending is not None:
                self.report(*self.pending)
            if self.finished is not None:
                self.finish(self.finished)

        try:
            self.server.work_done_progress.create(token, created)
        except Exception as exc:  # a client that refuses gets no progress, nothing else
            log.warning("cannot create progress: %s", exc)
            self.token = None

    def report(self, percent: int, message: str) -> None:
        if self.token is None:
            return
        if not self.begun:
            self.pending = (percent, message)
            return
        self.server.work_done_progress.report(
            self.token, types.WorkDoneProgressReport(message=message, percentage=percent)
        )

    def finish(self, state: str) -> None:
        if self.token is None:
            return
        if not self.begun:
            self.finished = state
            return
        token, self.token = self.token, None
        self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=state))


def create_server() -> FimLanguageServer:
    """A server with every feature registered."""
    server = FimLanguageServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: FimLanguageServer, params: types.InitializeParams) -> None:
        ls._loop = asyncio.get_running_loop()
        ls._init_options = params.initialization_options

    @server.feature(types.INITIALIZED)
    async def initialized(ls: FimLanguageServer, params: types.InitializedParams) -> None:
        await ls.pull_settings()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: FimLanguageServer, params: Any) -> None:
        ls.engine.shutdown(timeout=2.0)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: FimLanguageServer, params: types.DidChangeConfigurationParams
    ) -> None:
        pushed = params.settings
        if isinstance(pushed, dict) and pushed.get("fimlsp") is not None:
            # Settings sent with the notification (older clients, Neovim's settings).
            ls._pushed = pushed
            ls.apply_settings(ls._pulled, ls._pushed)
        else:  # "something changed": ask, as the protocol now prefers
            ls._pushed = None  # the answer is newer than anything pushed before
            await ls.pull_settings()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FimLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        ls.documents[item.uri] = Document(item.uri, item.text, item.version, item.language_id)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FimLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None:
            log.warning("change to a document that is not open: %s", params.text_document.uri)
            return
        encoding = ls.position_encoding
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                start, end = change.range.start, change.range.end
                try:
                    doc.replace(
                        (start.line, start.character), (end.line, end.character), change.text,
                        encoding,
                    )  # fmt: skip
                except PositionError as exc:
                    # The client's copy and ours differ now; ask for a full resync.
                    ls.log_to_client(f"fimlsp: bad change to {doc.uri}: {exc}",
                                     types.MessageType.Error)  # fmt: skip
                    return
            else:
                doc.set_text(change.text)
        doc.version = params.text_document.version

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: FimLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        """Nothing to do (the text is synchronized by changes); some clients send it anyway."""

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FimLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.pop(params.text_document.uri, None)
        ls.engine.forget(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: FimLanguageServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        _, answer = await ls.complete()
        here = types.Range(start=params.position, end=params.position)
        items = [
            types.InlineCompletionItem(insert_text=s.middle, range=here) for s in answer.suggestions
        ]
        return types.InlineCompletionList(items=items)

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[".", "(", "[", ",", " ", ":", "="]),
    )
    async def completion(
        ls: FimLanguageServer, params: types.CompletionParams
    ) -> types.CompletionList:
        request, answer = await ls.complete()
        items = [_completion_item(ls, request, s.middle, answer.status) for s in answer.suggestions]
        return types.CompletionList(is_incomplete=True, items=items)

    @server.feature(SERVER_STATUS_REQUEST)
    def server_status(ls: FimLanguageServer, params: Any) -> dict[str, Any]:
        """Counters for tests and benchmarks: what the server holds right now.

        With ``{"uri": ...}`` also the document's version, length and SHA-256, so that a
        client can check that its copy and the server's agree.
        """
        uri = getattr(params, "uri", None) or (
            params.get("uri") if isinstance(params, dict) else None
        )
        doc = ls.documents.get(uri) if isinstance(uri, str) else None
        document = (
            {
                "version": doc.version,
                "length": len(doc.text),
                "sha256": hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest(),
            }
            if doc is not None
            else None
        )
        return {
            "document": document,
            "state": ls.engine.state,
            "message": ls.engine.state_message,
            "settings": dataclasses.asdict(ls.settings),
            "documents": len(ls.documents),
            "capturedRequests": len(ls._captured),
            "runningRequests": len(ls._running),
            **ls.engine.counters(),
            "rssMb": round(_rss_mb(), 1),
        }

    return server


def _rss_mb() -> float:
    """Resident memory of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _completion_item(
    ls: FimLanguageServer, request: Request, middle: str, status: dict[str, Any]
) -> types.CompletionItem:
    """One completion item that inserts ``middle``; it replaces the word before the
    cursor with itself plus the middle, so that clients filtering by that word keep it."""
    left = request.text[: request.offset]
    word = _WORD_TAIL.search(left)
    prefix = word.group() if word else ""
    doc = Document(request.uri, request.text)
    encoding = ls.position_encoding
    start = types.Position(*doc.position_at(request.offset - len(prefix), encoding))
    end = types.Position(*doc.position_at(request.offset, encoding))
    first_line = middle.split("\n", 1)[0].strip() or middle.strip().split("\n", 1)[0]
    label = prefix + (first_line if len(first_line) <= 60 else first_line[:57] + "...")
    lines = middle.count("\n") + 1
    detail = f"fimlsp: {lines} line{'s' if lines > 1 else ''}, {status.get('tokens', 0)} tokens"
    return types.CompletionItem(
        label=label or "(fimlsp)",
        kind=types.CompletionItemKind.Snippet,
        detail=detail,
        documentation=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=f"```python\n{prefix}{middle}\n```"
        ),
        filter_text=prefix + middle,
        text_edit=types.TextEdit(range=types.Range(start=start, end=end), new_text=prefix + middle),
        insert_text_format=types.InsertTextFormat.PlainText,
        sort_text="0",
        preselect=True,
    )
