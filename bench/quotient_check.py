"""Check the FIM quotient on middles cut out of real code.

Usage::

    python -m bench.quotient_check [PATHS...] [--cuts boundary|randspan|both]
        [--n N] [--seed S] [--target 3.13] [--oracle PYTHON] [--json]

PATHS are files or directories (searched recursively for ``*.py``); the
default corpus is the running interpreter's standard library, as for
``bench.grammar_coverage``, whose oracle (``ast.parse`` of the CPython
given by ``--oracle``, see ``bench.oracle``) this benchmark shares.  Files that do not
decode, or whose text the oracle rejects, are skipped.  ``--target`` defaults
to the oracle's version.

A *cut* splits a file's text into ``L + middle + R``; the quotient
``Q = {m : L + m + R is a valid module}`` of ``(L, R)`` is built and asked
about the true middle and about other middles.  ``--n`` cuts of each kind are
drawn, each from a file picked uniformly at random (section VII-A of the
quotient-parsing paper):

``boundary``
    CPython's ``tokenize`` runs over the file; two tokens at the same
    indentation depth (INDENT/DEDENT count) are picked, the second after the
    first and at most ``MAX_MIDDLE`` characters further.  The text between
    them and a random part of the first token (so the middle often starts
    mid-identifier) is removed: ``L = text[:start1 + k]``, ``R =
    text[start2:]``.
``randspan``
    a random point in the first 90 % of the file; between 1 and
    ``min(100, len(text) // 5)`` characters are removed.

For every cut:

1. *completeness*: fed character by character from ``q.initial``, the true
   middle must be ``viable`` after every character (and before the first) and
   ``complete`` at its end.  A failure is reported as ``not_viable`` or
   ``not_complete`` with the number of middle characters fed when it happened
   (``index``).
2. *soundness*: ``--variants`` other middles (the true middle truncated at
   random points, mutated by one token or one character, and middles of other
   cuts) are judged by the quotient and by the oracle on ``L + m + R``.
   ``unsound``: the quotient says complete, the oracle rejects;
   ``incomplete``: the oracle accepts, the quotient says not complete (a
   completeness bug too).  A state that is complete but not viable is an
   ``inconsistent`` finding.
3. *timings*: building the quotient with a fresh ``QuotientBuilder`` (also by
   file size in lines); building it again with the same builder after a
   one-character edit at the end of L (the first character of the true
   middle appended to L, R unchanged); one step ``state.feed(ch).viable`` on a
   state never fed ``ch`` before (states compute ``viable`` lazily, so the
   step is timed with its answer); one completeness check ``state.complete``
   on a state object that has not answered it before.

Crashes (our code raised) and timeouts (a cut took more than ``--time-limit``
seconds of our code's time) are findings too.  The run is deterministic
given ``--seed`` and the corpus (timings aside).  The exit status is 1 when
anything other than an oracle failure was found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import io
import json
import math
import random
import sys
import time
import tokenize
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO

from bench.corpus import CorpusFile, LineIndex, discover, stdlib_corpus, stdlib_root
from bench.harness import (
    FileTimeout,
    add_corpus_arguments,
    crash_detail,
    rounded_percentile,
    time_limit,
    with_progress,
)
from bench.mutants import make_mutant, token_spans
from bench.oracle import Oracle, OracleFailure, Verdict
from lexer.text import split_lines
from quotient_parser import SourceDecodeError, decode_source
from quotient_parser.quotient import Quotient, QuotientBuilder, QuotientState

CUT_KINDS = ("boundary", "randspan")

#: Longest middle of a boundary cut (characters).
MAX_MIDDLE = 400
#: A random span removes at most this many characters ...
RANDSPAN_MAX = 100
#: ... and at most this fraction of the file.
RANDSPAN_FRACTION = 0.2
#: A random span starts in this first fraction of the file.
RANDSPAN_START = 0.9
#: Tries at picking a token pair in one file before picking another file.
PAIR_TRIES = 20

#: File-size buckets (in lines) for construction times: (label, low, high).
SIZE_BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("<100", 0, 100),
    ("100-200", 100, 200),
    ("200-400", 200, 400),
    ("400-1000", 400, 1000),
    ("1000-5000", 1000, 5000),
    (">5000", 5000, math.inf),
)

#: Finding kinds; all but ``oracle`` make the exit status 1.
KINDS = (
    "not_viable",
    "not_complete",
    "unsound",
    "incomplete",
    "inconsistent",
    "crash",
    "timeout",
    "oracle",
)


def size_bucket(lines: int) -> str:
    for label, low, high in SIZE_BUCKETS:
        if low <= lines < high:
            return label
    return SIZE_BUCKETS[-1][0]


# --------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Source:
    """A usable corpus file: decoded, and accepted by the oracle as text."""

    name: str
    text: str

    @functools.cached_property
    def lines(self) -> int:
        return len(split_lines(self.text))


class Corpus:
    """Corpus files, loaded on demand; a file is checked by the oracle once."""

    def __init__(self, files: Sequence[CorpusFile], oracle: Oracle, cache: int = 64) -> None:
        self.files = list(files)
        self.oracle = oracle
        self._usable: dict[int, bool] = {}
        self._index = {cf.name: i for i, cf in enumerate(self.files)}
        self._load = functools.lru_cache(maxsize=cache)(self._read)

    def __len__(self) -> int:
        return len(self.files)

    def _read(self, index: int) -> Source | None:
        cf = self.files[index]
        try:
            text = decode_source(cf.path.read_bytes())
        except (OSError, SourceDecodeError, SyntaxError):
            return None
        return Source(cf.name, text)

    def load(self, index: int) -> Source | None:
        """The file at ``index``, or None if it does not decode or the oracle rejects it."""
        if self._usable.get(index) is False:
            return None
        source = self._load(index)
        if source is None:
            self._usable[index] = False
        elif index not in self._usable:
            self._usable[index] = self.oracle.check(source.text).ok is True
        return source if self._usable[index] else None

    def by_name(self, name: str) -> Source | None:
        index = self._index.get(name)
        return None if index is None else self.load(index)

    @property
    def skipped(self) -> int:
        """Files looked at so far and found unusable."""
        return sum(not ok for ok in self._usable.values())

    @property
    def used(self) -> int:
        return sum(self._usable.values())


# --------------------------------------------------------------------------- cuts


@dataclass(frozen=True)
class Cut:
    """``L = text[:left_end]``, ``middle = text[left_end:middle_end]``, ``R`` the rest."""

    kind: str
    file: str
    left_end: int
    middle_end: int
    middle: str

    @property
    def offsets(self) -> tuple[int, int]:
        return self.left_end, self.middle_end


@dataclass(frozen=True)
class Token:
    start: int
    text: str
    depth: int  # INDENTs minus DEDENTs before the token


def depth_tokens(text: str) -> list[Token]:
    """The tokens of ``text`` (CPython's ``tokenize``) with their indentation
    depth; INDENT, DEDENT and ENDMARKER are left out, and so is any token whose
    reported position does not match its text (``tokenize`` misplaces some
    f-string parts).  Empty if ``tokenize`` fails on the file."""
    starts = [0]
    for line in io.StringIO(text).readlines():  # the same split as tokenize's readline
        starts.append(starts[-1] + len(line))
    tokens: list[Token] = []
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.INDENT:
                depth += 1
            elif tok.type == tokenize.DEDENT:
                depth -= 1
            elif tok.type == tokenize.ENDMARKER:
                break
            else:
                row, col = tok.start
                if row - 1 >= len(starts):
                    continue
                start = starts[row - 1] + col
                if text[start : start + len(tok.string)] == tok.string:
                    tokens.append(Token(start, tok.string, depth))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return []
    tokens.sort(key=lambda t: t.start)
    return tokens


def boundary_cut(source: Source, rng: random.Random, max_middle: int = MAX_MIDDLE) -> Cut | None:
    tokens = depth_tokens(source.text)
    if len(tokens) < 2:
        return None
    starts = [t.start for t in tokens]
    for _ in range(PAIR_TRIES):
        i = rng.randrange(len(tokens) - 1)
        first = tokens[i]
        end = first.start + len(first.text)
        hi = bisect.bisect_right(starts, first.start + max_middle, lo=i + 1)
        partners = [
            j for j in range(i + 1, hi) if tokens[j].depth == first.depth and starts[j] >= end
        ]
        if not partners:
            continue
        second = tokens[rng.choice(partners)]
        left_end = first.start + rng.randint(0, len(first.text))
        middle = source.text[left_end : second.start]
        return Cut("boundary", source.name, left_end, second.start, middle)
    return None


def randspan_cut(source: Source, rng: random.Random) -> Cut | None:
    n = len(source.text)
    if n == 0:
        return None
    left_end = rng.randint(0, int(n * RANDSPAN_START))
    longest = max(1, min(RANDSPAN_MAX, int(n * RANDSPAN_FRACTION)))
    middle_end = min(n, left_end + rng.randint(1, longest))
    if middle_end <= left_end:
        return None
    middle = source.text[left_end:middle_end]
    return Cut("randspan", source.name, left_end, middle_end, middle)


def make_cuts(corpus: Corpus, kind: str, n: int, seed: int) -> list[Cut]:
    """``n`` cuts of one kind, each from a file picked uniformly (files that
    are unusable, or offer no cut, are passed over)."""
    if kind not in CUT_KINDS:
        raise ValueError(f"unknown cut kind {kind!r}")
    cut = boundary_cut if kind == "boundary" else randspan_cut
    return draw_cuts(corpus, n, random.Random(f"{seed}:{kind}"), cut)


def draw_cuts(
    corpus: Corpus,
    n: int,
    rng: random.Random,
    cut: Callable[[Source, random.Random], Cut | None],
) -> list[Cut]:
    """``n`` cuts made by ``cut``, each in a file picked uniformly with ``rng`` (a file
    that is unusable or offers no cut is passed over, within a bound on the tries)."""
    cuts: list[Cut] = []
    tries = 0
    while len(cuts) < n and tries < 50 * n + 100 and len(corpus):
        tries += 1
        source = corpus.load(rng.randrange(len(corpus)))
        if source is None:
            continue
        made = cut(source, rng)
        if made is not None:
            cuts.append(made)
    return cuts


# --------------------------------------------------------------------------- other middles


@dataclass(frozen=True)
class Variant:
    """Another middle for the same cut; ``shared`` leading characters are the
    true middle's, so its state can be fed from the walk's state there."""

    kind: str  # truncated, mutant, foreign
    text: str
    shared: int
    description: str


def make_variants(
    cut: Cut,
    source: Source,
    count: int,
    rng: random.Random,
    foreign: Sequence[str],
) -> list[Variant]:
    """``count`` middles other than the true one: about 40 % truncations, 20 %
    middles of other cuts and the rest one-token or one-character mutants."""
    middle = cut.middle
    truncations = min(len(middle), round(0.4 * count))
    others = min(len(foreign), round(0.2 * count))
    mutants = count - truncations - others
    variants: list[Variant] = []
    for t in sorted(rng.sample(range(len(middle)), truncations)):
        variants.append(Variant("truncated", middle[:t], t, f"true middle truncated to {t} chars"))
    if mutants > 0:
        a, b = cut.offsets
        spans = [(s - a, e - a) for s, e in _spans(source) if a <= s and e <= b]
        for _ in range(mutants):
            mutant = make_mutant(middle, rng, spans)
            variants.append(Variant("mutant", mutant.text, mutant.offset, mutant.description))
    for _ in range(others):
        text = rng.choice(foreign)
        variants.append(Variant("foreign", text, 0, "the middle of another cut"))
    return variants


@functools.lru_cache(maxsize=16)
def _spans(source: Source) -> list[tuple[int, int]]:
    return token_spans(source.text)


# --------------------------------------------------------------------------- checking


@dataclass
class Config:
    target: tuple[int, int]
    seed: int = 0
    variants: int = 10
    time_limit: float | None = 60.0  # seconds of our code's time per cut


@dataclass(frozen=True)
class Failure:
    file: str
    offsets: tuple[int, int]  # (end of L, end of the true middle) in the decoded text
    kind: str
    detail: str
    cut: str = ""  # boundary or randspan
    where: str = ""  # line:column of the end of L
    index: int | None = None  # middle characters fed when it happened
    middle: str | None = None  # the middle judged, when it is not the true one


@dataclass
class CutResult:
    cut: Cut
    lines: int
    where: str = ""  # line:column of the end of L
    build_ms: float | None = None
    rebuild_ms: float | None = None
    step_us: list[float] = field(default_factory=list)
    eos_us: list[float] = field(default_factory=list)
    variants: int = 0
    variants_unknown: int = 0
    oracle_accepted: int = 0
    complete_verdicts: int = 0
    failures: list[Failure] = field(default_factory=list)

    def add(
        self, kind: str, detail: str, index: int | None = None, middle: str | None = None
    ) -> None:
        c = self.cut
        self.failures.append(
            Failure(c.file, c.offsets, kind, detail, c.kind, self.where, index, middle)
        )

    def count(self, kind: str) -> int:
        return sum(f.kind == kind for f in self.failures)


def _ms(ns: int) -> float:
    return ns / 1e6


def _us(ns: int) -> float:
    return ns / 1e3


def _short(text: str, limit: int = 60) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


class CutChecker:
    """Runs every check on one cut; keeps what it is doing for crash reports."""

    def __init__(
        self, cfg: Config, oracle: Oracle, source: Source, cut: Cut, variants: Sequence[Variant]
    ) -> None:
        self.cfg = cfg
        self.oracle = oracle
        self.source = source
        self.cut = cut
        self.variants = list(variants)
        self.result = CutResult(cut, source.lines, LineIndex(source.text).where(cut.left_end))
        self.activity = "starting"
        self.index: int | None = None

    def run(self) -> CutResult:
        text, (a, b) = self.source.text, self.cut.offsets
        left, right = text[:a], text[b:]
        verdicts = self.oracle.check_many([left + v.text + right for v in self.variants])
        try:
            with time_limit(self.cfg.time_limit):
                self._check(left, right, verdicts)
        except FileTimeout:
            self.result.add(
                "timeout",
                f"over {self.cfg.time_limit} s (while {self.activity})",
                index=self.index,
            )
        except Exception as exc:  # a crash of our code is a finding, never hidden
            self.result.add("crash", crash_detail(exc, self.activity), index=self.index)
        return self.result

    def _check(self, left: str, right: str, verdicts: Sequence[Verdict]) -> None:
        res, middle = self.result, self.cut.middle

        # Construction with a fresh builder.
        self.activity = "building the quotient"
        builder = QuotientBuilder(self.cfg.target)
        t0 = time.perf_counter_ns()
        q = builder.build(left, right)
        res.build_ms = _ms(time.perf_counter_ns() - t0)

        # 1. Completeness, character by character; every step is timed.
        self.activity = "feeding the true middle"
        states = self._walk(q, middle)
        if len(states) == len(middle) + 1:
            self.activity, self.index = "checking the true middle is complete", len(middle)
            t0 = time.perf_counter_ns()
            complete = states[-1].complete
            res.eos_us.append(_us(time.perf_counter_ns() - t0))
            if not complete:
                res.add(
                    "not_complete",
                    f"the true middle {_short(middle)} is viable throughout but not complete",
                    index=len(middle),
                )

        # 2. Soundness (and completeness) on the other middles.
        for variant, verdict in zip(self.variants, verdicts):
            self._judge(states, variant, verdict)

        # 3. Construction again after a one-character edit at the end of L (last,
        # so that the edited left context cannot have fed the walk's states).
        if middle:
            self.activity, self.index = "rebuilding after a one-character edit", None
            t0 = time.perf_counter_ns()
            builder.build(left + middle[0], right)
            res.rebuild_ms = _ms(time.perf_counter_ns() - t0)

    def _walk(self, q: Quotient, middle: str) -> list[QuotientState]:
        """States after each prefix of the middle, up to the first one that is
        not viable (recorded as a failure)."""
        res = self.result
        state = q.initial
        self.index = 0
        if not state.viable:
            res.add("not_viable", "the empty middle is not viable", index=0)
            return [state]
        states = [state]
        for i, ch in enumerate(middle):
            self.index = i + 1
            t0 = time.perf_counter_ns()
            state = state.feed(ch)
            viable = state.viable
            res.step_us.append(_us(time.perf_counter_ns() - t0))
            states.append(state)
            if not viable:
                res.add(
                    "not_viable",
                    f"not viable after {i + 1} chars of the true middle: "
                    f"{_short(middle[max(0, i - 30) : i])} then {ch!r}",
                    index=i + 1,
                )
                break
        return states

    def _judge(self, states: Sequence[QuotientState], variant: Variant, verdict: Verdict) -> None:
        res = self.result
        res.variants += 1
        if verdict.ok is None:
            res.variants_unknown += 1
            res.add("oracle", f"{variant.description}: {verdict.describe()}", middle=variant.text)
            return
        if verdict.ok:
            res.oracle_accepted += 1
        self.activity = f"judging a variant ({variant.description})"
        shared = min(variant.shared, len(states) - 1)
        self.index = shared
        state = states[shared].feed(variant.text[shared:])
        # A new state object for the same text: no answer memoised on it yet
        # (``feed`` of nothing, or a repeated truncation, returns a known state).
        state = QuotientState(state.quotient, state.state)
        t0 = time.perf_counter_ns()
        complete = state.complete
        res.eos_us.append(_us(time.perf_counter_ns() - t0))
        if complete:
            res.complete_verdicts += 1
            if not state.viable:
                res.add(
                    "inconsistent",
                    f"{variant.description}: complete but not viable",
                    middle=variant.text,
                )
        if complete and not verdict.ok:
            res.add(
                "unsound",
                f"{variant.description}: quotient says complete, oracle {verdict.describe()}",
                middle=variant.text,
            )
        elif verdict.ok and not complete:
            res.add(
                "incomplete",
                f"{variant.description}: oracle accepts, quotient says not complete "
                f"(viable: {state.viable})",
                middle=variant.text,
            )


# --------------------------------------------------------------------------- report


@dataclass
class Report:
    target: tuple[int, int]
    oracle: str
    oracle_version: str
    corpus: str
    seed: int
    kinds: tuple[str, ...]
    n: int
    variants_per_cut: int
    files_used: int = 0
    files_skipped: int = 0
    results: list[CutResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    def failures(self, kind: str | None = None) -> list[Failure]:
        return [f for r in self.results for f in r.failures if kind in (None, f.kind)]

    def count(self, kind: str) -> int:
        return sum(r.count(kind) for r in self.results)

    def to_dict(self) -> dict[str, object]:
        rs = self.results
        builds = [r.build_ms for r in rs if r.build_ms is not None]
        rebuilds = [r.rebuild_ms for r in rs if r.rebuild_ms is not None]
        steps = [v for r in rs for v in r.step_us]
        eos = [v for r in rs for v in r.eos_us]
        by_size: dict[str, dict[str, object]] = {}
        for label, _, _ in SIZE_BUCKETS:
            times = [
                r.build_ms for r in rs if r.build_ms is not None and size_bucket(r.lines) == label
            ]
            by_size[label] = {
                "count": len(times),
                "median": rounded_percentile(times, 50, 3),
                "p90": rounded_percentile(times, 90, 3),
            }
        return {
            "target": ".".join(map(str, self.target)),
            "oracle": self.oracle,
            "oracle_version": self.oracle_version,
            "oracle_matches_target": self.oracle_version.split(".")[:2]
            == [str(v) for v in self.target],
            "python": ".".join(map(str, sys.version_info[:3])),
            "corpus": self.corpus,
            "seed": self.seed,
            "cut_kinds": list(self.kinds),
            "n": self.n,
            "files_used": self.files_used,
            "files_skipped": self.files_skipped,
            "cuts": len(rs),
            "cuts_by_kind": {k: sum(r.cut.kind == k for r in rs) for k in self.kinds},
            "middle_chars": sum(len(r.cut.middle) for r in rs),
            "completeness_failures": self.count("not_viable") + self.count("not_complete"),
            "not_viable": self.count("not_viable"),
            "not_complete": self.count("not_complete"),
            "variants_per_cut": self.variants_per_cut,
            "variants": sum(r.variants for r in rs),
            "variants_without_verdict": sum(r.variants_unknown for r in rs),
            "oracle_accepted_variants": sum(r.oracle_accepted for r in rs),
            "complete_verdicts": sum(r.complete_verdicts for r in rs),
            "unsound_verdicts": self.count("unsound"),
            "incomplete_verdicts": self.count("incomplete"),
            "inconsistencies": self.count("inconsistent"),
            "crashes": self.count("crash"),
            "timeouts": self.count("timeout"),
            "oracle_failures": self.count("oracle"),
            "build_ms_median": rounded_percentile(builds, 50, 3),
            "build_ms_p90": rounded_percentile(builds, 90, 3),
            "build_ms_by_size": by_size,
            "rebuild_ms_median": rounded_percentile(rebuilds, 50, 3),
            "rebuild_ms_p90": rounded_percentile(rebuilds, 90, 3),
            "step_samples": len(steps),
            "step_us_median": rounded_percentile(steps, 50, 3),
            "step_us_p90": rounded_percentile(steps, 90, 3),
            "step_us_p99": rounded_percentile(steps, 99, 3),
            "eos_samples": len(eos),
            "eos_us_median": rounded_percentile(eos, 50, 3),
            "eos_us_p90": rounded_percentile(eos, 90, 3),
            "eos_us_p99": rounded_percentile(eos, 99, 3),
            "elapsed_s": round(self.elapsed_s, 3),
            "failures": [asdict(f) for f in self.failures()],
        }

    @property
    def clean(self) -> bool:
        return not any(f.kind != "oracle" for f in self.failures())

    def summary(self, show: int = 50) -> str:
        d = self.to_dict()

        def num(key: str, digits: int = 1) -> str:
            value = d[key]
            return "n/a" if not isinstance(value, float | int) else f"{value:.{digits}f}"

        def fmt(value: object, digits: int = 1) -> str:
            return "n/a" if not isinstance(value, float | int) else f"{value:.{digits}f}"

        match = "" if d["oracle_matches_target"] else "  [oracle version != target]"
        by_kind = d["cuts_by_kind"]
        assert isinstance(by_kind, dict)
        kinds = " + ".join(f"{v} {k}" for k, v in by_kind.items())
        lines = [
            f"quotient check: target {d['target']}, oracle CPython {d['oracle_version']} "
            f"({d['oracle']}){match}",
            f"corpus: {d['corpus']} ({d['files_used']} files used, {d['files_skipped']} "
            f"skipped); cuts: {kinds}; seed {d['seed']}; {d['elapsed_s']} s",
            "",
            f"  completeness  {d['cuts']} true middles ({d['middle_chars']} chars): "
            f"{d['not_viable']} not viable, {d['not_complete']} not complete",
            f"  soundness     {d['variants']} other middles, {d['oracle_accepted_variants']} "
            f"accepted by the oracle; {d['complete_verdicts']} complete verdicts, "
            f"{d['unsound_verdicts']} unsound, {d['incomplete_verdicts']} incomplete"
            f" ({d['variants_without_verdict']} without oracle verdict)",
            f"  problems      {d['crashes']} crashes, {d['timeouts']} timeouts, "
            f"{d['inconsistencies']} inconsistencies, {d['oracle_failures']} oracle failures",
            f"  build         fresh builder: {num('build_ms_median')} ms median, "
            f"{num('build_ms_p90')} p90; after a one-char edit: "
            f"{num('rebuild_ms_median', 2)} ms median, {num('rebuild_ms_p90', 2)} p90",
        ]
        by_size = d["build_ms_by_size"]
        assert isinstance(by_size, dict)
        for label, stats in by_size.items():
            if stats["count"]:
                lines.append(
                    f"      {label:>9} lines: {stats['count']:>5} cuts, "
                    f"{fmt(stats['median'])} ms median, {fmt(stats['p90'])} p90"
                )
        lines += [
            f"  one step      {num('step_us_median')} us median, {num('step_us_p90')} p90, "
            f"{num('step_us_p99')} p99 ({d['step_samples']} samples)",
            f"  complete?     {num('eos_us_median')} us median, {num('eos_us_p90')} p90, "
            f"{num('eos_us_p99')} p99 ({d['eos_samples']} samples)",
        ]
        if d["timeouts"] or d["crashes"]:
            lines.append(
                "  note: a timeout or crash interrupts the quotient mid-step; if it "
                "keeps shared tables, later findings may be side effects"
            )
        found = self.failures()
        if found:
            lines += ["", f"findings ({min(show, len(found))} of {len(found)} shown):"]
            for f in found[:show]:
                a, b = f.offsets
                where = f"{f.file}:{f.where} [{a}:{b}] ({f.cut})"
                at = "" if f.index is None else f" at middle index {f.index}"
                lines.append(f"  {where}  [{f.kind}]{at}  {f.detail}")
                if f.middle is not None:
                    lines.append(f"      middle: {f.middle!r}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- driver


def _progress(cuts: Sequence[Cut], enabled: bool) -> Iterator[Cut]:
    return with_progress(cuts, enabled, "cut", lambda cut: cut.file)


def check_cuts(
    cuts: Sequence[Cut],
    sources: Callable[[str], Source | None],
    cfg: Config,
    oracle: Oracle,
    *,
    progress: bool = False,
) -> list[CutResult]:
    """Check every cut; ``sources`` maps a file name to its text."""
    middles = [c.middle for c in cuts]
    results: list[CutResult] = []
    for number, cut in enumerate(_progress(cuts, progress)):
        source = sources(cut.file)
        if source is None:  # unreachable for cuts made from the same corpus
            continue
        rng = random.Random(f"{cfg.seed}:{cut.kind}:{number}")
        foreign = middles[:number] + middles[number + 1 :]
        variants = make_variants(cut, source, cfg.variants, rng, foreign)
        results.append(CutChecker(cfg, oracle, source, cut, variants).run())
    return results


def check_corpus(
    files: Sequence[CorpusFile],
    cfg: Config,
    oracle: Oracle,
    *,
    kinds: Sequence[str] = CUT_KINDS,
    n: int = 200,
    corpus_name: str = "",
    progress: bool = False,
) -> Report:
    """Draw ``n`` cuts of each kind from ``files`` and check them all."""
    t0 = time.monotonic()
    corpus = Corpus(files, oracle)
    cuts = [cut for kind in kinds for cut in make_cuts(corpus, kind, n, cfg.seed)]
    QuotientBuilder(cfg.target)  # load the grammar outside the timings
    results = check_cuts(cuts, corpus.by_name, cfg, oracle, progress=progress)
    report = Report(
        target=cfg.target,
        oracle=oracle.python,
        oracle_version=oracle.version_string,
        corpus=corpus_name,
        seed=cfg.seed,
        kinds=tuple(kinds),
        n=n,
        variants_per_cut=cfg.variants,
        files_used=corpus.used,
        files_skipped=corpus.skipped,
        results=results,
    )
    report.elapsed_s = time.monotonic() - t0
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.quotient_check",
        description="Check the FIM quotient on middles cut out of real code.",
    )
    add_corpus_arguments(p, target_help="Python version of the quotient")
    p.add_argument(
        "--cuts", choices=["boundary", "randspan", "both"], default="both", help="kinds of cut"
    )
    p.add_argument("--n", type=int, default=200, metavar="N", help="cuts of each kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--variants", type=int, default=10, metavar="N", help="other middles judged per cut"
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="budget of our code's time per cut (0: none)",
    )
    p.add_argument(
        "--show", type=int, default=50, metavar="N", help="findings listed in the summary"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    try:
        if args.paths:
            files, corpus_name = discover(args.paths), " ".join(args.paths)
        else:
            files, corpus_name = stdlib_corpus(), str(stdlib_root())
    except FileNotFoundError as exc:
        print(f"error: no such file or directory: {exc}", file=sys.stderr)
        return 2
    try:
        oracle = Oracle(args.oracle)
    except (OSError, OracleFailure, ValueError, RuntimeError) as exc:
        print(f"error: cannot start oracle {args.oracle!r}: {exc}", file=sys.stderr)
        return 2
    kinds = CUT_KINDS if args.cuts == "both" else (args.cuts,)
    with oracle:
        target = args.target or oracle.version[:2]
        if tuple(target) != oracle.version[:2]:
            print(
                f"warning: target {target[0]}.{target[1]} but the oracle is "
                f"{oracle.version_string}: verdicts may legitimately differ",
                file=sys.stderr,
            )
        cfg = Config(
            target=tuple(target),
            seed=args.seed,
            variants=args.variants,
            time_limit=args.time_limit or None,
        )
        report = check_corpus(
            files,
            cfg,
            oracle,
            kinds=kinds,
            n=args.n,
            corpus_name=corpus_name,
            progress=not args.no_progress and sys.stderr.isatty(),
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=1), file=out)
    else:
        print(report.summary(show=args.show), file=out)
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
