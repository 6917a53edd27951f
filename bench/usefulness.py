"""Would a user accept the middle?  HumanEval infilling and cuts of real code, per mode.

Usage::

    python -m bench.usefulness SUITE [--model SPEC] [--n N] [--seed S] [--max-tokens N]
        [--jobs N] [--modes MODE...] [--names-compare] [--json] [--details]

Suites: ``humaneval-single-line``, ``humaneval-multi-line``, ``humaneval-random-span``
(:mod:`bench.humaneval`: Bavarian et al.'s tasks, judged by the problems' tests) and
``lines`` and ``blocks`` (:mod:`bench.code_cuts`: the rest of a line, mid-word and after
a token, and a block's body, cut from the standard library).  ``--n`` draws that many
tasks with the seed (0: all; the HumanEval suites default to all single-line tasks and
200 of the others, the code suites to 100 of each kind).

Every task is completed in each mode, greedy, from the same prompt (read once into the
model's cache before the modes run):

``constrained``    what the language server answers: the syntax-checked loop in the
                   ``auto`` line mode, with its fallback (``decoding/attempts.py``);
``unconstrained``  the model's own tokens, to its end token or the budget;
``checked``        the unconstrained output cut back until ``ast.parse`` accepts the file;
``heuristic``      the free generation trimmed by the string rules shipping tools use
                   (``decoding/heuristic.py``): the baseline users compare us with.

Per mode: validity (``ast.parse`` of this interpreter on the completed file), pass@1
(HumanEval: the problem's tests pass, run in a fresh interpreter with a time limit),
exact match and first-line exact match (trailing blanks aside; the first line is the
first non-blank one of each), edit similarity (one less the Levenshtein distance over
the longer length), *repeats R* (a line of the middle, not one of the true middle's own
lines, equals the first non-blank line after the cursor: code the user already has),
empty answers (never a success), tokens and milliseconds, and the undefined-name rate
(of the non-empty valid middles, the share that load a name bound nowhere, as pyflakes'
F821 reports it inside the middle: ``bench/undefined_names.py``).  ``--names-compare``
adds constrained decoding with ``knownNames`` off (``constrained_known_names_off``).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import IO, Any, cast

from bench.harness import rounded_percentile, with_progress
from bench.humaneval import KINDS as HUMANEVAL_KINDS
from bench.humaneval import InfillTask, infill_tasks, run_tests
from bench.undefined_names import undefined_in_middle
from lexer.version import TargetVersion
from lsp_server.decoding import Completion, DecodeOptions, build_prompt, generate
from lsp_server.decoding.attempts import Allowance, generate_middles
from lsp_server.decoding.checked import checked_prefix
from lsp_server.decoding.edit_distance import edit_similarity
from lsp_server.model import Backend, ModelError, open_model
from lsp_server.modes import MODES, LineMode, Mode
from quotient_parser.quotient import Quotient

__all__ = ["SUITES", "Task", "main", "repeats_right"]

SUITES = (*(f"humaneval-{kind}" for kind in HUMANEVAL_KINDS), "lines", "blocks")
#: Constrained decoding with knownNames off, beside the modes (``--names-compare``).
NAMES_OFF = "constrained_known_names_off"
#: Tasks drawn when ``--n`` is not given (None: all).
_DEFAULT_N: dict[str, int | None] = {
    "humaneval-single-line": None,
    "humaneval-multi-line": 200,
    "humaneval-random-span": 200,
    "lines": 100,
    "blocks": 100,
}


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One place to complete: the text around it, the true middle, and (HumanEval) the
    problem whose tests judge a middle."""

    id: str
    kind: str
    left: str
    right: str
    truth: str
    humaneval: InfillTask | None = None


def humaneval_tasks(kind: str, n: int | None, seed: int) -> list[Task]:
    tasks = [
        Task(t.task_id, t.kind, t.left, t.right, t.truth, t)
        for t in infill_tasks(kind, seed)  # type: ignore[arg-type]
    ]
    return _draw(tasks, n, seed)


