"""How much context a request's prompt may hold on the machine the server runs on.

Reading a prompt costs time in proportion to the tokens the backend has not read yet:
about 240 tokens a second for the embedded default on one core of the development
machine, tens of thousands on a GPU.  A request that spends its deadline reading
returns nothing, which is what a user sees first on a laptop.  So the prompt is sized
by time, from the measured reading speed (:class:`ReadSpeed`) and the deadline:

* the **cold allowance**: the tokens a request may read, :data:`COLD_SHARE` of the
  deadline's worth, so that a request in a file nobody read yet still has time to
  generate;
* the **machine window**: the most context worth having, :data:`WARM_SHARE` of the
  deadline's worth (never more than the context window): read-ahead reads it while the
  model has nothing else to do;
* a request's budget: the largest up to the machine window whose prompt costs at most
  the cold allowance to read (:meth:`PromptBudget.choose`).  With a cold cache that is
  the cold allowance; as read-ahead warms the cache it grows back to the machine
  window, and a prompt's head stays where the cache has it while the user types.

A backend that cannot say what it has cached (no :class:`~lsp_server.model.backend.
PromptCache`) gets the cold allowance every time.

Project context (``DecodeOptions.project_context``) heads the prompt on top of the
file's text: its size is a share of the machine window (:meth:`PromptBudget.
context_budget`, rounded down to a power of two so that the drift of the measured speed
does not change it, and with it the whole cached prompt), and the file's text gets the
rest of the window.  A request takes it only when it costs nothing the prompt without
it would not: cold, the context is not read (read-ahead reads it while the user
pauses), and once cached it rides along at no cost.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .decoding import DecodeOptions, build_prompt
from .model.backend import Backend, PromptCache
from .model.prompt import RepoContext

__all__ = [
    "COLD_SHARE",
    "INITIAL_SPEED",
    "MIN_BUDGET",
    "MIN_CONTEXT",
    "WARM_SHARE",
    "PromptBudget",
    "PromptChoice",
    "ReadSpeed",
]

#: Share of the deadline a request may spend reading what the cache lacks.
COLD_SHARE = 0.15
#: Share of the deadline's worth of reading the largest prompt is sized to.
WARM_SHARE = 1.0
#: No prompt is cut below this many tokens of text, however slow the machine.
MIN_BUDGET = 24
#: Tokens per second assumed before anything was measured.
INITIAL_SPEED = 100.0
#: Reads shorter than this are not timed (fixed costs would dominate).
MIN_SAMPLE_TOKENS = 16
#: Weight of a new measurement in the running mean.
SPEED_WEIGHT = 0.3
#: The budget search stops when its bounds are this close (relative).
_SEARCH_PRECISION = 0.1
#: Project context smaller than this is not worth its separators.
MIN_CONTEXT = 64


class ReadSpeed:
    """Prompt tokens read per second: a running mean of measured reads."""

    def __init__(self, initial: float | None = None) -> None:
        """``initial``: a measurement (the engine's at load), or None for a guess."""
        self.tokens_per_s = INITIAL_SPEED if initial is None else initial
        self.samples = 0 if initial is None else 1

    def note(self, tokens: int, seconds: float) -> None:
        """One read of ``tokens`` tokens took ``seconds``."""
        if tokens < MIN_SAMPLE_TOKENS or seconds <= 0:
            return
        measured = tokens / seconds
        weight = 1.0 if self.samples == 0 else SPEED_WEIGHT
        self.tokens_per_s += weight * (measured - self.tokens_per_s)
        self.samples += 1


@dataclass(frozen=True)
class PromptChoice:
    """The prompt a request reads: its budget (tokens of text), its tokens, how many of
    them are not cached, the text token healing took out of it, and the project context
    it carries (None: none)."""

    budget: int
    prompt: list[int]
    uncached: int
    owed: str
    context: RepoContext | None = None
    #: Tokens of the prompt's head that are the project context.
    context_tokens: int = 0


class PromptBudget:
    """Sizes prompts to the machine; see the module docstring."""

    def __init__(
        self,
        speed: ReadSpeed | None = None,
        cold_share: float = COLD_SHARE,
        warm_share: float = WARM_SHARE,
        min_budget: int = MIN_BUDGET,
    ) -> None:
        self.speed = speed or ReadSpeed()
        self.cold_share = cold_share
        self.warm_share = warm_share
        self.min_budget = min_budget

    def cold_allowance(self, deadline_s: float) -> int:
        """Tokens a request may read within its deadline."""
        return max(self.min_budget, int(self.speed.tokens_per_s * self.cold_share * deadline_s))

    def machine_window(self, deadline_s: float) -> int:
        """The most context worth reading ahead (the backend caps it at its window)."""
        wanted = int(self.speed.tokens_per_s * self.warm_share * deadline_s)
        return max(self.cold_allowance(deadline_s), wanted)

    def context_budget(self, deadline_s: float, share: float, window: int) -> int:
        """Tokens of project context: ``share`` of the machine window (at most of the
        context ``window``), rounded down to a power of two; 0 below :data:`MIN_CONTEXT`."""
        wanted = int(share * min(self.machine_window(deadline_s), window))
        if wanted < MIN_CONTEXT:
            return 0
        return 1 << (wanted.bit_length() - 1)

    def choose(
        self,
        backend: Backend,
        left: str,
        right: str,
        options: DecodeOptions,
        deadline_s: float,
        allowance: int | None = None,
    ) -> PromptChoice:
        """The largest budget up to the machine window whose prompt costs at most
        ``allowance`` tokens to read (the cold allowance by default), with the options'
        project context where it costs no more than the prompt without it, or fits the
        allowance (see the module docstring).

        A prompt's cost falls as its budget shrinks (its head moves toward the cursor,
        into what the cache holds), so a bisection finds it within a few builds.
        """
        cold = self.cold_allowance(deadline_s)
        allowance = cold if allowance is None else allowance
        context = options.project_context
        if context is None:
            return self._choose(backend, left, right, options, deadline_s, allowance, 0)
        plain_options = dataclasses.replace(options, project_context=None)
        n = options.max_tokens
        head = len(backend.build_fim_prompt("", "", n, context=context)) - len(
            backend.build_fim_prompt("", "", n)
        )
        if head <= 0:  # no repository format, or no room for it
            return self._choose(backend, left, right, plain_options, deadline_s, allowance, 0)
        rich = dataclasses.replace(
            self._choose(backend, left, right, options, deadline_s, allowance, head),
            context=context,
            context_tokens=head,
        )
        if rich.uncached <= allowance:
            return rich
        plain = self._choose(backend, left, right, plain_options, deadline_s, allowance, 0)
        return rich if rich.uncached <= plain.uncached else plain

    def _choose(
        self,
        backend: Backend,
        left: str,
        right: str,
        options: DecodeOptions,
        deadline_s: float,
        allowance: int,
        head: int,
    ) -> PromptChoice:
        """:meth:`choose` for one prompt layout, ``head`` tokens of context taken out of
        the machine window."""
        cold = self.cold_allowance(deadline_s)
        low, high = cold, max(cold, self.machine_window(deadline_s) - head)

        def built(budget: int) -> PromptChoice:
            prompt, owed = build_prompt(
                backend, left, right, dataclasses.replace(options, prompt_budget=budget)
            )
            cost = backend.uncached(prompt) if isinstance(backend, PromptCache) else len(prompt)
            return PromptChoice(budget, prompt, cost, owed)

        best = built(low)
        if not isinstance(backend, PromptCache) or high <= low:
            return best
        widest = built(high)
        if widest.uncached <= allowance or widest.prompt == best.prompt:
            return widest  # the whole machine window is cached (or the file is short)
        while high - low > max(8, int(low * _SEARCH_PRECISION)):
            middle = built((low + high) // 2)
            if middle.uncached <= allowance:
                low, best = middle.budget, middle
            else:
                high = middle.budget
        return best
