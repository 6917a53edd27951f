"""The language server: syntax-guaranteed fill-in-the-middle over LSP.

Built on pygls, in the shape of its example servers: the state lives in a
:class:`FimLanguageServer` subclass, each handler is a plainly decorated function
that calls one of its methods.  The model, the quotients and decoding run in the engine
process (:mod:`lsp_server.engine_process`), which this process starts, supervises and
restarts when it dies (:mod:`lsp_server.engine_proxy`); the event loop never waits
for it.
What it adds to pygls' defaults:

* Documents are kept by :mod:`lsp_server.documents` and completion requests are
  captured when they arrive (:mod:`lsp_server.protocol` says why).
* ``textDocument/inlineCompletion`` is advertised (pygls does not by default) and
  served by the engine; ``textDocument/completion`` offers the same middle as
  one completion item for clients without inline completion.
* ``$/cancelRequest`` reaches a running generation between tokens, and a newer
  request for a document cancels the older one.
* Settings come from ``initializationOptions``, ``workspace/configuration``
  (section ``fimlsp``) and ``workspace/didChangeConfiguration``; the target Python
  comes from ``pythonVersion`` or, by default, from the document's project
  (:mod:`lsp_server.target`, with the workspace folders of ``initialize``).
* Model loading reports ``$/progress`` (:mod:`lsp_server.progress`); a model that
  cannot load is shown with ``window/showMessage`` and completions stay off until the
  settings change.
* After each completion the server sends ``fimlsp/status`` (:mod:`lsp_server.status`);
  the request ``fimlsp/serverStatus`` returns what the server holds (documents,
  queued and running requests, memory), for tests, benchmarks and curious users.
* Nothing on the event loop costs more than a small constant per character of the
  line at hand, or a copy of the text per edit: large messages are parsed and their
  texts' lines indexed on a thread, documents keep an incremental line index and
  record where each edit ended (read-ahead's cursor), completion items are built
  from the snapshot's position, digests are computed once per text and off the
  loop; the engine gets each document's text once per version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from . import __version__
from .completion_item import completion_item
from .documents import (
    Document,
    IndexedAhead,
    PositionEncoding,
    PositionError,
    position_encoding,
)
from .engine_proxy import EngineProxy
from .loop_lag import LoopLag
from .progress import LoadProgress
from .protocol import FimProtocol
from .request import Answer, Request
from .rss import rss_mb
from .settings import Settings, SettingsLayers
from .status import SERVER_STATUS_REQUEST, STATUS_NOTIFICATION, EngineState, target_status
from .target import path_of_uri, target_in_force

__all__ = ["FimLanguageServer", "create_server"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Captured:
    """A completion request's snapshot and the cursor's position in it (clamped to a
    code point: the items' ranges use it, never the position as sent)."""

    request: Request
    position: types.Position


class InFlight:
    """Completion requests between their arrival and their answer, by message id."""

    def __init__(self) -> None:
        self._captured: dict[Any, Captured | Exception] = {}  # arrived, handler not started
        self._running: dict[Any, Request] = {}  # handler awaiting the worker

    def capture(self, msg_id: Any, captured: Captured | Exception) -> None:
        """A request's snapshot (or why there is none), taken when it arrived."""
        self._captured[msg_id] = captured

    def start(self, msg_id: Any) -> Captured:
        """The captured request for the handler now starting; raises what capture met."""
        captured = self._captured.pop(msg_id, None)
        if captured is None:
            raise JsonRpcInvalidParams("no document snapshot for this request")
        if isinstance(captured, Exception):
            raise captured
        self._running[msg_id] = captured.request
        return captured

    def finish(self, msg_id: Any) -> None:
        self._running.pop(msg_id, None)

    def cancel(self, msg_id: Any) -> None:
        """``$/cancelRequest``: stop the worker on it, whether or not its handler started."""
        captured = self._captured.pop(msg_id, None)
        if isinstance(captured, Captured):
            captured.request.cancel.set()
        running = self._running.get(msg_id)
        if running is not None:
            running.cancel.set()

    def counters(self) -> dict[str, int]:
        return {"capturedRequests": len(self._captured), "runningRequests": len(self._running)}


class FimLanguageServer(LanguageServer):
    """Holds the documents, the settings, the requests in flight and the engine's proxy."""

    def __init__(self, log_file: str | None = None) -> None:
        """``log_file``: where the engine process logs too (else its standard error)."""
        super().__init__("fimlsp", __version__, protocol_cls=FimProtocol)
        self.documents: dict[str, Document] = {}
        self.indexed_ahead = IndexedAhead()  # line indexes of large texts, made off the loop
        self.requests = InFlight()
        self.loop_lag = LoopLag()  # how late the event loop runs (fimlsp/serverStatus)
        self.settings = Settings()
        self.layers = SettingsLayers()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._progress = LoadProgress(self)
        self._shown_error: str | None = None
        self._outage_shown = False  # an inference server's outage was shown
        self.engine = EngineProxy(
            on_state=self._engine_state, on_progress=self._engine_progress, log_file=log_file
        )

    # ---------------------------------------------------------------- session

    def begin_session(self, params: types.InitializeParams) -> None:
        """``initialize``: remember the event loop (the engine reports through it), start
        the engine, and take the client's initialization options (the first settings
        layer) and its workspace folders (where ``auto`` targets are read)."""
        self._loop = asyncio.get_running_loop()
        self.loop_lag.start(self._loop)
        self.engine.start()
        self.layers.initial = params.initialization_options
        self.folders_changed()

    def folders_changed(self) -> None:
        """The workspace folders as pygls keeps them (``initialize`` and
        ``workspace/didChangeWorkspaceFolders``), as paths for the planner."""
        workspace = self.workspace
        uris = [folder.uri for folder in workspace.folders.values()] or [workspace.root_uri]
        paths = [path_of_uri(uri) for uri in uris if uri]
        self.engine.workspace_folders = tuple(str(p) for p in paths if p is not None)

    def end_session(self) -> None:
        """``shutdown``: cancel everything and tell the engine to stop, without waiting
        for it (a model load must not delay the reply); ``exit`` waits for it."""
        self.engine.stop()

    def shutdown(self) -> None:
        """The process is leaving (``exit``, or the end of its input)."""
        self.engine.shutdown()
        super().shutdown()

    @property
    def position_encoding(self) -> PositionEncoding:
        """The column encoding negotiated in ``initialize`` (UTF-16 before it)."""
        caps = getattr(self.protocol, "server_capabilities", None)
        encoding = getattr(caps, "position_encoding", None) if caps is not None else None
        return position_encoding(getattr(encoding, "value", encoding))

    def _threadsafe(self, call: Callable[[], None]) -> None:
        """Run ``call`` on the server's event loop (the engine's hooks run on another thread)."""
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

    # ---------------------------------------------------------------- documents

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

    def open_document(self, item: types.TextDocumentItem) -> None:
        try:
            pieces = self.indexed_ahead.take(item.text)
        except LookupError as exc:  # its text was lost: never keep an older one
            self.forget_document(item.uri)
            self.log_to_client(f"fimlsp: cannot open {item.uri}: {exc}", types.MessageType.Error)
            return
        doc = Document(item.uri, item.text, item.version, item.language_id, pieces)
        self.documents[item.uri] = doc
        self.engine.document_changed(item.uri, doc.snapshot())

    def change_document(self, params: types.DidChangeTextDocumentParams) -> None:
        """Apply the changes in order.  A range the text does not have (a line past its
        end, an inverted range) is applied clamped, as VS Code's own text model applies
        it, and said in the log and the status: the document is never dropped."""
        uri = params.text_document.uri
        doc = self.documents.get(uri)
        if doc is None:
            log.warning("change to a document that is not open: %s", uri)
            return
        encoding = self.position_encoding
        for change in params.content_changes:
            if not isinstance(change, types.TextDocumentContentChangePartial):
                try:
                    doc.set_text(change.text, self.indexed_ahead.take(change.text))
                except LookupError as exc:  # its text was lost: never keep an older one
                    self.forget_document(uri)
                    self.log_to_client(
                        f"fimlsp: cannot change {uri}: {exc}", types.MessageType.Error
                    )
                    return
                continue
            start, end = change.range.start, change.range.end
            clamped = doc.replace(
                (start.line, start.character), (end.line, end.character), change.text, encoding
            )
            if clamped is not None:
                self.note_document_problem(f"a change to {uri} did not fit its text: {clamped}")
        doc.version = params.text_document.version
        self.engine.document_changed(doc.uri, doc.snapshot(), doc.edited_to)

    def note_document_problem(self, text: str) -> None:
        """A change the client sent was repaired or clamped: its copy of a document and
        ours may differ until it sends the whole text.  Said in the log and the status."""
        log.warning("%s", text)
        self.log_to_client(f"fimlsp: {text}", types.MessageType.Warning)
        self.send_status(
            {"state": self.engine.state, "message": self.engine.state_message, "warning": text}
        )

    def close_document(self, uri: str) -> None:
        self.forget_document(uri)

    def forget_document(self, uri: str) -> None:
        """Drop a document and what the worker keeps for it."""
        self.documents.pop(uri, None)
        self.engine.forget(uri)

    # ---------------------------------------------------------------- settings

    def apply_settings(self) -> None:
        """Resolve the settings layers, report bad values, and (re)configure the worker."""
        settings, problems = self.layers.resolve()
        for problem in problems:
            self.log_to_client(f"fimlsp: {problem}", types.MessageType.Warning)
        self.settings = settings
        if self.engine.configure(settings):
            self._begin_progress()
        if settings.enable:
            self.send_status({"state": self.engine.state, "message": self.engine.state_message})

    async def pull_settings(self) -> None:
        """Ask the client for section ``fimlsp`` when it supports workspace/configuration."""
        caps = self.client_capabilities.workspace
        if caps is not None and caps.configuration:
            try:
                result = await self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="fimlsp")])
                )
            except Exception as exc:
                log.warning("workspace/configuration failed: %s", exc)
                result = [None]
            self.layers.pulled = result[0] if result else None
        self.apply_settings()

    async def settings_changed(self, pushed: object) -> None:
        """``workspace/didChangeConfiguration``: settings sent along (older clients,
        Neovim), or a hint that something changed, to be asked for."""
        if isinstance(pushed, dict) and pushed.get("fimlsp") is not None:
            self.layers.pushed = pushed
            self.apply_settings()
        else:  # "something changed": ask, as the protocol now prefers
            self.layers.pushed = None  # the answer is newer than anything pushed before
            await self.pull_settings()

    # ---------------------------------------------------------------- the model's state

    def _engine_state(self, state: EngineState, message: str) -> None:
        log.info("model %s: %s", state, message)
        self.send_status({"state": state, "message": message})
        if state == EngineState.ERROR and message != self._shown_error:
            self._shown_error = message
            text = f"fimlsp: {message}. Completions are off until the model setting is fixed."
            self._threadsafe(
                lambda: self.window_show_message(
                    types.ShowMessageParams(type=types.MessageType.Error, message=text)
                )
            )
        elif state == EngineState.UNAVAILABLE and not self._outage_shown:
            # Once per outage: the retries that follow only update fimlsp/status.
            self._outage_shown = True
            text = f"fimlsp: {message}"
            self._threadsafe(
                lambda: self.window_show_message(
                    types.ShowMessageParams(type=types.MessageType.Warning, message=text)
                )
            )
        elif state in (EngineState.READY, EngineState.LOADING):
            self._outage_shown = False
        if state == EngineState.READY:
            self._shown_error = None
            self.log_to_client(f"fimlsp: model ready: {message}", types.MessageType.Info)
        if state in (EngineState.READY, EngineState.ERROR, EngineState.UNAVAILABLE):
            self._threadsafe(lambda: self._progress.finish(state))

    def _engine_progress(self, percent: int, message: str) -> None:
        self._threadsafe(lambda: self._progress.report(percent, message))

    def _begin_progress(self) -> None:
        """Open a work-done progress for a model load, if the client shows them."""
        window = self.client_capabilities.window
        if window is not None and window.work_done_progress:
            self._progress.start()

    # ---------------------------------------------------------------- completion

    def cancel_in_flight(self, msg_id: Any) -> None:
        """``$/cancelRequest``: the request's cancel flag is set, started or not."""
        self.requests.cancel(msg_id)

    def capture(self, msg_id: Any, params: Any) -> None:
        """Snapshot the document for a completion request and send it to the engine."""
        try:
            doc = self.document(params.text_document.uri)
            offset = self.offset(doc, params.position)
        except JsonRpcInvalidParams as exc:
            self.requests.capture(msg_id, exc)
            return
        context = getattr(params, "context", None)
        invoked = isinstance(context, types.InlineCompletionContext) and (
            context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        )
        position = types.Position(*doc.position_at(offset, self.position_encoding))
        request = self.engine.submit(
            Request(doc.uri, doc.snapshot(), offset, self.settings, invoked)
        )
        self.requests.capture(msg_id, Captured(request, position))

    async def complete(self) -> tuple[Captured, Answer]:
        """Wait for the request captured for the message being handled."""
        msg_id = self.protocol.msg_id
        captured = self.requests.start(msg_id)
        request = captured.request
        try:
            answer = await asyncio.wrap_future(request.future)
        except asyncio.CancelledError:
            request.cancel.set()  # $/cancelRequest: stop generating at the next token
            raise
        finally:
            self.requests.finish(msg_id)
        self.send_status(answer.status)
        return captured, answer

    async def server_status(self, uri: str | None) -> dict[str, Any]:
        """What the server holds now; with a URI, also that document's version, length,
        SHA-256 (so that a client can check that its copy and the server's agree) and
        the target in force for it.  Digests and targets are computed off the loop."""
        doc = self.documents.get(uri) if uri is not None else None
        document = None
        if doc is not None:
            version, snapshot = doc.version, doc.snapshot()
            length = snapshot.length
            digest = await asyncio.to_thread(snapshot.sha256)
            target = await asyncio.to_thread(
                target_in_force,
                self.settings.python_version,
                doc.uri,
                self.engine.workspace_folders,
            )
            document = {
                "version": version,
                "length": length,
                "sha256": digest,
                **target_status(target),
            }
        return {
            "document": document,
            "state": self.engine.state,
            "message": self.engine.state_message,
            "settings": dataclasses.asdict(
                dataclasses.replace(self.settings, api_key="***" if self.settings.api_key else None)
            ),
            "documents": len(self.documents),
            **self.requests.counters(),
            **self.engine.counters(),
            "model": self.engine.detected,
            "rssMb": round(rss_mb(), 1),
            "switchIntervalMs": round(sys.getswitchinterval() * 1e3, 3),
            **self.loop_lag.figures(),
        }


