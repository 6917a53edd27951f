"""The model worker: one thread that owns the model and answers completion requests.

llama.cpp's context is not thread-safe and a CPU has one model's worth of
compute, so every model operation (loading, prompt evaluation, decoding) runs
on a single worker thread, in order.  Requests never pile up behind it: a new
request for a document cancels the one before it, running or queued (editors
such as Neovim do not cancel while the user types), and a cancelled request
still in the queue is dropped without touching the model.  A running request
polls its cancel flag between prompt chunks and between tokens.

What a request is answered with is the :class:`~lsp_server.planner.Planner`'s
business; the engine owns the model's life (loading, reloading when the settings
that shape it change, its :class:`~lsp_server.status.EngineState`), the queue, and two
threads: the model worker and the quotient thread, on which the planner builds a
request's quotient while the worker reads its prompt.

When the queue is empty and the user has paused, the worker reads ahead
(:mod:`lsp_server.readahead`) for the document last opened, changed or asked about;
a request preempts it within one short chunk.  At load, a short read measures how fast
this machine reads prompts, which sizes the first request's prompt.

It runs in the engine process (:mod:`lsp_server.engine_process`), apart from the LSP
front's event loop; tests and benchmarks also drive it in their own process.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .documents import TextSnapshot
from .model import Backend, FimModel, ModelError, describe_spec, resolve_model
from .model.local.threads import suitable_threads
from .model.remote import RemoteCounters, is_server_url, open_remote
from .model.remote.server_api import ServerAvailability, ServerError, ServerHTTPError
from .planner import Planner
from .prompt_budget import PromptBudget, ReadSpeed
from .readahead import ReadAhead
from .request import Answer, Request
from .settings import Settings
from .status import EngineState

__all__ = ["Engine"]

log = logging.getLogger(__name__)

#: Called with (state, message) when the model's state changes.
StateHook = Callable[[EngineState, str], None]
#: Called with (percentage, message) while a model loads or downloads.
ProgressHook = Callable[[int, str], None]

#: Read at load to measure the prompt speed (any code will do; it is not kept).
_CALIBRATION_TEXT = "".join(
    f"def handler_{i}(request, *, timeout={i}.0):\n"
    f"    response = request.send(timeout=timeout)\n"
    f"    return response.json()['items'][{i}]\n\n"
    for i in range(8)
)
#: Tokens of the calibration read (after a short read that warms llama.cpp's buffers up).
_CALIBRATION_TOKENS = 64


class Engine:
    """Owns the model and its worker thread."""

    def __init__(
        self,
        on_state: StateHook | None = None,
        on_progress: ProgressHook | None = None,
    ) -> None:
        self.on_state = on_state or (lambda state, message: None)
        self.on_progress = on_progress or (lambda percent, message: None)
        self.state = EngineState.IDLE
        self.state_message = "no model loaded yet"
        self.model: Backend | None = None
        self._quotients = ThreadPoolExecutor(1, thread_name_prefix="fimlsp-quotient")
        self.planner = Planner(self._quotients)
        self.read_ahead = ReadAhead(self.planner)
        self._settings = Settings()
        self._serving = threading.Event()  # a request is queued or being answered
        self._stopping = False
        self._model_key: tuple[object, ...] | None = None
        #: What was detected about the loaded model (family, layout, end tokens), taken
        #: at load so that a status request never reads the model the worker uses.
        self.detected: dict[str, object] | None = None
        self._wanted_key: tuple[object, ...] | None = None
        self._latest: dict[str, Request] = {}
        self.served = 0  # requests answered, cancelled ones included
        self.cancelled = 0  # requests that stopped or never started because of a cancel
        self.shared = 0  # requests answered with the answer of an identical one
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        #: While an inference server fails: the backoff, and the timer of the next try.
        self._outage = ServerAvailability()
        self._retry: threading.Timer | None = None
        self._thread = threading.Thread(target=self._work, name="fimlsp-model", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- lifecycle

    def configure(self, settings: Settings) -> bool:
        """Load (or reload) the model if the settings that shape it changed.

        Returns whether a load was queued.
        """
        self._settings = settings
        if not settings.enable:
            self._set_state(EngineState.DISABLED, "completions are disabled in the settings")
            return False
        key = settings.model_key
        with self._lock:
            if key == self._wanted_key:
                if self.state == EngineState.DISABLED:  # enabled again
                    if self.model is not None and self._model_key == key:
                        self._set_state(EngineState.READY, "completions are enabled again")
                        return False
                else:
                    return False
            self._wanted_key = key
        self._outage.succeeded()  # a new model: a new count of failures
        self._set_state(EngineState.LOADING, f"loading model {describe_spec(settings.model_spec)}")
        self._jobs.put(lambda: self._load(settings, key))
        return True

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Cancel everything, stop the worker and free the model."""
        self._stopping = True
        with self._lock:
            for request in self._latest.values():
                request.cancel.set()
        if self._retry is not None:
            self._retry.cancel()
        self._jobs.put(None)
        self._thread.join(timeout)
        self._quotients.shutdown(wait=False, cancel_futures=True)

    @property
    def worker_alive(self) -> bool:
        """Whether the worker thread still runs (after :meth:`shutdown`: it is stuck in a
        model call that outlived the wait)."""
        return self._thread.is_alive()

    def forget(self, uri: str) -> None:
        """The document was closed: drop what was kept for it."""
        with self._lock:
            request = self._latest.pop(uri, None)
        self.read_ahead.forget(uri)
        self.planner.forget(uri)
        if request is not None:
            request.cancel.set()

    def document_changed(
        self, uri: str, text: str | TextSnapshot, edited_to: int | None = None
    ) -> None:
        """A document was opened or changed (``didOpen``, ``didChange``): it becomes what
        the worker reads ahead for once the user pauses (``edited_to``: where the last
        edit ended, when known)."""
        self.read_ahead.document(uri, text, edited_to)
        self.planner.project_view.document_changed(uri, text, edited_to)
        self._jobs.put(_wake)  # stop reading ahead for the old text; wait for the pause

    def busy(self) -> bool:
        """A request is queued or being answered."""
        return self._serving.is_set() or not self._jobs.empty()

    def _preempted(self) -> bool:
        """Read-ahead must stop: a request is queued or being answered, or the server stops."""
        return self._stopping or self.busy()

    def counters(self) -> dict[str, float]:
        """What the engine holds, to show that nothing accumulates."""
        with self._lock:
            return {
                "queuedJobs": self._jobs.qsize(),
                "pendingRequests": len(self._latest),
                **self.planner.counters(),
                "served": self.served,
                "cancelled": self.cancelled,
                "shared": self.shared,
                **self.read_ahead.counters(),
                **_remote_traffic(self.model),
            }

    def _set_state(self, state: EngineState, message: str) -> None:
        self.state, self.state_message = state, message
        try:
            self.on_state(state, message)
        except Exception:  # a hook must not take the worker down
            log.exception("state hook failed")

    def _load(self, settings: Settings, key: tuple[object, ...]) -> None:
        if key != self._wanted_key:
            return  # superseded by a newer configuration while queued
        old, self.model, self._model_key = self.model, None, None
        self.detected = None
        if old is not None:
            old.close()
        try:
            model = self._open(settings)
        except ServerError as exc:
            self._server_failed(exc, settings, key)
            return
        except ModelError as exc:
            self._set_state(EngineState.ERROR, str(exc))
            return
        except Exception as exc:  # corrupt files can fail in unexpected places
            log.exception("model load failed")
            self._set_state(EngineState.ERROR, f"cannot load the model: {exc}")
            return
        if key != self._wanted_key:
            model.close()
            return
        self.planner.budget = PromptBudget(ReadSpeed(_calibrate(model)))
        self.detected = model.detected()
        self.model, self._model_key = model, key
        self._outage.succeeded()
        self.on_progress(100, "ready")
        self._set_state(EngineState.READY, model.describe())

    def _open(self, settings: Settings) -> Backend:
        """The backend the settings name, reporting progress (a download is 0-90%)."""

        def downloaded(done: int, total: int | None) -> None:
            if total:
                percent = int(90 * done / total)
                self.on_progress(percent, f"downloading {done / 1e6:.0f} / {total / 1e6:.0f} MB")

        if is_server_url(settings.model):
            self.on_progress(0, f"connecting to {settings.model}")
            return open_remote(
                settings.model,
                api_key=settings.api_key,
                server_api=settings.server_api,
                model_vocab=settings.model_vocab,
                n_ctx=settings.context_size,
            )
        self.on_progress(0, "finding the model")
        path = resolve_model(settings.model_spec, progress=downloaded, show_progress=False)
        self.on_progress(90, f"loading {path.name}")
        return FimModel(
            path,
            n_ctx=settings.context_size,
            n_threads=settings.threads or suitable_threads(),
            n_gpu_layers=settings.gpu_layers,
        )

    def _server_failed(self, exc: ServerError, settings: Settings, key: tuple[object, ...]) -> None:
        """The inference server does not answer as it should: completions are off (the
        state says why) and the model is loaded again after a growing wait."""
        self._outage.failed(exc)
        delay = self._outage.seconds_to_retry()
        self._set_state(
            EngineState.UNAVAILABLE,
            f"{exc}; completions are off until it answers (next try in {delay:.0f} s)",
        )
        if self._retry is not None:
            self._retry.cancel()
        self._retry = threading.Timer(delay, self._jobs.put, [lambda: self._load(settings, key)])
        self._retry.daemon = True
        self._retry.start()

    def _work(self) -> None:
        while True:
            wait = self.read_ahead.wait_s() if self.state == EngineState.READY else None
            try:
                job = self._jobs.get(timeout=wait)
            except queue.Empty:
                self._read_ahead()
                continue
            if job is None:
                break
            try:
                job()
            except Exception:
                log.exception("model worker job failed")
        if self.model is not None:
            self.model.close()
            self.model = None

    def _read_ahead(self) -> None:
        model = self.model
        if model is None or self._preempted():
            return
        try:
            self.read_ahead.run(model, self._settings, self._quotients, self._preempted)
        except Exception:
            log.exception("read-ahead failed")

    # ---------------------------------------------------------------- requests

    def submit(self, request: Request) -> Request:
        """Queue a completion; the previous request for its document is cancelled.
        Returns the request that will answer it: ``request``, or an identical one
        already queued or running, whose answer it shares."""
        uri = request.uri
        self._serving.set()
        self.read_ahead.requested(uri, request.source, request.offset)
        with self._lock:
            previous = self._latest.get(uri)
            if previous is not None and previous.same_question(request):
                # The same question again (an inline and a completion request for one
                # keystroke): share the answer instead of cancelling each other.
                self.shared += 1
                return previous
            if self.state != EngineState.READY:
                self._latest.pop(uri, None)
            else:
                self._latest[uri] = request
        if previous is not None:
            previous.cancel.set()
        if self.state != EngineState.READY:
            # Loading (maybe downloading) or broken: answer now, not after the load job.
            request.future.set_running_or_notify_cancel()
            request.future.set_result(self._answer(request))
            return request
        self._jobs.put(lambda: self._serve(request))
        return request

    def _answer(self, request: Request) -> Answer:
        return self.planner.answer(request, self.model, self.state, self.state_message)

    def _serve(self, request: Request) -> None:
        self._serving.set()
        try:
            self._serve_one(request)
        finally:
            self.read_ahead.touch()
            if self._jobs.empty():
                self._serving.clear()

    def _serve_one(self, request: Request) -> None:
        self.served += 1
        if request.future.set_running_or_notify_cancel() is False:
            self.cancelled += 1
            self._drop(request)
            return
        request.times.dequeued = time.perf_counter()
        try:
            try:
                answer = self._answer(request)
            except ServerError as exc:  # the inference server failed during the request
                answer = self._server_lost(request, exc)
        except Exception as exc:
            log.exception("completion failed")
            request.future.set_exception(exc)
            return
        finally:
            self._drop(request)
        if request.cancelled:
            self.cancelled += 1
        request.future.set_result(answer)

    def _server_lost(self, request: Request, exc: ServerError) -> Answer:
        """Nothing, with the reason: a request the server refused (a 4xx: this request is
        wrong, not the server) leaves the model ready; any other failure turns completions
        off until the server answers again."""
        log.warning("inference server failed: %s", exc)
        if isinstance(exc, ServerHTTPError) and not exc.transient:
            return self.planner.answer(request, None, self.state, str(exc))
        if self.state == EngineState.READY:
            self._server_failed(exc, request.settings, self._model_key or ())
        return self.planner.answer(request, None, self.state, self.state_message)

    def _drop(self, request: Request) -> None:
        with self._lock:
            if self._latest.get(request.uri) is request:
                del self._latest[request.uri]


