"""``summary.md`` and a latency-versus-editors plot from ``bench.team_load`` JSON files.

Usage::

    python -m bench.gpu.team_report RUN.json [RUN.json ...] --out DIR [--phases PHASES.json]
        [--title TEXT]

One table per run (a model shape and API), one row per load level; the knee (the first
level whose p95 passes 300 ms, or twice the p95 of the fewest editors); the issue's target
(16 editors, p95 <= 300 ms, every middle valid); the fault level's windows; the phases'
times when given.  The plot is ``latency.png`` (matplotlib, where installed) or
``latency.svg``, drawn here without it: p50 and p95 against editors, one colour per run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["knee", "plot", "summary"]

#: The issue's target: at this many editors, p95 at most this.
TARGET_EDITORS, TARGET_P95_MS = 16, 300.0
_COLUMNS = (
    ("editors", "editors"),
    ("slots", "slots"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p95_ms", "p95 ms"),
    ("latency_p99_ms", "p99 ms"),
    ("worst_editor_p95_ms", "worst editor p95"),
    ("answered", "answered"),
    ("answered_with_completion", "with completion"),
    ("requests_per_completion", "requests / completion"),
    ("server_tokens_per_s", "server tok/s"),
    ("server_prompt_tokens_per_s", "prompt tok/s"),
    ("prompt_cached_share", "prompt cached"),
    ("busy_slots_per_decode", "busy slots / decode"),
    ("client_parser_share", "parser share"),
    ("middles_checked", "middles checked"),
    ("middles_invalid", "invalid"),
    ("hung_editors", "hung"),
    ("errors", "errors"),
    ("machine_cpu_busy", "CPU busy"),
    ("driver_loop_lag_p95_ms", "driver lag p95 ms"),
)


def run_name(report: dict[str, Any], path: Path) -> str:
    meta = report.get("meta", {})
    model = Path(str(meta.get("model") or meta.get("server_url") or path.stem)).stem
    return f"{model} ({meta.get('server_api', '?')})"


def knee(rows: Sequence[dict[str, Any]]) -> int | None:
    """The fewest editors whose p95 passes the target or twice the lightest level's."""
    loads = sorted(
        (r for r in rows if r.get("kind") == "load" and r.get("latency_p95_ms")),
        key=lambda r: r["editors"],
    )
    if not loads:
        return None
    base = loads[0]["latency_p95_ms"]
    if base > TARGET_P95_MS:
        return int(loads[0]["editors"])  # past the target from the lightest level on
    for row in loads:
        if row["latency_p95_ms"] > max(TARGET_P95_MS, 2 * base):
            return int(row["editors"])
    return None


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


def _table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| " + " | ".join(title for _, title in _COLUMNS) + " |",
        "|" + " --- |" * len(_COLUMNS),
    ]
    lines += ["| " + " | ".join(_cell(r.get(k)) for k, _ in _COLUMNS) + " |" for r in rows]
    return lines


def _faults(row: dict[str, Any]) -> list[str]:
    f = row["faults"]
    lines = [
        f"Faults with {row['editors']} editors over {row['seconds']:.0f} s: editor 0 opens a "
        f"{f.get('big_file_bytes', 0) / 1e6:.1f} MB file at {f['big_file_at_s']} s"
        + (
            f", the server restarts at {f['restart_at_s']} s (back at {f['server_back_at_s']} "
            f"s, {f['server_down_s']} s down)"
            if "restart_at_s" in f
            else ""
        )
        + f"; hung editors: {row['hung_editors']}; every middle valid: {row['valid']}.",
        "",
        "| window | answered | with completion | p50 ms | p95 ms | p99 ms | states |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in (
        "others_before",
        "others_with_big_file",
        "big_file_editor",
        "everyone_during_restart",
        "others_after_restart",
    ):
        w = f.get(name)
        if w:
            states = ", ".join(f"{k} {v}" for k, v in w["states"].items())
            lines.append(
                f"| {name} ({w['from_s']}-{w['to_s']} s) | {w['answered']} | "
                f"{w['with_completion']} | {_cell(w['p50_ms'])} | {_cell(w['p95_ms'])} | "
                f"{_cell(w['p99_ms'])} | {states} |"
            )
    if "editors_recovered" in f:
        lines += [
            "",
            f"After the restart: {f['editors_recovered']} of {f['editors_total']} "
            f"editors answered from the model again (p50 {f['recovery_s_p50']} s, max "
            f"{f['recovery_s_max']} s after the server's health), "
            f"{f['editors_with_completion_after']} got a completion (first after p50 "
            f"{f['first_completion_s_p50']} s, max {f['first_completion_s_max']} s).",
        ]
    return lines


