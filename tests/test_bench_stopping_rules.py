"""``bench.stopping_rules``' replayed rules on hand-made traces (no model)."""

from __future__ import annotations

from bench.stopping_rules import RULES, Step, Trace
from bench.usefulness import Task

TASK = Task("t", "multi-line", "def f(x):\n", "    return y\n", "    y = x\n")


def _trace(*lines: tuple[str, float, int, float]) -> Trace:
    """A generation of whole lines, each (text, mean log-probability per token, tokens,
    log-probability of ending after it), every line end complete."""
    steps, middle, logprob, tokens = [], "", 0.0, 0
    for text, mean, count, end in lines:
        middle, logprob, tokens = middle + text, logprob + mean * count, tokens + count
        steps.append(Step(middle, tokens, logprob, end, True))
    return Trace("humaneval-multi-line", "t", True, tuple(steps), middle)


def test_sure_lines_ends_before_the_first_unsure_further_line() -> None:
    sure = RULES["sure-lines"]
    likeliest = RULES["likeliest"]
    # The likeliest end is after the third line; the second is unsure.
    trace = _trace(
        ("    y = x\n", -0.05, 4, -9.0), ("    z = 1\n", -0.9, 4, -9.0),
        ("    w = 2\n", -0.0, 4, -0.1),
    )  # fmt: skip
    assert likeliest(trace, TASK) == "    y = x\n    z = 1\n    w = 2\n"
    assert sure(trace, TASK) == "    y = x\n"
    confident = _trace(("    y = x\n", -0.05, 4, -9.0), ("    z = 1\n", -0.1, 4, -0.1))
    assert sure(confident, TASK) == likeliest(confident, TASK) == "    y = x\n    z = 1\n"
