"""Distance to a finish and ``stay_inside`` on middles cut out of real code.

Usage::

    python -m bench.finish_distance [PATHS...] [--n N] [--seed S] [--target 3.11]
        [--oracle PYTHON] [--witnesses K] [--witness-nodes N] [--witness-seconds S]
        [--json]

The cuts are ``bench.quotient_check``'s (``--n`` boundary and ``--n``
randspan cuts from the running interpreter's standard library by default).
For every cut a decoder is imitated: the true middle is split into
token-like pieces (a word or a run of punctuation with at most one blank
before it, or a run of blanks) and fed piece by piece; at each step the
state reached and a few sibling candidates (other common pieces) ask
``distance()``, as a steering decoder would for each viable candidate.

Reported:

* the time per ``distance()`` call, first call on a quotient (which reads
  the right context) apart from the rest, and of the bound alone;
* witnesses (``QuotientState.witness``) at ``--witnesses`` states of each
  cut that are not complete (evenly along the middle, the start first):
  time, nodes, how often one is found and proved shortest, its length
  against the bound; every witness
  is checked: ``feed(w).complete`` and the oracle's ``ast.parse`` of
  ``L + m + w + R``, and the bound (and the search's proved lower bound)
  must not exceed its length;
* ``stay_inside``: how many true middles are still complete with it, why the
  others escape (a bracket, string or block open at the cursor that R
  closes), how often the restricted quotient looks empty
  (``Quotient.inside_empty()``), and the cost of a step with the check.

The grammar's per-terminal tables are built before the timings
(``YieldTables.warm_up``, about a second), as a server would at start.
The exit status is 1 when a witness is invalid or a bound exceeds a
witness, 0 otherwise.  Timings are taken on a shared machine: compare
figures from one run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

from bench.corpus import discover, stdlib_corpus, stdlib_root
from bench.harness import add_corpus_arguments, rounded_percentile, with_progress
from bench.oracle import Oracle, OracleFailure
from bench.quotient_check import CUT_KINDS, Corpus, Cut, make_cuts
from quotient_parser.finish import INFINITE
from quotient_parser.quotient import InsideState, Quotient, QuotientBuilder, QuotientState
from quotient_parser.yields import yield_tables

#: A token-like piece of a middle: a word or a run of punctuation with at most
#: one blank before it, or a run of blanks and line breaks.
PIECE_RE = re.compile(r" ?\w+| ?[^\w\s]+|\s+")
#: Pieces a decoder's other candidates might be.
SIBLINGS = (" x", "(", ")", ",", ":", "\n", " =", ".")


def pieces(middle: str) -> list[str]:
    return PIECE_RE.findall(middle)


@dataclass
class Sample:
    """One witness: where, what, how long it took, and the checks."""

    cut: int
    index: int  # middle characters fed before it
    bound: int
    length: int | None
    lower: int
    exact: bool
    nodes: int
    ms: float
    complete: bool = True
    problem: str = ""


@dataclass
class Results:
    first_us: list[float] = field(default_factory=list)
    warm_us: list[float] = field(default_factory=list)
    bound_us: list[float] = field(default_factory=list)
    complete_us: list[float] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    inside: Counter[str] = field(default_factory=Counter)
    inside_examples: list[tuple[str, str, str, str]] = field(default_factory=list)
    inside_empty: int = 0
    step_free_us: list[float] = field(default_factory=list)
    step_inside_us: list[float] = field(default_factory=list)
    cuts: int = 0
    empty: int = 0


def _timed_distance(q: Quotient, state: QuotientState, results: Results, first: bool) -> None:
    """Time distance() on a fresh state, and its two parts: the completeness check
    (which a decoder asks anyway before accepting an end) and the bound."""
    t0 = time.perf_counter_ns()
    complete = state.complete
    t1 = time.perf_counter_ns()
    if not complete:
        q.finish.lower_bound(state.state)
    t2 = time.perf_counter_ns()
    state.distance()
    t3 = time.perf_counter_ns()
    if first:
        results.first_us.append((t3 - t0) / 1e3)
        return
    results.complete_us.append((t1 - t0) / 1e3)
    results.bound_us.append((t2 - t1) / 1e3)
    results.warm_us.append((t3 - t0) / 1e3)


def walk(q: Quotient, middle: str, results: Results) -> list[tuple[int, QuotientState]]:
    """Feed the middle piece by piece, asking distance() as a decoder would; the
    states reached, with the characters fed."""
    state = q.initial
    _timed_distance(q, state, results, first=True)
    states = [(0, state)]
    fed = 0
    for piece in pieces(middle):
        for sibling in SIBLINGS:
            if sibling != piece:
                candidate = state.feed(sibling)
                if candidate.viable:
                    _timed_distance(q, candidate, results, first=False)
        state = state.feed(piece)
        fed += len(piece)
        if not state.viable:
            break
        _timed_distance(q, state, results, first=False)
        states.append((fed, state))
    return states


def witnesses(
    number: int,
    cut: Cut,
    q: Quotient,
    states: list[tuple[int, QuotientState]],
    args: argparse.Namespace,
    results: Results,
) -> list[tuple[Sample, str]]:
    """Witnesses at ``args.witnesses`` states of the walk; (sample, file text) pairs."""
    open_states = [(fed, state) for fed, state in states if not state.complete]
    count = min(args.witnesses, len(open_states))
    if count <= 0:
        return []
    last = len(open_states) - 1
    picks = sorted({round(i * last / max(1, count - 1)) for i in range(count)})
    out: list[tuple[Sample, str]] = []
    for k in picks:
        fed, state = open_states[k]
        bound = state.distance()
        t0 = time.perf_counter()
        found = state.witness(max_nodes=args.witness_nodes, max_seconds=args.witness_seconds)
        ms = (time.perf_counter() - t0) * 1e3
        text = found.text
        sample = Sample(
            number,
            fed,
            bound,
            None if text is None else len(text),
            found.lower,
            found.exact,
            found.nodes,
            ms,
        )
        if text is not None:
            sample.complete = state.feed(text).complete
            if not sample.complete:
                sample.problem = "witness not complete"
            elif bound > len(text) or found.lower > len(text):
                sample.problem = f"bound {bound} / lower {found.lower} > witness {len(text)}"
            source = q.left + cut.middle[:fed] + text + q.right
            out.append((sample, source))
        results.samples.append(sample)
    return out


def check_inside(
    cut: Cut, left: str, right: str, builder: QuotientBuilder, results: Results
) -> None:
    """Is the true middle still complete under stay_inside?  Why not?"""
    q = builder.build(left, right, stay_inside=True)  # the builder's memo is warm
    if q.empty:
        return
    if not q.free_initial.feed(cut.middle).complete:
        results.inside["not complete without it"] += 1
        return
    state = q.initial
    assert isinstance(state, InsideState)
    reason = None
    for piece in pieces(cut.middle):
        free = state.state
        t0 = time.perf_counter_ns()
        free.feed(piece)
        results.step_free_us.append((time.perf_counter_ns() - t0) / 1e3)
        t0 = time.perf_counter_ns()
        reason = q.enclosure.escape(free, piece)
        results.step_inside_us.append((time.perf_counter_ns() - t0) / 1e3)
        if reason is not None:
            break
        state = state.feed(piece)
    if reason is None and state.complete:
        results.inside[f"{cut.kind}: kept"] += 1
        return
    results.inside[f"{cut.kind}: escapes ({reason or 'at the end'})"] += 1
    if len(results.inside_examples) < 12:
        results.inside_examples.append((cut.file, reason or "", q.left[-40:], cut.middle[:60]))
    if q.inside_empty():
        results.inside_empty += 1


def run(
    cuts: Sequence[Cut],
    corpus: Corpus,
    target: tuple[int, int],
    oracle: Oracle,
    args: argparse.Namespace,
) -> Results:
    results = Results()
    checks: list[tuple[Sample, str]] = []
    for number, cut in enumerate(
        with_progress(cuts, not args.no_progress and sys.stderr.isatty(), "cut", lambda c: c.file)
    ):
        source = corpus.by_name(cut.file)
        if source is None:
            continue
        left, right = source.text[: cut.left_end], source.text[cut.middle_end :]
        builder = QuotientBuilder(target)
        q = builder.build(left, right)
        results.cuts += 1
        if q.empty:
            results.empty += 1
            continue
        states = walk(q, cut.middle, results)
        checks.extend(witnesses(number, cut, q, states, args, results))
        check_inside(cut, left, right, builder, results)
    verdicts = oracle.check_many([source for _, source in checks]) if checks else []
    for (sample, _source), verdict in zip(checks, verdicts):
        if verdict.ok is False and not sample.problem:
            sample.problem = f"oracle rejects: {verdict.error}"
    return results


def report(
    results: Results, args: argparse.Namespace, target: tuple[int, int]
) -> dict[str, object]:
    samples = results.samples
    found = [s for s in samples if s.length is not None]
    exact = [s for s in found if s.exact]
    nonzero = [s for s in exact if s.length]
    inside_steps = [b - a for a, b in zip(results.step_free_us, results.step_inside_us)]
    kept = {k: v for k, v in results.inside.items() if k.endswith("kept")}
    return {
        "target": ".".join(map(str, target)),
        "seed": args.seed,
        "n": args.n,
        "cuts": results.cuts,
        "empty_quotients": results.empty,
        "distance_first_call_us": {
            "median": rounded_percentile(results.first_us, 50),
            "p90": rounded_percentile(results.first_us, 90),
            "p99": rounded_percentile(results.first_us, 99),
            "samples": len(results.first_us),
        },
        "distance_us": {
            "median": rounded_percentile(results.warm_us, 50),
            "p90": rounded_percentile(results.warm_us, 90),
            "p99": rounded_percentile(results.warm_us, 99),
            "samples": len(results.warm_us),
        },
        "complete_check_us": {
            "median": rounded_percentile(results.complete_us, 50),
            "p90": rounded_percentile(results.complete_us, 90),
            "p99": rounded_percentile(results.complete_us, 99),
            "samples": len(results.complete_us),
        },
        "bound_only_us": {
            "median": rounded_percentile(results.bound_us, 50),
            "p90": rounded_percentile(results.bound_us, 90),
            "p99": rounded_percentile(results.bound_us, 99),
            "samples": len(results.bound_us),
        },
        "witness": {
            "states": len(samples),
            "found": len(found),
            "proved_shortest": len(exact),
            "ms_median": rounded_percentile([s.ms for s in samples], 50),
            "ms_p90": rounded_percentile([s.ms for s in samples], 90),
            "ms_p99": rounded_percentile([s.ms for s in samples], 99),
            "nodes_median": rounded_percentile([s.nodes for s in samples], 50, 0),
            "length_median": rounded_percentile(
                [s.length for s in found if s.length is not None], 50, 0
            ),
            "bound_over_shortest_mean": round(
                sum(s.bound / s.length for s in nonzero if s.length) / len(nonzero), 3
            )
            if nonzero
            else None,
            "bound_equals_shortest": sum(s.bound == s.length for s in exact),
            "unreachable": sum(s.bound >= INFINITE for s in samples),
            "problems": [
                {"cut": s.cut, "index": s.index, "problem": s.problem} for s in samples if s.problem
            ],
        },
        "stay_inside": {
            "true_middles": dict(sorted(results.inside.items())),
            "kept_share": round(sum(kept.values()) / max(1, sum(results.inside.values())), 3),
            "looks_empty": results.inside_empty,
            "step_us_free_median": rounded_percentile(results.step_free_us, 50),
            "step_us_check_median": rounded_percentile(results.step_inside_us, 50),
            "step_us_check_p99": rounded_percentile(results.step_inside_us, 99),
            "extra_us_median": rounded_percentile(inside_steps, 50),
            "examples": [
                {"file": f, "reason": r, "left_end": lt, "middle": m}
                for f, r, lt, m in results.inside_examples
            ],
        },
    }


def summary(d: dict[str, object]) -> str:
    def line(name: str, key: str) -> str:
        stats = d[key]
        assert isinstance(stats, dict)
        return (
            f"  {name:<22} {stats['median']} us median, {stats['p90']} p90, "
            f"{stats['p99']} p99 ({stats['samples']} calls)"
        )

    w = d["witness"]
    inside = d["stay_inside"]
    assert isinstance(w, dict) and isinstance(inside, dict)
    lines = [
        f"finish distance: target {d['target']}, {d['cuts']} cuts "
        f"({d['empty_quotients']} empty quotients), seed {d['seed']}",
        line("distance(), 1st call", "distance_first_call_us"),
        line("distance()", "distance_us"),
        line("  its complete check", "complete_check_us"),
        line("  its bound", "bound_only_us"),
        f"  witnesses              {w['found']} of {w['states']} states found, "
        f"{w['proved_shortest']} proved shortest; {w['ms_median']} ms median, "
        f"{w['ms_p90']} p90, {w['ms_p99']} p99; {w['nodes_median']} nodes median",
        f"  bound / shortest       {w['bound_over_shortest_mean']} mean (non-empty finishes), "
        f"equal in {w['bound_equals_shortest']} of {w['proved_shortest']}",
        f"  problems               {len(w['problems'])}",
        f"  stay_inside            kept {inside['kept_share']:.1%} of true middles: "
        + ", ".join(f"{k} {v}" for k, v in inside["true_middles"].items()),
        f"                         looks empty {inside['looks_empty']}; step "
        f"{inside['step_us_free_median']} us, check {inside['step_us_check_median']} us "
        f"median ({inside['step_us_check_p99']} p99)",
    ]
    for problem in w["problems"]:
        lines.append(f"    problem: {problem}")
    for example in inside["examples"]:
        lines.append(
            f"    escapes ({example['reason']}) {example['file']}: "
            f"...{example['left_end']!r} | {example['middle']!r}"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.finish_distance",
        description="Distance to a finish and stay_inside on middles cut out of real code.",
    )
    add_corpus_arguments(p, target_help="Python version of the quotient")
    p.add_argument("--n", type=int, default=100, metavar="N", help="cuts of each kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--witnesses", type=int, default=3, metavar="K", help="witness searches per cut")
    p.add_argument("--witness-nodes", type=int, default=2000, metavar="N")
    p.add_argument("--witness-seconds", type=float, default=0.5, metavar="S")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    try:
        files = discover(args.paths) if args.paths else stdlib_corpus()
    except FileNotFoundError as exc:
        print(f"error: no such file or directory: {exc}", file=sys.stderr)
        return 2
    try:
        oracle = Oracle(args.oracle)
    except (OSError, OracleFailure, ValueError, RuntimeError) as exc:
        print(f"error: cannot start oracle {args.oracle!r}: {exc}", file=sys.stderr)
        return 2
    with oracle:
        target = tuple(args.target or oracle.version[:2])
        corpus = Corpus(files, oracle)
        cuts = [cut for kind in CUT_KINDS for cut in make_cuts(corpus, kind, args.n, args.seed)]
        # the grammar and its per-terminal tables outside the timings (a server
        # builds them at start: YieldTables.warm_up)
        recognizer = QuotientBuilder(target).recognizer
        yield_tables(recognizer.grammar, recognizer.automaton).warm_up()
        results = run(cuts, corpus, (target[0], target[1]), oracle, args)
    d = report(results, args, (target[0], target[1]))
    d["corpus"] = " ".join(args.paths) if args.paths else str(stdlib_root())
    if args.json:
        print(json.dumps(d, indent=1), file=out)
    else:
        print(summary(d), file=out)
    problems = d["witness"]
    assert isinstance(problems, dict)
    return 1 if problems["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
