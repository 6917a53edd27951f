"""The front's engine: a stand-in that starts the engine process, talks to it and
restarts it when it dies.

The server (:mod:`lsp_server.server`) calls :class:`EngineProxy` as it would call the
engine itself (``configure``, ``submit``, ``document_changed``, ``forget``,
``state``, ``counters``, ``shutdown``); every call returns at once.  Messages go to
the engine process (:mod:`lsp_server.engine_process`) on a sender thread, in order,
with consecutive changes of one document coalesced into the last; what comes back is
read on a receiver thread.  So a model load or a quotient build never holds the event
loop, and neither does a slow write to the engine.

The front holds the documents; the proxy keeps what a new engine needs (the settings,
the workspace folders, each document's latest text).  When the engine dies (a
llama.cpp abort, an out-of-memory kill, ``kill -9``), the receiver reads the end of
the pipe at once: every request waiting for it fails with :class:`EngineStopped`, the
state hook says so once, and a new engine starts with what was kept (at once; after
a wait that grows while engines keep dying before their model is ready).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .documents import TextSnapshot
from .engine_protocol import (
    Answered,
    Cancel,
    Channel,
    Configure,
    Counters,
    DocumentChanged,
    Failed,
    Forget,
    Inspect,
    Inspected,
    Progress,
    Shutdown,
    StateChanged,
    Submit,
    WorkspaceFolders,
)
from .request import Request
from .rss import rss_mb
from .settings import Settings
from .status import EngineState

__all__ = ["EngineProxy", "EngineStopped"]

log = logging.getLogger(__name__)

StateHook = Callable[[EngineState, str], None]
ProgressHook = Callable[[int, str], None]

#: The longest wait before starting an engine again.
_MAX_BACKOFF_S = 30.0
#: Seconds the engine has to exit after Shutdown before it is killed.
_EXIT_WAIT_S = 2.0
#: The folder that holds the ``lsp_server`` package: the engine imports the same code.
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


class EngineStopped(RuntimeError):
    """The engine process ended before answering (the request's error response)."""


class _Outbox:
    """What is to be sent to one engine, in order; a document's changes queued one after
    another (nothing else for it in between) are coalesced into the last."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._changes: dict[str, list[DocumentChanged]] = {}  # the holder still queued
        self._ready = threading.Condition()
        self._closed = False

    def put(self, message: Any) -> None:
        with self._ready:
            uri = getattr(message, "uri", None)
            if uri is not None:
                self._changes.pop(uri, None)  # a later change must not jump over it
            self._items.append(message)
            self._ready.notify()

    def change(self, message: DocumentChanged) -> None:
        with self._ready:
            holder = self._changes.get(message.uri)
            if holder is not None:
                holder[0] = message
                return
            holder = self._changes[message.uri] = [message]
            self._items.append(holder)
            self._ready.notify()

    def get(self) -> Any:
        """The next message (waits for one); None once closed."""
        with self._ready:
            while not self._items and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            item = self._items.popleft()
            if isinstance(item, list):
                message = item[0]
                if self._changes.get(message.uri) is item:
                    del self._changes[message.uri]
                return message
            return item

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Engine:
    """One engine process and the two threads that talk to it."""

    process: subprocess.Popen[bytes]
    channel: Channel
    outbox: _Outbox
    started: float
    #: It had a model ready (an engine that dies before that makes the next one wait).
    was_ready: bool = False


class _ForwardedCancel(threading.Event):
    """A request's cancel flag on the front: setting it also tells the engine."""

    def __init__(self, forward: Callable[[], None]) -> None:
        super().__init__()
        self._forward = forward

    def set(self) -> None:
        if not self.is_set():
            super().set()
            self._forward()


class EngineProxy:
    """Starts, supervises and talks to the engine process (see the module docstring)."""

    def __init__(
        self,
        on_state: StateHook | None = None,
        on_progress: ProgressHook | None = None,
        log_level: str | None = None,
        log_file: str | None = None,
    ) -> None:
        self.on_state = on_state or (lambda state, message: None)
        self.on_progress = on_progress or (lambda percent, message: None)
        self.state = EngineState.IDLE
        self.state_message = "no model loaded yet"
        #: What was detected about the loaded model (family, layout, end tokens).
        self.detected: dict[str, object] | None = None
        self.restarts = 0  # engines started again after one died
        self._log_level = log_level or logging.getLevelName(logging.getLogger().level)
        self._log_file = log_file
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, Request] = {}  # sent, not answered yet
        self._counters: dict[str, float] = {}  # the engine's, as it last sent them
        self._inspections: dict[int, Future[Any]] = {}
        # What a new engine is told first.
        self._settings: Settings | None = None
        self._wanted_key: tuple[object, ...] | None = None
        self._folders: tuple[str, ...] = ()
        self._documents: dict[str, tuple[str | TextSnapshot, int | None]] = {}
        self._young_deaths = 0
        self._stopping = False
        self._engine: _Engine | None = None
        self._retry: threading.Timer | None = None

    # ---------------------------------------------------------------- the process

    def start(self) -> None:
        """Start an engine process (unless one runs) and tell it what the last one knew."""
        with self._lock:
            if self._stopping or self._engine is not None:
                return
            ours, theirs = socket.socketpair()
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p
            )
            command = [sys.executable, "-m", "lsp_server.engine_process"]
            command += ["--fd", str(theirs.fileno()), "--log-level", self._log_level]
            if self._log_file:
                command += ["--log-file", self._log_file]
            try:
                process = subprocess.Popen(
                    command,
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=_stderr_or_null(),  # stdout carries the protocol
                    env=env,
                )
            finally:
                theirs.close()
            engine = _Engine(
                process, Channel(Connection(ours.detach())), _Outbox(), time.monotonic()
            )
            self._engine = engine
            if self._folders:
                engine.outbox.put(WorkspaceFolders(self._folders))
            if self._settings is not None:
                engine.outbox.put(Configure(self._settings))
            for uri, (source, edited_to) in self._documents.items():
                engine.outbox.change(DocumentChanged(uri, source, edited_to))
        for target, name in ((self._send_loop, "send"), (self._receive_loop, "receive")):
            thread = threading.Thread(
                target=target, args=(engine,), name=f"fimlsp-engine-{name}", daemon=True
            )
            thread.start()

    def _send_loop(self, engine: _Engine) -> None:
        while (message := engine.outbox.get()) is not None:
            try:
                engine.channel.send(message)
            except OSError:  # the engine has gone: the receiver sees the end and says so
                return
            except Exception as exc:  # a message that cannot be pickled
                log.exception("cannot send %s to the engine", type(message).__name__)
                if isinstance(message, Submit):
                    self._finish(message.id, error=EngineStopped(f"cannot send it: {exc}"))

    def _receive_loop(self, engine: _Engine) -> None:
        while True:
            try:
                message = engine.channel.recv()
            except (EOFError, OSError):
                break
            try:
                self._handle(message)
            except Exception:
                log.exception("cannot handle the engine's %s", type(message).__name__)
        self._lost(engine)

    def _handle(self, message: Any) -> None:
        if isinstance(message, Answered):
            self._finish(message.id, answer=message)
        elif isinstance(message, Failed):
            self._finish(message.id, error=RuntimeError(message.error))
        elif isinstance(message, Counters):
            self._counters = message.counters
        elif isinstance(message, StateChanged):
            if message.state == EngineState.READY and self._engine is not None:
                self._engine.was_ready = True
            self.detected = message.detected
            self._set_state(message.state, message.message)
        elif isinstance(message, Progress):
            self.on_progress(message.percent, message.message)
        elif isinstance(message, Inspected):
            future = self._inspections.pop(message.id, None)
            if future is not None and message.error is None:
                future.set_result(message.result)
            elif future is not None:
                future.set_exception(RuntimeError(message.error))

    def _finish(
        self, request_id: int, answer: Answered | None = None, error: Exception | None = None
    ) -> None:
        with self._lock:
            request = self._pending.pop(request_id, None)
        if request is None or request.future.done():
            return
        if answer is not None:
            request.future.set_result(answer.answer)
        else:
            request.future.set_exception(error or EngineStopped("no answer"))

    def _lost(self, engine: _Engine) -> None:
        """The engine's end of the pipe closed: it exited or was killed."""
        engine.outbox.close()
        try:
            code = engine.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:  # it closed its end but lives on: end it
            engine.process.kill()
            code = engine.process.wait()
        engine.channel.close()
        with self._lock:
            if self._engine is engine:
                self._engine = None
            pending, self._pending = self._pending, {}
            inspections, self._inspections = self._inspections, {}
            self._counters = {}
            stopping = self._stopping
        for future in inspections.values():
            future.set_exception(EngineStopped("the engine process stopped"))
        if stopping:
            for request in pending.values():
                if not request.future.done():
                    request.future.set_exception(EngineStopped("the server is shutting down"))
            return
        how = _how_it_ended(code)
        error = EngineStopped(f"the completion engine stopped ({how}); a new one is starting")
        for request in pending.values():
            if not request.future.done():
                request.future.set_exception(error)
        lived = time.monotonic() - engine.started
        self._young_deaths = 0 if engine.was_ready else self._young_deaths + 1
        wait = min(_MAX_BACKOFF_S, 2.0 ** (self._young_deaths - 1)) if self._young_deaths else 0
        self.restarts += 1
        log.error("the engine process stopped (%s) after %.1f s; starting a new one", how, lived)
        restarting = self._settings is not None and self._settings.enable
        self.detected = None
        self._set_state(
            EngineState.LOADING if restarting else self.state,
            f"the completion engine stopped ({how}); "
            + (f"a new one starts in {wait:.0f} s" if wait else "a new one is starting"),
        )
        if wait:
            self._retry = threading.Timer(wait, self.start)
            self._retry.daemon = True
            self._retry.start()
        else:
            self.start()

    @property
    def pid(self) -> int | None:
        """The engine process's id (None between an engine's death and the next start)."""
        engine = self._engine
        return None if engine is None else engine.process.pid

    @property
    def worker_alive(self) -> bool:
        """Whether an engine process is running."""
        engine = self._engine
        return engine is not None and engine.process.poll() is None

    # ---------------------------------------------------------------- messages

    def _send(self, message: Any) -> None:
        engine = self._engine
        if engine is not None:
            engine.outbox.put(message)

    def _set_state(self, state: EngineState, message: str) -> None:
        if (state, message) == (self.state, self.state_message):
            return  # what the front said already, now said by the engine
        self.state, self.state_message = state, message
        try:
            self.on_state(state, message)
        except Exception:
            log.exception("state hook failed")

    def configure(self, settings: Settings) -> bool:
        """Send the settings; returns whether they ask for another model (a load)."""
        self._settings = settings
        self._send(Configure(settings))
        if not settings.enable:
            self._set_state(EngineState.DISABLED, "completions are disabled in the settings")
            return False
        key = settings.model_key
        if key == self._wanted_key:
            return False  # the engine says whether it is ready again
        self._wanted_key = key
        self._set_state(EngineState.LOADING, f"loading model {settings.model}")
        return True

    @property
    def workspace_folders(self) -> tuple[str, ...]:
        return self._folders

    @workspace_folders.setter
    def workspace_folders(self, folders: tuple[str, ...]) -> None:
        self._folders = folders
        self._send(WorkspaceFolders(folders))

    def document_changed(
        self, uri: str, text: str | TextSnapshot, edited_to: int | None = None
    ) -> None:
        self._documents[uri] = (text, edited_to)
        engine = self._engine
        if engine is not None:
            engine.outbox.change(DocumentChanged(uri, text, edited_to))

    def forget(self, uri: str) -> None:
        self._documents.pop(uri, None)
        self._send(Forget(uri))

    def submit(self, request: Request) -> Request:
        """Send a completion request; its future gets the answer, or :class:`EngineStopped`."""
        request_id = next(self._ids)
        request.cancel = _ForwardedCancel(lambda: self._send(Cancel(request_id)))
        with self._lock:
            engine = self._engine
            if engine is not None:
                self._pending[request_id] = request
        if engine is None:
            request.future.set_exception(
                EngineStopped(f"the completion engine is not running ({self.state_message})")
            )
            return request
        engine.outbox.put(Submit(request_id, request))
        return request

    def inspect(self, function: str, params: dict[str, Any]) -> Future[Any]:
        """What ``function`` (``module:name``, called with the engine and ``params`` in
        the engine process) returns: a look inside the engine for benchmarks."""
        future: Future[Any] = Future()
        inspection = next(self._ids)
        with self._lock:
            engine = self._engine
            if engine is not None:
                self._inspections[inspection] = future
        if engine is None:
            future.set_exception(EngineStopped("the engine process is not running"))
        else:
            engine.outbox.put(Inspect(inspection, function, params))
        return future

    def counters(self) -> dict[str, float]:
        """The engine's counters as it last sent them (before its last answer, and every
        0.1 s while they change), and the front's own: ``pendingRequests`` are the
        requests sent and not answered yet."""
        engine = self._engine
        return {
            **self._counters,
            "pendingRequests": len(self._pending),
            "engineOutbox": len(engine.outbox) if engine is not None else 0,
            "engineRestarts": self.restarts,
            "enginePid": engine.process.pid if engine is not None else 0,
            "engineRssMb": round(rss_mb(engine.process.pid), 1) if engine is not None else 0.0,
        }

    def stop(self) -> _Engine | None:
        """Tell the engine to stop (it cancels what runs and exits within a second of
        reading this); returns at once.  No engine starts after this."""
        with self._lock:
            engine = self._engine
            if not self._stopping and engine is not None:
                engine.outbox.put(Shutdown())
            self._stopping = True
        if self._retry is not None:
            self._retry.cancel()
        return engine

    def shutdown(self, timeout: float = _EXIT_WAIT_S) -> None:
        """Stop the engine, wait up to ``timeout`` s for it to exit, then kill it."""
        engine = self.stop()
        if engine is None:
            return
        try:
            engine.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log.warning("the engine process did not exit in time: killing it")
            engine.process.kill()
            engine.process.wait()


def _how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _stderr_or_null() -> int:
    """This process's standard error for the engine's output, else nowhere."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL
