"""The README's table of current figures, built from the JSON files in ``bench/results``.

Each row reports one kind of run, read from the newest JSON file of that kind, so the
README cannot say what no kept run measured.  A results folder holds one run per file,
named by what wrote it: ``bench.report`` writes ``quality.json``, ``lsp.json``,
``coverage.json``, ``quotient.json`` and ``<suite>.json``; a benchmark's ``--json``
output kept by hand is named after the benchmark (``fim_quality*.json``,
``lsp_latency*.json``, ``humaneval_single_line*.json``, ``grammar_coverage*.json``,
``quotient_check*.json``, ``model_families*.json``).  Left out: folders of a
``bench.report --quick`` run (samples too small to report), and files whose name
carries a commit hash (``lsp_latency_gemma_at_7913da6.json``), which keep a run at an
older commit for comparison.

*Newest* is the latest date in the folder's name (``2026-11-24-...``), then the latest
commit that added the file (a file not committed yet is newer than any committed one),
then the name, last first.
Each row also checks that the run is the standard one (the 400 cuts, the embedded
default model, seed 0, ...), so a smaller or differently configured run never replaces
it.  ``python3 -m bench.report --readme-table [--write]`` prints the table or rewrites
the README's block between :data:`BEGIN` and :data:`END`.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_server.model.catalog import DEFAULT_MODEL
from lsp_server.modes import MODES

__all__ = ["BEGIN", "END", "README", "RESULTS", "replace_block", "rows", "table"]

RESULTS = Path(__file__).resolve().parent / "results"
README = RESULTS.parent.parent / "README.md"
BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"

#: The names the embedded default model is recorded under.
EMBEDDED = ("default", DEFAULT_MODEL)
#: The FIM model the usefulness rows report (fast enough to run the suites on a CPU).
USEFULNESS_MODEL = "qwen2.5-coder-0.5b"
#: HumanEval's suites, in the table's order.
HUMANEVAL = ("humaneval-single-line", "humaneval-multi-line", "humaneval-random-span")
_LINE_MODES = ("auto", "single", "multi")
#: A commit hash as one ``_``-separated part of a file name.
_COMMIT = re.compile(r"(?:^|_)[0-9a-f]{7,40}(?:_|$)")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_KIND_NAMES = {"randspan": "random-span"}


@dataclass(frozen=True)
class Run:
    """One kept result: its file and what the benchmark printed."""

    path: Path
    data: dict[str, Any]


# --------------------------------------------------------------------------- finding runs


def _added_times(results: Path) -> dict[Path, float]:
    """When each file under ``results`` was first committed (empty without git)."""
    try:
        log = subprocess.run(
            ["git", "-c", "core.quotePath=false", "-C", str(results), "log",
             "--format=%x00%ct", "--name-only", "--no-renames", "--diff-filter=A", "--relative",
             "--", "."],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    added: dict[Path, float] = {}
    for entry in log.split("\0")[1:]:
        stamp, _, names = entry.partition("\n")
        for name in names.split("\n"):
            if name.strip():
                # git log runs newest first: the last time seen is the first addition.
                added[results / name.strip()] = float(stamp)
    return added


def _quick(folder: Path) -> bool:
    """Whether the folder holds a ``bench.report --quick`` run."""
    config = folder / "config.json"
    if not config.is_file():
        return False
    return bool(json.loads(config.read_text(encoding="utf-8")).get("quick"))


class Results:
    """The result files of a results folder, newest first."""

    def __init__(self, root: Path) -> None:
        self.root = root
        added = _added_times(root)
        folders = [d for d in root.iterdir() if d.is_dir() and not _quick(d)]
        files = [
            f for d in folders for f in d.glob("*.json")
            if f.name != "config.json" and not _COMMIT.search(f.stem)
        ]  # fmt: skip

        def age(f: Path) -> tuple[str, float, str]:
            date = _DATE.match(f.parent.name)
            return (date.group() if date else "", added.get(f, math.inf), f.name)

        self.files = sorted(files, key=age, reverse=True)

    def named(self, names: Iterable[str]) -> Iterator[Run]:
        """The runs in files named ``NAME.json`` or ``NAME_*.json``, newest first."""
        stems = tuple(names)
        for path in self.files:
            if any(path.stem == s or path.stem.startswith(s + "_") for s in stems):
                data = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(data, dict):
                    yield Run(path, data)

    def newest(
        self, names: Iterable[str], accept: Callable[[Run], bool] = lambda _: True
    ) -> Run | None:
        """The newest of those runs that ``accept`` takes."""
        return next((run for run in self.named(names) if accept(run)), None)

    def newest_per(self, names: Iterable[str], key: str) -> list[Run]:
        """The newest run for each value of ``key`` (a target version), in version order."""
        found: dict[str, Run] = {}
        for run in self.named(names):
            if key in run.data:
                found.setdefault(str(run.data[key]), run)
        return [found[k] for k in sorted(found, key=lambda v: tuple(map(int, v.split("."))))]


def _line_mode(run: Run) -> str:
    """The run's line mode: recorded since it was added, else named last in the file."""
    if "line_mode" in run.data:
        return str(run.data["line_mode"])
    last = run.path.stem.rsplit("_", 1)[-1]
    return last if last in _LINE_MODES else "auto"


