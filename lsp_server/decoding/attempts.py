"""Every run that decodes a request's middle again, in the order it applies.

A generation (:func:`generate`) and a request's middles (:func:`generate_middles`, what
the language server and the usefulness benchmarks ask for) go through these, each where
the runs before it left a reason to look again, and only while there is time:

1. **First run** (:func:`.request.decode`), from the prompt, in the line mode the
   cursor asks for (:func:`.line_mode.single_line`).
2. **Inside fallback**: a constrained middle did not complete and no middle can while
   staying inside the construct at the cursor (``Quotient.inside_empty``): run again
   from the quotient's unrestricted start (``Completion.inside_fallback``).
3. **Past the echo**: the model wrote R's next line again with nothing complete before
   it: follow it to that step and take another token there
   (:func:`.alternatives.branch_within`).
4. **Restart**: a steered middle ran out of budget: decode again from a step where a
   finish was in reach (:mod:`.restart`, ``Completion.restarted``).
5. **Checked or heuristic post-processing**: checked mode's cut-back with
   ``ast.parse``, heuristic mode's tidying; it ends each generation, so the line mode
   judges what it left.
6. **Line-mode fallback** (``auto``): a single line that does not complete is
   generated again over several lines.
7. **Extension** (``auto``, a FIM model): a single line at a line's start that
   completes is decoded on over the further lines the model is sure of
   (:mod:`.extend`).
8. **Alternatives**, for an explicit constrained request: branches off the middle at
   its least sure steps and, in ``auto``, the other line mode's middle, ranked
   (:mod:`.alternatives`), so that the user has distinct complete middles to cycle.

The caller's deadline and cancel reach the attempts after the first through an
:class:`Allowance`; nothing here knows the language server's types.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lexer.version import NEWEST, TargetLike
from lsp_server.model.backend import Backend
from lsp_server.modes import LineMode
from quotient_parser.quotient import Quotient

from .alternatives import ALTERNATIVES, branch, branch_points, branch_within, ranked
from .checked import checked_prefix
from .extend import extend
from .heuristic import HeuristicFilter
from .line_mode import at_line_start, own_line, single_line
from .loop import build_prompt
from .options import DecodeOptions
from .request import decode
from .restart import restart
from .result import Completion, DecodeTimes
from .stop_reason import StopReason
from .stopping import StopCheck

__all__ = ["Allowance", "Middles", "generate", "generate_middles"]

#: The two witness searches that decide whether no middle can stay inside
#: (``Quotient.inside_empty``), made only after a middle failed: states expanded by
#: each (the bound that makes the answer the same on any machine; finishes that must
#: leave a string and begin a block, as ``')\n    if `` before R's ``LIN:``, take a
#: few thousand), and a cap in seconds (also a quarter of the request's time left).
INSIDE_NODES = 3000
INSIDE_SECONDS = 2.0


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Allowance:
    """What the caller knows of a request's time, for :func:`generate_middles`."""

    #: A generation's options, single-line or not, with what is left of the deadline
    #: when it is asked (each attempt's deadline counts from its own start).
    options: Callable[[bool], DecodeOptions]
    #: Whether another generation may still start (time left, not cancelled).
    may_retry: Callable[[], bool] = field(default=_always)
    #: Polled while a prompt is read and between tokens.
    cancel: Callable[[], bool] | None = None


@dataclass
class Middles:
    """What a request's attempts found."""

    #: The line mode's middle (after its fallback): the one the status reports.
    first: Completion
    #: Whether ``first`` is single-line.
    single: bool
    #: The middles to offer, best first, each with whether it is single-line: none where
    #: ``first`` is empty or incomplete or the request was cancelled.
    offered: list[tuple[Completion, bool]]
    #: Every whole generation made, in order (a branch is not one).
    generations: list[Completion]