def _remote_traffic(model: Backend | None) -> dict[str, int]:
    """An inference server's backend: the requests it sent (``remoteRequests``: streams,
    one per rejected token, probes, prefills), so that a team's load test can count
    requests per completion. Plain ints read across threads; they start again from 0
    when the backend is opened again (after an outage)."""
    counters = getattr(model, "counters", None)
    if not isinstance(counters, RemoteCounters):
        return {}
    return {
        "remoteGenerations": counters.generations,
        "remoteRequests": counters.requests,
        "remoteRejected": counters.rejected,
        "remoteProbes": counters.probes,
        "remotePrefills": counters.prefills,
    }


def _wake() -> None:
    """A job that does nothing: it wakes the worker (to look at read-ahead again)."""


def _calibrate(model: Backend) -> float | None:
    """Prompt tokens per second this machine reads, measured with a short read."""
    tokens = model.tokenize(_CALIBRATION_TEXT)[: 16 + _CALIBRATION_TOKENS]
    if len(tokens) < 16 + _CALIBRATION_TOKENS:
        return None
    try:
        model.prefill(tokens[:16])  # the first read sets buffers up: not timed
        started = time.perf_counter()
        model.prefill(tokens)
        seconds = time.perf_counter() - started
    except ModelError:
        log.exception("measuring the prompt speed failed")
        return None
    return _CALIBRATION_TOKENS / seconds if seconds > 0 else None
