"""The settings of one completion request."""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.model.prompt import RepoContext
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
    #: Steering (``steering.py``): once the tokens left come near the distance to a
    #: finish, take only candidates that keep a finish within the budget, preferring
    #: those that bring it closer.  False: follow the model to the end of the budget.
    steer: bool = True
    #: A steered middle that ran out of budget without landing is decoded again from a
    #: step where a finish was in reach (``restart.py``).  False: one generation only.
    restart: bool = True
    #: When no candidate can still finish within the budget, end the middle with the
    #: shortest finish the quotient finds (text the model did not write).
    witness_ending: bool = False
    #: The middle may not leave the bracket, string or block open at the cursor that
    #: the right context closes (``quotient_parser/inside.py``); where no middle can,
    #: the unrestricted quotient is used instead.  Only for a quotient ``generate``
    #: builds itself: a quotient passed in carries its own.
    stay_inside: bool = True
    #: ``knownNames``: the middle may not load a bare name bound nowhere where the cursor
    #: is (``known_names.py``); off for a file that uses Python's dynamic features.
    known_names: bool = True
    #: When none of the top k candidates fits, how many more of the model's ranking are
    #: tried (most likely first).  0: none.  The count bounds the search, so the answer
    #: does not depend on the machine's speed or load; ``further_down_ms`` is only a
    #: safety cap on a pathologically slow step.
    further_down: int = 512
    further_down_ms: float = 1000.0
    #: The file's path as the prompt names it, for model families whose prompts carry
    #: it (Mellum's ``<filename>path``); empty when unknown.
    file_path: str = ""
    #: Record every complete stopping point, scored, and run to the token limit or the
    #: model's end (neither the likeliest end nor an echo of R stops it): what
    #: ``bench.stopping_rules`` replays to compare rules for where a middle ends.
    study_stops: bool = False
    #: Lines after the middle's first end it before them when the model was unsure of
    #: them: a line whose tokens' mean log-probability falls below this, where the middle
    #: is complete before it (``StopReason.UNSURE_LINE``).  None: no such stop.  Set by
    #: the extension of a single line (``extend.py``).
    line_confidence: float | None = None
    #: Other files of the project for the head of the prompt (``lsp_server.project``);
    #: used by families with a repository-level format, outside ``prompt_budget``.
    project_context: RepoContext | None = None

    @property
    def constrained(self) -> bool:
        return self.mode == "constrained"