# --------------------------------------------------------------------------- formatting


def _us(value: float) -> str:
    return f"{value:.0f} µs" if value < 1000 else f"{value / 1000:.2f} ms"


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms"


def _share(value: float, digits: int) -> str:
    return f"{round(value, digits):g}"


def _count(n: int, total: int) -> str:
    return f"{n} ({100 * n / total:.1f} %)" if total else str(n)


def _model(data: dict[str, Any]) -> str:
    name = data.get("model_file") or data.get("model")
    return f"{name} (the embedded default)" if data.get("model") in EMBEDDED else f"{name}"


def _corpus(path: str) -> str:
    version = re.search(r"python(3\.\d+)$", path.rstrip("/"))
    if version:
        return f"the {version.group(1)} standard library"
    parts = Path(path).parts
    if parts and parts[-1] == "stdlib":
        return f"the standard library of {parts[-2]}"
    return "/".join(parts[-2:])


# --------------------------------------------------------------------------- rows


#: One row: what was measured, the figures, the run they come from.
Row = tuple[str, str, Run]


def _validity(results: Results) -> list[Row]:
    def standard(run: Run) -> bool:
        d = run.data
        return (
            d.get("model") in EMBEDDED and d.get("cases") == 400 and d.get("seed") == 0
            and d.get("max_tokens") == 32 and not d.get("budget_sweep")
            and d.get("steering", True) and not d.get("witness_ending")
            and d.get("stay_inside", True)
        )  # fmt: skip

    run = results.newest(("quality", "fim_quality"), standard)
    if run is None:
        return []
    d = run.data
    kinds = ", ".join(
        f"{n} {_KIND_NAMES.get(kind, kind)}" for kind, n in (d.get("cases_by_kind") or {}).items()
    )
    modes = ", ".join(f"{m} {_count(d[m]['success'], d['cases'])}" for m in MODES if m in d)
    return [
        (
            f"Valid middles (the file parses after the completion): {d['cases']} cuts of "
            f"{_corpus(d['corpus'])} ({kinds}), {_model(d)}, {d['max_tokens']} tokens",
            f"{modes}; constrained middles claimed complete but invalid: "
            f"{d['constrained']['claimed_success_but_invalid']}",
            run,
        ),
        (
            "Parser time per generated token (viability and completeness checks), the same run",
            f"{_us(d['parser_us_per_token_median'])} median, "
            f"{_us(d['parser_us_per_token_p90'])} p90, {_us(d['parser_us_per_token_p99'])} p99",
            run,
        ),
    ]


def _families(results: Results) -> list[Row]:
    run = results.newest(("model_families",), lambda r: bool(r.data.get("families")))
    if run is None:
        return []
    medians = ", ".join(
        f"{f['family']} {_us(f['parser_us_per_token_median'])}"
        for f in run.data["families"]
        if f.get("parser_us_per_token_median") is not None
    )
    return [
        (
            "Parser time per token by model family (median; random-weight stand-ins on each "
            f"family's real vocabulary, {run.data['cuts']} cuts)",
            medians,
            run,
        )
    ]


def _usefulness(results: Results) -> list[Row]:
    rows: list[Row] = []
    for suite in HUMANEVAL:

        def standard(run: Run, suite: str = suite) -> bool:
            d = run.data
            return (
                d.get("suite") == suite and d.get("model") == USEFULNESS_MODEL
                and d.get("seed") == 0 and _line_mode(run) == "auto"
            )  # fmt: skip

        run = results.newest((suite, suite.replace("-", "_")), standard)
        if run is None:
            continue
        d = run.data
        figures = ", ".join(
            f"{mode} {_share(f['pass_at_1'], 3)} / {_share(f['edit_similarity'], 2)}"
            for mode, f in d["modes"].items()
        )
        name = suite.removeprefix("humaneval-")
        rows.append(
            (
                f"HumanEval {name} infilling, {d['tasks']} tasks (seed {d['seed']}), "
                f"{d['model']}, `lineMode` auto, {d['max_tokens']} tokens: "
                "pass@1 / edit similarity",
                figures,
                run,
            )
        )
    return rows


