"""Restarts: a middle that ran out of budget is decoded again from where a finish was in reach.

Steering starts when the tokens left come near the distance to a finish, but the
distance is a lower bound, and where it is loose (a finish must build what R's later
lines need: a comprehension's ``for`` before R's ``if``, a ``try:`` before R's
``except``) and the witness search finds nothing from where the model has got to, the
budget runs out with the middle never complete.  Some steps back a finish was often in
reach: steering found one and let the model go on, or a search finds one at a line
start of the middle or at its start, before the model wandered off.

A restart replays the generation up to the latest such step (the model's cache still
holds it: :func:`.loop.resume`) and steers from there at once, following that finish
with the model's candidates (``Steering.steer_now``; the usual rules, so the middle
stays the model's).  It is returned only where it lands, and says so
(``Completion.restarted``): it is the model's text, but not the way the model liked
best.  At most ``ATTEMPTS`` restarts per request, only while the request has time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

from lsp_server.model.backend import Backend
from quotient_parser.quotient import Quotient, QuotientState

from .loop import Decoder, resume
from .options import DecodeOptions
from .result import Completion, DecodeTimes
from .stopping import StopCheck

__all__ = ["restart", "restart_points"]

#: Tokens a restart allows beyond what the finish takes in the vocabulary's own tokens
#: (the model's candidates may write it in more pieces).
SLACK_TOKENS = 1
#: Line starts of the middle, latest first, searched for a finish where steering found
#: none (the middle's start is searched after them).
LINE_STARTS = 2
#: Each search's bound in states expanded (what makes the answer the same on any machine
#: and under any load; larger than steering's, as a restart happens once), and its
#: safety cap in time, also bounded by the request's deadline.
SEARCH_NODES = 1200
SEARCH_SECONDS = 1.0
#: Restarts tried at most per request, and how many steps before the last one that
#: failed the next must begin (one just before it would likely fail the same way).
ATTEMPTS = 2
ATTEMPT_GAP = 4


def restart(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    stop: StopCheck,
) -> Completion | None:
    """A middle that lands, decoded again from a step of ``first`` (which did not) where
    a finish was in reach; None where no such step is found or no restart lands either."""
    tried: list[int] = []
    for at, finish in restart_points(backend, quotient, options, first, stop):
        if any(at > step - ATTEMPT_GAP for step in tried):
            continue  # too close to one that failed: it would likely fail the same way
        if stop():
            break
        tried.append(at)

        def steer_from_here(decoder: Decoder, finish: str = finish) -> None:
            if decoder.steering is not None:
                decoder.steering.steer_now(finish)

        again = resume(backend, quotient, options, first, at, steer_from_here, stop)
        if again.complete:
            again.restarted = True
            return again
        if len(tried) >= ATTEMPTS:
            break  # before asking for another point: it may cost a search
    return None


def restart_points(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    stop: StopCheck,
) -> Iterator[tuple[int, str]]:
    """(step, finish) to restart ``first`` at, best first: the steps whose finish
    steering found and the budget still holds after, latest first; then the middle's
    last line starts and its start, where a search finds one that the budget holds."""

    def fits(at: int, finish: str) -> bool:
        return at + len(backend.tokenize(finish)) + SLACK_TOKENS <= options.max_tokens

    found = [(at, finish) for at, finish in first.witnesses if fits(at, finish)]
    yield from sorted(found, key=lambda point: point[0], reverse=True)
    for at, state in _search_points(backend, quotient, options, first, stop):
        seconds = SEARCH_SECONDS
        if stop.deadline is not None:
            seconds = min(seconds, stop.deadline - time.perf_counter())
        if seconds <= 0 or stop():
            return
        finish = state.witness(max_nodes=SEARCH_NODES, max_seconds=seconds).text
        if finish is not None and fits(at, finish):
            yield at, finish


def _search_points(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    stop: StopCheck,
) -> Iterator[tuple[int, QuotientState]]:
    """(step, state) where a restart may search for a finish: the middle's last
    ``LINE_STARTS`` line starts, latest first, then its start (the first step where no
    healed text is owed and no character is unfinished, as steering needs)."""
    start = quotient.free_initial if first.inside_fallback else quotient.initial
    scratch = Decoder(
        backend, replace(options, steer=False), quotient, first.healed, stop, DecodeTimes(),
        start=start,
    )  # fmt: skip
    beginning: tuple[int, QuotientState] | None = None
    line_starts: list[tuple[int, QuotientState]] = []
    last = options.max_tokens - 1  # a restart there has no token to steer with
    steps = zip(first.token_ids[:last], first.token_logprobs[:last])
    for at, (token, logprob) in enumerate(steps):
        if scratch.state is not None and not (scratch.owed or scratch.held):
            if beginning is None:
                beginning = (at, scratch.state)
            elif scratch.middle.endswith(("\n", "\r")):
                line_starts.append((at, scratch.state))
        if not scratch.replay([token], [logprob]):
            break
    yield from reversed(line_starts[-LINE_STARTS:])
    if beginning is not None:
        yield beginning