def code_tasks(kinds: Sequence[str], n: int, seed: int) -> list[Task]:
    """``n`` cuts of each kind from this interpreter's standard library."""
    from bench.code_cuts import make_code_cuts
    from bench.grammar_coverage import Oracle, stdlib_corpus
    from bench.quotient_check import Corpus

    with Oracle(sys.executable) as oracle:
        corpus = Corpus(stdlib_corpus(), oracle)
        tasks = []
        for kind in kinds:
            for cut in make_code_cuts(corpus, kind, n, seed):  # type: ignore[arg-type]
                source = corpus.by_name(cut.file)
                assert source is not None
                text = source.text
                where = f"{cut.file}@{cut.left_end}"
                tasks.append(
                    Task(where, kind, text[: cut.left_end], text[cut.middle_end :], cut.middle)
                )
    return tasks


def suite_tasks(suite: str, n: int | None, seed: int) -> list[Task]:
    if suite.startswith("humaneval-"):
        return humaneval_tasks(suite[len("humaneval-") :], n, seed)
    kinds = ("mid-word", "after-token") if suite == "lines" else ("block",)
    return code_tasks(kinds, n or 100, seed)


def _draw(tasks: list[Task], n: int | None, seed: int) -> list[Task]:
    """``n`` of ``tasks`` drawn with ``seed``, in their order (all when ``n`` is None or
    not smaller)."""
    if n is None or n >= len(tasks):
        return tasks
    chosen = set(random.Random(seed).sample(range(len(tasks)), n))
    return [t for i, t in enumerate(tasks) if i in chosen]


# --------------------------------------------------------------------------- metrics


def _first_code_line(text: str) -> str:
    return next((line.rstrip() for line in text.splitlines() if line.strip()), "")


def repeats_right(middle: str, right: str, truth: str) -> bool:
    """A line of ``middle`` that is not one of the true middle's own lines equals the
    first non-blank line after the cursor (blanks around them aside)."""
    following = _first_code_line(right).strip()
    if not following:
        return False
    own = {line.strip() for line in truth.splitlines()}
    return any(line.strip() == following not in own for line in middle.splitlines())


def parses(source: str) -> bool:
    """``ast.parse`` of this interpreter accepts ``source``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


@dataclass
class ModeRun:
    """One mode's middle for one task, and how it fares."""

    middle: str
    stop_reason: str
    tokens: int
    ms: float  # the mode's own wall time (the shared prompt reading aside)
    single_line: bool | None = None  # constrained: the line mode it ended in
    complete: bool | None = None  # what the mode claims (None: a mode that does not check)
    valid: bool = False
    passed: bool | None = None  # None: the task has no tests
    #: names the middle loads that are bound nowhere (pyflakes' F821 in the middle; None:
    #: not judged, the file does not parse or the middle is blank)
    undefined: list[str] | None = None

    def figures(self, task: Task) -> dict[str, Any]:
        middle, truth = self.middle.rstrip(), task.truth.rstrip()
        empty = not middle.strip()
        return {
            "empty": empty,
            "valid": self.valid,
            "valid_non_empty": self.valid and not empty,
            "passed": self.passed,
            "exact": middle == truth,
            "first_line_exact": not empty and _first_code_line(middle) == _first_code_line(truth),
            "edit_similarity": edit_similarity(middle, truth),
            "repeats_right": repeats_right(self.middle, task.right, task.truth),
            "claimed_but_invalid": self.complete is True and not self.valid,
            "undefined": None if self.undefined is None else bool(self.undefined),
        }


@dataclass
class TaskResult:
    task: Task
    prompt_tokens: int = 0
    prompt_ms: float = 0.0
    runs: dict[str, ModeRun] = field(default_factory=dict)
    error: str | None = None


# --------------------------------------------------------------------------- running


