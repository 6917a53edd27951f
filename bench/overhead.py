"""Per-token syntax-checking overhead against the size of the file (the paper's Figure 11).

Usage::

    python -m bench.overhead [PATHS...] [--n N] [--seed S] [--target X.Y] [--json]

For ``--n`` random-span cuts of the corpus (``bench.quotient_check``'s cuts; PATHS
default to the standard library), the true middle is split into token-sized pieces
(identifiers, numbers, runs of spaces, single punctuation: about the size of a
code model's tokens, without loading a model) and fed one piece at a time, as a
decoder would, to two checkers:

``constrained``  the FIM quotient: ``state.feed(piece).viable`` (the check every
                 candidate token gets) and, separately, ``state.complete`` (the
                 end-of-generation check); the quotient is built once per cut
                 (its construction time is reported on its own, by file size);
``ast_parse``    what a decoder without an incremental parser must do to know the
                 same: ``ast.parse(L + middle so far + R)`` after every token,
                 whose cost grows with the whole file.

Reported per bin of file size (characters): medians and p90 of microseconds per
token for each checker, the ratio ast.parse / constrained, and quotient
construction time.  The raw points are kept for the plots of ``bench.report``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import IO, Any

from bench.grammar_coverage import (
    Oracle,
    OracleFailure,
    add_corpus_arguments,
    discover,
    percentile,
    stdlib_corpus,
    with_progress,
)
from bench.quotient_check import Corpus, make_cuts
from lexer.version import TargetVersion
from quotient_parser.quotient import QuotientBuilder

#: Upper bounds (characters) of the file-size bins; the last bin is open.
BINS = (2_000, 8_000, 32_000, 128_000)
_PIECE = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[0-9]+|[ \t]+|\r?\n|.", re.DOTALL)


def pieces(middle: str) -> list[str]:
    """Token-sized pieces of ``middle``."""
    return _PIECE.findall(middle)


def bin_label(size: int) -> str:
    low = 0
    for high in BINS:
        if size < high:
            return f"{low // 1000}k-{high // 1000}k"
        low = high
    return f"{low // 1000}k+"


@dataclass
class Point:
    """One cut's measurements."""

    file: str
    file_chars: int
    tokens: int
    build_ms: float
    viable_us: float  # median over the cut's tokens
    complete_us: float
    ast_parse_us: float


def measure(text: str, left_end: int, middle_end: int, builder: QuotientBuilder) -> Point | None:
    left, middle, right = text[:left_end], text[left_end:middle_end], text[middle_end:]
    parts = pieces(middle)
    if not parts:
        return None
    t0 = time.perf_counter()
    quotient = builder.build(left, right)
    build_ms = (time.perf_counter() - t0) * 1e3
    state = quotient.initial
    viable_ns: list[int] = []
    complete_ns: list[int] = []
    parse_ns: list[int] = []
    so_far = ""
    for part in parts:
        t0 = time.perf_counter_ns()
        state = state.feed(part)
        ok = state.viable
        viable_ns.append(time.perf_counter_ns() - t0)
        if not ok:
            return None  # the corpus and the quotient disagree: bench.quotient_check's job
        t0 = time.perf_counter_ns()
        _ = state.complete
        complete_ns.append(time.perf_counter_ns() - t0)
        so_far += part
        source = left + so_far + right
        t0 = time.perf_counter_ns()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(source)
        except (SyntaxError, ValueError):
            pass
        parse_ns.append(time.perf_counter_ns() - t0)

    def median_us(values: list[int]) -> float:
        return sorted(values)[len(values) // 2] / 1e3

    return Point(
        file="",
        file_chars=len(text),
        tokens=len(parts),
        build_ms=build_ms,
        viable_us=median_us(viable_ns),
        complete_us=median_us(complete_ns),
        ast_parse_us=median_us(parse_ns),
    )


def summarize(points: Sequence[Point]) -> list[dict[str, Any]]:
    """Per size bin: medians and p90s of the per-cut medians."""
    rows = []
    labels = sorted({bin_label(p.file_chars) for p in points}, key=_bin_order)
    for label in labels:
        group = [p for p in points if bin_label(p.file_chars) == label]

        def stat(key: str, q: float, group: list[Point] = group) -> float | None:
            value = percentile([getattr(p, key) for p in group], q)
            return None if value is None else round(value, 1)

        constrained = stat("viable_us", 50) or 0.0
        parse = stat("ast_parse_us", 50) or 0.0
        rows.append(
            {
                "bin": label,
                "cuts": len(group),
                "file_chars_median": stat("file_chars", 50),
                "constrained_viable_us_median": constrained,
                "constrained_viable_us_p90": stat("viable_us", 90),
                "constrained_complete_us_median": stat("complete_us", 50),
                "constrained_complete_us_p90": stat("complete_us", 90),
                "ast_parse_us_median": parse,
                "ast_parse_us_p90": stat("ast_parse_us", 90),
                "ratio_ast_parse_over_constrained": round(parse / constrained, 1)
                if constrained
                else None,
                "build_ms_median": stat("build_ms", 50),
                "build_ms_p90": stat("build_ms", 90),
            }
        )
    return rows


def _bin_order(label: str) -> int:
    return int(label.split("k")[0])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.overhead",
        description="Per-token checking cost: the FIM quotient against ast.parse on every token.",
    )
    add_corpus_arguments(p, target_help="target version (default: the oracle's)")
    p.add_argument("--n", type=int, default=200, metavar="N", help="random-span cuts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    files = discover(args.paths) if args.paths else stdlib_corpus()
    started = time.monotonic()
    with Oracle(args.oracle) as oracle:
        target = TargetVersion.parse(args.target or oracle.version[:2])
        corpus = Corpus(files, oracle)
        cuts = make_cuts(corpus, "randspan", args.n, args.seed)
        builder = QuotientBuilder(target)
        points: list[Point] = []
        for cut in with_progress(cuts, args.progress, "cut", lambda c: c.file):
            source = corpus.by_name(cut.file)
            if source is None:
                continue
            point = measure(source.text, cut.left_end, cut.middle_end, builder)
            if point is not None:
                point.file = cut.file
                points.append(point)
        oracle_version = oracle.version
    return {
        "target": str(target),
        "oracle_version": f"{oracle_version[0]}.{oracle_version[1]}",
        "n": args.n,
        "seed": args.seed,
        "cuts_measured": len(points),
        "bins": summarize(points),
        "points": [asdict(p) for p in points],
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def summary(report: dict[str, Any]) -> str:
    lines = [
        f"per-token overhead, target {report['target']}: {report['cuts_measured']} cuts, "
        f"{report['elapsed_s']} s",
        f"  {'file size':>10} {'cuts':>5} {'viable µs':>10} {'complete µs':>12} "
        f"{'ast.parse µs':>13} {'ratio':>7} {'build ms':>9}",
    ]
    for row in report["bins"]:
        lines.append(
            f"  {row['bin']:>10} {row['cuts']:>5} {row['constrained_viable_us_median']:>10} "
            f"{row['constrained_complete_us_median']:>12} {row['ast_parse_us_median']:>13} "
            f"{row['ratio_ast_parse_over_constrained']!s:>7} {row['build_ms_median']:>9}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    try:
        report = run(args)
    except OracleFailure as exc:
        print(f"bench.overhead: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=1), file=out)
    else:
        print(summary(report), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
