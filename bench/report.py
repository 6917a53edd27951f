"""Run every benchmark, keep the figures, draw the plots.

Usage::

    python -m bench.report [--quick] [--model SPEC] [--out DIR] [--machine NAME]
        [--seed S] [--jobs N] [--only NAME...] [--render] [PATHS...]
    python -m bench.report --readme-table [--write] [--readme FILE]

Runs, in order, with a fixed seed and without downloading anything (the corpus is
the local standard library or PATHS, the model the configured one):

1. ``bench.fim_quality``: constrained, unconstrained and checked decoding on
   boundary and random-span cuts (the paper's Table I, success rates by mode);
2. ``bench.grammar_coverage``: the recognizer against CPython's ``ast.parse``;
3. ``bench.quotient_check``: completeness, soundness and timings of the quotient;
4. ``bench.overhead``: per-token checking cost against file size, the quotient
   against ``ast.parse`` on every token (the paper's Figure 11);
5. ``bench.lsp_latency``: typing sessions replayed through the real language
   server (latency, cancellations, memory);
6. ``bench.fim_quality --budgets 8 16 32 64``: success against the token budget for
   the modes and for constrained decoding with steering on and off;
7. ``bench.usefulness`` on each of its suites (HumanEval single-line, multi-line and
   random-span infilling; the rest of a line and block bodies of real code): pass@1,
   exact match, edit similarity, repetition of R and empty answers per mode.

Everything goes to ``bench/results/<date>-<machine>/``: one JSON file per
benchmark, ``config.json`` (arguments, machine, versions), ``report.md`` with the
tables, and PNG plots: ``overhead.png`` (per-token overhead against file size),
``construction.png`` (quotient construction time against file size),
``success.png`` (success rates by mode and cut kind), ``budget.png`` (success
against the token budget) and ``usefulness.png`` (pass@1 or exact match, and edit
similarity, per suite and mode).  With ``--only``, the other
benchmarks' JSON files already in the folder are kept and appear in the report, so a
long run can be taken in parts.

``--quick`` uses small samples and finishes in a few minutes on two CPU cores;
the full run takes hours (``config.json`` keeps each benchmark's duration).

``--readme-table`` runs nothing: it prints the README's table of current figures,
built from the newest runs kept under ``bench/results`` (:mod:`bench.figures`), and
with ``--write`` puts it into the README between its markers.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from bench import figures as readme_figures
from lsp_server.modes import MODES

RESULTS = Path(__file__).resolve().parent / "results"

#: (quick, full) sample sizes for each benchmark.
SIZES = {
    "fim_cuts": (10, 200),
    "fim_max_tokens": (16, 32),
    "coverage_files": (20, None),  # None: the whole corpus
    "quotient_cuts": (40, 2000),
    "overhead_cuts": (40, 300),
    "lsp_requests": (100, 1000),
    "budget_cuts": (2, 50),
}
#: The token budgets of the sweep (issue 17).
BUDGETS = (8, 16, 32, 64)
#: (quick, full) tasks of each ``bench.usefulness`` suite (0: all).
USEFULNESS = {
    "humaneval-single-line": (20, 0),
    "humaneval-multi-line": (10, 200),
    "humaneval-random-span": (10, 200),
    "lines": (10, 100),
    "blocks": (10, 100),
}


def _capture(main: Callable[..., int], argv: list[str]) -> tuple[int, dict[str, Any]]:
    """Run a benchmark's ``main`` in process and parse the JSON it prints."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(argv)
    text = buffer.getvalue()
    start = text.find("{")
    if start < 0:
        raise RuntimeError(f"no JSON from {main.__module__}: {text[-500:]}")
    return status, json.loads(text[start:])


def machine_info() -> dict[str, Any]:
    """What the figures were taken on."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory_gb = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            memory_gb = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    try:
        import llama_cpp

        info["llama_cpp_python"] = llama_cpp.__version__
        info["gpu_offload"] = bool(llama_cpp.llama_supports_gpu_offload())
    except ImportError:
        info["llama_cpp_python"] = None
    return info


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "machine"


# --------------------------------------------------------------------------- plots


def _pyplot() -> Any:
    """matplotlib's pyplot without a display (imported only when plots are drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)