class Runner:
    """Completes tasks with one model in every mode and judges the middles."""

    def __init__(
        self, model: Backend, options: DecodeOptions, modes: Sequence[str], line_mode: LineMode
    ) -> None:
        self.model = model
        self.options = options
        self.modes = tuple(modes)
        self.line_mode = line_mode
        self.target = TargetVersion.parse(f"{sys.version_info[0]}.{sys.version_info[1]}")

    def run(self, task: Task) -> TaskResult:
        result = TaskResult(task)
        try:
            prompt, _ = build_prompt(self.model, task.left, task.right, self.options)
            t0 = time.perf_counter()
            # All but the last token: every mode then decodes that one alone (a prompt
            # cached after an earlier generation is re-entered so), so that each starts
            # from the same logits: a batch's arithmetic differs from one token's in the
            # last bits, enough to swap two near-equal candidates.
            self.model.prefill(prompt[:-1] or prompt)
            result.prompt_ms = (time.perf_counter() - t0) * 1e3
            result.prompt_tokens = len(prompt)
            free: Completion | None = None
            for mode in self.modes:
                if mode == "checked" and free is not None:
                    result.runs[mode] = self._checked(task, free, result.runs["unconstrained"])
                    continue
                run, completion = self._complete(task, mode)
                result.runs[mode] = run
                if mode == "unconstrained":
                    free = completion
        except ModelError as exc:
            result.error = str(exc)
            return result
        self._judge(result)
        return result

    def _complete(self, task: Task, mode: str) -> tuple[ModeRun, Completion]:
        t0 = time.perf_counter()
        if mode == "constrained" or mode == NAMES_OFF:
            completion, single, tokens = self._constrained(task, mode == "constrained")
        else:
            options = replace(self.options, mode=cast(Mode, mode))
            completion = generate(self.model, task.left, task.right, options, target=self.target)
            single, tokens = None, completion.tokens
        ms = (time.perf_counter() - t0) * 1e3
        stop = str(completion.stop_reason)
        run = ModeRun(completion.middle, stop, tokens, ms, single, completion.complete)
        return run, completion

    def _constrained(self, task: Task, known_names: bool) -> tuple[Completion, bool, int]:
        """The server's answer: the line mode's decision and its fallback, over one
        quotient (the tokens of both attempts counted)."""
        options = replace(self.options, mode="constrained", known_names=known_names)
        quotient = Quotient(task.left, task.right, self.target, stay_inside=options.stay_inside)
        allowance = Allowance(lambda single: replace(options, single_line=single))
        middles = generate_middles(self.model, quotient, self.line_mode, allowance)
        return middles.first, middles.single, sum(c.tokens for c in middles.generations)

    def _checked(self, task: Task, free: Completion, unconstrained: ModeRun) -> ModeRun:
        """Checked mode from the unconstrained run's output (the same generation)."""
        t0 = time.perf_counter()
        copy = replace(free)
        cut = checked_prefix(copy, task.left, task.right)
        ms = unconstrained.ms + (time.perf_counter() - t0) * 1e3
        return ModeRun(cut.middle, str(cut.stop_reason), unconstrained.tokens, ms,
                       complete=cut.complete)  # fmt: skip

    def _judge(self, result: TaskResult) -> None:
        task = result.task
        verdicts: dict[str, tuple[bool, bool | None]] = {}
        for run in result.runs.values():
            if run.middle not in verdicts:
                valid = parses(task.left + run.middle + task.right)
                passed = None
                if task.humaneval is not None:
                    passed = valid and run_tests(task.humaneval, run.middle).passed
                verdicts[run.middle] = (valid, passed)
            run.valid, run.passed = verdicts[run.middle]
            if run.valid and run.middle.strip():
                run.undefined = undefined_in_middle(task.left, run.middle, task.right)


# --------------------------------------------------------------------------- report


def mode_figures(results: Sequence[TaskResult], mode: str) -> dict[str, Any]:
    """The per-mode figures of the module docstring over ``results``."""
    done = [r for r in results if r.error is None and mode in r.runs]
    rows = [r.runs[mode].figures(r.task) for r in done]
    runs = [r.runs[mode] for r in done]
    n = len(rows)

    def count(key: str) -> int:
        return sum(bool(row[key]) for row in rows)

    def share(value: float) -> float | None:
        return round(value / n, 4) if n else None

    figures: dict[str, Any] = {"tasks": n}
    if any(row["passed"] is not None for row in rows):
        figures["pass_at_1"] = share(count("passed"))
        figures["passed"] = count("passed")
    truth_non_empty = [row for row, r in zip(rows, done) if r.task.truth.strip()]
    ms = [run.ms for run in runs]
    judged = [row for row in rows if row["undefined"] is not None]
    figures.update(
        undefined_judged=len(judged),
        undefined_name_rate=(
            round(sum(row["undefined"] for row in judged) / len(judged), 4) if judged else None
        ),
        undefined_names=sorted({name for run in runs for name in run.undefined or ()}),
        valid=count("valid"),
        valid_non_empty=count("valid_non_empty"),
        claimed_but_invalid=count("claimed_but_invalid"),
        exact_match=share(count("exact")),
        first_line_exact=share(count("first_line_exact")),
        edit_similarity=share(sum(row["edit_similarity"] for row in rows)),
        repeats_right=share(count("repeats_right")),
        empty=share(count("empty")),
        empty_where_truth_non_empty=(
            round(sum(row["empty"] for row in truth_non_empty) / len(truth_non_empty), 4)
            if truth_non_empty
            else None
        ),
        tokens=sum(run.tokens for run in runs),
        tokens_mean=share(sum(run.tokens for run in runs)),
        ms_median=rounded_percentile(ms, 50),
        ms_p90=rounded_percentile(ms, 90),
        ms_total=round(sum(ms), 1),
        stop_reasons=_counts(run.stop_reason for run in runs),
    )
    if mode == "constrained":
        figures["single_line_answers"] = sum(run.single_line is True for run in runs)
    return figures


