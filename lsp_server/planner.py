"""What to answer a completion request with; runs on the model worker.

* nothing, with the reason, when completions are off, the model is not ready, the
  document is too large, or no middle can make the file valid (the quotient is empty);
* the rest of the completion just shown, when the user has typed along it (no model
  call);
* otherwise the middles of :func:`~lsp_server.decoding.attempts.generate_middles`:
  single-line or multi-line as the line mode says, and for an explicit request up to
  three distinct complete middles to cycle through; every second attempt (the line
  mode's fallback, alternatives) is decided there, within what the planner allows of
  the deadline (:class:`~lsp_server.decoding.attempts.Allowance`).

Every answer carries its ``fimlsp/status`` figures, computed once from the request's
moments (:meth:`lsp_server.status.RequestTimes.figures`).  The planner keeps, per
document, the quotient builder (left-context states, right-context memo) and the
completion last shown.

Before generating, the prompt is sized to the machine (:mod:`lsp_server.prompt_budget`)
and read while the quotient is built on the quotient thread: the quotient is pure
Python, and llama.cpp lets go of the interpreter while it reads, so on two cores the
two overlap.  A cancel stops both.

For a model whose family has a repository-level prompt format, the prompt is headed by
project context (:mod:`lsp_server.project`): a request takes what read-ahead last chose
for the document, and never reads files itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from lexer.text import LINE_END_RE
from lexer.version import TargetVersion
from quotient_parser.newer_syntax import NewerSyntax, find_newer_syntax
from quotient_parser.quotient import BuildInterrupted, Quotient, QuotientBuilder

from .decoding import Completion, DecodeOptions
from .decoding.attempts import Allowance, generate_middles
from .decoding.stopping import StopCheck
from .lines import document_line_ends
from .model import Backend, Interrupted
from .model.prompt import RepoContext
from .project import ProjectContext, ProjectView
from .prompt_budget import PromptBudget, PromptChoice
from .request import Answer, Request, Suggestion
from .settings import Settings
from .status import EngineState, StopReason, target_status
from .target import ProjectTarget, target_in_force

__all__ = ["Planner"]

log = logging.getLogger(__name__)

#: Documents whose quotient work (left-context states, right-context memo) is kept.
BUILDERS_KEPT = 8
#: Share of the deadline after which no second generation is started.
_LATE_SHARE = 0.8


@dataclass
class _Shown:
    """The last completion offered for a document, for typing along it."""

    left: str
    right: str
    middle: str
    single_line: bool


class Planner:
    """Answers requests one at a time (on the worker); ``forget`` and ``counters`` may be
    called from other threads.

    ``quotients`` runs quotient construction (one thread: a builder is not thread-safe);
    without it quotients are built on the caller's thread, after the prompt is read.
    """

    def __init__(self, quotients: Executor | None = None) -> None:
        self._builders: OrderedDict[tuple[str, TargetVersion], QuotientBuilder] = OrderedDict()
        self._shown: dict[str, _Shown] = {}
        #: Per document: the text through the line that needs a newer Python (or the
        #: whole text when none does), for its target, and what was found.
        self._newer: dict[str, tuple[TargetVersion, str, NewerSyntax | None]] = {}
        self._lock = threading.Lock()
        #: The client's workspace folders (from ``initialize``): where an ``auto``
        #: target is read from (a project's virtual environment).
        self.workspace_folders: tuple[str, ...] = ()
        self.quotients = quotients
        self.budget = PromptBudget()
        #: The open documents (the engine feeds it) and the project context chosen.
        self.project_view = ProjectView()
        self.project = ProjectContext(self.project_view)
        self.prompt_tokens = 0  # tokens of the prompts requests used
        self.prompt_evaluated = 0  # of which requests read themselves (not cached)

    def forget(self, uri: str) -> None:
        """The document was closed: drop what was kept for it."""
        with self._lock:
            self._shown.pop(uri, None)
            self._newer.pop(uri, None)
            self.project_view.closed(uri)
            self.project.forget(uri)
            for key in [k for k in self._builders if k[0] == uri]:
                del self._builders[key]

    def counters(self) -> dict[str, int]:
        with self._lock:
            return {
                "builders": len(self._builders),
                "shownCompletions": len(self._shown),
                "promptTokens": self.prompt_tokens,
                "promptEvaluated": self.prompt_evaluated,
                "promptTokensPerSecond": round(self.budget.speed.tokens_per_s),
                "projectContexts": self.project.built,
            }

    def builder(self, uri: str, target: TargetVersion) -> QuotientBuilder:
        """The document's quotient builder (made, or moved to the front of those kept)."""
        key = (uri, target)
        with self._lock:
            builder = self._builders.get(key)
            if builder is None:
                builder = self._builders[key] = QuotientBuilder(target)
                while len(self._builders) > BUILDERS_KEPT:
                    self._builders.popitem(last=False)
            else:
                self._builders.move_to_end(key)
        return builder

    def prompt_options(
        self, settings: Settings, uri: str, context: RepoContext | None = None
    ) -> DecodeOptions:
        """The options that shape the prompt of a request in ``uri`` (its budget aside),
        with project ``context``."""
        return settings_options(settings, uri, context)

    def project_context(
        self,
        model: Backend,
        settings: Settings,
        uri: str,
        left: str,
        right: str,
        refresh: bool = False,
    ) -> RepoContext | None:
        """Project context for a prompt at the end of ``left`` (None where the setting or
        the model's family has none): the last chosen for the document, or with
        ``refresh`` (read-ahead) chosen again if the file or the others changed."""
        if not settings.project_context or not model.detected().get("repoFormat"):
            return None
        deadline_s = settings.deadline_ms / 1e3
        share, window = settings.project_context_share, settings.context_size
        budget = self.budget.context_budget(deadline_s, share, window)
        try:
            return self.project.for_request(uri, left, right, self.workspace_folders, budget,
                                            model.tokenize, refresh)  # fmt: skip
        except Exception:  # a broken file or folder must not cost the completion
            log.exception("choosing project context failed")
            return None

    # ---------------------------------------------------------------- answering

    def answer(
        self, request: Request, model: Backend | None, state: EngineState, message: str
    ) -> Answer:
        """The answer to ``request`` with the model (None while there is none) in
        ``state`` (whose message explains why a model is missing)."""
        if request.times.dequeued is None:
            request.times.dequeued = time.perf_counter()
        refused = self._refusal(request, model, state, message)
        if refused is not None:
            return refused
        target = request.target = target_in_force(
            request.settings.python_version, request.uri, self.workspace_folders
        )
        reused = self._typed_along(request)
        if reused is not None:
            return _answer(request, state, [reused], StopReason.REUSED, tokens=0)
        assert model is not None  # _refusal answers when there is none
        settings = request.settings
        context = self.project_context(model, settings, request.uri, request.left, request.right)
        choice = self.budget.choose(
            model,
            request.left,
            request.right,
            self.prompt_options(settings, request.uri, context),
            settings.deadline_ms / 1e3,
        )
        request.project_context = choice.context
        building = self._start_quotient(request, target.version)
        read = self._read_prompt(request, model, choice, building)
        # Asked without raising: ``result()`` would raise the future's exception through
        # this frame, whose locals hold the future: a reference cycle that outlives the
        # request until a full collection.
        if isinstance(building.exception(), BuildInterrupted):
            return _nothing(request, state, StopReason.CANCELLED)
        quotient = building.result()
        figures: dict[str, Any] = {
            "promptTokens": len(choice.prompt),
            "promptEvaluated": choice.uncached,
        }
        if choice.context is not None:
            figures["projectFiles"] = len(choice.context.files)
            figures["contextTokens"] = choice.context_tokens
        with self._lock:
            self.prompt_tokens += len(choice.prompt)
            self.prompt_evaluated += choice.uncached
        if settings.mode == "constrained" and quotient.empty:
            message = self._why_empty(request, quotient, target)
            request.times.quotient_built = time.perf_counter()  # explaining is part of it
            return _nothing(request, state, StopReason.NO_MIDDLE_FITS, message, figures)
        built = request.times.quotient_built
        if read is not None and built is not None:
            # The prompt phase is what reading took beyond the quotient's construction.
            request.times.generation(built, max(built, read), None)
        return self._generated(request, model, state, quotient, choice, figures)

    def _read_prompt(
        self, request: Request, model: Backend, choice: PromptChoice, building: Future[Quotient]
    ) -> float | None:
        """Read the chosen prompt while the quotient is built; the moment it was read, or
        None when it stopped: on a cancel or at the deadline (the generation then goes on
        from what was read, or stops), or because the quotient came out empty."""
        deadline = request.times.received + request.settings.deadline_ms / 1e3
        constrained = request.settings.mode == "constrained"

        def cancelled() -> bool:
            return request.cancel.is_set() or (constrained and _came_out_empty(building))

        stop = StopCheck(cancelled, deadline)
        started = time.perf_counter()
        try:
            model.prefill(choice.prompt, stop)
        except Interrupted:
            return None
        ended = time.perf_counter()
        self.budget.speed.note(choice.uncached, ended - started)
        return ended

    def _start_quotient(self, request: Request, target: TargetVersion) -> Future[Quotient]:
        """Build the request's quotient on the quotient thread (here without one)."""
        if self.quotients is not None:
            return self.quotients.submit(self._quotient, request, target)
        done: Future[Quotient] = Future()
        try:
            done.set_result(self._quotient(request, target))
        except BuildInterrupted as exc:
            done.set_exception(exc)
        return done

    def _why_empty(self, request: Request, quotient: Quotient, target: ProjectTarget) -> str:
        """Why no middle fits: syntax newer than the target (say where, and where the
        target came from), else which side of the cursor is at fault."""
        newer = self._newer_syntax(request.uri, request.text, target.version)
        if newer is not None:
            return (
                f"{newer.describe()}, newer than the target Python {target.version} "
                f"({target.origin}): raise requires-python or set pythonVersion"
            )
        if quotient.left_viable:
            return "no text at the cursor can connect to the code after it"
        return "the code before the cursor is not valid Python, whatever follows"

    def _newer_syntax(self, uri: str, text: str, target: TargetVersion) -> NewerSyntax | None:
        """:func:`find_newer_syntax` of the document, kept while the text up to the line
        it found (or all of it, when none) is unchanged: a user typing below that line
        does not pay for another pass per keystroke."""
        with self._lock:
            known = self._newer.get(uri)
        if known is not None and known[0] == target and text.startswith(known[1]):
            if known[2] is not None or len(text) == len(known[1]):
                return known[2]
        found = find_newer_syntax(text, target)
        head = text if found is None else text[: _line_end(text, found.offset)]
        with self._lock:
            self._newer.pop(uri, None)
            self._newer[uri] = (target, head, found)
            while len(self._newer) > BUILDERS_KEPT:
                del self._newer[next(iter(self._newer))]
        return found

    def _refusal(
        self, request: Request, model: Backend | None, state: EngineState, message: str
    ) -> Answer | None:
        """The answer when there is nothing to generate, else None."""
        settings = request.settings
        if request.cancelled:
            return _nothing(request, state, StopReason.CANCELLED)
        if not settings.enable:
            return _nothing(request, EngineState.DISABLED, StopReason.DISABLED)
        if model is None or state != EngineState.READY:
            return _nothing(request, state, StopReason.NO_MODEL, message)
        if request.length > settings.max_document_chars:
            message = (
                f"document has {request.length} characters, more than maxDocumentChars "
                f"({settings.max_document_chars})"
            )
            return _nothing(request, state, StopReason.TOO_LARGE, message)
        return None

    def _typed_along(self, request: Request) -> Suggestion | None:
        """The rest of the shown completion, if the user typed a prefix of it."""
        left, right = request.left, request.right
        shown = self._shown.get(request.uri)
        if shown is None or right != shown.right or not left.startswith(shown.left):
            return None
        typed = left[len(shown.left) :]
        if not typed or len(typed) >= len(shown.middle) or not shown.middle.startswith(typed):
            return None
        # left + rest + right == shown.left + shown.middle + right, which parsed.
        rest = shown.middle[len(typed) :]
        return Suggestion(rest, shown.single_line, True, StopReason.REUSED)

    def _quotient(self, request: Request, target: TargetVersion) -> Quotient:
        """The quotient for the request, from the document's builder (kept for the next
        keystroke); a cancel interrupts it (``BuildInterrupted``)."""
        builder = self.builder(request.uri, target)
        quotient = builder.build(
            request.left,
            request.right,
            interrupt=request.cancel.is_set,
            stay_inside=request.settings.stay_inside,
        )
        request.times.quotient_built = time.perf_counter()
        return quotient

    # ---------------------------------------------------------------- generating

    def _generated(
        self,
        request: Request,
        model: Backend,
        state: EngineState,
        quotient: Quotient,
        choice: PromptChoice,
        figures: dict[str, Any],
    ) -> Answer:
        """The request's middles (:func:`generate_middles`), within what is left of its
        deadline, from the prompt the budget chose (and read)."""
        settings = request.settings
        allowance = Allowance(
            lambda single: _options(request, single, choice.budget),
            lambda: not request.cancelled and not _late(request),
            request.cancel.is_set,
        )
        middles = generate_middles(
            model,
            quotient,
            settings.line_mode,
            allowance,
            alternatives=request.alternatives,
            prompt=(choice.prompt, choice.owed),
        )
        for run in middles.generations:
            times = run.times
            request.times.generation(times.started, times.prompt_read, times.first_token)
        result, single = middles.first, middles.single
        suggestions: list[Suggestion] = []
        for completion, lines in middles.offered:
            middle = document_line_ends(completion.middle, quotient, request.text)
            stop = completion.stop_reason
            suggestions.append(Suggestion(middle, lines, completion.complete, stop))
        if suggestions:
            with self._lock:
                first = suggestions[0]
                self._shown[request.uri] = _Shown(
                    request.left, request.right, first.middle, first.single_line
                )
        stop = StopReason.CANCELLED if request.cancelled else result.stop_reason
        figures = {**figures, **_result_figures(result, single)}
        return _answer(request, state, suggestions, stop, **figures)


