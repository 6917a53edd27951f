"""Where and when a middle ends.

Generation stops when the model ends it (where the middle is complete), when it
connects, at the token or time limit, on a cancel, or when no candidate is viable.
Unless it ended by itself, the middle returned is the best *stopping point* seen: a
complete middle with text (blanks alone are no suggestion), scored by the model's
probability of that middle followed by an end token.

For a FIM model, which sees the code after the cursor and was trained to end the middle
there, the score is the plain log-probability ``log P(middle) + log P(end | middle)``:
the likeliest complete middle along the generation.  Every token only lowers
``log P(middle)``, so once it falls to the best score found no later point can win and
generation stops (``StoppingPoints.settled``, ``StopReason.LIKELIEST_END``); an Instruct
model that seldom writes its end token still stops where it would most likely have
ended.  Without FIM tokens the end token means the end of the file, not of the middle,
and the score is length-normalised as before.

A model that goes on past the end of the middle often writes the code after the cursor
again (``RightEcho``): once a whole line of the middle is the next line of code after
the cursor, the middle ends before it, at the best stopping point there
(``StopReason.REPEATS_RIGHT``); the middle just before the echo is such a point, scored
with the probability through the echo, which stands for the end (the model ended the
middle there by going on with R).  With the cursor inside a line, a line the model ends
that ends with the rest of the cursor's line (``return closest_pair`` where R goes on
with ``osest_pair``) is the same echo within one line: the middle is cut before that
text (``return cl``), a stopping point scored with the probability of the echo, which
stands for the end.  When no token boundary was complete, the text inside
the tokens is searched, longest first, within a small budget.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from lexer.text import first_line, last_line
from quotient_parser.quotient import QuotientState

from .edit_distance import nearly_equal
from .stop_reason import StopReason

__all__ = ["IN_TOKEN_STOP_CHECKS", "RightEcho", "StopCheck", "StoppingPoints"]

#: Completeness checks spent looking for a stopping point inside tokens.
IN_TOKEN_STOP_CHECKS = 128
#: R's lines of code that ``RightEcho.restates`` compares a line with, and the edits
#: per character of such a line within which a line restates it.
RESTATED_LINES = 3
RESTATED_EDITS = 0.1


class StopCheck:
    """Whether a request must stop now: cancelled, or past its deadline.

    Called (as the backend's ``interrupt`` too) it answers and remembers why in
    ``reason``.
    """

    def __init__(self, cancel: Callable[[], bool] | None, deadline: float | None) -> None:
        self.cancel = cancel
        self.deadline = deadline
        self.reason: StopReason | None = None

    @classmethod
    def from_now(cls, cancel: Callable[[], bool] | None, seconds: float | None) -> StopCheck:
        """A check whose deadline is ``seconds`` from now (None: no deadline)."""
        return cls(cancel, None if seconds is None else time.perf_counter() + seconds)

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
    tokens it holds, so that its log-probability can be told.  ``likelihood``: score
    points by their log-probability (a FIM model), else by the length-normalised one.
    """

    def __init__(self, likelihood: bool = True) -> None:
        self.likelihood = likelihood
        self.best: tuple[float, str, int] | None = None  # (score, middle, tokens)
        #: every point that was the best when found, in order (each beats the one before)
        self.bests: list[tuple[float, str, int]] = []
        #: (middle before a token, the quotient state after that middle), per token taken
        self.boundaries: list[tuple[str, QuotientState]] = []
        #: tokens taken before the first boundary recorded (a replayed prefix)
        self.offset = 0

    def score(self, logprob: float, end_logprob: float, tokens: int) -> float:
        """The score of stopping after ``tokens`` tokens of summed ``logprob``, where the
        model ends with ``end_logprob``."""
        if self.likelihood:
            return logprob + end_logprob
        return (logprob + end_logprob) / (tokens + 1)

    def could_improve(self, score: float) -> bool:
        """Whether stopping here with ``score`` would beat the best point: only then is
        the (costly) completeness check worth making."""
        return self.best is None or score > self.best[0]

    def found(self, score: float, middle: str, tokens: int) -> None:
        self.best = (score, middle, tokens)
        self.bests.append(self.best)

    def settled(self, logprob: float) -> bool:
        """No point after a middle of summed ``logprob`` can beat the best one: each
        token, and the end token, only lower it (likelihood scores only)."""
        return self.likelihood and self.best is not None and logprob <= self.best[0]

    def best_within(self, chars: int) -> tuple[float, str, int] | None:
        """The best point whose middle is at most ``chars`` characters long."""
        return next((point for point in reversed(self.bests) if len(point[1]) <= chars), None)

    def cut_at(self, middle: str, offset: int) -> tuple[int, QuotientState] | None:
        """(tokens it holds, state) of ``middle`` cut at ``offset`` characters: the
        state at the boundary before the cut, fed the text up to it (None before the
        first boundary recorded)."""
        for index in range(len(self.boundaries) - 1, -1, -1):
            before, state = self.boundaries[index]
            if len(before) <= offset:
                rest = middle[len(before) : offset]
                return self.offset + index + bool(rest), state.feed(rest) if rest else state
        return None

    def tokens_before(self, offset: int) -> int:
        """How many tokens the middle holds when it is ``offset`` characters long or
        shorter: the last token boundary at or before ``offset``."""
        count = 0
        for index, (before, _) in enumerate(self.boundaries):
            if len(before) > offset:
                break
            count = index
        return self.offset + count

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
        if not held and middle.strip() and state.lands:
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
                if candidate.strip() and at.feed(candidate[len(before) :]).lands:
                    return candidate, True, self.offset + index + (cut > len(before))
            end = min(end, len(before) - 1)
        return middle, False, tokens


class RightEcho:
    """Where a middle begins to write the code after the cursor again.

    The next line of code after the cursor (R's first non-blank line) is the line a
    model writes when it has gone past the end of the middle: a whole line of the middle
    equal to it, blanks around both aside, is an echo, and the middle ends before it.
    """

    def __init__(self, right: str, left: str = "") -> None:
        code = (line.strip() for line in right.splitlines() if line.strip())
        #: R's next lines of code, blanks around them aside (``RESTATED_LINES`` at most)
        self.lines = list(itertools.islice(code, RESTATED_LINES))
        self.line = self.lines[0] if self.lines else ""
        #: the middle's first line ends the cursor's line, whose code before the cursor
        #: makes it no line of its own (``max(values, `` + ``)``: no echo of R's ``)``)
        self.joins_left = bool(last_line(left).strip())
        #: the rest of the cursor's line, when the cursor is inside a line of code (code
        #: on both sides of it): what a line of the middle ends with when it echoes R
        rest = first_line(right).rstrip()
        self.rest = rest if self.joins_left and rest.strip() else ""

    def start(self, middle: str) -> int | None:
        """The offset where the middle's first whole line equal to R's next line of code
        begins (its indentation included), or None."""
        if not self.line:
            return None
        offset = 0
        for index, line in enumerate(middle.splitlines(keepends=True)):
            if not line.endswith(("\n", "\r")):
                break  # not whole yet
            if line.strip() == self.line and not (index == 0 and self.joins_left):
                return offset
            offset += len(line)
        return None

    def restates(self, line: str) -> bool:
        """Whether ``line`` is one of R's next lines of code, or nearly (within a tenth
        of its length in edits): a middle that goes on over lines and writes it has
        gone past its end, even where it skipped a line of R or changed a character."""
        text = line.strip()
        return any(nearly_equal(text, target, RESTATED_EDITS) for target in self.lines)

    def tail(self, middle: str) -> int | None:
        """The offset where a whole line of the middle begins to write the rest of the
        cursor's line again (the cursor inside a line), or None."""
        if not self.rest:
            return None
        offset = 0
        for line in middle.splitlines(keepends=True):
            if not line.endswith(("\n", "\r")):
                break
            body = line.rstrip()
            if body.endswith(self.rest):
                return offset + len(body) - len(self.rest)
            offset += len(line)
        return None