def _counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


@dataclass
class Report:
    suite: str
    model: str
    model_family: str
    has_fim: bool
    options: DecodeOptions
    modes: tuple[str, ...]
    n: int | None
    seed: int
    results: list[TaskResult]
    elapsed_s: float = 0.0
    line_mode: str = "auto"

    def to_dict(self, details: bool = False) -> dict[str, Any]:
        done = [r for r in self.results if r.error is None]
        kinds = sorted({r.task.kind for r in done})
        out: dict[str, Any] = {
            "suite": self.suite,
            "model": self.model,
            "model_family": self.model_family,
            "has_fim": self.has_fim,
            "python": ".".join(map(str, sys.version_info[:3])),
            "max_tokens": self.options.max_tokens,
            "top_k": self.options.top_k,
            "temperature": self.options.temperature,
            "n": self.n,
            "seed": self.seed,
            "line_mode": self.line_mode,
            "tasks": len(done),
            "errors": [{"task": r.task.id, "error": r.error} for r in self.results if r.error],
            "modes": {mode: mode_figures(done, mode) for mode in self.modes},
            "prompt_tokens_median": rounded_percentile([r.prompt_tokens for r in done], 50),
            "prompt_ms_median": rounded_percentile([r.prompt_ms for r in done], 50),
            "elapsed_s": round(self.elapsed_s, 1),
        }
        if len(kinds) > 1:
            out["by_kind"] = {
                kind: {
                    mode: mode_figures([r for r in done if r.task.kind == kind], mode)
                    for mode in self.modes
                }
                for kind in kinds
            }
        if details:
            out["details"] = [_task_dict(r) for r in self.results]
        return out

    def summary(self) -> str:
        d = self.to_dict()
        lines = [
            f"{self.suite}: {d['tasks']} tasks, model {self.model} ({self.model_family}, "
            f"{'FIM' if self.has_fim else 'no FIM'}), {self.options.max_tokens} tokens, "
            f"greedy, {d['elapsed_s']} s",
            "",
            _table(d["modes"]),
        ]
        for kind, modes in d.get("by_kind", {}).items():
            lines += ["", f"{kind}:", _table(modes)]
        return "\n".join(lines)


_COLUMNS = (
    ("pass@1", "pass_at_1"),
    ("valid", "valid_non_empty"),
    ("exact", "exact_match"),
    ("1st line", "first_line_exact"),
    ("edit sim", "edit_similarity"),
    ("undef", "undefined_name_rate"),
    ("repeats R", "repeats_right"),
    ("empty", "empty"),
    ("tokens", "tokens_mean"),
    ("ms p50", "ms_median"),
    ("ms p90", "ms_p90"),
)


def _table(modes: dict[str, dict[str, Any]]) -> str:
    header = f"{'mode':<14}" + "".join(f"{name:>10}" for name, _ in _COLUMNS)
    rows = [header]
    for mode, figures in modes.items():
        cells = []
        for _, key in _COLUMNS:
            value = figures.get(key)
            if key == "valid_non_empty":
                value = round(value / figures["tasks"], 4) if figures["tasks"] else None
            cells.append(f"{'-' if value is None else value:>10}")
        rows.append(f"{mode:<14}" + "".join(cells))
    return "\n".join(rows)


