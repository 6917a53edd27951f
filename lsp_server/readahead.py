"""Read-ahead: what the model worker does while nobody waits for it.

A request in a file nobody has read yet pays for everything at once: parsing the file
up to the cursor for the quotient, parsing the code after it, and reading the prompt.
When the user pauses (nothing asked or changed for :data:`IDLE_S`), the worker does
that work ahead for the *focus*: the document last opened, changed or asked about, and
the cursor there when it is known (a request's position; after an edit, where the edit
ended: the server's document records that per incremental change, and only a whole new
text is compared with the old one, on the worker, never on the event loop).  In order,
each step interruptible and resumed at the next pause:

* on the quotient thread, the document's whole text is parsed once forwards
  (:meth:`~quotient_parser.quotient.QuotientBuilder.warm`: a first request anywhere
  starts from the line start before its cursor) and once backwards
  (:meth:`~quotient_parser.quotient.QuotientBuilder.warm_right`: the check of the code
  after any cursor reads only its first line), and, at the cursor, the quotient
  itself (the code after the cursor);
* on the worker, the project context for the cursor chosen again where the file, its
  imports or the other documents changed (:mod:`lsp_server.project`: it reads files, so
  requests never do), then the prompt a request at the cursor would read now, then the
  largest prompt the machine is worth, headed by that context
  (:meth:`~lsp_server.prompt_budget.PromptBudget.machine_window`), which lets later
  requests' budgets grow back.  A backend that keeps prompts
  (:class:`~lsp_server.model.backend.PromptCache`) reads it without losing the prompt
  the last request used; another gets the first prompt through ``prefill``.

A request always preempts read-ahead: every step polls ``interrupt``, which says yes
as soon as a request is queued or being served; the model is polled between short
chunks (``READ_AHEAD_CHUNK`` tokens), so a request waits at most one chunk.  A change
to the focus stops a step too, since its text went stale.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from lexer.text import count_line_ends
from quotient_parser.quotient import BuildInterrupted

from .documents import TextSnapshot, length_of, text_of
from .model import Backend, Interrupted
from .model.backend import PromptCache
from .planner import Planner
from .prompt_budget import PromptChoice
from .settings import Settings
from .target import target_in_force

__all__ = ["IDLE_S", "ReadAhead", "edit_end"]

#: How long the worker must have been left alone before it reads ahead: longer than the
#: gap between keystrokes of someone typing, so a burst of typing is never slowed.
IDLE_S = 0.25

Interrupt = Callable[[], bool]


#: Characters compared at once by :func:`edit_end` (each comparison copies two slices:
#: a bounded C call, so the worker hands the GIL back to the loop between them).
_COMPARED = 1 << 16


def edit_end(old: str, new: str) -> int:
    """Where in ``new`` the edit that turned ``old`` into it ends (the cursor after
    typing or pasting; where text was deleted)."""
    n = min(len(old), len(new))
    prefix = _common_run(old, new, n, at_end=False)
    return len(new) - _common_run(old, new, n - prefix, at_end=True)


def _common_run(a: str, b: str, limit: int, at_end: bool) -> int:
    """How many characters ``a`` and ``b`` begin (``at_end``: end) with in common, at
    most ``limit``, in comparisons of at most :data:`_COMPARED` characters."""

    def window(text: str, done: int, size: int) -> str:
        if at_end:
            return text[len(text) - done - size : len(text) - done]
        return text[done : done + size]

    done = 0
    while done < limit:
        size = min(_COMPARED, limit - done)
        x, y = window(a, done, size), window(b, done, size)
        if x == y:
            done += size
            continue
        lo, hi = 0, size  # the longest common run within this window
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if window(x, 0, mid) == window(y, 0, mid):
                lo = mid
            else:
                hi = mid - 1
        return done + lo
    return limit


@dataclass(frozen=True)
class _Focus:
    uri: str
    source: str | TextSnapshot
    cursor: int | None
    version: int
    #: The focus's previous text, when the edit between it and ``text`` is unknown
    #: (a whole new text): the worker finds where it ended (``cursor`` then holds the
    #: previous cursor, kept if the text did not change).
    previous: str | TextSnapshot | None = None

    @property
    def text(self) -> str:
        """The text (a snapshot's pieces joined on first use: on the worker)."""
        return text_of(self.source)

    @property
    def length(self) -> int:
        """The text's length (without joining a snapshot's pieces)."""
        return length_of(self.source)

    def resolved(self) -> _Focus:
        """The focus with the cursor after an unknown edit found (costs a comparison of
        the two texts, in bounded pieces: called on the worker)."""
        if self.previous is None:
            return self
        previous, text = text_of(self.previous), self.text
        unchanged = len(previous) == len(text) and _common_run(
            previous, text, len(text), at_end=False
        ) == len(text)
        cursor = self.cursor if unchanged else edit_end(previous, text)
        return _Focus(self.uri, self.source, cursor, self.version)


class ReadAhead:
    """The focus and the read-ahead steps still to do for it; counts what they cost.

    ``document``, ``requested`` and ``forget`` may be called from any thread; ``run`` on
    the model worker.
    """

    def __init__(self, planner: Planner, idle_s: float = IDLE_S) -> None:
        self.planner = planner
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._focus: _Focus | None = None
        self._version = 0
        self._last_activity = time.perf_counter()
        self._done: set[tuple[str, int]] = set()  # (step, focus version)
        self._quotient_task: Future[None] | None = None
        self.cpu_s = 0.0  # CPU time of read-ahead, worker and quotient thread together
        self.tokens = 0  # prompt tokens read ahead
        self.steps = 0

    # ---------------------------------------------------------------- the focus

    def document(self, uri: str, text: str | TextSnapshot, edited_to: int | None = None) -> None:
        """A document was opened or changed: it becomes the focus; after an edit to the
        focus, the cursor is taken to be where the edit ended: ``edited_to`` when the
        caller knows it (an incremental change), else found later on the worker by
        comparing the texts (a whole new text).  Costs no more than a constant here."""
        with self._lock:
            focus = self._focus
            if focus is None or focus.uri != uri:
                self._refocus(uri, text, None)
            elif edited_to is not None:
                self._refocus(uri, text, edited_to)
            else:
                previous = focus.source if focus.previous is None else focus.previous
                self._refocus(uri, text, focus.cursor, previous)

    def requested(self, uri: str, text: str | TextSnapshot, offset: int) -> None:
        """A request arrived: its document and cursor are the focus."""
        with self._lock:
            self._refocus(uri, text, offset)

    def forget(self, uri: str) -> None:
        with self._lock:
            if self._focus is not None and self._focus.uri == uri:
                self._focus = None
                self._version += 1

    def _refocus(
        self,
        uri: str,
        text: str | TextSnapshot,
        cursor: int | None,
        previous: str | TextSnapshot | None = None,
    ) -> None:
        self._version += 1
        self._focus = _Focus(uri, text, cursor, self._version, previous)
        self._last_activity = time.perf_counter()

    def touch(self) -> None:
        """Something happened (a request): wait for the next pause."""
        with self._lock:
            self._last_activity = time.perf_counter()

    def stale(self, version: int) -> bool:
        return self._version != version

    # ---------------------------------------------------------------- scheduling

    def _pending(self, focus: _Focus) -> list[str]:
        steps = ["quotient"] if self._quotient_task is None else []
        if focus.cursor is not None or focus.previous is not None:
            steps.append("prompt")
        return [s for s in steps if (s, focus.version) not in self._done]

    def wait_s(self) -> float | None:
        """Seconds until read-ahead has work (0: now), None when it has none."""
        with self._lock:
            focus = self._focus
            if focus is None or not self._pending(focus):
                return None
            return max(0.0, self._last_activity + self.idle_s - time.perf_counter())

    def run(
        self,
        model: Backend,
        settings: Settings,
        quotients: Executor | None,
        interrupt: Interrupt,
    ) -> None:
        """One round of read-ahead on the worker: start the quotient steps on the
        quotient thread, then read prompts until done or interrupted."""
        with self._lock:
            focus = self._focus
        if focus is None or not settings.enable:
            return
        if focus.length > settings.max_document_chars:
            return  # nothing is read ahead for it (its text is never joined)
        if focus.previous is not None:
            focus = focus.resolved()
            with self._lock:
                if self._focus is not None and self._focus.version == focus.version:
                    self._focus = focus
        with self._lock:
            pending = self._pending(focus)

        def stop() -> bool:
            return interrupt() or self.stale(focus.version)

        if "quotient" in pending:
            self._start_quotient(focus, settings, quotients, stop)
        if "prompt" in pending:
            started = time.thread_time()
            try:
                self._read_prompts(model, focus, settings, stop)
            except Interrupted:
                pass
            else:
                with self._lock:
                    self._done.add(("prompt", focus.version))
            finally:
                self._count(time.thread_time() - started)

    def _count(self, cpu_s: float, tokens: int = 0, steps: int = 1) -> None:
        with self._lock:
            self.cpu_s += cpu_s
            self.tokens += tokens
            self.steps += steps

    def counters(self) -> dict[str, float]:
        with self._lock:
            return {
                "readAheadCpuMs": round(self.cpu_s * 1e3, 1),
                "readAheadTokens": self.tokens,
                "readAheadSteps": self.steps,
            }

    # ---------------------------------------------------------------- the quotient

    def _start_quotient(
        self, focus: _Focus, settings: Settings, quotients: Executor | None, stop: Interrupt
    ) -> None:
        def task() -> None:
            started = time.thread_time()
            try:
                self._warm_quotient(focus, settings, stop)
            except BuildInterrupted:
                pass
            else:
                with self._lock:
                    self._done.add(("quotient", focus.version))
            finally:
                with self._lock:
                    self._quotient_task = None
                self._count(time.thread_time() - started)

        if quotients is None:
            task()
            return
        with self._lock:
            self._quotient_task = quotients.submit(task)

    def _warm_quotient(self, focus: _Focus, settings: Settings, stop: Interrupt) -> None:
        """The whole document's states (unless most of them are warm) and its backward
        parse, then the quotient at the cursor."""
        if focus.length > settings.max_document_chars:
            return
        target = target_in_force(settings.python_version, focus.uri, self.planner.workspace_folders)
        builder = self.planner.builder(focus.uri, target.version)
        if 2 * builder.warmed_lines(focus.text) < count_line_ends(focus.text):
            builder.warm(focus.text, stop)
        builder.warm_right(focus.text, stop)
        if focus.cursor is not None:
            left, right = focus.text[: focus.cursor], focus.text[focus.cursor :]
            builder.build(left, right, interrupt=stop)

    # ---------------------------------------------------------------- the prompt

    def _read_prompts(
        self, model: Backend, focus: _Focus, settings: Settings, stop: Interrupt
    ) -> None:
        """The prompt a request at the cursor would read now, then the machine window's."""
        assert focus.cursor is not None
        if focus.length > settings.max_document_chars:
            return
        left, right = focus.text[: focus.cursor], focus.text[focus.cursor :]
        context = self.planner.project_context(model, settings, focus.uri, left, right, True)
        options = self.planner.prompt_options(settings, focus.uri, context)
        budget = self.planner.budget
        deadline_s = settings.deadline_ms / 1e3
        now = budget.choose(model, left, right, options, deadline_s)
        if not isinstance(model, PromptCache):
            model.prefill(now.prompt, stop)
            self._count(0.0, now.uncached, steps=0)
            return
        self._read(model, now, stop)
        # Then the largest prompt worth having, sized with the speed just measured.
        widest = budget.choose(model, left, right, options, deadline_s, allowance=1 << 30)
        self._read(model, widest, stop)

    def _read(self, model: PromptCache, choice: PromptChoice, stop: Interrupt) -> None:
        if choice.uncached <= 1:
            return
        started = time.perf_counter()
        try:
            model.read_ahead(choice.prompt, stop)
        finally:
            self._count(0.0, choice.uncached - model.uncached(choice.prompt), steps=0)
        self.planner.budget.speed.note(choice.uncached, time.perf_counter() - started)
