"""FIM prompts cut to a token budget: whole lines, nearest the cursor first.

A file is usually longer than the model's context window, so the prompt keeps the end
of the prefix and the start of the suffix.  Cuts fall on line boundaries (the model sees
whole lines, as in training), the budget is split between the two sides
(``suffix_share``) and whatever one side does not need goes to the other.  Token counts
are estimated from the tokens of the whole text and every candidate cut is verified by
tokenizing it, so the estimate may be rough (normalising tokenizers) but the result
never exceeds the budget.

The budget is a parameter of :meth:`PromptBuilder.fit`, not a property of the model:
:meth:`PromptBuilder.window_budget` is what the context window allows, and a caller
that knows better (the time it takes to read a prompt) may pass less.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Protocol

from lexer.text import split_lines

from .errors import ModelError
from .families import FimLayout, FimTokens, assemble_prompt

__all__ = ["PromptBuilder", "Tokenizer"]


class Tokenizer(Protocol):
    """What prompt building needs from a vocabulary."""

    @property
    def token_bytes(self) -> Sequence[bytes]: ...
    def tokenize(self, text: str) -> list[int]: ...
    def tokenize_infill(self, text: str) -> list[int]: ...
    def detokenize(self, tokens: Sequence[int]) -> bytes: ...


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

    def build(self, prefix: str, suffix: str, budget: int, path: str = "") -> list[int]:
        """Token ids of the FIM prompt for text around the cursor, cut to ``budget``
        tokens of text (see :func:`~lsp_server.model.families.assemble_prompt`); ``path``
        names the file where the layout has a file header (its tokens count against the
        budget)."""
        header = self.tokenizer.tokenize(path) if path and self.layout.file_header else []
        prefix, suffix = self.fit(prefix, suffix, budget - len(header))
        return assemble_prompt(
            self.layout,
            self.tokens,
            self._tokenize_prefix(prefix),
            self._tokenize_suffix(suffix),
            header,
        )

    def fit(self, prefix: str, suffix: str, budget: int) -> tuple[str, str]:
        """Cut ``prefix``'s head and ``suffix``'s tail to ``budget`` tokens in all.

        The budget is split ``1 - suffix_share`` prefix (3/4 by default) to
        ``suffix_share`` suffix, and whatever one side does not need goes to the other. A
        model without FIM gets the whole budget for the prefix.
        """
        if not self.layout.has_fim:
            return self._keep_tail(prefix, budget), ""
        p_toks = self._tokenize_prefix(prefix)
        s_toks = self._tokenize_suffix(suffix)
        if len(p_toks) + len(s_toks) <= budget:
            return prefix, suffix
        s_budget = int(budget * self.suffix_share)
        p_budget = budget - s_budget
        if len(p_toks) < p_budget:
            s_budget += p_budget - len(p_toks)
            p_budget = len(p_toks)
        elif len(s_toks) < s_budget:
            p_budget += s_budget - len(s_toks)
            s_budget = len(s_toks)
        return (
            self._keep_tail(prefix, p_budget, p_toks),
            self._keep_head(suffix, s_budget, s_toks),
        )

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

    def _keep_tail(self, text: str, budget: int, toks: list[int] | None = None) -> str:
        """Longest tail of ``text`` starting at a line start that takes <= budget tokens."""
        if budget <= 0 or not text:
            return ""
        toks = self._tokenize_prefix(text) if toks is None else toks
        if len(toks) <= budget:
            return text
        data = text.encode("utf-8", errors="replace")
        starts = [0, *self._token_ends(toks, data)[:-1]]
        line_starts = [at for at in _line_end_bytes(text) if at < len(data)]
        for align in dict.fromkeys((self.align_lines, 1)):
            for line, at in enumerate(line_starts, start=1):
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