def _task_dict(r: TaskResult) -> dict[str, Any]:
    return {
        "task": r.task.id,
        "kind": r.task.kind,
        "truth": r.task.truth,
        "prompt_tokens": r.prompt_tokens,
        "error": r.error,
        "runs": {
            mode: {
                "middle": run.middle,
                "stop_reason": run.stop_reason,
                "tokens": run.tokens,
                "ms": round(run.ms, 1),
                **run.figures(r.task),
            }
            for mode, run in r.runs.items()
        },
    }


# --------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class WorkerSpec:
    model: str | None
    ctx_size: int
    threads: int
    options: DecodeOptions
    modes: tuple[str, ...]
    line_mode: LineMode


_runner: Runner | None = None


def _worker_start(spec: WorkerSpec) -> None:
    global _runner
    model = open_model(spec.model, n_ctx=spec.ctx_size, n_threads=spec.threads)
    _runner = Runner(model, spec.options, spec.modes, spec.line_mode)


def _worker_run(task: Task) -> TaskResult:
    assert _runner is not None
    return _runner.run(task)


def run_tasks(
    tasks: Sequence[Task], spec: WorkerSpec, jobs: int, progress: bool
) -> list[TaskResult]:
    """Every task, in ``jobs`` processes (consecutive tasks stay together, so that a
    problem's tasks reuse the prompt's cached start)."""
    if jobs <= 1:
        _worker_start(spec)
        return [_worker_run(task) for task in with_progress(tasks, progress, "task", _task_id)]
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    chunk = max(1, len(tasks) // (jobs * 8))
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start,
                             initargs=(spec,)) as pool:  # fmt: skip
        done = pool.map(_worker_run, tasks, chunksize=chunk)
        return [result for _, result in zip(with_progress(tasks, progress, "task", _task_id), done)]


def _task_id(task: Task) -> str:
    return task.id


# --------------------------------------------------------------------------- command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.usefulness",
        description="HumanEval infilling and cuts of real code: pass@1, exact match, edit "
        "similarity, repetition and empty answers per decoding mode.",
    )
    p.add_argument("suite", choices=SUITES)
    p.add_argument("--model", default=None, metavar="SPEC", help="model name, path or 'default'")
    p.add_argument(
        "--n", type=int, default=None, metavar="N", help="tasks drawn (0: all; default by suite)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=64, metavar="N")
    p.add_argument("--top-k", type=int, default=50, metavar="K")
    p.add_argument("--line-mode", choices=("auto", "single", "multi"), default="auto")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument(
        "--names-compare",
        action="store_true",
        help=f"also constrained with knownNames off (reported as {NAMES_OFF})",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ctx-size", type=int, default=4096)
    p.add_argument("--jobs", type=int, default=1, metavar="N")
    p.add_argument("--json", action="store_true")
    p.add_argument("--details", action="store_true", help="with --json: every task's middles")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    started = time.monotonic()
    n = _DEFAULT_N[args.suite] if args.n is None else (args.n or None)
    tasks = suite_tasks(args.suite, n, args.seed)
    modes: tuple[str, ...] = tuple(m for m in MODES if m in args.modes)
    if args.names_compare and "constrained" in modes:
        at = modes.index("constrained") + 1
        modes = (*modes[:at], NAMES_OFF, *modes[at:])
    if "checked" in modes and "unconstrained" not in modes:
        modes = (
            *modes[: modes.index("checked")],
            "unconstrained",
            *modes[modes.index("checked") :],
        )
    options = DecodeOptions(max_tokens=args.max_tokens, top_k=args.top_k, seed=args.seed)
    spec = WorkerSpec(args.model, args.ctx_size, args.threads, options, modes, args.line_mode)
    try:
        probe = open_model(args.model, n_ctx=256, n_threads=1)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    family, has_fim = probe.layout.family, probe.has_fim
    probe.close()
    progress = not args.no_progress and sys.stderr.isatty()
    results = run_tasks(tasks, spec, args.jobs, progress)
    report = Report(args.suite, args.model or "default", family, has_fim, options, modes, n,
                    args.seed, results, time.monotonic() - started,
                    line_mode=args.line_mode)  # fmt: skip
    if args.json:
        json.dump(report.to_dict(args.details), out, indent=1, ensure_ascii=False)
        out.write("\n")
    else:
        print(report.summary(), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