def _latency(results: Results) -> list[Row]:
    def standard(run: Run) -> bool:
        d = run.data
        return d.get("model") in EMBEDDED and d.get("seed") == 0 and d.get("requests") == 1000

    run = results.newest(("lsp", "lsp_latency"), standard)
    if run is None:
        return []
    d = run.data
    rows: list[Row] = [
        (
            f"Typing through `fimlsp --stdio`, {_model(d)}: {d['requests']} requests in typing "
            f"sessions over the standard library, a keystroke every {d['typing_ms']:g} ms, "
            f"{d['max_tokens']} tokens, {d['deadline_ms']} ms deadline",
            f"latency p50 {_ms(d['latency_ms_p50'])}, p95 {_ms(d['latency_ms_p95'])}; "
            f"{d['with_completion']} of {d['answered']} answered requests with a completion",
            run,
        )
    ]
    cold = d.get("cold_open")
    if cold:
        rows.append(
            (
                f"Cold opens, the same run: {cold['files']} files of `{cold['package']}` "
                f"opened, a request {cold['pause_ms'] / 1000:g} s later at a random line",
                f"{cold['with_completion']} of {cold['files']} with a completion; "
                f"p50 {_ms(cold['latency_ms_p50'])}, p95 {_ms(cold['latency_ms_p95'])}",
                run,
            )
        )
    return rows


def _coverage(results: Results) -> list[Row]:
    rows: list[Row] = []
    for run in results.newest_per(("coverage", "grammar_coverage"), "target"):
        d = run.data
        found = len(d.get("disagreements") or [])
        rows.append(
            (
                f"Recognizer against CPython {d['oracle_version']}'s `ast.parse` "
                f"({d['target']} grammar): {d['files']:,} files of {_corpus(d['corpus'])}, "
                f"every prefix viable, {d['mutants']:,} mutants",
                f"{found} disagreements ({d['membership_disagreements']} on files, "
                f"{d['mutant_disagreements']} on mutants, {d['prefix_failures']} of "
                f"{d['prefix_checks']:,} prefixes); {d['crashes']} crashes, "
                f"{d['timeouts']} timeouts",
                run,
            )
        )
    return rows


def _quotient(results: Results) -> list[Row]:
    rows: list[Row] = []
    for run in results.newest_per(("quotient", "quotient_check"), "target"):
        d = run.data
        rows.append(
            (
                f"FIM quotient against CPython {d['oracle_version']} ({d['target']} grammar): "
                f"{d['cuts']:,} cuts of {_corpus(d['corpus'])}, {d['variants']:,} variants",
                f"{d['unsound_verdicts']} unsound, {d['incomplete_verdicts']} incomplete "
                f"verdicts, {d['completeness_failures']} completeness failures; built in "
                f"{_ms(d['build_ms_median'])} median",
                run,
            )
        )
    return rows


def rows(results: Path = RESULTS) -> list[Row]:
    """Every row of the table, from the newest runs under ``results``."""
    found = Results(results)
    return [
        *_validity(found),
        *_families(found),
        *_usefulness(found),
        *_latency(found),
        *_coverage(found),
        *_quotient(found),
    ]


def _link(run: Run, base: Path) -> str:
    """The run's folder, linked to its README (or report), and its file."""
    folder = run.path.parent
    page = next(
        (folder / n for n in ("README.md", "report.md") if (folder / n).is_file()), run.path
    )
    href = Path(os.path.relpath(page, base)).as_posix()
    return f"[{folder.name}]({href}) `{run.path.name}`"


def table(results: Path = RESULTS, base: Path = README.parent) -> str:
    """The Markdown table, links relative to ``base`` (the README's folder)."""
    lines = ["| measure | figures | run |", "| --- | --- | --- |"]
    for measure, figures, run in rows(results):
        lines.append(f"| {measure} | {figures} | {_link(run, base)} |")
    return "\n".join(lines) + "\n"


def replace_block(text: str, block: str) -> str:
    """``text`` with what stands between :data:`BEGIN` and :data:`END` replaced."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} block")
    start += len(BEGIN)
    return text[:start] + "\n" + block + text[end:]


def block_of(text: str) -> str:
    """What stands between the markers (without the line break after :data:`BEGIN`)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} ... {END} block")
    return text[start + len(BEGIN) : end].removeprefix("\n")
