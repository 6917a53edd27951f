"""What ``fimlsp/status`` says: the engine's states, why a request stopped, and its figures.

These are contracts with the editors: VS Code's status bar
(``editors/vscode/src/status.ts``) and Neovim's statusline
(``editors/nvim/lua/fimlsp/status.lua``) list the same states and stop reasons, and
``tests/test_editor_status.py`` holds them to it.  The enumerations are str-valued:
they compare equal to, print as and serialize to their values.

The figures of a request come from moments taken as they happen
(:class:`RequestTimes`) and are computed in one place (:meth:`RequestTimes.figures`)::

    received ─ queue ─► dequeued ─ quotient ─► built ─ prompt ─► read ─ generate ─► done
                                                         first token ─┘(within generate)

The phases a request went through add up to ``elapsedMs``; ``timeToFirstTokenMs`` runs
from ``received`` to the moment the first token was chosen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from .decoding.stop_reason import StopReason

if TYPE_CHECKING:
    from .target import ProjectTarget

__all__ = [
    "SERVER_STATUS_REQUEST",
    "STATUS_NOTIFICATION",
    "EngineState",
    "RequestTimes",
    "StopReason",
    "target_status",
]

#: The notification the server sends after each completion and each state change.
STATUS_NOTIFICATION = "fimlsp/status"
#: The request that returns what the server holds (documents, requests, memory).
SERVER_STATUS_REQUEST = "fimlsp/serverStatus"


class _Named(str, Enum):
    """A str-valued enumeration that prints as its value."""

    def __str__(self) -> str:
        return str(self.value)


class EngineState(_Named):
    """The model worker's state."""

    IDLE = "idle"  # nothing configured yet
    LOADING = "loading"  # finding, downloading or loading the model
    READY = "ready"
    ERROR = "error"  # the model cannot load: completions are off until the settings change
    DISABLED = "disabled"  # ``enable`` is false
    #: The inference server (a ``model`` URL) does not answer as it should: completions
    #: are off until it does; it is tried again with growing intervals.
    UNAVAILABLE = "unavailable"


def target_status(target: ProjectTarget) -> dict[str, str]:
    """The target in a status: ``target`` ("3.12"), ``targetSource`` (where it came
    from: ``setting``, ``pyproject``, ``setup.cfg``, ``venv``, ``python3``,
    ``default``) and ``targetOrigin`` (a sentence naming the file or setting)."""
    return {
        "target": str(target.version),
        "targetSource": target.kind,
        "targetOrigin": target.origin,
    }


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1e3, 2)


@dataclass
class RequestTimes:
    """Moments of one request (``time.perf_counter()`` seconds), taken as they happen."""

    received: float = field(default_factory=time.perf_counter)
    dequeued: float | None = None  # the worker took it up (or answered it at once)
    quotient_built: float | None = None
    decoding_started: float | None = None  # the first generation began
    prompt_read: float | None = None  # the first generation's prompt was read
    first_token: float | None = None  # the first token was chosen
    done: float | None = None

    def generation(
        self, started: float, prompt_read: float | None, first_token: float | None
    ) -> None:
        """Note one generation's moments; the request keeps the first of each."""
        if self.decoding_started is None:
            self.decoding_started, self.prompt_read = started, prompt_read
        if self.first_token is None:
            self.first_token = first_token

    def figures(self) -> dict[str, float]:
        """The status figures, in milliseconds: ``queueMs``, then ``quotientMs``,
        ``promptMs`` and ``generateMs`` for the phases the request went through (a phase
        it ended in runs to ``done``), ``timeToFirstTokenMs`` when a token was chosen,
        and ``elapsedMs``."""
        done = time.perf_counter() if self.done is None else self.done
        dequeued = self.received if self.dequeued is None else self.dequeued
        out = {"queueMs": _ms(self.received, dequeued)}
        if self.quotient_built is not None:
            out["quotientMs"] = _ms(dequeued, self.quotient_built)
            if self.decoding_started is not None:
                read = done if self.prompt_read is None else self.prompt_read
                out["promptMs"] = _ms(self.quotient_built, read)
                if self.prompt_read is not None:
                    out["generateMs"] = _ms(self.prompt_read, done)
        if self.first_token is not None:
            out["timeToFirstTokenMs"] = _ms(self.received, self.first_token)
        out["elapsedMs"] = _ms(self.received, done)
        return out
