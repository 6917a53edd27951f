"""Heuristic mode: what shipping completion tools do to a free generation.

The fair baseline for fimlsp is not raw sampling but the model's own output trimmed by
the string rules that Copilot, Continue, Tabby, llama.vim and llama.vscode apply.  The
rules, each as those tools describe or implement it (the idea, in our words and code):

1. **One line in the middle of a line.**  When the cursor's line has code both before and
   after the cursor, the completion ends at its first line break (Continue completes
   multi-line only where the rest of the line is empty; Copilot and llama.vim's first
   releases stop at ``"\\n"``).
2. **Indentation stop.**  A new line indented less than the cursor's line ends the
   completion before it (llama.vim and llama.vscode send the cursor line's indentation
   as llama-server's ``n_indent``, which stops there).  The cursor's line is the whole
   line it stands on: at its start, the indentation of the code after it.
3. **Repeating the code after the cursor.**  A generated line equal to the next non-blank
   line after the cursor, blanks aside or within a tenth of its length in edits, ends
   the completion before it (Continue's similar-line stop, Copilot's snipping of a
   completion whose tail matches the document's next lines, Tabby's duplicate-suffix
   filters).  The first line counts only where it starts a line of its own.
4. **Repeated lines.**  A line written three times in a row ends the completion after its
   first copy (Continue's repeating-lines stop).
5. **Closing brackets the line already has.**  Closing brackets at the end of the
   completion that the text after the cursor begins with are dropped (Tabby's bracket
   handling of auto-closed pairs).
6. **Trailing blanks.**  Trailing spaces and blank lines are trimmed (Continue, Tabby);
   where the completion is a line of its own before code on the cursor's line, its
   line break stays.

Rules 1 to 4 stop the generation as soon as they apply (``HeuristicFilter.cut``), as the
tools stop streaming; 5 and 6 tidy the result (``HeuristicFilter.tidy``).
"""

from __future__ import annotations

from lexer.text import first_line, indentation, last_line, split_lines

from .edit_distance import nearly_equal

__all__ = ["HeuristicFilter"]

#: Closing brackets that rule 5 drops.
_CLOSERS = ")]}"
#: Rule 3's tolerance: edits per character of the line after the cursor.
_SIMILAR = 0.1
#: Rule 4: copies of one line in a row that end the completion.
_REPEATS = 3


class HeuristicFilter:
    """The rules above for one cursor (``left`` and ``right`` of the document)."""

    def __init__(self, left: str, right: str) -> None:
        before, after = last_line(left), first_line(right)
        self.mid_line = bool(before.strip()) and bool(after.strip())
        self.own_line = not before.strip() and bool(after.strip())
        self.at_line_start = not before.strip()
        self.indent = len(indentation(before + after))
        self.next_code = next((line.strip() for line in _lines(right) if line.strip()), "")
        self.closers = after.lstrip(" \t")

    def cut(self, middle: str) -> int | None:
        """Where the completion ends by rules 1 to 4 (an offset into ``middle``), or None
        while none applies; only whole lines are judged."""
        lines = split_lines(middle)
        if self.mid_line and lines and lines[0].endswith(("\n", "\r")):
            return len(lines[0].rstrip("\r\n"))
        offset = 0
        repeats = 0
        for index, line in enumerate(lines):
            if not line.endswith(("\n", "\r")):
                break  # not whole yet
            text = line.rstrip("\r\n")
            if index > 0 and text.strip() and len(indentation(text)) < self.indent:
                return offset
            if (index > 0 or self.at_line_start) and self._repeats_next(text):
                return offset
            if index > 0 and text.strip() and text == lines[index - 1].rstrip("\r\n"):
                repeats += 1
                if repeats == _REPEATS - 1:
                    return offset - len(lines[index - 1])
            else:
                repeats = 0
            offset += len(line)
        return None

    def tidy(self, middle: str) -> str:
        """The final completion: its last line judged by rules 1 to 4 as a whole line (the
        generation ended there), then rules 5 and 6."""
        cut = self.cut(middle if middle.endswith(("\n", "\r")) else middle + "\n")
        if cut is not None:
            middle = middle[:cut]
        kept_break = self.own_line and middle.rstrip(" \t").endswith(("\n", "\r"))
        middle = middle.rstrip()
        if "\n" not in middle and "\r" not in middle:
            middle = self._drop_closers(middle)
        if kept_break and middle:
            middle += "\n"
        return middle

    def _repeats_next(self, line: str) -> bool:
        """Rule 3: ``line`` is the next line of code after the cursor, or nearly."""
        text, target = line.strip(), self.next_code
        if not text or not target:
            return False
        return nearly_equal(text, target, _SIMILAR)

    def _drop_closers(self, middle: str) -> str:
        """Rule 5: trailing closing brackets that the rest of the line begins with."""
        run = len(middle) - len(middle.rstrip(_CLOSERS))
        while run and not self.closers.startswith(middle[len(middle) - run :]):
            run -= 1
        return middle[: len(middle) - run] if run else middle


def _lines(text: str) -> list[str]:
    return [line.rstrip("\r\n") for line in split_lines(text)]