def summary(
    runs: Sequence[tuple[str, dict[str, Any]]], title: str, phases: dict[str, Any] | None = None
) -> str:
    """The Markdown summary of ``runs`` (name, report)."""
    lines = [f"# {title}", ""]
    for name, report in runs:
        meta, rows = report.get("meta", {}), report.get("rows", [])
        loads = [r for r in rows if r.get("kind") == "load"]
        lines += [
            f"## {name}",
            "",
            f"llama-server: {meta.get('slots')} slots of {meta.get('slot_ctx')} tokens, "
            f"`{meta.get('server_args') or '(CPU)'}`; editors: real fimlsp processes over "
            f"stdio, {meta.get('drivers')} driver process(es), started in "
            f"{meta.get('editors_start_s')} s; keystroke every {meta.get('typing_ms')} ms, "
            f"{meta.get('cancel')} cancel, maxTokens {meta.get('max_tokens')}, deadline "
            f"{meta.get('deadline_ms')} ms; {meta.get('cpus')} CPUs.",
            "",
        ]
        if meta.get("skipped"):
            lines += [f"Skipped for the time budget: {', '.join(meta['skipped'])}.", ""]
        lines += _table(loads)
        k = knee(loads)
        at = next((r for r in loads if r["editors"] == TARGET_EDITORS), None)
        if k is None:
            lines += ["", "Knee: not reached at these levels."]
        elif k == loads[0]["editors"]:
            lines += [
                "",
                f"Knee: p95 above {TARGET_P95_MS:.0f} ms from the lightest level on "
                f"({k} editor(s)).",
            ]
        else:
            lines += [
                "",
                f"Knee: {k} editors (p95 past {TARGET_P95_MS:.0f} ms and twice the "
                "lightest level's).",
            ]
        if at is not None:
            met = (at["latency_p95_ms"] or math.inf) <= TARGET_P95_MS and at["valid"]
            lines.append(
                f"Target ({TARGET_EDITORS} editors: p95 <= {TARGET_P95_MS:.0f} ms, every "
                f"answered middle valid): {'met' if met else 'NOT met'} (p95 "
                f"{at['latency_p95_ms']} ms, {at['middles_invalid']} invalid of "
                f"{at['middles_checked']})."
            )
        for row in rows:
            if row.get("kind") == "faults":
                lines += ["", *_faults(row)]
        lines.append("")
    if phases:
        lines += ["## Phases", "", "| phase | seconds | result |", "| --- | --- | --- |"]
        for phase, info in phases.items():
            lines.append(
                f"| {phase} | {info.get('seconds', '-')} | "
                f"{info.get('note') or info.get('exit', '')} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot(runs: Sequence[tuple[str, dict[str, Any]]], out_dir: Path) -> Path | None:
    """latency.png with matplotlib, else latency.svg drawn here; None with nothing to draw."""
    series = []
    for name, report in runs:
        loads = sorted(
            (
                r
                for r in report.get("rows", [])
                if r.get("kind") == "load" and r.get("latency_p95_ms") is not None
            ),
            key=lambda r: r["editors"],
        )
        if loads:
            series.append(
                (
                    name,
                    [r["editors"] for r in loads],
                    [r["latency_p50_ms"] for r in loads],
                    [r["latency_p95_ms"] for r in loads],
                )
            )
    if not series:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _svg(series, out_dir / "latency.svg")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, xs, p50, p95) in enumerate(series):
        color = f"C{i}"
        ax.plot(xs, p95, "o-", color=color, label=f"{name} p95")
        ax.plot(xs, p50, "s--", color=color, alpha=0.6, label=f"{name} p50")
    ax.axhline(TARGET_P95_MS, color="grey", lw=0.8, ls=":", label=f"{TARGET_P95_MS:.0f} ms")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("editors typing at once")
    ax.set_ylabel("request to answer (ms)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path = out_dir / "latency.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _svg(series: Sequence[tuple[str, list[int], list[float], list[float]]], path: Path) -> Path:
    """The same plot as plain SVG: log-2 editors across, log latency up."""
    width, height, margin = 640, 400, 60
    xs = [x for _, e, _, _ in series for x in e]
    ys = [y for _, _, p50, p95 in series for y in (*p50, *p95) if y and y > 0] + [TARGET_P95_MS]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs)) or 1.0
    y0, y1 = math.log10(min(ys)) - 0.1, math.log10(max(ys)) + 0.1

    def px(x: float) -> float:
        span = (x1 - x0) or 1.0
        return margin + (math.log2(x) - x0) / span * (width - 2 * margin)

    def py(y: float) -> float:
        return height - margin - (math.log10(y) - y0) / (y1 - y0) * (height - 2 * margin)

    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{margin}" y1="{height - margin}" x2="{width - margin}" '
        f'y2="{height - margin}" stroke="black"/>',
        f'<line x1="{margin}" y1="{margin}" x2="{margin}" y2="{height - margin}" stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">editors typing at '
        "once</text>",
        f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" '
        'text-anchor="middle">request to answer (ms)</text>',
    ]
    for x in sorted(set(xs)):
        parts.append(
            f'<text x="{px(x):.1f}" y="{height - margin + 15}" text-anchor="middle">{x}</text>'
        )
    for exp in range(math.floor(y0), math.ceil(y1) + 1):
        for y in (10**exp, 3 * 10**exp):
            if y0 <= math.log10(y) <= y1:
                parts.append(
                    f'<text x="{margin - 5}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>'
                )
    parts.append(
        f'<line x1="{margin}" y1="{py(TARGET_P95_MS):.1f}" x2="{width - margin}" '
        f'y2="{py(TARGET_P95_MS):.1f}" stroke="grey" stroke-dasharray="2,3"/>'
    )
    for i, (name, e, p50, p95) in enumerate(series):
        color = colors[i % len(colors)]
        for values, dash, label in ((p95, "", "p95"), (p50, ' stroke-dasharray="5,3"', "p50")):
            points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(e, values) if y)
            parts.append(f'<polyline points="{points}" fill="none" stroke="{color}"{dash}/>')
            parts.append(
                f'<text x="{width - margin + 2}" y="{margin + 14 * (2 * i + (label == "p50"))}" '
                f'fill="{color}" text-anchor="end">{name} {label}</text>'
            )
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu.team_report")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--phases", type=Path)
    p.add_argument("--title", default="A team's editors against one llama-server")
    args = p.parse_args(argv)
    runs = []
    for path in args.runs:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"team_report: {path}: {exc}", file=sys.stderr)
            continue
        runs.append((run_name(report, path), report))
    phases = json.loads(args.phases.read_text()) if args.phases and args.phases.is_file() else None
    args.out.mkdir(parents=True, exist_ok=True)
    text = summary(runs, args.title, phases)
    (args.out / "summary.md").write_text(text)
    drawn = plot(runs, args.out)
    print(text)
    print(f"plot: {drawn}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
