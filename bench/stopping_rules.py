"""Where should a middle end?  Rules compared on one generation per task.

Usage::

    python -m bench.stopping_rules generate --model qwen2.5-coder-0.5b --out traces.json
    python -m bench.stopping_rules judge traces.json [--json]   (.json.xz: compressed)

``generate`` decodes each HumanEval infilling task once, constrained and over several
lines, with ``DecodeOptions.study_stops``: nothing stops the generation before the token
limit or the model's end, and every step records the middle, its log-probability, the
probability of ending there and whether the middle is complete there.  ``judge`` then
replays each rule over the recorded steps, as the decoder would have applied it while
generating (the likeliest-end bound included), and runs the problem's tests on the
middle each rule returns.  One generation serves every rule, so the rules differ only
in where they stop, never in the model's tokens before that; the greedy tokens up to a
rule's stop are those the decoder would have written under it.

The rules (``RULES``): ``likeliest`` is the decoder's over several lines (the likeliest
complete point, an echo of R's next line of code ending the middle before it);
``lines`` takes only points at the model's own line ends where the middle is lines of
their own (the cursor at a line's start, code after it); ``echo`` scores the point just
before an echo of R with the echo's probability (a model that writes R again has ended
the middle there); ``first-line`` is the first complete line of its own (what single-line
mode gives); ``tail-echo`` also cuts a line that ends with the rest of the cursor's line
before that text (the decoder's rule inside a line); ``sure-lines`` is ``likeliest``
ended before the first further line the model was unsure of (the extension's
``line_confidence``; ``judge --line-confidence F ...`` sweeps it); ``oracle`` is the first point
whose middle passes, the ceiling.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import IO, Any

from bench.harness import with_progress
from bench.humaneval import run_tests
from bench.usefulness import Task, parses, repeats_right, suite_tasks
from lexer.version import TargetVersion
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.decoding.edit_distance import edit_similarity
from lsp_server.decoding.extend import LINE_CONFIDENCE
from lsp_server.decoding.line_mode import own_line
from lsp_server.decoding.stopping import RightEcho
from lsp_server.model import open_model
from quotient_parser.quotient import Quotient

__all__ = ["RULES", "Step", "Trace", "main"]

SUITES = ("humaneval-single-line", "humaneval-multi-line", "humaneval-random-span")


@dataclass(frozen=True)
class Step:
    """The middle before one step's token, and what the model says there."""

    middle: str
    tokens: int
    logprob: float  # of the middle
    end_logprob: float  # of ending the middle here
    complete: bool


@dataclass(frozen=True)
class Trace:
    suite: str
    task: str
    own_line: bool  # the cursor at a line's start with code after it
    steps: tuple[Step, ...]
    final: str  # the whole middle generated

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Trace:
        steps = tuple(Step(**s) for s in d["steps"])
        return Trace(d["suite"], d["task"], d["own_line"], steps, d["final"])


# --------------------------------------------------------------------------- generating


def trace_task(model: Any, task: Task, suite: str, options: DecodeOptions) -> Trace:
    target = TargetVersion.parse(f"{sys.version_info[0]}.{sys.version_info[1]}")
    quotient = Quotient(task.left, task.right, target, stay_inside=options.stay_inside)
    completion = generate(model, task.left, task.right, options, quotient=quotient, target=target)
    steps = tuple(Step(*s) for s in completion.stops)
    final = steps[-1].middle if steps else ""
    return Trace(suite, task.id, own_line(quotient), steps, max(final, completion.middle, key=len))


# --------------------------------------------------------------------------- rules

#: A rule: the trace and its task -> the middle it returns.
Rule = Callable[[Trace, Task], str]


def _replay(trace: Trace, echo: RightEcho, *, lines: bool, echo_score: bool) -> str:
    """The decoder's likeliest-end rule replayed over the trace's steps.

    At each step, as the decoder does after taking a token: an echo of R's next line
    ends the middle before it; else generation stops once the middle's log-probability
    falls to the best score (no later point can beat it); else the step is a stopping
    point if the middle is complete there (``lines``: and, for lines of their own, at a
    line's end).  ``echo_score``: the point just before an echo scores the middle's
    probability with the echo written (the echo standing for the end).
    """
    best: tuple[float, str] | None = None
    for index, step in enumerate(trace.steps):
        at = echo.start(step.middle)
        if at is not None:
            before = step.middle[:at]
            points = [(s.logprob + s.end_logprob, s.middle) for s in trace.steps[:index]
                      if _point(s, trace, lines) and len(s.middle) <= at]  # fmt: skip
            if echo_score:
                ended = next((s for s in trace.steps if s.middle == before and s.complete), None)
                if ended is not None and before.strip():
                    points.append((step.logprob, before))
            return max(points)[1] if points else ""
        if best is not None and step.logprob <= best[0]:
            return best[1]
        if _point(step, trace, lines):
            score = step.logprob + step.end_logprob
            if best is None or score > best[0]:
                best = (score, step.middle)
    return "" if best is None else best[1]


