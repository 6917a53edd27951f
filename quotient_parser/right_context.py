"""What is learnt about one right context, shared by every quotient that has it.

A completeness check parses R forward from the state after ``L + m``.  Charts built
while parsing R are interned by (place in R, items, origins), and at each clean line
start of R the outcome of the rest of the parse is memoised under (offset in R,
indentation stack, chart): a check parses R only until it meets a parse seen before.
``probe`` warms that memo when a quotient is built (``quotient.py`` tells the whole
design).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from lexer import LexError, LexState
from lexer.text import indentation, line_ends_and_end

from .earley import Chart
from .interrupt import BuildInterrupted, Interrupt, poll
from .recognizer import Recognizer, RecognizerState
from .suffix import right_context_can_end_module, right_line_can_be_code

__all__ = ["RightContext"]

#: Charts of the right context get positions above every left-context chart.
_RIGHT_BASE = 1 << 48
#: Room for zero-width symbols (DEDENTs) at one offset before positions overlap.
_POS_STRIDE = 128
#: Line ends of R at which construction probes with ``pass`` (see ``probe``).
_PROBE_LINES = 24
#: A right context keeps at most this many interned charts before starting afresh.
_TABLE_LIMIT = 400_000


class RightContext:
    """Everything learnt about one right context: interned charts and results."""

    __slots__ = (
        "_can_end",
        "_line_can_be_code",
        "line_ends",
        "memo",
        "probed",
        "recognizer",
        "table",
        "text",
    )

    def __init__(self, recognizer: Recognizer, text: str):
        self.recognizer = recognizer
        self.text = text
        self.line_ends = line_ends_and_end(text)
        self.table: dict[tuple[object, ...], Chart] = {}
        self.memo: dict[tuple[int, object, Chart], bool] = {}
        self.probed: set[int] = set()
        self._can_end: bool | None = None
        self._line_can_be_code: bool | None = None

    @property
    def can_end_module(self) -> bool:
        """Whether some text before R makes a valid module (see ``suffix``)."""
        if self._can_end is None:
            self._can_end = right_context_can_end_module(self.text, self.recognizer.version)
        return self._can_end

    @property
    def first_line_can_be_code(self) -> bool:
        """``suffix.right_line_can_be_code``, asked once per right context."""
        if self._line_can_be_code is None:
            self._line_can_be_code = right_line_can_be_code(self.text, self.recognizer.version)
        return self._line_can_be_code

    def accepts_after(self, lex: LexState, chart: Chart) -> bool:
        """Whether the text parsed into (lex, chart), followed by R, is a valid module."""
        return self._run(lex, chart, 0, lex.offset)

    def _run(
        self, lex: LexState, chart: Chart, r: int, base: int, interrupt: Interrupt | None = None
    ) -> bool:
        """Parse R[r:] on from (lex, chart); ``base`` is the absolute offset of R[0].
        ``interrupt``: see the module docstring (nothing is memoised then)."""
        if len(self.table) > _TABLE_LIMIT:
            self.table.clear()
            self.memo.clear()
        text = self.text
        memo = self.memo
        visited: list[tuple[int, object, Chart]] = []
        ends = self.line_ends
        k = bisect.bisect_right(ends, r)
        result = False
        current: Chart | None = chart
        lines = 1  # lines fed at once: doubled while a symbol spans them (see below)
        feeds = 0
        while True:
            if r >= len(text):
                try:
                    symbols = lex.finish()
                except LexError:
                    break
                current = self._scan(current, symbols, base)
                result = current is not None and current.accepting
                break
            k = min(k + lines, len(ends))
            end = ends[k - 1]
            feeds += 1
            poll(interrupt, feeds)
            try:
                lex, symbols = lex.feed(text[r:end])
            except LexError:
                break
            r = end
            current = self._scan(current, symbols, base)
            if current is None:
                break
            # The lexer lexes its pending text again with each feed: a string that
            # stays open over many lines of R, fed line by line, would cost the square
            # of its length.  While one is pending, feed twice as many lines each time
            # (no clean line start, where the memo is asked, can lie inside it).
            lines = lines * 2 if lex.pending and not lex.at_line_start else 1
            sync = lex.sync_key()
            if sync is not None:
                key: tuple[int, object, Chart] = (r, sync, current)
                known = memo.get(key)
                if known is not None:
                    result = known
                    break
                visited.append(key)
        for seen in visited:
            memo[seen] = result
        return result

    def _scan(
        self, chart: Chart | None, symbols: Sequence[tuple[str, str, int]], base: int
    ) -> Chart | None:
        if chart is None:
            return None
        rec = self.recognizer
        table = self.table
        for kind, text, start in symbols:
            symbol = rec.symbol_id(kind, text)
            if symbol is None:
                return None
            offset = start - base
            pos = _RIGHT_BASE + _POS_STRIDE * (offset if offset > 0 else 0)
            if pos <= chart.pos:
                pos = chart.pos + 1
            next_chart = chart.step_shared(symbol, pos, table)
            if next_chart is None:
                return None
            chart = next_chart
        return chart

    def probe(
        self, offset: int, state: RecognizerState, line: str, interrupt: Interrupt | None = None
    ) -> None:
        """Warm the memo with ``pass`` in place of the statement under the cursor.

        The statement that holds the cursor starts at the last clean line start
        of L (``offset``, where the recognizer is in ``state``; ``line`` is L's
        text from there).  For each of the first line ends of R, parse the rest
        of R after ``<indent>pass<newline>`` placed at that line end: a middle
        that completes a simple statement ending there reaches the same chart,
        so its first completeness check stops at the memo.  After the first
        probe the others meet its memo within a line or two.
        """
        if offset in self.probed:
            return
        self.probed.add(offset)
        try:
            self._probe_from(state, line, interrupt)
        except BuildInterrupted:
            self.probed.discard(offset)  # not done: the next build probes again
            raise

    def _probe_from(self, state: RecognizerState, line: str, interrupt: Interrupt | None) -> None:
        indent = indentation(line)
        probe = state.feed(indent + "pass")
        if probe.lex is None or probe.chart is None:
            return
        text = self.text
        for q in self.line_ends[:_PROBE_LINES]:
            if text.endswith("\r\n", 0, q):
                newline = "\r\n"
            elif q and text[q - 1] in "\r\n":
                newline = text[q - 1]
            else:
                break  # the last line has no line break
            try:
                lex, symbols = probe.lex.feed(newline)
            except LexError:
                return
            base = probe.lex.offset - (q - len(newline))
            chart = self._scan(probe.chart, symbols, base)
            if chart is None or lex.sync_key() is None:
                return
            self._run(lex, chart, q, base, interrupt)