# -------------------------------------------------------------------- handlers

Handler = TypeVar("Handler", bound=Callable[..., Any])
#: (method, options, handler), registered on every server create_server makes.
_FEATURES: list[tuple[str, Any, Callable[..., Any]]] = []


def feature(method: str, options: Any = None) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``method``."""

    def register(handler: Handler) -> Handler:
        _FEATURES.append((method, options, handler))
        return handler

    return register


@feature(types.INITIALIZE)
def initialize(ls: FimLanguageServer, params: types.InitializeParams) -> None:
    ls.begin_session(params)


@feature(types.INITIALIZED)
async def initialized(ls: FimLanguageServer, params: types.InitializedParams) -> None:
    await ls.pull_settings()


@feature(types.SHUTDOWN)
def shutdown(ls: FimLanguageServer, params: Any) -> None:
    ls.end_session()


@feature(types.EXIT)
def exit_(ls: FimLanguageServer, params: Any) -> None:
    """Stop the engine before the process ends (pygls exits right after this)."""
    ls.engine.shutdown()


@feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_workspace_folders(
    ls: FimLanguageServer, params: types.DidChangeWorkspaceFoldersParams
) -> None:
    ls.folders_changed()


@feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(
    ls: FimLanguageServer, params: types.DidChangeConfigurationParams
) -> None:
    await ls.settings_changed(params.settings)


@feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: FimLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.open_document(params.text_document)


@feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: FimLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.change_document(params)


@feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: FimLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    """Nothing to do (the text is synchronized by changes); some clients send it anyway."""


@feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: FimLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.close_document(params.text_document.uri)


@feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(
    ls: FimLanguageServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    captured, answer = await ls.complete()
    here = types.Range(start=captured.position, end=captured.position)
    items = [
        types.InlineCompletionItem(insert_text=s.middle, range=here) for s in answer.suggestions
    ]
    return types.InlineCompletionList(items=items)


@feature(
    types.TEXT_DOCUMENT_COMPLETION,
    types.CompletionOptions(trigger_characters=[".", "(", "[", ",", " ", ":", "="]),
)
async def completion(ls: FimLanguageServer, params: types.CompletionParams) -> types.CompletionList:
    captured, answer = await ls.complete()
    tokens = answer.status.get("tokens", 0)
    encoding = ls.position_encoding
    items = [
        completion_item(captured.request, captured.position, s.middle, tokens, encoding)
        for s in answer.suggestions
    ]
    return types.CompletionList(is_incomplete=True, items=items)


@feature(SERVER_STATUS_REQUEST)
async def server_status(ls: FimLanguageServer, params: Any) -> dict[str, Any]:
    """Counters for tests and benchmarks (``{"uri": ...}``: also that document)."""
    uri = getattr(params, "uri", None) or (params.get("uri") if isinstance(params, dict) else None)
    return await ls.server_status(uri if isinstance(uri, str) else None)


def create_server(log_file: str | None = None) -> FimLanguageServer:
    """A server with every handler registered (``log_file``: the engine's log too)."""
    server = FimLanguageServer(log_file)
    for method, options, handler in _FEATURES:
        server.feature(method, options)(handler)
    return server
