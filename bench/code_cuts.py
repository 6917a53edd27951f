"""Cuts of real code as a user meets them: the rest of a line, or a block's body.

``bench.quotient_check``'s cuts run between arbitrary symbol boundaries, often over many
lines: right for validity, not for how a completion is judged.  These are the places
completions are asked for and the text a user would want there:

``mid-word``     the cursor inside a name (at least two characters on either side are
                 not required: any split of a name of three or more); the truth is the
                 rest of the line;
``after-token``  the cursor right after a token that more code follows on its line; the
                 truth is the rest of the line;
``block``        the cursor at the end of a block header (``def f(x):``, ``if y:`` ...);
                 the truth is the block's body, one to ``BLOCK_LINES`` lines.

Files are picked uniformly from the corpus (a file the oracle rejects is passed over),
then a place in the file; the same seed gives the same cuts.
"""

from __future__ import annotations

import itertools
import keyword
import random
from collections.abc import Sequence
from typing import Literal

from bench.quotient_check import Corpus, Cut, Source, depth_tokens, draw_cuts
from lexer.text import indentation

__all__ = ["CODE_CUT_KINDS", "make_code_cuts"]

CodeCutKind = Literal["mid-word", "after-token", "block"]
CODE_CUT_KINDS: tuple[CodeCutKind, ...] = ("mid-word", "after-token", "block")
#: The longest rest of a line a line cut keeps (characters).
LINE_REST = 120
#: A block cut's body: at most this many lines and characters.
BLOCK_LINES = 6
BLOCK_CHARS = 400
#: Places tried in one file before another file is picked.
_TRIES = 20


def make_code_cuts(corpus: Corpus, kind: CodeCutKind, n: int, seed: int) -> list[Cut]:
    """``n`` cuts of ``kind``, each from a file picked uniformly."""
    rng = random.Random(f"{seed}:{kind}")
    if kind == "block":
        return draw_cuts(corpus, n, rng, block_cut)
    return draw_cuts(corpus, n, rng, lambda source, rng: line_cut(source, kind, rng))


def line_cut(source: Source, kind: CodeCutKind, rng: random.Random) -> Cut | None:
    """A cursor inside a name, or after a token, with code after it on its line."""
    text = source.text
    tokens = depth_tokens(text)
    for _ in range(_TRIES):
        if len(tokens) < 2:
            return None
        i = rng.randrange(len(tokens) - 1)
        token, after = tokens[i], tokens[i + 1]
        end = token.start + len(token.text)
        line_end = _line_end(text, token.start)
        if after.start >= line_end or "\n" in token.text or after.text.startswith("#"):
            continue  # the token ends its line (or only a comment follows)
        if kind == "mid-word":
            if len(token.text) < 3 or not token.text.isidentifier():
                continue
            if keyword.iskeyword(token.text):
                continue
            cursor = token.start + rng.randint(1, len(token.text) - 1)
        else:
            cursor = end
        rest = text[cursor:line_end]
        if not rest.strip() or len(rest) > LINE_REST:
            continue
        return Cut(kind, source.name, cursor, line_end, rest)
    return None


def block_cut(source: Source, rng: random.Random) -> Cut | None:
    """The cursor after a block header's colon; the truth is the body below it."""
    text = source.text
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    code = [t for t in depth_tokens(text) if t.text.strip() and not t.text.startswith("#")]
    headers = [  # a colon that ends its line and is followed by an indented block
        t
        for t, after in itertools.pairwise(code)
        if t.text == ":"
        and after.depth == t.depth + 1
        and not text[t.start + 1 : _line_end(text, t.start)].strip()
    ]
    for _ in range(_TRIES):
        if not headers:
            return None
        colon = rng.choice(headers)
        row = _row(starts, colon.start)
        header_indent = len(indentation(lines[row]))
        body = _body_rows(lines, row, header_indent)
        if not body or len(body) > BLOCK_LINES:
            continue
        cursor = colon.start + 1
        end = starts[body[-1]] + len(lines[body[-1]].rstrip("\r\n"))
        truth = text[cursor:end]
        if len(truth) > BLOCK_CHARS:
            continue
        return Cut("block", source.name, cursor, end, truth)
    return None


def _body_rows(lines: Sequence[str], header: int, header_indent: int) -> list[int]:
    """The rows of the block under the header at ``header`` (blank lines inside it
    included, trailing ones not); empty when the next code is not indented deeper."""
    rows: list[int] = []
    for row in range(header + 1, len(lines)):
        line = lines[row]
        if not line.strip():
            rows.append(row)
            continue
        if len(indentation(line)) <= header_indent:
            break
        rows.append(row)
    while rows and not lines[rows[-1]].strip():
        rows.pop()
    return rows


def _row(starts: Sequence[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi - 1:
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid
    return lo


def _line_end(text: str, offset: int) -> int:
    """The offset of the line end after ``offset`` (or the text's end)."""
    end = text.find("\n", offset)
    return len(text) if end < 0 else (end - 1 if end and text[end - 1] == "\r" else end)