def _tail_echo(t: Trace, task: Task) -> str:
    """``likeliest``, and, the cursor inside a line, where a line the model ended ends
    with the rest of the cursor's line (``return closest_pair`` where R goes on with
    ``osest_pair``), the middle cut before that text (``return cl``), as the decoder
    does: a point scored with the log-probability through the echo, weighed against
    those before it; generation stops as before once no later point can win."""
    echo = RightEcho(task.right, task.left)
    best: tuple[float, str] | None = None
    for step in t.steps:
        if best is not None and step.logprob <= best[0]:
            return best[1]
        at = echo.tail(step.middle) if step.middle.endswith("\n") else None
        if at is not None:
            cut = step.middle[:at]
            ok = cut.strip() and parses(task.left + cut + task.right)
            if ok and (best is None or step.logprob > best[0]):
                return cut
            return "" if best is None else best[1]
        if _point(step, t, False):
            score = step.logprob + step.end_logprob
            if best is None or score > best[0]:
                best = (score, step.middle)
    return "" if best is None else best[1]


def _point(step: Step, trace: Trace, lines: bool) -> bool:
    if not step.complete or not step.middle.strip():
        return False
    return not (lines and trace.own_line) or step.middle.endswith("\n")


def _first_line(trace: Trace, task: Task) -> str:
    for step in trace.steps:
        if _point(step, trace, lines=True) and (not trace.own_line or step.middle.count("\n") == 1):
            return step.middle
    return ""


def _replaying(lines: bool, echo_score: bool) -> Rule:
    def rule(t: Trace, task: Task) -> str:
        echo = RightEcho(task.right, task.left)
        return _replay(t, echo, lines=lines, echo_score=echo_score)

    return rule


def _sure_lines(floor: float) -> Rule:
    """``likeliest`` over the steps before the first line, after the middle's first,
    whose tokens' mean log-probability is below ``floor`` (the extension's
    ``line_confidence``: ``lsp_server/decoding/extend.py``)."""

    def rule(t: Trace, task: Task) -> str:
        cut, before = None, None
        for step in t.steps:
            if not step.middle.endswith("\n"):
                continue
            if before is not None and step.tokens > before.tokens:
                mean = (step.logprob - before.logprob) / (step.tokens - before.tokens)
                if mean < floor and step.middle[len(before.middle) :].strip():
                    cut = len(before.middle)
                    break
            before = step
        steps = t.steps if cut is None else tuple(s for s in t.steps if len(s.middle) <= cut)
        return _replay(replace(t, steps=steps), RightEcho(task.right, task.left),
                       lines=False, echo_score=False)  # fmt: skip

    return rule


RULES: dict[str, Rule] = {
    "likeliest": _replaying(lines=False, echo_score=False),
    "lines": _replaying(lines=True, echo_score=False),
    "echo": _replaying(lines=False, echo_score=True),
    "lines+echo": _replaying(lines=True, echo_score=True),
    "first-line": _first_line,
    "tail-echo": _tail_echo,
    "sure-lines": _sure_lines(LINE_CONFIDENCE),
}


# --------------------------------------------------------------------------- judging


class Judge:
    """Runs a task's tests once per distinct middle."""

    def __init__(self, tasks: dict[str, Task]) -> None:
        self.tasks = tasks
        self._seen: dict[tuple[str, str], bool] = {}

    def passes(self, task_id: str, middle: str) -> bool:
        key = (task_id, middle)
        if key not in self._seen:
            task = self.tasks[task_id]
            ok = bool(middle.strip()) and parses(task.left + middle + task.right)
            assert task.humaneval is not None
            self._seen[key] = ok and run_tests(task.humaneval, middle).passed
        return self._seen[key]


