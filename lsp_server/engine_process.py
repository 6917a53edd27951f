"""The engine process: the model, the quotients and decoding, apart from the LSP front.

The front (:mod:`lsp_server.engine_proxy`) starts it as
``python -m lsp_server.engine_process --fd N`` with one end of a socket pair, and
talks to it in the messages of :mod:`lsp_server.engine_protocol`.  Here the main
thread reads those messages and hands them to an :class:`~lsp_server.engine.Engine`
(whose worker thread runs the model); answers, state changes and load progress go
back as they happen.  A pure-Python quotient build or a llama.cpp call here holds
this process's GIL only, never the front's event loop.

The process exits when told to (:class:`~lsp_server.engine_protocol.Shutdown`) and
when the front's end of the pipe closes (the front exited or was killed): it never
outlives the front.  It leaves with ``os._exit``, without tearing the model down
under a llama.cpp call still running.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

from .collector import FREEZE_PERIOD_S, Collector
from .engine import Engine
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
from .request import Answer, Request
from .status import EngineState

log = logging.getLogger(__name__)

#: Seconds a running request may take to stop at its next token when the engine exits.
_STOP_WAIT_S = 0.5
#: Seconds between two looks at the counters (sent when they changed), which are also
#: the collector's ticks.
_COUNTERS_PERIOD_S = FREEZE_PERIOD_S


class EngineService:
    """An :class:`Engine` driven by messages from one channel."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._send_lock = threading.Lock()
        self._requests: dict[int, Request] = {}  # by id, until answered
        self.engine = Engine(on_state=self._state, on_progress=self._progress)
        self.collector = Collector().start()
        self._counters: dict[str, float] = {}
        self._counters_lock = threading.Lock()
        self._stopped = threading.Event()
        threading.Thread(target=self._report, name="fimlsp-counters", daemon=True).start()

    def send(self, message: Any) -> None:
        # OSError: the front has gone; the main thread sees it and exits.
        with self._send_lock, contextlib.suppress(OSError):
            self.channel.send(message)

    def send_counters(self) -> None:
        """The counters, if they changed since they were last sent."""
        with self._counters_lock:
            counters = {**self.engine.counters(), **self.collector.counters()}
            if counters != self._counters:
                self._counters = counters
                self.send(Counters(counters))

    def _report(self) -> None:
        while not self._stopped.wait(_COUNTERS_PERIOD_S):
            self.collector.tick(idle=not self.engine.busy())
            self.send_counters()

    def _state(self, state: EngineState, message: str) -> None:
        self.send(StateChanged(state, message, self.engine.detected))

    def _progress(self, percent: int, message: str) -> None:
        self.send(Progress(percent, message))

    def serve(self) -> None:
        """Handle messages until told to stop or the front's end closes."""
        while True:
            try:
                message = self.channel.recv()
            except (EOFError, OSError):
                return
            if isinstance(message, Shutdown):
                return
            try:
                self.handle(message)
            except Exception:  # one bad message must not stop the engine
                log.exception("engine message failed: %r", type(message).__name__)

    def handle(self, message: Any) -> None:
        engine = self.engine
        if isinstance(message, Submit):
            self._submit(message.id, message.request)
        elif isinstance(message, Cancel):
            request = self._requests.get(message.id)
            if request is not None:
                request.cancel.set()
        elif isinstance(message, DocumentChanged):
            engine.document_changed(message.uri, message.source, message.edited_to)
        elif isinstance(message, Forget):
            engine.forget(message.uri)
        elif isinstance(message, Configure):
            engine.configure(message.settings)
        elif isinstance(message, WorkspaceFolders):
            engine.planner.workspace_folders = message.folders
        elif isinstance(message, Inspect):
            self._inspect(message)
        else:
            log.warning("unknown engine message: %r", message)

    def _submit(self, request_id: int, request: Request) -> None:
        answering = self.engine.submit(request)  # may be an identical one, shared
        self._requests[request_id] = answering

        def answered(future: Future[Answer]) -> None:
            self._requests.pop(request_id, None)
            self.send_counters()
            error = future.exception()
            if error is None:
                self.send(Answered(request_id, future.result()))
            else:
                self.send(Failed(request_id, f"{type(error).__name__}: {error}"))

        answering.future.add_done_callback(answered)

    def _inspect(self, message: Inspect) -> None:
        module, _, name = message.function.partition(":")
        try:
            function = getattr(importlib.import_module(module), name)
            result, error = function(self.engine, message.params), None
        except Exception as exc:
            log.exception("inspecting with %s failed", message.function)
            result, error = None, f"{type(exc).__name__}: {exc}"
        self.send(Inspected(message.id, result, error))

    def stop(self) -> None:
        """Cancel what runs and give it a moment to stop at its next token."""
        self._stopped.set()
        self.engine.shutdown(timeout=_STOP_WAIT_S)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lsp_server.engine_process")
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--log-file", default=None)
    args = parser.parse_args(argv)
    handler: logging.Handler = (
        logging.FileHandler(args.log_file, encoding="utf-8")
        if args.log_file
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s engine %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(args.log_level)
    service = EngineService(Channel(Connection(args.fd)))
    try:
        service.serve()
        service.stop()
    finally:
        sys.stderr.flush()
        logging.shutdown()
        os._exit(0)  # no finalization under a llama.cpp call that did not stop


if __name__ == "__main__":
    main()
