"""The model worker: one thread that owns the model and answers completion requests.

llama.cpp's context is not thread-safe and a CPU has one model's worth of
compute, so every model operation (loading, prompt evaluation, decoding) runs
on a single worker thread, in order.  Requests never pile up behind it: a new
request for a document cancels the one before it, running or queued (editors
such as Neovim do not cancel while the user types), and a cancelled request
still in the queue is dropped without touching the model.  A running request
polls its cancel flag between tokens.

The engine also decides *what* to generate (:meth:`Engine._plan`):

* the same completion again, when the user has typed along a shown one;
* single-line or multi-line, in ``auto`` line mode, by asking the grammar
  whether the cursor opens a block;
* nothing, when the document is too large or the right context cannot be
  completed by any middle.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from lexer.text import LINE_END_RE, first_line, indentation, last_line
from lexer.version import TargetVersion
from quotient_parser.quotient import Quotient, QuotientBuilder

from .decoding import Completion, DecodeOptions, generate
from .model import FimModel, ModelError, resolve_model
from .settings import Settings

__all__ = ["Answer", "Engine", "Request", "Suggestion"]

log = logging.getLogger(__name__)

#: Documents whose quotient work (left-context states, right-context memo) is kept.
_BUILDERS_KEPT = 8

#: Called with (state, message): "loading", "ready", "error", "disabled".
StateHook = Callable[[str, str], None]
#: Called with (percentage, message) while a model loads or downloads.
ProgressHook = Callable[[int, str], None]


@dataclass(frozen=True)
class Suggestion:
    """One middle to show at the cursor."""

    middle: str
    single_line: bool
    complete: bool | None
    stop_reason: str


@dataclass
class Answer:
    """What a request produced, and the figures for ``fimlsp/status``."""

    suggestions: list[Suggestion]
    status: dict[str, Any]


@dataclass
class Request:
    """One completion request, cancellable from any thread."""

    uri: str
    text: str
    offset: int
    settings: Settings
    #: The user asked (an invoked inline completion, or cycling to the next suggestion):
    #: offer the other line mode's middle too, as a second item to cycle to.
    alternatives: bool = False
    received: float = field(default_factory=time.perf_counter)
    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future[Answer] = field(default_factory=Future)

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()


@dataclass
class _Shown:
    """The last completion offered for a document, for typing along it."""

    left: str
    right: str
    middle: str
    single_line: bool


class Engine:
    """Owns the model and its worker thread."""

    def __init__(
        self,
        on_state: StateHook | None = None,
        on_progress: ProgressHook | None = None,
    ) -> None:
        self.on_state = on_state or (lambda state, message: None)
        self.on_progress = on_progress or (lambda percent, message: None)
        self.state = "idle"
        self.state_message = "no model loaded yet"
        self.model: FimModel | None = None
        self._model_key: tuple[object, ...] | None = None
        self._wanted_key: tuple[object, ...] | None = None
        self._builders: OrderedDict[tuple[str, str], QuotientBuilder] = OrderedDict()
        self._shown: dict[str, _Shown] = {}
        self._latest: dict[str, Request] = {}
        self.served = 0  # requests answered, cancelled ones included
        self.cancelled = 0  # requests that stopped or never started because of a cancel
        self.shared = 0  # requests answered with the answer of an identical one
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="fimlsp-model", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- lifecycle

    def configure(self, settings: Settings) -> bool:
        """Load (or reload) the model if the settings that shape it changed.

        Returns whether a load was queued.
        """
        if not settings.enable:
            self._set_state("disabled", "completions are disabled in the settings")
            return False
        key = settings.model_key
        with self._lock:
            if key == self._wanted_key:
                if self.state == "disabled":  # enabled again
                    if self.model is not None and self._model_key == key:
                        self._set_state("ready", "completions are enabled again")
                        return False
                else:
                    return False
            self._wanted_key = key
        self._set_state("loading", f"loading model {_describe(settings.model_spec)}")
        self._jobs.put(lambda: self._load(settings, key))
        return True

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Cancel everything, stop the worker and free the model."""
        with self._lock:
            for request in self._latest.values():
                request.cancel.set()
        self._jobs.put(None)
        self._thread.join(timeout)

    def forget(self, uri: str) -> None:
        """The document was closed: drop what was kept for it."""
        with self._lock:
            request = self._latest.pop(uri, None)
            self._shown.pop(uri, None)
            for key in [k for k in self._builders if k[0] == uri]:
                del self._builders[key]
        if request is not None:
            request.cancel.set()

    def _set_state(self, state: str, message: str) -> None:
        self.state, self.state_message = state, message
        try:
            self.on_state(state, message)
        except Exception:  # a hook must not take the worker down
            log.exception("state hook failed")

    def _load(self, settings: Settings, key: tuple[object, ...]) -> None:
        if key != self._wanted_key:
            return  # superseded by a newer configuration while queued
        old, self.model, self._model_key = self.model, None, None
        if old is not None:
            old.close()

        def downloaded(done: int, total: int | None) -> None:
            if total:
                percent = int(90 * done / total)
                self.on_progress(percent, f"downloading {done / 1e6:.0f} / {total / 1e6:.0f} MB")

        try:
            self.on_progress(0, "finding the model")
            path = resolve_model(settings.model_spec, progress=downloaded, show_progress=False)
            self.on_progress(90, f"loading {path.name}")
            model = FimModel(
                path,
                n_ctx=settings.context_size,
                n_threads=settings.threads,
                n_gpu_layers=settings.gpu_layers,
            )
        except ModelError as exc:
            self._set_state("error", str(exc))
            return
        except Exception as exc:  # corrupt files can fail in unexpected places
            log.exception("model load failed")
            self._set_state("error", f"cannot load the model: {exc}")
            return
        if key != self._wanted_key:
            model.close()
            return
        self.model, self._model_key = model, key
        self.on_progress(100, "ready")
        self._set_state("ready", model.describe())

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            try:
                job()
            except Exception:
                log.exception("model worker job failed")
        if self.model is not None:
            self.model.close()
            self.model = None

    def counters(self) -> dict[str, int]:
        """What the engine holds, to show that nothing accumulates."""
        with self._lock:
            return {
                "queuedJobs": self._jobs.qsize(),
                "pendingRequests": len(self._latest),
                "builders": len(self._builders),
                "shownCompletions": len(self._shown),
                "served": self.served,
                "cancelled": self.cancelled,
                "shared": self.shared,
            }

    # ---------------------------------------------------------------- requests

    def submit(
        self, uri: str, text: str, offset: int, settings: Settings, alternatives: bool = False
    ) -> Request:
        """Queue a completion; the previous request for ``uri`` is cancelled."""
        request = Request(uri, text, offset, settings, alternatives)
        with self._lock:
            previous = self._latest.get(uri)
            if (
                previous is not None
                and not previous.cancelled
                and previous.offset == offset
                and previous.settings == settings
                and previous.text == text
                and previous.alternatives >= alternatives
            ):
                # The same question again (an inline and a completion request for one
                # keystroke): share the answer instead of cancelling each other.
                self.shared += 1
                return previous
            if self.state != "ready":
                self._latest.pop(uri, None)
            else:
                self._latest[uri] = request
        if previous is not None:
            previous.cancel.set()
        if self.state != "ready":
            # Loading (maybe downloading) or broken: answer now, not after the load job.
            request.future.set_running_or_notify_cancel()
            request.future.set_result(self._answer(request))
            return request
        self._jobs.put(lambda: self._serve(request))
        return request

    def _serve(self, request: Request) -> None:
        self.served += 1
        if request.future.set_running_or_notify_cancel() is False:
            self.cancelled += 1
            self._drop(request)
            return
        try:
            answer = self._answer(request)
        except Exception as exc:
            log.exception("completion failed")
            request.future.set_exception(exc)
            return
        finally:
            self._drop(request)
        if request.cancelled:
            self.cancelled += 1
        request.future.set_result(answer)

    def _drop(self, request: Request) -> None:
        with self._lock:
            if self._latest.get(request.uri) is request:
                del self._latest[request.uri]

    def _answer(self, request: Request) -> Answer:
        settings = request.settings
        status: dict[str, Any] = {"uri": request.uri, "state": self.state}
        if request.cancelled:
            return Answer([], {**status, "stopReason": "cancelled"})
        if not settings.enable:
            return Answer([], {**status, "state": "disabled", "stopReason": "disabled"})
        if self.model is None or self.state != "ready":
            return Answer([], {**status, "stopReason": "no_model", "message": self.state_message})
        if len(request.text) > settings.max_document_chars:
            message = (
                f"document has {len(request.text)} characters, more than maxDocumentChars "
                f"({settings.max_document_chars})"
            )
            return Answer([], {**status, "stopReason": "too_large", "message": message})
        left, right = request.text[: request.offset], request.text[request.offset :]

        reused = self._typed_along(request.uri, left, right)
        if reused is not None:
            status.update(
                stopReason="reused", tokens=0, suggestions=1, elapsedMs=_ms_since(request.received)
            )
            return Answer([reused], status)

        builder = self._builder(request.uri, settings.python_version)
        started = time.perf_counter()
        quotient = builder.build(left, right)
        quotient_ms = (time.perf_counter() - started) * 1e3
        if settings.mode == "constrained" and quotient.empty:
            left_ok = quotient.initial.state.viable
            message = (
                "no text at the cursor can connect to the code after it"
                if left_ok
                else "the code before the cursor is not valid Python, whatever follows"
            )
            return Answer([], {**status, "stopReason": "no_middle_fits", "message": message,
                               "quotientMs": quotient_ms})  # fmt: skip

        single = self._single_line(settings, quotient, left, right)
        result = self._generate(request, quotient, single)
        fell_back = False
        if single and settings.line_mode == "auto" and not result.complete:
            if not request.cancelled and not self._late(request):
                single = False  # the line cannot be finished on its own: offer more lines
                fell_back = True
                result = self._generate(request, quotient, single)

        suggestions: list[Suggestion] = []
        usable = result.complete or settings.mode == "unconstrained"
        if result.middle and usable and not request.cancelled:
            middle = _document_line_ends(result.middle, quotient, request.text)
            suggestion = Suggestion(middle, single, result.complete, result.stop_reason)
            suggestions.append(suggestion)
            self._shown[request.uri] = _Shown(left, right, middle, single)
            if request.alternatives and not fell_back:
                other = self._alternative(request, quotient, single)
                if other is not None and other.middle != middle:
                    suggestions.append(other)
        status["suggestions"] = len(suggestions)
        t = result.timings
        tokens = result.tokens
        generate_ms = t.get("generate_ms", 0.0)
        status.update(
            stopReason="cancelled" if request.cancelled else result.stop_reason,
            complete=result.complete,
            lineMode="single" if single else "multi",
            tokens=tokens,
            quotientMs=round(quotient_ms, 2),
            promptMs=round(t.get("prompt_ms", 0.0), 2),
            timeToFirstTokenMs=round(
                _ms_since(request.received) - t.get("total_ms", 0.0)  # waiting in the queue
                + quotient_ms + t.get("prompt_ms", 0.0)
                + (generate_ms / tokens if tokens else 0.0),
                2,
            ),
            tokensPerSecond=round(t.get("tokens_per_s", 0.0), 1),
            parserUsPerToken=round(t.get("parser_us_per_token_median", 0.0), 1),
            elapsedMs=round(_ms_since(request.received), 2),
        )  # fmt: skip
        return Answer(suggestions, status)

    def _generate(self, request: Request, quotient: Quotient, single: bool) -> Completion:
        settings = request.settings
        assert self.model is not None
        remaining = settings.deadline_ms / 1e3 - (time.perf_counter() - request.received)
        options = DecodeOptions(
            mode=settings.mode,
            max_tokens=settings.max_tokens,
            top_k=settings.top_k,
            single_line=single,
            deadline_s=max(0.01, remaining),
        )
        left, right = quotient.left, quotient.right
        return generate(
            self.model,
            left,
            right,
            options,
            quotient=quotient if settings.mode == "constrained" else None,
            target=settings.python_version,
            cancel=request.cancel.is_set,
        )

    def _alternative(self, request: Request, quotient: Quotient, single: bool) -> Suggestion | None:
        """The middle of the other line mode, for a second item (constrained, ``auto``)."""
        settings = request.settings
        if settings.line_mode != "auto" or settings.mode != "constrained":
            return None
        if request.cancelled or self._late(request):
            return None
        other = self._generate(request, quotient, not single)
        if not other.complete or not other.middle or request.cancelled:
            return None
        middle = _document_line_ends(other.middle, quotient, request.text)
        return Suggestion(middle, not single, other.complete, other.stop_reason)

    @staticmethod
    def _late(request: Request) -> bool:
        return _ms_since(request.received) > request.settings.deadline_ms * 0.8

    # ---------------------------------------------------------------- planning

    def _builder(self, uri: str, version: str) -> QuotientBuilder:
        key = (uri, version)
        builder = self._builders.get(key)
        if builder is None:
            builder = self._builders[key] = QuotientBuilder(TargetVersion.parse(version))
            while len(self._builders) > _BUILDERS_KEPT:
                self._builders.popitem(last=False)
        else:
            self._builders.move_to_end(key)
        return builder

    def _typed_along(self, uri: str, left: str, right: str) -> Suggestion | None:
        """The rest of the shown completion, if the user typed a prefix of it."""
        shown = self._shown.get(uri)
        if shown is None or right != shown.right or not left.startswith(shown.left):
            return None
        typed = left[len(shown.left) :]
        if not typed or len(typed) >= len(shown.middle) or not shown.middle.startswith(typed):
            return None
        # left + rest + right == shown.left + shown.middle + right, which parsed.
        return Suggestion(shown.middle[len(typed) :], shown.single_line, True, "reused")

    @staticmethod
    def _single_line(settings: Settings, quotient: Quotient, left: str, right: str) -> bool:
        """Whether to generate a single line (``auto``: unless the cursor opens a block)."""
        if settings.line_mode != "auto":
            return settings.line_mode == "single"
        return not opens_block(quotient, left, right)


