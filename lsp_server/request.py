"""A completion request as the model worker sees it, and what it produces."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from .documents import TextSnapshot, length_of, same_text, text_of
from .model.prompt import RepoContext
from .settings import Settings
from .status import RequestTimes, StopReason
from .target import ProjectTarget

__all__ = ["Answer", "Request", "Suggestion"]


@dataclass(frozen=True)
class Suggestion:
    """One middle to show at the cursor."""

    middle: str
    single_line: bool
    complete: bool | None
    stop_reason: StopReason


@dataclass
class Answer:
    """What a request produced, and the ``fimlsp/status`` notification that reports it."""

    suggestions: list[Suggestion]
    status: dict[str, Any]


@dataclass
class Request:
    """One completion request: a snapshot of the document, cancellable from any thread."""

    uri: str
    #: The document's text when the request arrived; a snapshot's pieces are joined
    #: when first read (on the worker).
    source: str | TextSnapshot
    offset: int
    settings: Settings
    #: The user asked (an invoked inline completion, or cycling to the next suggestion):
    #: offer the other line mode's middle too, as a second item to cycle to.
    alternatives: bool = False
    times: RequestTimes = field(default_factory=RequestTimes)
    #: The target in force and where it came from, once the planner resolved it.
    target: ProjectTarget | None = None
    #: The project context its prompt carries, once the planner chose it.
    project_context: RepoContext | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future[Answer] = field(default_factory=Future)

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled whole for the engine process (:mod:`lsp_server.engine_protocol`), every
        field but the two that belong to one process: the cancel flag goes as whether it
        is set, the future not at all (the other side makes its own)."""
        state = dict(self.__dict__)
        state["cancel"] = self.cancel.is_set()
        del state["future"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        cancelled = state.pop("cancel")
        self.__dict__.update(state)
        self.cancel = threading.Event()
        if cancelled:
            self.cancel.set()
        self.future = Future()

    @property
    def text(self) -> str:
        return text_of(self.source)

    @property
    def length(self) -> int:
        """The text's length (a snapshot's pieces are not joined for it)."""
        return length_of(self.source)

    @property
    def left(self) -> str:
        return self.text[: self.offset]

    @property
    def right(self) -> str:
        return self.text[self.offset :]

    def same_question(self, other: Request) -> bool:
        """Whether ``other`` asks what this request asks (an inline completion and a
        completion request for one keystroke), so that one answer serves both."""
        return (
            not self.cancelled
            and self.offset == other.offset
            and self.settings == other.settings
            and same_text(self.source, other.source)
            and self.alternatives >= other.alternatives
        )