def plot_overhead(overhead: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    points = overhead["points"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = [p["file_chars"] for p in points]
    for key, label, marker in (
        ("ast_parse_us", "checked: ast.parse on every token", "x"),
        ("complete_us", "constrained: completeness check", "s"),
        ("viable_us", "constrained: viability check", "o"),
    ):
        ax.scatter(sizes, [p[key] for p in points], s=12, marker=marker, label=label, alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("file size (characters)")
    ax.set_ylabel("µs per token (median over the cut)")
    ax.set_title("Per-token syntax-checking overhead against file size")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, path)


def plot_construction(overhead: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    points = overhead["points"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter([p["file_chars"] for p in points], [p["build_ms"] for p in points], s=12)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("file size (characters)")
    ax.set_ylabel("quotient construction (ms)")
    ax.set_title("FIM quotient construction time against file size")
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, path)


def success_by_kind(quality: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Success rate (%) per mode and cut kind, from the per-cut details."""
    rates: dict[str, dict[str, float]] = {}
    details = quality.get("details") or []
    for kind in sorted({d["kind"] for d in details}):
        cases = [d for d in details if d["kind"] == kind and not d.get("error")]
        if not cases:
            continue
        rates[kind] = {
            mode: round(100 * sum(d["runs"][mode]["success"] for d in cases) / len(cases), 1)
            for mode in MODES
        }
    return rates


def plot_success(quality: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    rates = success_by_kind(quality)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    kinds = list(rates)
    width = 0.8 / len(MODES)
    for i, mode in enumerate(MODES):
        xs = [k + (i - (len(MODES) - 1) / 2) * width for k in range(len(kinds))]
        bars = ax.bar(xs, [rates[kind].get(mode, 0.0) for kind in kinds], width, label=mode)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(kinds)), [f"{k} cuts" for k in kinds])
    ax.set_ylabel("file parses after the completion (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Success by decoding mode ({quality.get('model_file') or quality.get('model')})")
    ax.legend()
    _save(fig, path)


def plot_usefulness(results: dict[str, Any], path: Path) -> None:
    """Per suite and mode: pass@1 (HumanEval) or exact match, and edit similarity."""
    plt = _pyplot()
    suites = [name for name in USEFULNESS if results.get(name)]
    modes = [m for m in MODES if any(m in results[s]["modes"] for s in suites)]
    fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    width = 0.8 / max(1, len(modes))
    for row, (ax, label) in enumerate(
        zip(axes, ("pass@1 (HumanEval) or exact match", "edit similarity"))
    ):
        for i, mode in enumerate(modes):
            xs = [k + (i - (len(modes) - 1) / 2) * width for k in range(len(suites))]
            values = []
            for suite in suites:
                figures = results[suite]["modes"].get(mode, {})
                key = "edit_similarity" if row else ("pass_at_1" if "pass_at_1" in figures
                                                      else "exact_match")  # fmt: skip
                values.append(100 * (figures.get(key) or 0.0))
            bars = ax.bar(xs, values, width, label=mode)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_ylabel(f"{label} (%)")
        ax.set_ylim(0, 105)
    axes[1].set_xticks(range(len(suites)), suites, fontsize=8)
    first = results[suites[0]]
    axes[0].set_title(f"Would a user accept the middle? ({first.get('model')})")
    axes[0].legend(fontsize=8)
    _save(fig, path)


# --------------------------------------------------------------------------- markdown


def plot_budget(budget: dict[str, Any], path: Path) -> None:
    """Success against the token budget, per variant of the sweep."""
    plt = _pyplot()
    sweep = budget["budget_sweep"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    cases = max(1, sweep["cases"])
    for variant, counts in sweep["success"].items():
        rates = [100 * c / cases for c in counts]
        style = "--" if variant == "constrained_unsteered" else "-"
        ax.plot(sweep["budgets"], rates, style, marker="o", label=variant.replace("_", ", "))
    ax.set_xscale("log", base=2)
    ax.set_xticks(sweep["budgets"], [str(b) for b in sweep["budgets"]])
    ax.set_xlabel("token budget (max tokens)")
    ax.set_ylabel("file parses after the completion (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Success against the token budget ({sweep['cases']} cuts)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    _save(fig, path)


def _figures_table(result: dict[str, Any]) -> list[str]:
    """A benchmark's scalar figures as a two-column Markdown table."""
    rows = ["| figure | value |", "| --- | --- |"]
    for key, value in result.items():
        if not isinstance(value, (list, dict)):
            rows.append(f"| {key} | {value} |")
    return rows


def markdown(results: dict[str, Any], config: dict[str, Any]) -> str:
    lines = _header(config)
    sections = {
        "quality": _quality_section,
        "coverage": lambda c: ["## Recognizer against CPython", "", *_figures_table(c), ""],
        "quotient": lambda q: ["## FIM quotient", "", *_figures_table(q), ""],
        "overhead": _overhead_section,
        "lsp": _lsp_section,
        "budget": _budget_section,
    }
    for name, section in sections.items():
        if results.get(name):
            lines += section(results[name])
    for suite in USEFULNESS:
        if results.get(suite):
            lines += _usefulness_section(suite, results[suite])
    return "\n".join(lines)


_USEFULNESS_COLUMNS = (
    ("pass@1", "pass_at_1"),
    ("valid, non-empty", "valid_non_empty"),
    ("exact", "exact_match"),
    ("first line exact", "first_line_exact"),
    ("edit similarity", "edit_similarity"),
    ("repeats R", "repeats_right"),
    ("empty", "empty"),
    ("tokens / task", "tokens_mean"),
    ("ms p50", "ms_median"),
    ("ms p90", "ms_p90"),
)


def _usefulness_section(suite: str, d: dict[str, Any]) -> list[str]:
    """One suite of ``bench.usefulness``: a row per mode."""
    lines = [
        f"## Usefulness: {suite}",
        "",
        f"{d['tasks']} tasks, model {d['model']}, {d['max_tokens']} tokens, greedy "
        f"({d['elapsed_s']} s).",
        "",
        "| mode | " + " | ".join(name for name, _ in _USEFULNESS_COLUMNS) + " |",
        "| --- |" + " --- |" * len(_USEFULNESS_COLUMNS),
    ]
    for mode, figures in d["modes"].items():
        cells = []
        for _, key in _USEFULNESS_COLUMNS:
            value = figures.get(key)
            if key == "valid_non_empty" and figures["tasks"]:
                value = round(value / figures["tasks"], 4)
            cells.append("—" if value is None else str(value))
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _header(config: dict[str, Any]) -> list[str]:
    """The machine, the command, and how each benchmark was run."""
    m = config["machine"]
    lines = [
        f"# fimlsp benchmark report, {config['date']}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, {m['os']}; "
        f"Python {m['python']}, llama-cpp-python {m.get('llama_cpp_python')} "
        f"(GPU offload: {m.get('gpu_offload')}).",
        f"Command: `{config['command']}` ({'quick' if config['quick'] else 'full'} run, "
        f"seed {config['seed']}), {config['elapsed_s']} s.",
        "",
    ]
    benchmarks = config.get("benchmarks") or {}
    if not benchmarks:
        return lines
    if config.get("kept_from_earlier_runs"):
        total = sum(b["elapsed_s"] for b in benchmarks.values())
        lines += [f"Assembled from these runs, {total:.0f} s in all:", ""]
    lines += [
        "| benchmark | command | duration | exit status | load average at start |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, b in benchmarks.items():
        load = b.get("load_average_at_start")
        shown = " / ".join(f"{x:.2f}" for x in load) if load else "not recorded"
        lines.append(
            f"| {name} | `{b['command']}` | {b['elapsed_s']} s | {b['exit_status']} | {shown} |"
        )
    return [*lines, ""]


def _quality_section(q: dict[str, Any]) -> list[str]:
    """Table I and the success rates by mode and cut kind."""
    table = q["table"]
    lines = [
        f"## Decoding quality ({q.get('model_file') or q.get('model')}, "
        f"{q['cases']} cuts, max {q['max_tokens']} tokens)",
        "",
        "Table I layout: rows by unconstrained outcome, columns by constrained outcome.",
        "",
        "| | constrained ✓ | constrained ✗ | total |",
        "| --- | --- | --- | --- |",
    ]
    for row, name in (
        ("unconstrained_ok", "unconstrained ✓"),
        ("unconstrained_fail", "unconstrained ✗"),
        ("checked_fail", "… of which checked ✗"),
        ("total", "total"),
    ):
        r = table[row]
        lines.append(f"| {name} | {r['constrained_ok']} | {r['constrained_fail']} | {r['total']} |")
    lines += ["", "| mode | success | claimed but invalid | success by kind |",
              "| --- | --- | --- | --- |"]  # fmt: skip
    rates = success_by_kind(q)
    for mode in MODES:
        by_kind = ", ".join(f"{k} {rates[k][mode]} %" for k in rates)
        lines.append(
            f"| {mode} | {q[mode]['success']} / {q['cases']} | "
            f"{q[mode]['claimed_success_but_invalid']} | {by_kind} |"
        )
    c = q["constrained"]
    lines += [
        "",
        "Constrained decoding (steering "
        f"{'on' if q.get('steering', True) else 'off'}, witness endings "
        f"{'on' if q.get('witness_ending') else 'off'}, stayInside "
        f"{'on' if q.get('stay_inside', True) else 'off'}):",
        "",
        "| success | model-written share | witness endings | steered stops | steering in "
        "successes | restarted successes | further down | exact match | mean log-prob / token "
        "| steering µs p99 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {c['success']} / {q['cases']} | {c.get('model_written_share')} | "
        f"{c.get('witness_endings')} | {c.get('steered_stops')} | {c.get('steered_successes')} "
        f"| {c.get('restarted_successes', '—')} | {c.get('rescued_cuts')} | {c['exact_match']} "
        f"| {c.get('mean_logprob')} | {q.get('steer_us_per_token_p99')} |",
    ]
    inside = q.get("stay_inside_compare")
    if inside:
        lines += [
            "",
            f"stayInside on against off on {inside['cuts']} cuts: the answer changed in "
            f"{inside['answers_changed']}; the file parses in {inside['success_staying_inside']} "
            f"staying inside, {inside['success_not_staying_inside']} not "
            f"({inside['claimed_but_invalid_staying_inside']} claimed but invalid, "
            f"{inside['fallbacks']} fallbacks); the true middle stays inside in "
            f"{inside['true_middle_stays_inside']}.",
        ]
    return [
        *lines,
        "",
        f"Parser time per token: median {q['parser_us_per_token_median']} µs, "
        f"p99 {q['parser_us_per_token_p99']} µs. Wall time constrained / unconstrained: "
        f"{q['wall_ratio_constrained_over_unconstrained']}.",
        "",
        "![success rates](success.png)",
        "",
    ]


def _overhead_section(o: dict[str, Any]) -> list[str]:
    lines = [
        "## Per-token overhead against file size (Figure 11)",
        "",
        "| file size | cuts | viable µs | complete µs | ast.parse µs | ratio | build ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in o["bins"]:
        lines.append(
            f"| {r['bin']} | {r['cuts']} | {r['constrained_viable_us_median']} | "
            f"{r['constrained_complete_us_median']} | {r['ast_parse_us_median']} | "
            f"{r['ratio_ast_parse_over_constrained']} | {r['build_ms_median']} |"
        )
    return [*lines, "", "![overhead](overhead.png)", "", "![construction](construction.png)", ""]


def _lsp_section(lsp: dict[str, Any]) -> list[str]:
    return [
        "## Language server while typing",
        "",
        f"{lsp['requests']} inline completion requests in {lsp['sessions']} typing "
        f"sessions through `fimlsp --stdio` ({lsp['max_tokens']} tokens at most, "
        f"deadline {lsp['deadline_ms']} ms, a keystroke every {lsp['typing_ms']} ms).",
        "",
        "| answered | with a completion | latency p50 / p95 | at pauses p50 / p95 "
        "| cancelled | errors | memory after |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {lsp['answered']} | {lsp['with_completion']} | {lsp['latency_ms_p50']} / "
        f"{lsp['latency_ms_p95']} ms | {lsp['pause_latency_ms_p50']} / "
        f"{lsp['pause_latency_ms_p95']} ms | {lsp['cancelled']} of {lsp['cancel_sent']} "
        f"| {lsp['errors']} | front {lsp['rss_mb_after']} MB, engine "
        f"{lsp.get('engine_rss_mb_after')} MB |",
        "",
        f"Requests read {lsp.get('prompt_share_evaluated')} of their prompt tokens themselves "
        f"(the rest came from the KV cache); read-ahead took {lsp.get('read_ahead_cpu_ms')} ms "
        f"of CPU; {lsp['llama_threads']} llama.cpp thread(s).",
        "",
        *_cold_open_lines(lsp.get("cold_open")),
    ]


def _cold_open_lines(cold: dict[str, Any] | None) -> list[str]:
    if not cold:
        return []
    return [
        f"Cold open: {cold['files']} files of {cold['package']} opened, a request "
        f"{cold['pause_ms']:.0f} ms later at a random line: {cold['with_completion']} with a "
        f"completion, latency p50 / p95 {cold['latency_ms_p50']} / {cold['latency_ms_p95']} ms.",
        "",
    ]


# --------------------------------------------------------------------------- driver


def _budget_section(b: dict[str, Any]) -> list[str]:
    """The budget sweep: a row per variant, a column per budget."""
    sweep = b["budget_sweep"]
    budgets = sweep["budgets"]
    lines = [
        f"## Success against the token budget ({sweep['cases']} cuts)",
        "",
        "Successes (exact matches, mean log-probability per token) at each budget; "
        "`constrained_unsteered` is constrained decoding with steering off.",
        "",
        "| variant | " + " | ".join(f"{n} tokens" for n in budgets) + " |",
        "| --- |" + " --- |" * len(budgets),
    ]
    for variant, counts in sweep["success"].items():
        cells = [
            f"{n} ({e}, {lp})"
            for n, e, lp in zip(
                counts, sweep["exact_match"][variant], sweep["mean_logprob"][variant]
            )
        ]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return [*lines, "", "![success against the budget](budget.png)", ""]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n")[0])
    p.add_argument("paths", nargs="*", metavar="PATHS",
                   help="corpus files or directories (default: the standard library)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="small samples (minutes)")
    p.add_argument("--model", default="default", help="GGUF path, hf://..., or default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="output folder")
    p.add_argument("--machine", default=None, help="name for the output folder")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes for the decoding-quality benchmark")  # fmt: skip
    p.add_argument(
        "--render",
        action="store_true",
        help="run nothing: redraw report.md and the plots from the folder's JSON",
    )
    p.add_argument(
        "--readme-table",
        action="store_true",
        help="run nothing: print the README's figures table from the newest kept runs",
    )
    p.add_argument(
        "--write", action="store_true", help="with --readme-table: rewrite the README's block"
    )
    p.add_argument(
        "--readme", type=Path, default=None, metavar="FILE",
        help="with --readme-table: the README to rewrite (default: the project's)",
    )  # fmt: skip
    p.add_argument(
        "--only",
        nargs="+",
        choices=["quality", "coverage", "quotient", "overhead", "lsp", "budget", *USEFULNESS],
        default=None,
        help="run only these benchmarks",
    )
    return p


#: A benchmark's entry point and its arguments.
Run = tuple[Callable[..., int], list[str]]


def benchmarks(args: argparse.Namespace) -> dict[str, Run]:
    """Every benchmark, in order, with the arguments this report runs it with."""
    from bench import (
        fim_quality,
        grammar_coverage,
        lsp_latency,
        overhead,
        quotient_check,
        usefulness,
    )

    pick = 0 if args.quick else 1
    paths = list(args.paths)
    seed = ["--seed", str(args.seed)]
    useful: dict[str, Run] = {
        suite: (
            usefulness.main,
            [
                suite,
                *("--model", args.model, "--n", str(sizes[pick]), "--json", *seed),
                *("--jobs", str(args.jobs), "--no-progress"),
            ],
        )
        for suite, sizes in USEFULNESS.items()
    }
    return {
        "quality": (
            fim_quality.main,
            [
                *paths,
                *("--model", args.model, "--cuts", "both", "--heal-compare", "--inside-compare"),
                "--details",
                *("--n", str(SIZES["fim_cuts"][pick])),
                *("--max-tokens", str(SIZES["fim_max_tokens"][pick]), "--json", *seed),
                *("--jobs", str(args.jobs)),
            ],
        ),
        "coverage": (
            grammar_coverage.main,
            [*paths, "--json", *seed]
            + (["--limit", str(SIZES["coverage_files"][0])] if args.quick else []),
        ),
        "quotient": (
            quotient_check.main,
            [*paths, "--n", str(SIZES["quotient_cuts"][pick]), "--json", *seed],
        ),
        "overhead": (
            overhead.main,
            [*paths, "--n", str(SIZES["overhead_cuts"][pick]), "--json", *seed],
        ),
        "lsp": (
            lsp_latency.main,
            [
                *paths,
                *("--model", args.model, "--requests", str(SIZES["lsp_requests"][pick])),
                *("--json", "--no-progress", *seed),
            ],
        ),
        "budget": (
            fim_quality.main,
            [
                *paths,
                *("--model", args.model, "--cuts", "both", "--n", str(SIZES["budget_cuts"][pick])),
                *("--budgets", *map(str, BUDGETS), "--max-tokens", "32", "--json", *seed),
                *("--jobs", str(args.jobs), "--no-progress"),
            ],
        ),
        **useful,
    }


def _command(run: Run) -> str:
    bench_main, bench_argv = run
    return f"python -m {bench_main.__module__} {' '.join(bench_argv)}"


def run_benchmark(name: str, run: Run, folder: Path, out: IO[str]) -> tuple[int, Any, Any]:
    """Run one benchmark, write its JSON; (exit status, figures, how it was run)."""
    print(f"== {name}: {_command(run)}", file=out)
    t0, load = time.monotonic(), list(os.getloadavg())
    status, result = _capture(*run)
    (folder / f"{name}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    elapsed = round(time.monotonic() - t0, 1)
    print(f"   done in {elapsed:.0f} s (exit status {status})", file=out)
    record = {
        "load_average_at_start": load,
        "command": _command(run),
        "elapsed_s": elapsed,
        "exit_status": status,
        "finished": dt.datetime.now().isoformat(timespec="seconds"),
    }
    return status, result, record


def draw(results: dict[str, Any], config: dict[str, Any], folder: Path) -> Path:
    """Write ``config.json``, the plots and ``report.md`` into ``folder``."""
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    if "overhead" in results:
        plot_overhead(results["overhead"], folder / "overhead.png")
        plot_construction(results["overhead"], folder / "construction.png")
    if "quality" in results:
        plot_success(results["quality"], folder / "success.png")
    if results.get("budget", {}).get("budget_sweep"):
        plot_budget(results["budget"], folder / "budget.png")
    if any(results.get(suite) for suite in USEFULNESS):
        plot_usefulness(results, folder / "usefulness.png")
    report = folder / "report.md"
    report.write_text(markdown(results, config))
    return report


def readme_table(write: bool, readme: Path | None, out: IO[str]) -> int:
    """Print the README's figures table, or rewrite the README's block with it."""
    path = readme or readme_figures.README
    block = readme_figures.table(readme_figures.RESULTS, path.resolve().parent)
    if not write:
        out.write(block)
        return 0
    text = path.read_text(encoding="utf-8")
    new = readme_figures.replace_block(text, block)
    if new != text:
        path.write_text(new, encoding="utf-8")
    print(f"{path}: figures table {'rewritten' if new != text else 'unchanged'}", file=out)
    return 0


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    if args.readme_table:
        return readme_table(args.write, args.readme, out)
    if args.write or args.readme:
        build_parser().error("--write and --readme go with --readme-table")
    date = dt.date.today().isoformat()
    folder = args.out or RESULTS / f"{date}-{args.machine or _slug(platform.node())}"
    folder.mkdir(parents=True, exist_ok=True)
    runs = benchmarks(args)  # imports every benchmark: not part of the report's time
    started = time.monotonic()
    # How each benchmark in the folder was run (kept across --only runs).
    earlier: dict[str, Any] = {}
    if (folder / "config.json").is_file():
        earlier = json.loads((folder / "config.json").read_text())
    timeline: dict[str, Any] = earlier.get("benchmarks", {})
    results: dict[str, Any] = {}
    statuses: dict[str, int] = {}
    for name, run in runs.items():
        if not args.render and (not args.only or name in args.only):
            statuses[name], results[name], timeline[name] = run_benchmark(name, run, folder, out)
    # With --only, the other benchmarks' figures already in the folder stay in the report.
    kept = [name for name in runs if name not in results and (folder / f"{name}.json").is_file()]
    for name in kept:
        results[name] = json.loads((folder / f"{name}.json").read_text())
    pick = 0 if args.quick else 1
    config = {
        "date": date,
        "command": "python -m bench.report " + " ".join(argv if argv is not None else sys.argv[1:]),
        "quick": args.quick,
        "seed": args.seed,
        "model": args.model,
        "sizes": {k: v[pick] for k, v in (SIZES | USEFULNESS).items()},
        # Rendering runs nothing: the machine is the one the figures were taken on.
        "machine": earlier.get("machine") if args.render and earlier else machine_info(),
        "exit_statuses": statuses,
        "kept_from_earlier_runs": kept,
        "benchmarks": {name: timeline[name] for name in runs if name in timeline},
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    print(f"report: {draw(results, config, folder)}", file=out)
    return max(statuses.values(), default=0)


if __name__ == "__main__":
    sys.exit(main())