def generate(
    backend: Backend,
    left: str,
    right: str,
    options: DecodeOptions | None = None,
    *,
    quotient: Quotient | None = None,
    target: TargetLike = NEWEST,
    cancel: Callable[[], bool] | None = None,
    prompt: tuple[list[int], str] | None = None,
) -> Completion:
    """Generate the middle between ``left`` and ``right``: attempts 1 to 5.

    ``quotient`` may be passed in to reuse one built earlier (the language
    server keeps a builder per document); it must be for (left, right).
    ``cancel`` is polled while the prompt is read and between tokens.  ``prompt``: the
    prompt's tokens and the text token healing took out of it, when the caller built
    them already (the planner's budget chose and read them): what ``build_prompt``
    makes for ``options``.  Under ``stay_inside`` (the quotient's, or the options' for
    a quotient built here) a middle may come from the inside fallback
    (``inside_fallback``); one that ran out of budget may be restarted (``restarted``).
    """
    opts = options or DecodeOptions()
    times = DecodeTimes()
    stop = StopCheck(cancel, None if opts.deadline_s is None else times.started + opts.deadline_s)
    if opts.constrained and quotient is None:
        quotient = Quotient(left, right, target, stay_inside=opts.stay_inside)
        times.quotient_built = time.perf_counter()
    prompt_ids, owed = build_prompt(backend, left, right, opts) if prompt is None else prompt
    rules = HeuristicFilter(left, right) if opts.mode == "heuristic" else None
    result = decode(backend, prompt_ids, owed, opts, quotient, stop, times, rules=rules)
    if quotient is not None and _inside_is_why(result, quotient, stop):
        result = decode(backend, prompt_ids, owed, opts, quotient, stop, times, free=True)
        result.inside_fallback = True
    result.healed, result.prompt = owed, prompt_ids  # before a restart, which starts from them
    if quotient is not None and _echo_only(result, stop):
        result = _past_the_echo(backend, quotient, opts, result, stop)
    if quotient is not None and _ran_out(result, opts, stop) and not _own_single(opts, quotient):
        again = restart(backend, quotient, opts, result, stop)
        if again is not None:  # the time and the parser's work of both runs count
            again.parser_us = result.parser_us + again.parser_us
            again.steer_us = result.steer_us + again.steer_us
            times.stopped = again.times.stopped
            result = again
    if opts.mode == "checked":
        result = checked_prefix(result, left, right)
    elif rules is not None:
        result.middle = rules.tidy(result.middle)
    times.finished = time.perf_counter()
    result.timings = times.timings(len(prompt_ids), result.tokens, result.parser_us)
    return result


def _inside_is_why(result: Completion, quotient: Quotient, stop: StopCheck) -> bool:
    """The middle did not complete, and no middle can while staying inside: worth a
    second run without the restriction (only when there is time for it)."""
    if result.complete is not False or not quotient.stay_inside or stop():
        return False
    seconds = INSIDE_SECONDS
    if stop.deadline is not None:
        seconds = min(seconds, (stop.deadline - time.perf_counter()) / 4)
    return seconds > 0.01 and quotient.inside_empty(max_nodes=INSIDE_NODES, max_seconds=seconds)


def _echo_only(result: Completion, stop: StopCheck) -> bool:
    """The model's middle was R's next line of code again, with nothing complete before
    it (so nothing to offer): worth a second run that takes another token there."""
    step = result.echo_step
    return (
        result.stop_reason == StopReason.REPEATS_RIGHT
        and not result.middle.strip()
        and step is not None
        and step < len(result.token_ids)
        and not stop()
    )


def _past_the_echo(
    backend: Backend, quotient: Quotient, opts: DecodeOptions, first: Completion, stop: StopCheck
) -> Completion:
    """``first`` again up to the step where its echo of R began, then the model's next
    choice there (once: a second echo is answered as the first was)."""
    assert first.echo_step is not None
    again = branch_within(backend, quotient, opts, first, first.echo_step, stop)
    again.parser_us = first.parser_us + again.parser_us
    return again if again.middle.strip() else first


def _own_single(options: DecodeOptions, quotient: Quotient) -> bool:
    """A single line of its own: generated without steering, so nothing to restart (it
    falls back to several lines instead)."""
    return options.single_line and own_line(quotient)


