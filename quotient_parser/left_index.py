"""The recognizer states at every line start of a left context, kept for the next one.

An editor asks again after every keystroke: the new left context usually shares all
but its last lines with the previous one, so its parse restarts from the last line
start before they differ.
"""

from __future__ import annotations

import bisect

from lexer.text import line_ends_and_end

from .interrupt import BuildInterrupted, Interrupt, poll
from .recognizer import Recognizer, RecognizerState

__all__ = ["LeftIndex"]


class LeftIndex:
    """Recognizer states at every line start of a left context, for reuse."""

    __slots__ = ("offsets", "states", "text")

    def __init__(self, text: str, offsets: list[int], states: list[RecognizerState]):
        self.text = text
        self.offsets = offsets
        self.states = states

    @classmethod
    def build(
        cls,
        recognizer: Recognizer,
        text: str,
        previous: LeftIndex | None,
        interrupt: Interrupt | None = None,
    ) -> tuple[LeftIndex, RecognizerState]:
        """The index of ``text`` (from ``previous``'s shared lines on) and the state after
        it.  Interrupted, it raises :class:`BuildInterrupted` carrying the partial index
        (``args[0]``), whose stored line starts are all correct."""
        offsets = [0]
        states = [recognizer.initial()]
        if previous is not None:
            keep = previous.shared_lines(text)
            offsets = previous.offsets[:keep]
            states = previous.states[:keep]
        state = states[-1]
        base = start = offsets[-1]
        for line, relative_end in enumerate(line_ends_and_end(text[base:]), start=1):
            try:
                poll(interrupt, line)
            except BuildInterrupted:
                raise BuildInterrupted(cls(text, offsets, states)) from None
            end = base + relative_end
            if end == start:
                continue
            state = state.feed(text[start:end])
            start = end
            if end < len(text) and state.chart is not None:
                offsets.append(end)
                states.append(state)
        return cls(text, offsets, states), state

    def shared_lines(self, text: str) -> int:
        """How many stored line starts lie in the prefix ``text`` shares with ours."""
        offsets = self.offsets
        lo, hi = 1, len(offsets)
        # largest k such that text[:offsets[k-1]] == self.text[:offsets[k-1]]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            cut = offsets[mid - 1]
            if text[:cut] == self.text[:cut]:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def clean_line_start(self, limit: int) -> tuple[int, RecognizerState] | None:
        """The last stored state at a clean line start at or before ``limit``."""
        k = bisect.bisect_right(self.offsets, limit) - 1
        while k >= 0:
            state = self.states[k]
            if state.lex is not None and state.lex.sync_key() is not None:
                return self.offsets[k], state
            k -= 1
        return None
