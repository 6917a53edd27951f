"""``$/progress`` for a model load, which the model worker reports from its own thread."""

from __future__ import annotations

import logging
import uuid

from lsprotocol import types
from pygls.lsp.server import LanguageServer

__all__ = ["LoadProgress"]

log = logging.getLogger(__name__)


class LoadProgress:
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
