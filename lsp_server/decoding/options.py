"""The settings of one completion request."""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.modes import Mode

__all__ = ["DecodeOptions"]


@dataclass(frozen=True)
class DecodeOptions:
    """Settings of one completion request."""

    mode: Mode = "constrained"
    max_tokens: int = 128
    top_k: int = 50
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    single_line: bool = False
    deadline_s: float | None = None
    token_healing: bool = True
    #: Tokens of text around the cursor the prompt may hold (whole lines, nearest first);
    #: None: what the context window holds.  The planner sizes it to the machine.
    prompt_budget: int | None = None
    #: Stop at the first line end where the middle is complete.  None: only for
    #: models without FIM tokens, which never see the right context and so
    #: would go on to write what already follows the cursor.
    stop_when_connected: bool | None = None
    #: Closing: once this share of ``max_tokens`` is spent and the middle has never
    #: been complete, each step prefers, among the first ``closing_candidates`` viable
    #: candidates in the model's order, one after which the middle is complete, and
    #: stops there.  0 disables it.
    closing_share: float = 0.5
    closing_candidates: int = 8
    #: The file's path as the prompt names it, for model families whose prompts carry
    #: it (Mellum's ``<filename>path``); empty when unknown.
    file_path: str = ""

    @property
    def constrained(self) -> bool:
        return self.mode == "constrained"