def _file_name(uri: str) -> str:
    """The document's file name, for families whose prompts name the file (Mellum's
    ``<filename>``); the server knows no project root to make a relative path from."""
    return PurePosixPath(unquote(urlsplit(uri).path)).name


def settings_options(
    settings: Settings, uri: str, context: RepoContext | None = None
) -> DecodeOptions:
    """The one place settings become decoding options: those of a request in ``uri``
    (read-ahead and the prompt budget use them as they are, so that the prompt they
    read is the one the request's generation asks for)."""
    return DecodeOptions(
        mode=settings.mode,
        max_tokens=settings.max_tokens,
        top_k=settings.top_k,
        witness_ending=settings.witness_ending,
        file_path=_file_name(uri),
        known_names=settings.known_names,
        project_context=context,
    )


def _options(request: Request, single: bool, budget: int) -> DecodeOptions:
    """The decoding settings of a generation, with what is left of the deadline and a
    prompt of ``budget`` tokens of text."""
    elapsed = time.perf_counter() - request.times.received
    deadline_s = max(0.01, request.settings.deadline_ms / 1e3 - elapsed)
    return replace(
        settings_options(request.settings, request.uri, request.project_context),
        single_line=single,
        deadline_s=deadline_s,
        prompt_budget=budget,
    )