def judge(traces: Sequence[Trace], tasks: dict[str, Task]) -> dict[str, dict[str, Any]]:
    """Per suite and rule: pass@1, exact match, edit similarity, empty, repeats R."""
    judge_ = Judge(tasks)
    report: dict[str, dict[str, Any]] = {}
    for suite in SUITES:
        mine = [t for t in traces if t.suite == suite]
        if not mine:
            continue
        rows: dict[str, Any] = {}
        for name, rule in (*RULES.items(), ("oracle", None)):
            passed = exact = empty = repeats = 0
            similarity = 0.0
            for trace in mine:
                task = tasks[trace.task]
                if rule is None:
                    points = [s.middle for s in trace.steps if _point(s, trace, False)]
                    middle = next((m for m in points if judge_.passes(task.id, m)), "")
                else:
                    middle = rule(trace, task)
                passed += judge_.passes(task.id, middle)
                exact += middle.rstrip() == task.truth.rstrip()
                empty += not middle.strip()
                repeats += repeats_right(middle, task.right, task.truth)
                similarity += edit_similarity(middle.rstrip(), task.truth.rstrip())
            n = len(mine)
            rows[name] = {
                "pass@1": round(passed / n, 3),
                "exact": round(exact / n, 3),
                "edit_similarity": round(similarity / n, 4),
                "empty": round(empty / n, 3),
                "repeats_right": round(repeats / n, 3),
            }
        report[suite] = {"tasks": len(mine), "rules": rows}
    return report


def _tasks(suites: Sequence[str], n: int | None, seed: int) -> dict[str, tuple[str, Task]]:
    return {task.id: (suite, task) for suite in suites for task in suite_tasks(suite, n, seed)}


# --------------------------------------------------------------------------- command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.stopping_rules", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="one constrained multi-line generation per task")
    g.add_argument("--model", default="qwen2.5-coder-0.5b")
    g.add_argument("--suites", nargs="+", choices=SUITES, default=list(SUITES))
    g.add_argument("--n", type=int, nargs="+", default=[100, 40, 40], help="tasks per suite")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--threads", type=int, default=1)
    g.add_argument("--ctx-size", type=int, default=4096)
    g.add_argument("--out", required=True)
    g.add_argument("--no-progress", action="store_true")
    j = sub.add_parser("judge", help="each rule's middles, tested")
    j.add_argument("traces")
    j.add_argument("--json", action="store_true")
    j.add_argument(
        "--line-confidence", type=float, nargs="*", default=[], metavar="F",
        help="also the sure-lines rule with each of these thresholds (a sweep)",
    )  # fmt: skip
    return p


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    if args.command == "generate":
        counts = dict(zip(args.suites, args.n + args.n[-1:] * len(args.suites)))
        model = open_model(args.model, n_ctx=args.ctx_size, n_threads=args.threads)
        options = DecodeOptions(max_tokens=args.max_tokens, study_stops=True, restart=False)
        todo = [(s, t) for s in args.suites for t in suite_tasks(s, counts[s], args.seed)]
        traces = [
            trace_task(model, task, suite, options)
            for suite, task in with_progress(todo, not args.no_progress, "task", lambda x: x[1].id)
        ]
        meta = {"model": args.model, "seed": args.seed, "n": counts, "max_tokens": args.max_tokens}
        opener = lzma.open if args.out.endswith(".xz") else open
        with opener(args.out, "wt") as f:
            json.dump({**meta, "traces": [asdict(t) for t in traces]}, f)
        return 0
    opener = lzma.open if args.traces.endswith(".xz") else open
    with opener(args.traces, "rt") as f:
        data = json.load(f)
    traces = [Trace.from_dict(t) for t in data["traces"]]
    suites = sorted({t.suite for t in traces})
    tasks = {
        tid: task
        for tid, (_, task) in _tasks(suites, None, data["seed"]).items()
        if any(t.task == tid for t in traces)
    }
    for floor in args.line_confidence:
        RULES[f"sure-lines{floor:+g}"] = _sure_lines(floor)
    report = judge(traces, tasks)
    if args.json:
        json.dump({**{k: v for k, v in data.items() if k != "traces"}, "suites": report}, out,
                  indent=1)  # fmt: skip
        return 0
    for suite, r in report.items():
        out.write(f"\n{suite} ({r['tasks']} tasks)\n")
        out.write(f"{'rule':<16} pass@1  exact  ES      empty  repeats R\n")
        for name, row in r["rules"].items():
            cells = (row["pass@1"], row["exact"], row["edit_similarity"], row["empty"])
            out.write(f"{name:<16} " + " ".join(f"{c:<6}" for c in cells))
            out.write(f" {row['repeats_right']}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
