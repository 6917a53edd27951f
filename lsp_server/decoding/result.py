"""What a generation produced, and when each of its steps happened."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .stop_reason import StopReason

__all__ = ["Completion", "DecodeTimes", "Timings"]


#: The order of ``Timings.as_dict`` (the JSON of ``fimlsp complete`` keeps its key order).
_JSON_ORDER = (
    "generate_ms",
    "quotient_ms",
    "prompt_tokens",
    "prompt_ms",
    "total_ms",
    "tokens_per_s",
    "parser_us_per_token_median",
    "parser_us_per_token_p99",
)


@dataclass(frozen=True)
class Timings:
    """A generation's figures (milliseconds unless named otherwise); None where the
    generation did not get that far or had no such step."""

    prompt_tokens: int
    prompt_ms: float
    total_ms: float
    generate_ms: float | None = None  # None: the prompt was interrupted
    quotient_ms: float | None = None  # None: the quotient was passed in (or not needed)
    tokens_per_s: float | None = None
    parser_us_per_token_median: float | None = None
    parser_us_per_token_p99: float | None = None

    def as_dict(self) -> dict[str, float]:
        """The figures that exist, as ``fimlsp complete --json`` prints them."""
        values = {name: getattr(self, name) for name in _JSON_ORDER}
        return {name: float(value) for name, value in values.items() if value is not None}


@dataclass
class DecodeTimes:
    """Moments of one generation (``time.perf_counter()`` seconds)."""

    started: float = field(default_factory=time.perf_counter)
    quotient_built: float | None = None  # only when ``generate`` built the quotient itself
    prompt_read: float | None = None  # None: the prompt was interrupted
    first_token: float | None = None
    stopped: float | None = None  # the token loop ended (or the prompt was interrupted)
    finished: float | None = None  # the middle is final (fallback, checked mode done)

    @property
    def prompt_started(self) -> float:
        return self.started if self.quotient_built is None else self.quotient_built

    def timings(self, prompt_tokens: int, tokens: int, parser_us: list[float]) -> Timings:
        """The generation's figures, from its moments."""
        stopped = self.stopped if self.stopped is not None else time.perf_counter()
        finished = self.finished if self.finished is not None else stopped
        generate_ms = None if self.prompt_read is None else (stopped - self.prompt_read) * 1e3
        tokens_per_s = None
        if tokens and generate_ms is not None:
            tokens_per_s = tokens / (generate_ms / 1e3) if generate_ms > 0 else 0.0
        median = p99 = None
        if parser_us:
            ordered = sorted(parser_us)
            median = ordered[len(ordered) // 2]
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        read = stopped if self.prompt_read is None else self.prompt_read
        return Timings(
            prompt_tokens=prompt_tokens,
            prompt_ms=(read - self.prompt_started) * 1e3,
            total_ms=(finished - self.started) * 1e3,
            generate_ms=generate_ms,
            quotient_ms=(
                None if self.quotient_built is None else (self.quotient_built - self.started) * 1e3
            ),
            tokens_per_s=tokens_per_s,
            parser_us_per_token_median=median,
            parser_us_per_token_p99=p99,
        )


@dataclass
class Completion:
    """The middle and how it came to be.

    ``complete`` is None for the unconstrained modes, which do not know; ``healed`` is
    the text token healing took out of the prompt (the middle follows it);
    ``parser_us`` holds the time spent in the quotient at each step, ``steer_us`` the
    time steering spent on top of it (distances, candidates it weighed).

    ``logprob`` is the model's log-probability of the tokens the returned middle holds
    (``scored_tokens`` of them; a witness's tokens included).  ``steered`` counts the
    tokens steering chose over the model's first viable one, ``rescued`` the steps whose
    token came from further down the ranking than the top k, ``forced`` the tokens the
    model ranked nowhere among its candidates (a witness's own first token that steering
    wrote in place of the model's piece of a word: the middle is then not wholly the
    model's), ``witness`` is the text a
    witness ending appended (empty: the middle is all the model's), ``inside_fallback``
    says that no middle could stay inside the construct at the cursor, so this one
    was not held to it, ``restarted`` that the first generation ran out of budget and
    this middle comes from a restart at a step where a finish was in reach
    (``restart.py``).  ``token_ids``, ``token_logprobs`` and ``gaps`` (the chosen
    token's log-probability less the best other candidate's) are per step, for
    branching into alternatives; ``witnesses`` holds (step, finish) for each finish
    steering found, where a restart may begin; ``echo_step``, where the middle began to
    write R's next line of code again (``repeats_right``), the step to branch at;
    ``stops``, under ``DecodeOptions.study_stops``, each step's point as (middle,
    tokens, log-probability of the middle, log-probability of ending there, whether the
    middle is complete there).  ``names_off`` says why ``knownNames`` was off for the
    file (a star import, ``exec``, ...; ``known_names.py``), None where it was on or not
    asked for.
    """

    middle: str
    stop_reason: StopReason
    complete: bool | None
    tokens: int
    times: DecodeTimes = field(default_factory=DecodeTimes)
    timings: Timings = field(default_factory=lambda: Timings(0, 0.0, 0.0))
    parser_us: list[float] = field(default_factory=list)
    healed: str = ""
    logprob: float = 0.0
    scored_tokens: int = 0
    steered: int = 0
    rescued: int = 0
    forced: int = 0
    witness: str = ""
    inside_fallback: bool = False
    restarted: bool = False
    steer_us: list[float] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    witnesses: list[tuple[int, str]] = field(default_factory=list)
    echo_step: int | None = None
    stops: list[tuple[str, int, float, float, bool]] = field(default_factory=list)
    #: the prompt's tokens: a second run of the same request (a restart, an
    #: alternative) starts from them, built once
    prompt: list[int] = field(default_factory=list)
    names_off: str | None = None

    @property
    def mean_logprob(self) -> float | None:
        """The length-normalised log-probability: per token of the returned middle."""
        return self.logprob / self.scored_tokens if self.scored_tokens else None

    def as_dict(self) -> dict[str, object]:
        mean = self.mean_logprob
        return {
            "middle": self.middle,
            "stop_reason": self.stop_reason,
            "complete": self.complete,
            "tokens": self.tokens,
            "timings": self.timings.as_dict(),
            "healed": self.healed,
            "mean_logprob": None if mean is None else round(mean, 4),
            "steered": self.steered,
            "rescued": self.rescued,
            "forced": self.forced,
            "witness": self.witness,
            "inside_fallback": self.inside_fallback,
            "restarted": self.restarted,
            "known_names_off": self.names_off,
        }
