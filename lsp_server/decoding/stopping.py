"""Where and when a middle ends.

Generation stops when the model ends it (where the middle is complete), when it
connects, at the token or time limit, on a cancel, or when no candidate is viable.
Unless it ended by itself, the middle returned is the best *stopping point* seen: the
complete middle with the highest length-normalised log-probability, the probability of
ending there included.  When no token boundary was complete, the text inside the
tokens is searched, longest first, within a small budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lsp_server.status import StopReason
from quotient_parser.quotient import QuotientState

__all__ = ["IN_TOKEN_STOP_CHECKS", "StopCheck", "StoppingPoints"]

#: Completeness checks spent looking for a stopping point inside tokens.
IN_TOKEN_STOP_CHECKS = 128


class StopCheck:
    """Whether a request must stop now: cancelled, or past its deadline.

    Called (as the backend's ``interrupt`` too) it answers and remembers why in
    ``reason``.
    """

    def __init__(self, cancel: Callable[[], bool] | None, deadline: float | None) -> None:
        self.cancel = cancel
        self.deadline = deadline
        self.reason: StopReason | None = None

    @property
    def bounded(self) -> bool:
        """Whether anything can stop the request early."""
        return self.cancel is not None or self.deadline is not None

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def __call__(self) -> bool:
        if self.cancel is not None and self.cancel():
            self.reason = StopReason.CANCELLED
        elif self.past_deadline():
            self.reason = StopReason.DEADLINE
        else:
            self.reason = None
        return self.reason is not None


class StoppingPoints:
    """The best complete stopping point so far, and the token boundaries behind it.

    A point is (middle, tokens): the middle there and how many of the generation's
    tokens it holds, so that its log-probability can be told.
    """

    def __init__(self) -> None:
        self.best: tuple[float, str, int] | None = None  # (score, middle, tokens)
        #: (middle before a token, the quotient state after that middle), per token taken
        self.boundaries: list[tuple[str, QuotientState]] = []
        #: tokens taken before the first boundary recorded (a replayed prefix)
        self.offset = 0

    def could_improve(self, score: float) -> bool:
        """Whether stopping here with ``score`` would beat the best point: only then is
        the (costly) completeness check worth making."""
        return self.best is None or score > self.best[0]

    def found(self, score: float, middle: str, tokens: int) -> None:
        self.best = (score, middle, tokens)

    def passed(self, middle: str, state: QuotientState) -> None:
        """A token is taken after ``middle``, whose state is ``state``."""
        self.boundaries.append((middle, state))

    def fallback(
        self, middle: str, held: bytes, state: QuotientState, tokens: int, stop: StopCheck
    ) -> tuple[str, bool, int]:
        """(middle, complete, tokens it holds) to return when generation did not end by
        itself; ``tokens`` are those of ``middle``."""
        if self.best is not None:
            return self.best[1], True, self.best[2]
        if not held and state.lands:
            return middle, True, tokens
        # No token boundary was a valid end: look inside the tokens, longest first,
        # each cut once, from the state at the start of the token it falls in.
        # Bounded, and by the deadline: this runs after generation has stopped.
        budget = IN_TOKEN_STOP_CHECKS
        end = len(middle)
        for index in range(len(self.boundaries) - 1, -1, -1):
            before, at = self.boundaries[index]
            for cut in range(end, len(before) - 1, -1):
                budget -= 1
                if budget < 0 or stop.past_deadline():
                    return middle, False, tokens
                candidate = middle[:cut]
                if at.feed(candidate[len(before) :]).lands:
                    return candidate, True, self.offset + index + (cut > len(before))
            end = min(end, len(before) - 1)
        return middle, False, tokens