def _came_out_empty(building: Future[Quotient]) -> bool:
    """The quotient is built and no middle fits: nothing will be generated."""
    return building.done() and building.exception() is None and building.result().empty


def _late(request: Request) -> bool:
    """Too late in the deadline to start another generation."""
    elapsed_ms = (time.perf_counter() - request.times.received) * 1e3
    return elapsed_ms > request.settings.deadline_ms * _LATE_SHARE


def _result_figures(result: Completion, single: bool) -> dict[str, Any]:
    """The generation's own figures for the status (the answered one's)."""
    t = result.timings
    figures: dict[str, Any] = {
        "complete": result.complete,
        "lineMode": "single" if single else "multi",
        "tokens": result.tokens,
        "tokensPerSecond": round(t.tokens_per_s or 0.0, 1),
        "parserUsPerToken": round(t.parser_us_per_token_median or 0.0, 1),
        # the whole generation's time in the quotient (steering included), per request
        "parserMs": round((sum(result.parser_us) + sum(result.steer_us)) / 1e3, 3),
        "steeredTokens": result.steered,
        "rescuedSteps": result.rescued,
    }
    if result.forced:
        figures["forcedTokens"] = result.forced
    if result.witness:
        figures["witnessChars"] = len(result.witness)
    if result.restarted:
        figures["restarted"] = True
    if result.inside_fallback:
        figures["stayInside"] = "fallback"
        figures["message"] = (
            "no middle stays inside the bracket, string or block at the cursor: this one "
            "may leave it"
        )
    return figures


