"""Alternatives worth cycling: distinct complete middles that branch off the best one.

An explicitly invoked request gets up to ``ALTERNATIVES`` middles.  They come from a
small constrained beam that costs little more than the first generation: each
alternative follows the first middle up to one step and takes another token there
(the step where the model was least sure, smallest lead of its choice over the best
other candidate, first), then decodes on with the same checks and steering.  The
model's cache still holds the first generation, so the shared steps are not decoded
again.  Middles are ranked by length-normalised log-probability, the same for all of
them, and only complete, distinct ones are kept (PICARD's constrained beam, with
branches instead of a beam held in memory).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from lsp_server.model.backend import Backend
from quotient_parser.quotient import Quotient

from .loop import Decoder, resume
from .options import DecodeOptions
from .result import Completion
from .stopping import StopCheck

__all__ = ["ALTERNATIVES", "branch", "branch_points", "branch_within", "ranked"]

#: Middles offered to an explicit request at most.
ALTERNATIVES = 3


def branch_points(first: Completion, limit: int) -> list[int]:
    """Steps of ``first`` to branch at, least sure first: within the middle it returned,
    where another candidate was in sight (a finite lead)."""
    steps = range(min(len(first.gaps), max(1, first.scored_tokens)))
    usable = [step for step in steps if math.isfinite(first.gaps[step])]
    return sorted(usable, key=lambda step: (first.gaps[step], step))[:limit]


def branch(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    at: int,
    *,
    cancel: Callable[[], bool] | None = None,
) -> Completion:
    """The middle that follows ``first`` for ``at`` steps and then takes another token
    (``options.deadline_s`` counts from now)."""
    stop = StopCheck.from_now(cancel, options.deadline_s)
    return branch_within(backend, quotient, options, first, at, stop)


def branch_within(
    backend: Backend,
    quotient: Quotient,
    options: DecodeOptions,
    first: Completion,
    at: int,
    stop: StopCheck,
) -> Completion:
    """:func:`branch` under a request's own ``stop`` (its cancel and deadline)."""

    def ban_first_choice(decoder: Decoder) -> None:
        decoder.banned[at] = frozenset(first.token_ids[at : at + 1])

    return resume(backend, quotient, options, first, at, ban_first_choice, stop)


def ranked(completions: Sequence[Completion], limit: int = ALTERNATIVES) -> list[Completion]:
    """The complete, distinct middles (trailing blanks aside) of ``completions``, best
    length-normalised log-probability first, at most ``limit``."""
    seen: set[str] = set()
    kept: list[Completion] = []
    for completion in sorted(completions, key=_score, reverse=True):
        key = completion.middle.rstrip()
        if completion.complete and completion.middle and key not in seen:
            seen.add(key)
            kept.append(completion)
    return kept[:limit]


def _score(completion: Completion) -> float:
    mean = completion.mean_logprob
    return -math.inf if mean is None else mean