def opens_block(quotient: Quotient, left: str, right: str) -> bool:
    """The grammar's view: the cursor ends a block header, so the middle needs lines.

    True when the rest of the cursor's line is blank and the left context can go
    on with a new, more deeply indented line but not with one at the line's own
    indentation (``if x:``, ``def f(a):``, ``class C:``, ``else:`` and so on).
    """
    rest_of_line = first_line(right)
    if rest_of_line.strip():
        return False
    line = last_line(left)
    if not line.strip():
        return False
    indent = indentation(line)
    state = quotient.initial
    deeper = state.feed(f"\n{indent}    pass").viable
    same = state.feed(f"\n{indent}pass").viable
    return deeper and not same


def _document_line_ends(middle: str, quotient: Quotient, text: str) -> str:
    """``middle`` with the document's line ends, if the file still parses that way.

    Models also write ``\r`` and ``\r\n``; Python reads every line end alike, but an
    editor would show a stray ``^M``.  The rewritten middle is checked again, since a
    line end that meets one in the context (``\r`` before R's ``\n``) can change
    how many lines there are.
    """
    newline = "\r\n" if "\r\n" in text else "\r" if "\r" in text and "\n" not in text else "\n"
    rewritten = LINE_END_RE.sub(newline, middle)
    if rewritten == middle:
        return middle
    if quotient.initial.feed(rewritten).complete:
        return rewritten
    return middle


def _describe(spec: object) -> str:
    if isinstance(spec, tuple):
        return f"{spec[0]}/{spec[1]}"
    return "the embedded default" if spec in ("", "default") else str(spec)


def _ms_since(t: float) -> float:
    return (time.perf_counter() - t) * 1e3
