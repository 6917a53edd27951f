"""The figures of ``fimlsp/status``: computed once, from moments taken as they happen.

First the arithmetic on chosen moments, then the real engine (worker thread, tiny
llama.cpp model) answering requests, one of them queued behind another: the time to
the first token never exceeds the elapsed time, and the phases add up to it.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from model_fixtures import model_cache, stopping_model, tiny_factory  # noqa: F401

from lsp_server.engine import Engine
from lsp_server.request import Answer, Request
from lsp_server.settings import Settings
from lsp_server.status import EngineState, RequestTimes, StopReason

PHASES = ("queueMs", "quotientMs", "promptMs", "generateMs")


def adds_up(figures: dict[str, Any]) -> bool:
    """The phases present sum to the elapsed time (each figure is rounded to 0.01 ms)."""
    parts = [figures[p] for p in PHASES if p in figures]
    return math.isclose(sum(parts), figures["elapsedMs"], abs_tol=0.01 * (len(parts) + 1))


# ---------------------------------------------------------------- the arithmetic


def test_a_generated_answer() -> None:
    times = RequestTimes(received=10.0, dequeued=10.1, quotient_built=10.15)
    times.generation(started=10.16, prompt_read=10.4, first_token=10.45)
    times.generation(started=10.6, prompt_read=10.61, first_token=10.62)  # a second run
    times.done = 10.9
    figures = times.figures()
    assert figures == {
        "queueMs": 100.0,
        "quotientMs": 50.0,
        "promptMs": 250.0,  # the first generation's prompt
        "generateMs": 500.0,
        "timeToFirstTokenMs": 450.0,  # the first token of the request, from its arrival
        "elapsedMs": 900.0,
    }
    assert adds_up(figures)
    assert figures["timeToFirstTokenMs"] <= figures["elapsedMs"]


def test_a_prompt_that_ran_out_of_time() -> None:
    times = RequestTimes(received=1.0, dequeued=1.0, quotient_built=1.2)
    times.generation(started=1.2, prompt_read=None, first_token=None)
    times.done = 4.0
    figures = times.figures()
    assert figures == {"queueMs": 0.0, "quotientMs": 200.0, "promptMs": 2800.0,
                       "elapsedMs": 3000.0}  # fmt: skip
    assert adds_up(figures)


def test_answers_without_generation() -> None:
    reused = RequestTimes(received=1.0, dequeued=1.5, done=1.5004)
    assert reused.figures() == {"queueMs": 500.0, "elapsedMs": 500.4}
    empty = RequestTimes(received=1.0, dequeued=1.0, quotient_built=1.03, done=1.03)
    assert empty.figures() == {"queueMs": 0.0, "quotientMs": 30.0, "elapsedMs": 30.0}
    at_once = RequestTimes(received=2.0, done=2.001)  # answered without queueing
    assert at_once.figures() == {"queueMs": 0.0, "elapsedMs": 1.0}


# ---------------------------------------------------------------- the engine


@dataclass
class Worker:
    engine: Engine
    settings: Settings

    def answer(self, uri: str, text: str, offset: int, **changes: Any) -> Answer:
        request = self.submit(uri, text, offset, **changes)
        return request.future.result(timeout=60)

    def submit(self, uri: str, text: str, offset: int, **changes: Any) -> Request:
        return self.engine.submit(Request(uri, text, offset, replace(self.settings, **changes)))


@pytest.fixture(scope="module")
def worker(stopping_model: Path) -> Iterator[Worker]:
    ready = threading.Event()
    engine = Engine(on_state=lambda state, _: None if state == "loading" else ready.set())
    settings = Settings(model=str(stopping_model), max_tokens=24, deadline_ms=20_000)
    engine.configure(settings)
    assert ready.wait(60) and engine.state == EngineState.READY, engine.state_message
    yield Worker(engine, settings)
    engine.shutdown()


def test_generated_answers_add_up(worker: Worker) -> None:
    text = "def f(x):\n    return (x +\n\nprint(f(1))\n"
    offset = text.index("+") + 1
    for mode in ("constrained", "unconstrained"):
        status = worker.answer(f"file:///sum-{mode}.py", text, offset, mode=mode).status
        assert status["tokens"] > 0, status
        assert set(PHASES) <= set(status), status
        assert adds_up(status), status
        ttft = status["timeToFirstTokenMs"]
        before_generation = status["queueMs"] + status["quotientMs"] + status["promptMs"]
        assert before_generation - 0.05 <= ttft <= status["elapsedMs"], status


def test_a_queued_request_counts_its_wait(worker: Worker) -> None:
    """Two documents at once: the second waits for the worker, and says so."""
    text = "import os\n\ndef main(path):\n    name = os.path.basename(path\n"
    offset = text.index("(path") + len("(path")
    first = worker.submit("file:///first.py", text, offset)
    second = worker.submit("file:///second.py", text + "\n", offset)
    statuses = [r.future.result(timeout=60).status for r in (first, second)]
    for status in statuses:
        assert adds_up(status), status
        if "timeToFirstTokenMs" in status:
            assert status["timeToFirstTokenMs"] <= status["elapsedMs"], status
    first_worked = statuses[0]["elapsedMs"] - statuses[0]["queueMs"]
    assert statuses[1]["queueMs"] >= first_worked - 1.0, statuses


@pytest.mark.parametrize(
    ("text", "offset", "reason", "message"),
    [
        ("x = )\n", 5, StopReason.NO_MIDDLE_FITS, "before the cursor is not valid"),
        ("x = 1\n\x00\n", 6, StopReason.NO_MIDDLE_FITS, "no text at the cursor can connect"),
        ("x = (1 +\n", 8, StopReason.TOO_LARGE, "maxDocumentChars"),
    ],
)
def test_answers_without_a_model_call(
    worker: Worker, text: str, offset: int, reason: StopReason, message: str
) -> None:
    limit = 3 if reason == StopReason.TOO_LARGE else 1000
    answer = worker.answer(f"file:///{reason}.py", text, offset, max_document_chars=limit)
    status = answer.status
    assert not answer.suggestions
    assert status["stopReason"] == reason and message in status["message"], status
    assert ("quotientMs" in status) is (reason == StopReason.NO_MIDDLE_FITS)
    assert "timeToFirstTokenMs" not in status and "promptMs" not in status
    assert sum(status[p] for p in PHASES if p in status) <= status["elapsedMs"] + 0.03