def _nothing(
    request: Request,
    state: EngineState,
    stop: StopReason,
    message: str | None = None,
    figures: dict[str, Any] | None = None,
) -> Answer:
    """No suggestion, and why."""
    extra = {**(figures or {}), **({} if message is None else {"message": message})}
    return Answer([], _status(request, state, stop, extra))


def _answer(
    request: Request,
    state: EngineState,
    suggestions: list[Suggestion],
    stop: StopReason,
    **figures: Any,
) -> Answer:
    """Suggestions (maybe none) from a generation or from typing along."""
    return Answer(
        suggestions, _status(request, state, stop, {"suggestions": len(suggestions), **figures})
    )


def _status(
    request: Request, state: EngineState, stop: StopReason, extra: dict[str, Any]
) -> dict[str, Any]:
    """The ``fimlsp/status`` of a finished request: what it found (``extra``) and the
    timing figures of :meth:`~lsp_server.status.RequestTimes.figures`."""
    request.times.done = time.perf_counter()
    status: dict[str, Any] = {"uri": request.uri, "state": state, "stopReason": stop}
    if request.target is not None:
        status.update(target_status(request.target))
    return {**status, **extra, **request.times.figures()}


def _line_end(text: str, offset: int) -> int:
    """The offset just past the line end after ``offset`` (or the text's end)."""
    match = LINE_END_RE.search(text, offset)
    return len(text) if match is None else match.end()