def _ran_out(result: Completion, options: DecodeOptions, stop: StopCheck) -> bool:
    """A steered middle that did not complete, for want of tokens or of a candidate that
    fits, with time left: worth a restart."""
    stopped_short = result.stop_reason in (StopReason.MAX_TOKENS, StopReason.NO_VIABLE_TOKEN)
    wanted = options.steer and options.restart
    return wanted and result.complete is False and stopped_short and not stop()


def _extensible(backend: Backend, quotient: Quotient, first: Completion) -> bool:
    """A complete constrained single line at a line's start from a FIM model: what
    :mod:`.extend` may continue."""
    return backend.has_fim and first.complete is True and at_line_start(quotient)


def _extend(
    backend: Backend, quotient: Quotient, first: Completion, allowance: Allowance
) -> Completion | None:
    """Attempt 7: ``first`` decoded on over the lines the model is sure of, while the
    request has time."""
    if not allowance.may_retry():
        return None
    options = allowance.options(False)
    stop = StopCheck.from_now(allowance.cancel, options.deadline_s)
    return extend(backend, quotient, options, first, stop)


def generate_middles(
    backend: Backend,
    quotient: Quotient,
    line_mode: LineMode,
    allowance: Allowance,
    *,
    alternatives: bool = False,
    prompt: tuple[list[int], str] | None = None,
) -> Middles:
    """The middles at ``quotient``'s cursor in ``line_mode``: the line mode's (multi-line
    again in ``auto`` when a single line does not complete, or extended where it does),
    and with ``alternatives`` (an explicit request) up to ``ALTERNATIVES`` to cycle
    through.  ``prompt``: as for
    :func:`generate`, for every generation."""
    generations: list[Completion] = []

    def run(options: DecodeOptions) -> Completion:
        completion = generate(
            backend,
            quotient.left,
            quotient.right,
            options,
            quotient=quotient if options.constrained else None,
            target=quotient.target,
            cancel=allowance.cancel,
            prompt=prompt,
        )
        generations.append(completion)
        return completion

    single = single_line(line_mode, quotient, backend.has_fim)
    options = allowance.options(single)
    first = run(options)
    fell_back = False
    if single and line_mode == "auto" and not first.complete and allowance.may_retry():
        first, single, fell_back = run(allowance.options(False)), False, True
    elif single and line_mode == "auto" and _extensible(backend, quotient, first):
        longer = _extend(backend, quotient, first, allowance)
        if longer is not None:
            generations.append(longer)
            first, single = longer, False
    offered: list[tuple[Completion, bool]] = []
    cancelled = allowance.cancel is not None and allowance.cancel()
    if first.middle and first.complete is not False and not cancelled:  # None: unchecked
        offered = [(first, single)]
        if alternatives and options.constrained:
            other_mode = line_mode == "auto" and not fell_back
            offered = _alternatives(backend, quotient, first, single, other_mode, allowance, run)
    return Middles(first, single, offered, generations)


def _alternatives(
    backend: Backend,
    quotient: Quotient,
    first: Completion,
    single: bool,
    other_mode: bool,
    allowance: Allowance,
    run: Callable[[DecodeOptions], Completion],
) -> list[tuple[Completion, bool]]:
    """Up to ``ALTERNATIVES`` distinct complete middles (with their line mode), best
    first: branches off ``first`` at its least sure steps and, with ``other_mode``, the
    other line mode's middle (``run``) as the second try (or once no branch point is
    left), while ``allowance`` allows."""
    found: list[tuple[Completion, bool]] = [(first, single)]
    points = branch_points(first, 2 * ALTERNATIVES)
    tried = 0
    while (points or other_mode) and allowance.may_retry():
        if len(ranked([c for c, _ in found])) >= ALTERNATIVES:
            break
        if other_mode and (tried == 1 or not points):
            other_mode = False
            found.append((run(allowance.options(not single)), not single))
        else:
            options = allowance.options(single)
            at = points.pop(0)
            found.append((branch(backend, quotient, options, first, at,
                                 cancel=allowance.cancel), single))  # fmt: skip
        tried += 1
    lines = {id(completion): mode for completion, mode in found}
    return [(c, lines[id(c)]) for c in ranked([c for c, _ in found])]
