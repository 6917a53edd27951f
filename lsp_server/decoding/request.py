"""One run of the loop from a request's prompt: what every attempt of :mod:`.attempts`
that does not follow an earlier run (:func:`.loop.resume`) starts with."""

from __future__ import annotations

import time

from lsp_server.model.backend import Backend
from lsp_server.model.errors import Interrupted
from quotient_parser.quotient import Quotient

from .heuristic import HeuristicFilter
from .loop import Decoder
from .options import DecodeOptions
from .result import Completion, DecodeTimes
from .stop_reason import StopReason
from .stopping import StopCheck

__all__ = ["decode"]


def decode(
    backend: Backend,
    prompt: list[int],
    owed: str,
    opts: DecodeOptions,
    quotient: Quotient | None,
    stop: StopCheck,
    times: DecodeTimes,
    *,
    free: bool = False,
    rules: HeuristicFilter | None = None,
) -> Completion:
    """One run of the loop from the prompt (``free``: from the quotient's start without
    the ``stay_inside`` restriction; ``rules``: heuristic mode's)."""
    start = quotient.free_initial if free and quotient is not None else None
    try:
        generation = backend.start(prompt, stop if stop.bounded else None)
    except Interrupted:
        # A long prompt on a slow machine: give up for now; what was read stays with the
        # backend, so asking again at this place goes on from there.
        times.stopped = time.perf_counter()
        reason = stop.reason or StopReason.DEADLINE
        return Completion("", reason, False if opts.constrained else None, 0, times)
    if times.prompt_read is None:
        times.prompt_read = time.perf_counter()
    with generation:
        decoder = Decoder(backend, opts, quotient, owed, stop, times, start=start, rules=rules)
        return decoder.run(generation)
