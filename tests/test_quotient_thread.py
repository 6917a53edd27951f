"""The planner builds a request's quotient on the quotient thread while the worker reads
the prompt, and a cancel stops both (real tiny llama.cpp models, the real planner)."""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import gc
import threading
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    model_cache,
    tiny_factory,
    tiny_model_path,
)

from lsp_server.model import FimModel
from lsp_server.planner import Planner
from lsp_server.request import Request
from lsp_server.settings import Settings
from lsp_server.status import EngineState, StopReason

TEXT = "".join(f"def f{i}(x):\n    return x * {i} + len('{i}')\n\n" for i in range(150))
SETTINGS = Settings(max_tokens=8, deadline_ms=20_000)


@pytest.fixture
def model(tiny_model_path: Path) -> Iterator[FimModel]:
    with FimModel(tiny_model_path, n_ctx=2048) as m:
        yield m


class WatchingExecutor(ThreadPoolExecutor):
    """The real one-thread executor; each task first waits (up to 10 s) until the model
    has decoded something, then notes its thread and whether it saw the read start."""

    def __init__(self, model: FimModel) -> None:
        super().__init__(1, thread_name_prefix="quotient-under-test")
        self.model = model
        self.decoded_before = model.cache.n_decoded
        self.saw_reading: list[bool] = []
        self.threads: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def watched() -> Any:
            deadline = time.monotonic() + 10
            while self.model.cache.n_decoded == self.decoded_before:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.001)
            self.saw_reading.append(self.model.cache.n_decoded > self.decoded_before)
            self.threads.append(threading.current_thread().name)
            return fn(*args, **kwargs)

        return super().submit(watched)


def test_the_quotient_is_built_while_the_prompt_is_read(model: FimModel) -> None:
    quotients = WatchingExecutor(model)
    planner = Planner(quotients)
    try:
        request = Request("file:///q.py", TEXT, TEXT.index("def f120"), SETTINGS)
        answer = planner.answer(request, model, EngineState.READY, "")
    finally:
        quotients.shutdown()
    # The quotient's construction began only once the worker was reading the prompt: had
    # the planner waited for the quotient before reading, the task would have timed out.
    assert quotients.saw_reading == [True]
    assert quotients.threads[0].startswith("quotient-under-test")
    assert answer.status["stopReason"] != StopReason.CANCELLED, answer.status
    assert answer.status["promptEvaluated"] == answer.status["promptTokens"] > 0


def test_a_cancel_stops_the_read_and_the_build(model: FimModel) -> None:
    with ThreadPoolExecutor(1) as quotients:
        planner = Planner(quotients)
        request = Request("file:///q.py", TEXT, TEXT.index("def f120"), SETTINGS)
        request.cancel.set()
        answer = planner.answer(request, model, EngineState.READY, "")
    assert answer.status["stopReason"] == StopReason.CANCELLED
    assert answer.suggestions == []
    assert model.cache.n_decoded == 0  # not one prompt chunk read


def test_an_empty_quotient_answers_from_the_thread(model: FimModel) -> None:
    broken = "def f(:\n" + TEXT  # no middle can follow a broken left context
    with ThreadPoolExecutor(1) as quotients:
        planner = Planner(quotients)
        request = Request("file:///q.py", broken, len("def f(:\n"), SETTINGS)
        answer = planner.answer(request, model, EngineState.READY, "")
    assert answer.status["stopReason"] == StopReason.NO_MIDDLE_FITS
    assert answer.suggestions == []


class CancellingExecutor(ThreadPoolExecutor):
    """The real one-thread executor; the request is cancelled as its build starts, so
    the build stops with ``BuildInterrupted``."""

    def __init__(self, request: Request) -> None:
        super().__init__(1)
        self.request = request

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def cancelled_first() -> Any:
            self.request.cancel.set()
            return fn(*args, **kwargs)

        return super().submit(cancelled_first)


def test_a_cancelled_build_leaves_no_reference_cycle(model: FimModel) -> None:
    """The planner takes the build's ``BuildInterrupted`` from its future without
    raising it through its own frame: raised there, the exception's traceback held the
    frame, whose locals held the future, which held the exception, and the cycle kept
    the request's whole stack (quotient, text, prompt) until a full collection, which
    comes rarely on a large heap."""
    gc.collect()
    gc.disable()
    try:
        request = Request("file:///q.py", TEXT, TEXT.index("def f120"), SETTINGS)
        with CancellingExecutor(request) as quotients:
            planner = Planner(quotients)
            answer = planner.answer(request, model, EngineState.READY, "")
        assert answer.status["stopReason"] == StopReason.CANCELLED
        del answer, request, planner, quotients
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        frames = [o.f_code.co_name for o in gc.garbage if isinstance(o, types.FrameType)]
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.enable()
    assert frames == []
