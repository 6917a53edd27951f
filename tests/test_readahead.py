"""Read-ahead: what the worker reads while the user pauses, and how a request stops it.

The planner, the budget and the tiny llama.cpp models are the real ones; a request's
arrival is simulated by the ``interrupt`` callback the engine gives read-ahead (it says
yes once a request is queued), whose polls are counted in tokens decoded.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    model_cache,
    stopping_model,
    tiny_factory,
    tiny_model_path,
)

from lexer.text import count_line_ends
from lsp_server import readahead
from lsp_server.engine import Engine
from lsp_server.model import FimModel
from lsp_server.model.local.context import READ_AHEAD_CHUNK
from lsp_server.planner import Planner
from lsp_server.prompt_budget import PromptBudget, ReadSpeed
from lsp_server.readahead import ReadAhead, edit_end
from lsp_server.request import Request
from lsp_server.settings import Settings
from lsp_server.status import EngineState
from lsp_server.target import target_in_force

TEXT = "".join(f"def f{i}(x):\n    return x * {i} + len('{i}')\n\n" for i in range(120))
URI = "file:///ahead.py"
SETTINGS = Settings(max_tokens=16, deadline_ms=3000)


def test_edit_end_is_where_the_cursor_ends_up() -> None:
    assert edit_end("abcdef", "abcXdef") == 4  # typed X
    assert edit_end("abcdef", "abdef") == 2  # deleted c
    assert edit_end("abcdef", "abXYZf") == 5  # replaced cde
    assert edit_end("aaa", "aaaa") == 4  # ambiguous: the end of the run
    assert edit_end("", "x = 1\n") == 6
    assert edit_end("same", "same") == 4


@pytest.fixture
def model(tiny_model_path: Path) -> Iterator[FimModel]:
    with FimModel(tiny_model_path, n_ctx=2048) as m:
        yield m


class FixedSpeed(ReadSpeed):
    """A reading speed that measurements do not move: budgets the test can predict."""

    def note(self, tokens: int, seconds: float) -> None:
        pass


def _ahead(speed: float = 200.0) -> ReadAhead:
    planner = Planner()
    planner.budget = PromptBudget(FixedSpeed(speed))
    return ReadAhead(planner, idle_s=0.0)


def test_read_ahead_warms_the_quotient_and_the_prompts(model: FimModel) -> None:
    ahead = _ahead()
    ahead.document(URI, TEXT)
    assert ahead.wait_s() == 0.0  # the document's quotient is to be warmed
    ahead.run(model, SETTINGS, None, lambda: False)
    builder = ahead.planner.builder(URI, target_in_force(SETTINGS.python_version, URI, ()).version)
    assert builder.warmed_lines(TEXT) == count_line_ends(TEXT)
    assert ahead.wait_s() is None  # no cursor known: nothing more to do
    cursor = TEXT.index("def f100")
    ahead.requested(URI, TEXT, cursor)  # a request says where the cursor is
    ahead.run(model, SETTINGS, None, lambda: False)
    budget, options = ahead.planner.budget, ahead.planner.prompt_options(SETTINGS, URI)
    left, right = TEXT[:cursor], TEXT[cursor:]
    widest = budget.choose(model, left, right, options, 3.0, allowance=1 << 30)
    assert widest.budget > budget.cold_allowance(3.0)
    assert model.uncached(widest.prompt) == 0  # the largest prompt is read
    assert budget.choose(model, left, right, options, 3.0).budget == widest.budget
    counters = ahead.counters()
    assert counters["readAheadTokens"] >= len(widest.prompt) and counters["readAheadCpuMs"] > 0
    assert ahead.wait_s() is None


def test_an_edit_moves_the_cursor_read_ahead_reads_for(model: FimModel) -> None:
    ahead = _ahead()
    cursor = TEXT.index("def f50")
    ahead.requested(URI, TEXT, cursor)
    edited = TEXT[:cursor] + "x = 1\n" + TEXT[cursor:]
    ahead.document(URI, edited)
    ahead.run(model, SETTINGS, None, lambda: False)
    left, right = edited[: cursor + 6], edited[cursor + 6 :]
    options = ahead.planner.prompt_options(SETTINGS, URI)
    now = ahead.planner.budget.choose(model, left, right, options, 3.0)
    assert now.uncached == 0


def test_an_edit_whose_end_is_known_is_not_diffed() -> None:
    ahead = _ahead()
    ahead.requested(URI, TEXT, 5)
    ahead.document(URI, TEXT + "# a\n", edited_to=7)
    assert ahead._focus is not None and ahead._focus.cursor == 7
    assert ahead._focus.previous is None  # nothing left for the worker to compare
    ahead.document(URI, "# new\n" + TEXT)  # a whole new text: compared on the worker
    assert ahead._focus.cursor == 7 and ahead._focus.previous == TEXT + "# a\n"
    ahead.document(URI, "# new\n" + TEXT + "z")  # and another: from the oldest unknown
    focus = ahead._focus.resolved()
    assert focus.previous is None and focus.cursor == len(TEXT) + 7


def test_a_request_stops_read_ahead_within_one_chunk(model: FimModel) -> None:
    ahead = _ahead(speed=400.0)
    ahead.requested(URI, TEXT, len(TEXT) - 100)
    ahead.run(model, SETTINGS, None, lambda: True)  # a request is already waiting
    assert model.cache.n_decoded == 0
    polls = 0

    def request_after_two_chunks() -> bool:
        nonlocal polls
        polls += 1
        return model.cache.n_decoded >= 2 * READ_AHEAD_CHUNK

    decoded = model.cache.n_decoded
    ahead.run(model, SETTINGS, None, request_after_two_chunks)
    assert model.cache.n_decoded - decoded == 2 * READ_AHEAD_CHUNK  # not one token more
    assert ahead.wait_s() == 0.0  # unfinished: resumed at the next pause
    ahead.run(model, SETTINGS, None, lambda: False)
    assert ahead.wait_s() is None


def test_a_change_stops_read_ahead_for_the_old_text(model: FimModel) -> None:
    ahead = _ahead(speed=400.0)
    ahead.requested(URI, TEXT, len(TEXT) - 100)

    def edited_meanwhile() -> bool:
        if model.cache.n_decoded >= READ_AHEAD_CHUNK:
            ahead.document(URI, TEXT + "# more\n")
        return False

    ahead.run(model, SETTINGS, None, edited_meanwhile)
    assert model.cache.n_decoded <= 2 * READ_AHEAD_CHUNK
    assert ahead.wait_s() == 0.0  # the new text is still to be read for


# ---------------------------------------------------------------- in the engine


@pytest.fixture(scope="module")
def engine(stopping_model: Path) -> Iterator[Engine]:
    ready = threading.Event()
    engine = Engine(on_state=lambda state, _: None if state == "loading" else ready.set())
    engine.configure(Settings(model=str(stopping_model), max_tokens=16, deadline_ms=20_000))
    assert ready.wait(60) and engine.state == EngineState.READY, engine.state_message
    yield engine
    engine.shutdown()


def _wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_engine_reads_ahead_when_idle_and_answers_meanwhile(engine: Engine) -> None:
    text = TEXT * 8  # long enough that the quotient's warm-up takes a while
    uri = "file:///engine-ahead.py"
    before = engine.counters()["readAheadSteps"]
    engine.document_changed(uri, text)
    _wait_for(lambda: engine.counters()["readAheadSteps"] > before)  # after the pause
    # A short deadline: the request reads a small prompt, read-ahead the rest of the window.
    settings = Settings(model=engine._settings.model, max_tokens=16, deadline_ms=300)
    request = Request(uri, text, len(text) - 50, settings)
    answer = engine.submit(request).future.result(timeout=60)
    assert answer.status["promptTokens"] < engine.model.n_ctx // 2  # type: ignore[union-attr]
    assert answer.status["stopReason"] not in ("cancelled",), answer.status
    builder = engine.planner.builder(uri, target_in_force(settings.python_version, uri, ()).version)
    _wait_for(lambda: builder.warmed_lines(text) == count_line_ends(text))
    _wait_for(lambda: engine.read_ahead.wait_s() is None)  # the cursor's prompts read too
    assert engine.counters()["readAheadTokens"] > 0
    assert not engine._preempted()


def _edit_end_by_definition(old: str, new: str) -> int:
    n = min(len(old), len(new))
    prefix = next((i for i in range(n) if old[i] != new[i]), n)
    suffix = next((i for i in range(n - prefix) if old[-1 - i] != new[-1 - i]), n - prefix)
    return len(new) - suffix


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab😀", max_size=30), st.text(alphabet="ab😀", max_size=30))
def test_edit_end_compared_in_bounded_windows(old: str, new: str) -> None:
    """Texts compared a window at a time (of 3 here) give what the definition gives."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readahead, "_COMPARED", 3)
        assert edit_end(old, new) == _edit_end_by_definition(old, new)
