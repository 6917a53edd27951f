"""What a generation produced, and when each of its steps happened."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lsp_server.status import StopReason

__all__ = ["Completion", "DecodeTimes"]


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

    def timings(self, prompt_tokens: int, tokens: int, parser_us: list[float]) -> dict[str, float]:
        """The figures of ``Completion.timings``, in milliseconds (and tokens per second)."""
        stopped = self.stopped if self.stopped is not None else time.perf_counter()
        finished = self.finished if self.finished is not None else stopped
        out: dict[str, float] = {}
        if self.prompt_read is not None:
            out["generate_ms"] = (stopped - self.prompt_read) * 1e3
        if self.quotient_built is not None:
            out["quotient_ms"] = (self.quotient_built - self.started) * 1e3
        out["prompt_tokens"] = float(prompt_tokens)
        read = stopped if self.prompt_read is None else self.prompt_read
        out["prompt_ms"] = (read - self.prompt_started) * 1e3
        out["total_ms"] = (finished - self.started) * 1e3
        if tokens and self.prompt_read is not None:
            gen_ms = out["generate_ms"]
            out["tokens_per_s"] = tokens / (gen_ms / 1e3) if gen_ms > 0 else 0.0
        if parser_us:
            ordered = sorted(parser_us)
            out["parser_us_per_token_median"] = ordered[len(ordered) // 2]
            out["parser_us_per_token_p99"] = ordered[
                min(len(ordered) - 1, int(len(ordered) * 0.99))
            ]
        return out


@dataclass
class Completion:
    """The middle and how it came to be.

    ``complete`` is None for the unconstrained modes, which do not know; ``healed`` is
    the text token healing took out of the prompt (the middle follows it);
    ``parser_us`` holds the time spent in the quotient at each step.
    """

    middle: str
    stop_reason: StopReason
    complete: bool | None
    tokens: int
    times: DecodeTimes = field(default_factory=DecodeTimes)
    timings: dict[str, float] = field(default_factory=dict)
    parser_us: list[float] = field(default_factory=list)
    healed: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "middle": self.middle,
            "stop_reason": self.stop_reason,
            "complete": self.complete,
            "tokens": self.tokens,
            "timings": self.timings,
            "healed": self.healed,
        }
