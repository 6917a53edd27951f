"""Check the recognizer against CPython's parser on a corpus of real code.

Usage::

    python -m bench.grammar_coverage [PATHS...] [--target 3.13] [--oracle PYTHON]
        [--json] [--limit N] [--seed S] [--mutants 20] [--prefix-offsets 50]

PATHS are files or directories (searched recursively for ``*.py``); the default
corpus is the running interpreter's standard library including its test suite
(``sysconfig.get_paths()['stdlib']`` without ``site-packages``).

The oracle is ``ast.parse`` in the interpreter given by ``--oracle`` (default:
this one), run as a persistent worker process (``bench/_oracle_worker.py``).
``--target`` defaults to the oracle's version; a mismatch is reported.

For every file:

1. *membership*: ``Recognizer.recognize`` of the decoded text must agree with
   the oracle's verdict on the file's bytes; a file that ``decode_source``
   refuses counts as rejected;
2. *prefix* (files the oracle accepts): the state at every line start and at
   ``--prefix-offsets`` random offsets must be viable;
3. *mutant* (files the oracle accepts): ``--mutants`` random one-token or
   one-character edits; ``complete`` after feeding the mutant must agree with
   the oracle's verdict on the mutant's text;
4. *speed*: microseconds per character of ``recognize`` over whole files the
   oracle accepts, and microseconds per ``state.feed(next_char).viable`` (one
   step with its answer, which states may compute lazily) from states
   stored at the random prefix offsets (best of ``--step-repeats`` equivalent
   states, each fed that character for the first time, since states may
   memoize what they were fed).

Other kinds of findings: *crash* (our code raised), *timeout* (a file took
longer than ``--time-limit`` seconds of our code's time) and *consistency*
(feeding the text incrementally and ``recognize`` disagree).  The run is
deterministic given ``--seed`` (timings aside); the exit status is 1 when
anything was found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

from bench.corpus import (
    CorpusFile,
    LineIndex,
    discover,
    select_evenly,
    stdlib_corpus,
    stdlib_root,
)
from bench.harness import (
    FileTimeout,
    add_corpus_arguments,
    crash_detail,
    parse_target,
    percentile,
    time_limit,
    with_progress,
)
from bench.mutants import Mutant, make_mutant, make_mutants, token_spans
from bench.oracle import Oracle, OracleFailure, Verdict
from lexer.text import split_lines
from quotient_parser import Recognizer, SourceDecodeError, decode_source

# Names the other benchmarks imported from here before the shared pieces moved
# to bench.corpus, bench.harness, bench.mutants and bench.oracle; kept until
# they import from there.
_crash_detail = crash_detail
__all__ = [
    "Config",
    "CorpusFile",
    "FileTimeout",
    "LineIndex",
    "Mutant",
    "Oracle",
    "OracleFailure",
    "Report",
    "Verdict",
    "_crash_detail",
    "add_corpus_arguments",
    "check_files",
    "discover",
    "make_mutant",
    "make_mutants",
    "parse_target",
    "percentile",
    "select_evenly",
    "split_lines",
    "stdlib_corpus",
    "stdlib_root",
    "time_limit",
    "token_spans",
    "with_progress",
]

KINDS = ("membership", "prefix", "mutant", "consistency", "crash", "timeout", "oracle")


class State(Protocol):
    """What the benchmark needs from a recognizer state."""

    @property
    def viable(self) -> bool: ...

    @property
    def complete(self) -> bool: ...

    def feed(self, text: str, /) -> State: ...


# --------------------------------------------------------------------------- checking


@dataclass
class Config:
    target: tuple[int, int]
    mutants: int = 20
    prefix_offsets: int = 50
    seed: int = 0
    time_limit: float | None = 120.0  # seconds of our code's time per file
    step_repeats: int = 3


@dataclass(frozen=True)
class Disagreement:
    file: str
    line: int | None
    kind: str
    detail: str


@dataclass
class FileResult:
    file: str
    chars: int = 0
    oracle_ok: bool | None = None
    ours_ok: bool | None = None
    prefix_checks: int = 0
    prefix_failures: int = 0
    mutants: int = 0
    mutant_disagreements: int = 0
    mutants_unknown: int = 0
    mutants_valid: int = 0
    recognize_ns: int | None = None
    step_ns: list[int] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)

    def add(self, line: int | None, kind: str, detail: str) -> None:
        self.disagreements.append(Disagreement(self.file, line, kind, detail))

    def count(self, kind: str) -> int:
        return sum(d.kind == kind for d in self.disagreements)


def _split_points(length: int, count: int) -> list[int]:
    """Up to ``count`` distinct split points strictly inside ``range(length)``."""
    if length < 2 or count <= 0:
        return []
    return sorted({1 + i * (length - 1) // count for i in range(count)})


class FileChecker:
    """Runs all checks on one file; holds the state of a check in progress so
    that a crash or a timeout can be reported where it happened."""

    def __init__(self, rec: Recognizer, oracle: Oracle, cfg: Config, cf: CorpusFile) -> None:
        self.rec = rec
        self.oracle = oracle
        self.cfg = cfg
        self.cf = cf
        self.result = FileResult(cf.name)
        self.rng = random.Random(f"{cfg.seed}:{cf.name}")
        self.activity = "reading"
        self.text = ""
        self.index = LineIndex("")
        self.pos: int | None = None  # offset being worked on, for crash reports
        self.deadline = 0.0

    # -- driver
    def run(self) -> FileResult:
        res = self.result
        data = self.cf.path.read_bytes()
        verdict = self.oracle.check(data)
        res.oracle_ok = verdict.ok
        if verdict.ok is None:
            res.add(None, "oracle", verdict.describe())
            return res
        self.deadline = time.monotonic() + (self.cfg.time_limit or float("inf"))

        decoded = self._guarded(lambda: self._decode(data, verdict))
        if decoded is None:
            return res
        text = decoded
        mutants: list[Mutant] = []
        mutant_verdicts: list[Verdict] = []
        if verdict.ok and self.cfg.mutants > 0:
            mutants = make_mutants(text, self.cfg.mutants, self.rng)
            mutant_verdicts = self.oracle.check_many([m.text for m in mutants])
        self._guarded(lambda: self._check_text(verdict, mutants, mutant_verdicts))
        return res

    def _guarded(self, body: Callable[[], str | None]) -> str | None:
        """Run our code under the time limit, turning failures into findings."""
        res = self.result
        try:
            with time_limit(self.deadline - time.monotonic() if self.cfg.time_limit else None):
                return body()
        except FileTimeout:
            res.add(
                self._line(), "timeout", f"over {self.cfg.time_limit} s (while {self.activity})"
            )
        except Exception as exc:  # a crash of our code is a finding, never hidden
            res.add(self._line(), "crash", crash_detail(exc, self.activity))
        return None

    def _line(self) -> int | None:
        return None if self.pos is None else self.index.line_col(self.pos)[0]

    # -- phases
    def _decode(self, data: bytes, verdict: Verdict) -> str | None:
        self.activity = "decoding"
        try:
            text = decode_source(data)
        except (SourceDecodeError, SyntaxError) as exc:
            self.result.ours_ok = False
            if verdict.ok:
                line = getattr(exc, "lineno", None)
                self.result.add(
                    line if isinstance(line, int) else None,
                    "membership",
                    f"oracle accepts but decode_source raised {type(exc).__name__}: {exc}",
                )
            return None
        self.text = text
        self.index = LineIndex(text)
        self.result.chars = len(text)
        return text

    def _check_text(
        self, verdict: Verdict, mutants: Sequence[Mutant], mutant_verdicts: Sequence[Verdict]
    ) -> None:
        res, text, index, rec = self.result, self.text, self.index, self.rec

        # Whole-file recognition, timed.
        self.activity, self.pos = "recognizing the whole file", 0
        t0 = time.perf_counter_ns()
        ours = rec.recognize(text)
        res.recognize_ns = time.perf_counter_ns() - t0
        res.ours_ok = ours

        # Line by line, keeping the state at every line start.
        self.activity = "feeding line by line"
        state: State = rec.initial()
        states: list[State] = [state]
        starts = [0]
        dead_line: int | None = None  # 1-based line after which we are not viable
        for number, line_text in enumerate(split_lines(text), start=1):
            if not state.viable:
                break
            self.pos = starts[-1]
            state = state.feed(line_text)
            states.append(state)
            starts.append(starts[-1] + len(line_text))
            if not state.viable:
                dead_line = number
        final = state.feed(text[starts[-1] :])  # the rest, if we stopped early
        incremental = final.complete
        if incremental and not final.viable:
            res.add(index.line_col(len(text))[0], "consistency", "state is complete but not viable")
        if incremental and dead_line is not None:
            res.add(
                dead_line,
                "consistency",
                f"the text is complete although its prefix up to line {dead_line} is not viable",
            )
        if incremental != ours:
            res.add(
                dead_line,
                "consistency",
                f"recognize() {'accepts' if ours else 'rejects'} but feeding line by "
                f"line {'accepts' if incremental else 'rejects'}",
            )

        first_dead: int | None = None
        if not states[0].viable:
            first_dead = 0
        elif dead_line is not None:
            first_dead = self._first_dead_offset(
                states[dead_line - 1], starts[dead_line - 1], starts[dead_line]
            )

        # 1. Membership.
        line: int | None
        if ours != verdict.ok:
            if verdict.ok:
                if first_dead is not None:
                    line = index.line_col(first_dead)[0]
                    detail = (
                        f"oracle accepts; recognizer rejects: prefix stops being viable "
                        f"at {index.where(first_dead)}"
                    )
                else:
                    line = index.line_col(len(text))[0]
                    detail = "oracle accepts; recognizer rejects: all prefixes viable, not complete"
            else:
                line = verdict.lineno
                detail = f"oracle {verdict.describe()}; recognizer accepts"
            res.add(line, "membership", detail)

        if not verdict.ok:
            return

        # 2. Prefixes: every line start, then random offsets.
        self.activity = "checking prefixes"
        line_starts = len(split_lines(text)) + 1
        viable_starts = len(states) - (0 if states[-1].viable else 1)
        res.prefix_checks += line_starts
        res.prefix_failures += line_starts - viable_starts
        offsets = sorted({self.rng.randint(0, len(text)) for _ in range(self.cfg.prefix_offsets)})
        failed_offsets: list[int] = []
        samples: list[tuple[int, State]] = []
        for off in offsets:
            self.pos = off
            j = min(bisect.bisect_right(starts, off), len(states)) - 1
            st = states[j].feed(text[starts[j] : off])
            res.prefix_checks += 1
            if st.viable:
                samples.append((off, st))
            else:
                res.prefix_failures += 1
                failed_offsets.append(off)
        if first_dead is not None or failed_offsets:
            first = min([o for o in (first_dead, *failed_offsets[:1]) if o is not None])
            detail = f"prefix up to {index.where(first)} (offset {first}) is not viable"
            if first_dead is None:
                detail += " (while the line-start states are)"
            res.add(index.line_col(first)[0], "prefix", detail)

        # 4. One incremental step from stored states.  States may memoize what
        # they were fed, so a repeat must not feed the same state object the
        # same character again: each repeat uses an equivalent state reached by
        # splitting the text since the line start at a different point.
        self.activity = "timing single steps"
        for off, st in samples:
            if off >= len(text):
                continue
            self.pos = off
            ch = text[off]
            j = bisect.bisect_right(starts, off) - 1
            chunk = text[starts[j] : off]
            if not chunk and split_lines(text[off : off + 2])[0] == ch:
                continue  # a one-character line: the line state was fed just that
            twins = [st] + [
                states[j].feed(chunk[:k]).feed(chunk[k:])
                for k in _split_points(len(chunk), self.cfg.step_repeats - 1)
            ]
            best = None
            for twin in twins:
                t0 = time.perf_counter_ns()
                twin.feed(ch).viable  # noqa: B018 - the answer may be computed lazily
                dt = time.perf_counter_ns() - t0
                best = dt if best is None else min(best, dt)
            assert best is not None
            res.step_ns.append(best)

        # 3. Mutants, fed from the last stored line state before the edit.
        self.activity = "checking mutants"
        for mutant, mv in zip(mutants, mutant_verdicts):
            res.mutants += 1
            if mv.ok is None:
                res.mutants_unknown += 1
                continue
            if mv.ok:
                res.mutants_valid += 1
            self.pos = mutant.offset
            j = min(bisect.bisect_right(starts, mutant.offset), len(states)) - 1
            got = states[j].feed(mutant.text[starts[j] :]).complete
            if got == mv.ok:
                continue
            res.mutant_disagreements += 1
            where = LineIndex(mutant.text)
            line = mv.lineno if not mv.ok else where.line_col(mutant.offset)[0]
            res.add(
                line,
                "mutant",
                f"{mutant.description}: oracle {mv.describe()}, "
                f"recognizer {'accepts' if got else 'rejects'}",
            )
            whole = rec.recognize(mutant.text)
            if whole != got:
                res.add(
                    line,
                    "consistency",
                    f"{mutant.description}: recognize() {'accepts' if whole else 'rejects'}"
                    f" but feeding from the line state {'accepts' if got else 'rejects'}",
                )

    def _first_dead_offset(self, state: State, start: int, end: int) -> int:
        """The first offset in ``text[start:end]`` (a line whose start state
        is ``state``) up to which the text is not a viable prefix (``end`` if
        feeding the line character by character never makes it non-viable)."""
        self.activity = "locating the first non-viable prefix"
        text = self.text
        for off in range(start, end):
            self.pos = off
            state = state.feed(text[off])
            if not state.viable:
                return off + 1
        return end


# --------------------------------------------------------------------------- report


@dataclass
class Report:
    target: tuple[int, int]
    oracle: str
    oracle_version: str
    corpus: str
    seed: int
    mutants_per_file: int
    prefix_offsets_per_file: int
    results: list[FileResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    def disagreements(self, kind: str | None = None) -> list[Disagreement]:
        return [d for r in self.results for d in r.disagreements if kind in (None, d.kind)]

    def to_dict(self) -> dict[str, object]:
        rs = self.results
        per_char = [
            r.recognize_ns / 1000 / r.chars
            for r in rs
            if r.oracle_ok and r.chars and r.recognize_ns is not None
        ]
        steps = [ns / 1000 for r in rs for ns in r.step_ns]
        return {
            "target": ".".join(map(str, self.target)),
            "oracle": self.oracle,
            "oracle_version": self.oracle_version,
            "oracle_matches_target": self.oracle_version.split(".")[:2]
            == [str(v) for v in self.target],
            "python": ".".join(map(str, sys.version_info[:3])),
            "corpus": self.corpus,
            "seed": self.seed,
            "mutants_per_file": self.mutants_per_file,
            "prefix_offsets_per_file": self.prefix_offsets_per_file,
            "files": len(rs),
            "chars": sum(r.chars for r in rs),
            "oracle_accepted": sum(r.oracle_ok is True for r in rs),
            "oracle_rejected": sum(r.oracle_ok is False for r in rs),
            "membership_disagreements": sum(r.count("membership") for r in rs),
            "prefix_checks": sum(r.prefix_checks for r in rs),
            "prefix_failures": sum(r.prefix_failures for r in rs),
            "mutants": sum(r.mutants for r in rs),
            "mutant_disagreements": sum(r.mutant_disagreements for r in rs),
            "mutants_without_verdict": sum(r.mutants_unknown for r in rs),
            "mutants_accepted_by_oracle": sum(r.mutants_valid for r in rs),
            "consistency_failures": sum(r.count("consistency") for r in rs),
            "crashes": sum(r.count("crash") for r in rs),
            "timeouts": sum(r.count("timeout") for r in rs),
            "oracle_failures": sum(r.count("oracle") for r in rs),
            "us_per_char_median": percentile(per_char, 50),
            "us_per_char_p90": percentile(per_char, 90),
            "step_samples": len(steps),
            "step_us_median": percentile(steps, 50),
            "step_us_p90": percentile(steps, 90),
            "step_us_p99": percentile(steps, 99),
            "elapsed_s": round(self.elapsed_s, 3),
            "disagreements": [asdict(d) for d in self.disagreements()],
        }

    @property
    def clean(self) -> bool:
        return not self.disagreements()

    def summary(self, show: int = 50) -> str:
        d = self.to_dict()

        def num(key: str, digits: int = 2) -> str:
            value = d[key]
            return "n/a" if not isinstance(value, float | int) else f"{value:.{digits}f}"

        match = "" if d["oracle_matches_target"] else "  [oracle version != target]"
        lines = [
            f"grammar coverage: target {d['target']}, oracle CPython {d['oracle_version']} "
            f"({d['oracle']}){match}",
            f"corpus: {d['corpus']} ({d['files']} files, {d['chars']} chars), "
            f"seed {d['seed']}, {d['elapsed_s']} s",
            "",
            f"  membership   {d['oracle_accepted']} accepted / {d['oracle_rejected']} rejected "
            f"by the oracle; {d['membership_disagreements']} disagreements",
            f"  prefixes     {d['prefix_checks']} checked; {d['prefix_failures']} not viable",
            f"  mutants      {d['mutants']} checked ({d['mutants_accepted_by_oracle']} valid for "
            f"the oracle); {d['mutant_disagreements']} disagreements"
            f" ({d['mutants_without_verdict']} without oracle verdict)",
            f"  problems     {d['crashes']} crashes, {d['timeouts']} timeouts, "
            f"{d['consistency_failures']} consistency failures, "
            f"{d['oracle_failures']} oracle failures",
            f"  speed        whole file: {num('us_per_char_median')} us/char median, "
            f"{num('us_per_char_p90')} p90",
            f"               one step:   {num('step_us_median', 1)} us median, "
            f"{num('step_us_p90', 1)} p90, {num('step_us_p99', 1)} p99 "
            f"({d['step_samples']} samples)",
        ]
        if d["timeouts"] or d["crashes"]:
            lines.append(
                "  note: a timeout or crash interrupts the recognizer mid-step; if it "
                "keeps lazily built tables, later findings may be side effects"
            )
        found = self.disagreements()
        if found:
            lines += ["", f"findings ({min(show, len(found))} of {len(found)} shown):"]
            for f in found[:show]:
                where = f.file if f.line is None else f"{f.file}:{f.line}"
                lines.append(f"  {where}  [{f.kind}]  {f.detail}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- driver


def check_files(
    files: Iterable[CorpusFile],
    cfg: Config,
    oracle: Oracle,
    *,
    corpus: str = "",
    progress: bool = False,
) -> Report:
    """Run every check on ``files`` and collect a report."""
    files = list(files)
    report = Report(
        target=cfg.target,
        oracle=oracle.python,
        oracle_version=oracle.version_string,
        corpus=corpus,
        seed=cfg.seed,
        mutants_per_file=cfg.mutants,
        prefix_offsets_per_file=cfg.prefix_offsets,
    )
    t0 = time.monotonic()
    rec = Recognizer(target=cfg.target)
    for cf in with_progress(files, progress, "file", lambda cf: cf.name):
        report.results.append(FileChecker(rec, oracle, cfg, cf).run())
    report.elapsed_s = time.monotonic() - t0
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.grammar_coverage",
        description="Compare the fimlsp recognizer with CPython's parser on real code.",
    )
    add_corpus_arguments(p, target_help="Python version to recognize")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="check N files spread evenly over the corpus",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mutants", type=int, default=20, metavar="N", help="mutants per file")
    p.add_argument(
        "--prefix-offsets", type=int, default=50, metavar="N", help="random prefix offsets per file"
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="budget of our code's time per file (0: none)",
    )
    p.add_argument(
        "--step-repeats",
        type=int,
        default=3,
        metavar="N",
        help="time each single step N times and keep the best",
    )
    p.add_argument(
        "--show",
        type=int,
        default=50,
        metavar="N",
        help="findings listed in the human-readable summary",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.paths:
            files, corpus = discover(args.paths), " ".join(args.paths)
        else:
            files, corpus = stdlib_corpus(), str(stdlib_root())
    except FileNotFoundError as exc:
        print(f"error: no such file or directory: {exc}", file=sys.stderr)
        return 2
    files = select_evenly(files, args.limit)
    try:
        oracle = Oracle(args.oracle)
    except (OSError, OracleFailure, ValueError, RuntimeError) as exc:
        print(f"error: cannot start oracle {args.oracle!r}: {exc}", file=sys.stderr)
        return 2
    with oracle:
        target = args.target or oracle.version[:2]
        if tuple(target) != oracle.version[:2]:
            print(
                f"warning: target {target[0]}.{target[1]} but the oracle is "
                f"{oracle.version_string}: verdicts may legitimately differ",
                file=sys.stderr,
            )
        cfg = Config(
            target=target,
            mutants=args.mutants,
            prefix_offsets=args.prefix_offsets,
            seed=args.seed,
            time_limit=args.time_limit or None,
            step_repeats=args.step_repeats,
        )
        report = check_files(
            files, cfg, oracle, corpus=corpus, progress=not args.no_progress and sys.stderr.isatty()
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(report.summary(show=args.show))
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
