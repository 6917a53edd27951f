"""FIM prompts cut to a token budget: whole lines, nearest the cursor first.

A file is usually longer than the model's context window, so the prompt keeps the end
of the prefix and the start of the suffix.  Cuts fall on line boundaries (the model sees
whole lines, as in training), the budget is split between the two sides
(``suffix_share``) and whatever one side does not need goes to the other.  Only the text
near the cursor is tokenized; token counts are estimated from its tokens and every
candidate cut is verified by tokenizing it, so the estimate may be rough (normalising
tokenizers) but the result never exceeds the budget, except that the cursor's own line
is never cut while the context window (``limit``) holds it.

The budget is a parameter of :meth:`PromptBuilder.fit`, not a property of the model:
:meth:`PromptBuilder.window_budget` is what the context window allows, and a caller
that knows better (the time it takes to read a prompt) may pass less.

Project context (:class:`RepoContext`, chosen by :mod:`lsp_server.project`) comes on
top of the budget, at the head of the prompt in the family's repository format
(:func:`~lsp_server.model.families.repo_header`); a family without one ignores it.  Its
tokens are kept for the next prompt with the same context, so a keystroke tokenizes
only the text around the cursor.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from lexer.text import (
    LINE_END_RE,
    count_line_ends,
    first_line,
    last_line,
    last_line_start,
    split_lines,
)

from .errors import ModelError
from .families import FimLayout, FimTokens, assemble_prompt, repo_header

__all__ = ["MIN_FILE_WINDOW", "PromptBuilder", "RepoContext", "Tokenizer"]

#: Project context is left out when, with it, the window would hold fewer tokens of the
#: file's own text than this.
MIN_FILE_WINDOW = 256

#: Characters per token assumed when taking the text near the cursor to tokenize: code
#: averages 3 to 4, so the first piece taken usually holds the budget; one that does not
#: is taken four times longer until it does or is the whole side.
_CHARS_PER_TOKEN_GUESS = 6


class Tokenizer(Protocol):
    """What prompt building needs from a vocabulary."""

    @property
    def token_bytes(self) -> Sequence[bytes]: ...
    def tokenize(self, text: str) -> list[int]: ...
    def tokenize_infill(self, text: str) -> list[int]: ...
    def detokenize(self, tokens: Sequence[int]) -> bytes: ...


@dataclass(frozen=True)
class RepoContext:
    """Other files of the project for the head of a prompt: the repository's name, each
    file's path and the text taken from it, and the current file's path (all as the
    prompt spells them)."""

    name: str
    files: tuple[tuple[str, str], ...]
    current_path: str


class PromptBuilder:
    """FIM prompts for one model: its layout, its tokenizer and its context window.

    With ``align_lines`` > 1 the prefix is cut only at line numbers (counted from the
    start of the prefix) that are multiples of it, so the cut, and with it the KV cache,
    stays put while the user types: otherwise each line the window slides by forces a
    full re-evaluation.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        layout: FimLayout,
        tokens: FimTokens,
        n_ctx: int,
        *,
        suffix_share: float = 0.25,
        align_lines: int = 1,
    ) -> None:
        if not 0.0 <= suffix_share <= 1.0:
            raise ValueError("suffix_share must be between 0 and 1")
        self.tokenizer = tokenizer
        self.layout = layout
        self.tokens = tokens
        self.n_ctx = n_ctx
        self.suffix_share = suffix_share
        self.align_lines = max(1, align_lines)
        #: The last project context and its tokens (a keystroke reuses them).
        self._context: tuple[RepoContext, list[int]] | None = None

    # ------------------------------------------------------------ budget

    def window_budget(self, max_new_tokens: int = 128, margin: int = 8) -> int:
        """Tokens of prefix plus suffix the context window holds, leaving room to generate;
        ``ModelError`` when it holds none."""
        overhead = len(assemble_prompt(self.layout, self.tokens, [], []))
        budget = self.n_ctx - max_new_tokens - margin - overhead
        if budget <= 0:
            raise ModelError(
                f"context of {self.n_ctx} tokens leaves no room for a prompt with "
                f"max_new_tokens={max_new_tokens}"
            )
        return budget

    # ------------------------------------------------------------ prompts

    def for_request(
        self,
        prefix: str,
        suffix: str,
        max_new_tokens: int = 128,
        path: str = "",
        budget: int | None = None,
        margin: int = 8,
        *,
        context: RepoContext | None = None,
    ) -> list[int]:
        """What a backend's ``build_fim_prompt`` returns: the prompt cut to ``budget``
        tokens of text, within the window that leaves room for ``max_new_tokens``, after
        ``context``'s tokens where the family has a repository format and the window
        still holds :data:`MIN_FILE_WINDOW` tokens of text beside them."""
        window = self.window_budget(max_new_tokens, margin)
        head = self.context_tokens(context)
        if window - len(head) < min(MIN_FILE_WINDOW, window):
            head = []
        window -= len(head)
        wanted = window if budget is None else max(1, min(budget, window))
        return self.build(prefix, suffix, wanted, limit=window, path=path, head=head)

    def context_tokens(self, context: RepoContext | None) -> list[int]:
        """The repository header for ``context`` (empty without one, or for a family
        without a repository format), tokenized once per context."""
        if context is None or not self.layout.repo:
            return []
        known = self._context
        if known is not None and (known[0] is context or known[0] == context):
            return known[1]
        tokens = repo_header(self.layout, self.tokens, self._tokenize_prefix, context.name,
                             context.files, context.current_path)  # fmt: skip
        self._context = (context, tokens)
        return tokens

    def build(
        self,
        prefix: str,
        suffix: str,
        budget: int,
        limit: int | None = None,
        path: str = "",
        head: Sequence[int] = (),
    ) -> list[int]:
        """Token ids of the FIM prompt for text around the cursor, cut to ``budget``
        tokens of text (see :func:`~lsp_server.model.families.assemble_prompt` and
        :meth:`fit`); ``path`` names the file where the layout has a file header (its
        tokens count against the budget and the limit); ``head``: a repository header's
        tokens, outside the budget."""
        header = self.tokenizer.tokenize(path) if path and self.layout.file_header else []
        limit = budget if limit is None else limit
        prefix, suffix = self.fit(
            prefix, suffix, max(1, budget - len(header)), max(1, limit - len(header))
        )
        return assemble_prompt(
            self.layout,
            self.tokens,
            self._tokenize_prefix(prefix),
            self._tokenize_suffix(suffix),
            header,
            head,
        )

    def fit(
        self, prefix: str, suffix: str, budget: int, limit: int | None = None
    ) -> tuple[str, str]:
        """Cut ``prefix``'s head and ``suffix``'s tail to ``budget`` tokens in all.

        Whole lines are kept, nearest the cursor first on both sides.  The budget is split
        ``1 - suffix_share`` prefix (3/4 by default) to ``suffix_share`` suffix, and
        whatever one side does not need goes to the other. A model without FIM gets the
        whole budget for the prefix.  The cursor's own line (its part before the cursor,
        and after it) is kept whole even beyond ``budget``, up to ``limit`` (the context
        window; by default ``budget``): only a line longer than that is cut.

        Only the text near the cursor is tokenized (:meth:`_tail_piece`), so a long file
        costs no more than a short one.
        """
        limit = budget if limit is None else limit
        line_tokens = self._cursor_line_tokens(prefix, suffix)
        budget = max(budget, min(limit, sum(line_tokens)))
        if not self.layout.has_fim:
            piece, toks, lines_before = self._tail_piece(prefix, budget)
            return self._keep_tail(piece, budget, toks, lines_before), ""
        p_piece, p_toks, lines_before = self._tail_piece(prefix, budget)
        s_piece, s_toks = self._head_piece(suffix, budget)
        if len(p_toks) + len(s_toks) <= budget:  # then both pieces are whole
            return prefix, suffix
        s_budget = int(budget * self.suffix_share)
        p_budget = budget - s_budget
        if len(p_toks) < p_budget:
            s_budget += p_budget - len(p_toks)
            p_budget = len(p_toks)
        elif len(s_toks) < s_budget:
            p_budget += s_budget - len(s_toks)
            s_budget = len(s_toks)
        # Each side's line at the cursor whole, before lines farther away on the other.
        want_p, want_s = min(line_tokens[0], len(p_toks)), min(line_tokens[1], len(s_toks))
        if s_budget < want_s <= budget - want_p:
            p_budget, s_budget = budget - want_s, want_s
        elif p_budget < want_p <= budget - want_s:
            p_budget, s_budget = want_p, budget - want_p
        return (
            self._keep_tail(p_piece, p_budget, p_toks, lines_before),
            self._keep_head(s_piece, s_budget, s_toks),
        )

    # ------------------------------------------------------------ the text near the cursor

    def _cursor_line_tokens(self, prefix: str, suffix: str) -> tuple[int, int]:
        """Tokens of the cursor's line before the cursor, and after it (FIM only)."""
        before = len(self._tokenize_prefix(last_line(prefix)))
        after = len(self._tokenize_suffix(first_line(suffix))) if self.layout.has_fim else 0
        return before, after

    def _tail_piece(self, text: str, budget: int) -> tuple[str, list[int], int]:
        """(piece, its tokens, line ends before it): the shortest tail of ``text`` that
        starts at a line start and takes more than ``budget`` tokens, or all of it.

        Every cut within ``budget`` tokens lies inside the piece (a candidate tail is
        tokenized on its own), so cutting the piece is cutting the text.
        """
        chars = max(1, budget) * _CHARS_PER_TOKEN_GUESS
        while True:
            cut = last_line_start(text[: len(text) - chars]) if chars < len(text) else 0
            piece = text[cut:]
            toks = self._tokenize_prefix(piece)
            if cut == 0 or len(toks) > budget:
                return piece, toks, count_line_ends(text[:cut])
            chars *= 4

    def _head_piece(self, text: str, budget: int) -> tuple[str, list[int]]:
        """(piece, its tokens): the shortest head of ``text`` that ends at a line end and
        takes more than ``budget`` tokens, or all of it."""
        chars = max(1, budget) * _CHARS_PER_TOKEN_GUESS
        while True:
            end = len(text)
            if chars < len(text):
                line_end = LINE_END_RE.search(text, chars)
                end = line_end.end() if line_end is not None else len(text)
            piece = text[:end]
            toks = self._tokenize_suffix(piece)
            if end == len(text) or len(toks) > budget:
                return piece, toks
            chars *= 4

    # ------------------------------------------------------------ cutting

    def _tokenize_prefix(self, text: str) -> list[int]:
        return self.tokenizer.tokenize(text) if text else []

    def _tokenize_suffix(self, text: str) -> list[int]:
        if not text:
            return []
        if self.layout.suffix_no_space:
            return self.tokenizer.tokenize_infill(text)
        return self.tokenizer.tokenize(text)

    def _token_ends(self, toks: list[int], data: bytes) -> list[int]:
        """Byte offset in ``data`` where each token ends.

        Exact when the token bytes spell ``data``; a SentencePiece dummy space is discounted;
        otherwise (normalising tokenizers) an estimate that the callers verify.
        """
        table = self.tokenizer.token_bytes
        ends: list[int] = []
        pos = len(data) - len(self.tokenizer.detokenize(toks))  # -1 with a dummy leading space
        for t in toks:
            pos += len(table[t])
            ends.append(min(max(pos, 0), len(data)))
        return ends

    def _keep_tail(
        self, text: str, budget: int, toks: list[int] | None = None, lines_before: int = 0
    ) -> str:
        """Longest tail of ``text`` starting at a line start that takes <= budget tokens;
        ``lines_before``: line ends before ``text`` in the prefix (for ``align_lines``)."""
        if budget <= 0 or not text:
            return ""
        toks = self._tokenize_prefix(text) if toks is None else toks
        if len(toks) <= budget:
            return text
        data = text.encode("utf-8", errors="replace")
        starts = [0, *self._token_ends(toks, data)[:-1]]
        line_starts = [at for at in _line_end_bytes(text) if at < len(data)]
        for align in dict.fromkeys((self.align_lines, 1)):
            for line, at in enumerate(line_starts, start=1 + lines_before):
                if line % align or len(toks) - bisect_left(starts, at) > budget:
                    continue  # not aligned, or estimated too long: try the next line start
                candidate = data[at:].decode("utf-8", errors="replace")
                if len(self._tokenize_prefix(candidate)) <= budget:
                    return candidate
        # the cursor's own line is too long: keep its last tokens
        for keep in range(budget, 0, -1):
            candidate = data[starts[-keep] :].decode("utf-8", errors="ignore")
            if len(self._tokenize_prefix(candidate)) <= budget:
                return candidate
        return ""

    def _keep_head(self, text: str, budget: int, toks: list[int] | None = None) -> str:
        """Longest head of ``text`` ending at a line end that takes <= budget tokens."""
        if budget <= 0 or not text:
            return ""
        toks = self._tokenize_suffix(text) if toks is None else toks
        if len(toks) <= budget:
            return text
        data = text.encode("utf-8", errors="replace")
        ends = self._token_ends(toks, data)
        for at in reversed(_line_end_bytes(text)):
            if bisect_right(ends, at) > budget:
                continue  # estimate says too long: try the previous line end
            candidate = data[:at].decode("utf-8", errors="replace")
            if len(self._tokenize_suffix(candidate)) <= budget:
                return candidate
        for keep in range(budget, 0, -1):
            candidate = data[: ends[keep - 1]].decode("utf-8", errors="ignore")
            if len(self._tokenize_suffix(candidate)) <= budget:
                return candidate
        return ""


def _line_end_bytes(text: str) -> list[int]:
    """UTF-8 offsets just after each line end of ``text`` (``lexer.text``'s line ends)."""
    ends: list[int] = []
    at = 0
    for line in split_lines(text):
        at += len(line.encode("utf-8", errors="replace"))
        if line.endswith(("\n", "\r")):
            ends.append(at)
    return ends
