"""The FIM quotient (``quotient_parser.quotient``): API contract, builder
reuse, and a small fixed run of ``bench.quotient_check``.

Validity is always judged by the running interpreter's ``ast.parse`` (the
``ast_accepts`` fixture, or the bench's oracle worker on this interpreter),
with the target set to the running version.  Edge cases of the cursor
position are in ``test_quotient_edges.py``.
"""

from __future__ import annotations

import io
import json
import random
import sys
from collections.abc import Callable, Iterator, Sequence

import pytest

from bench.corpus import CorpusFile, stdlib_root
from bench.mutants import make_mutant, token_spans
from bench.oracle import Oracle
from bench.quotient_check import (
    MAX_MIDDLE,
    RANDSPAN_MAX,
    SIZE_BUCKETS,
    Config,
    Corpus,
    Cut,
    Failure,
    Report,
    Source,
    boundary_cut,
    check_corpus,
    depth_tokens,
    main,
    make_cuts,
    randspan_cut,
    size_bucket,
)
from quotient_parser.quotient import Quotient, QuotientBuilder, QuotientState

Accepts = Callable[[str], bool]

#: Small standard-library modules present in every version from 3.10 on.
SAMPLE_FILES = [
    "bisect.py",
    "colorsys.py",
    "fnmatch.py",
    "json/decoder.py",
    "string.py",
]
SAMPLE_CUTS = 20  # of each kind


def stdlib_source(name: str) -> Source:
    return Source(name, (stdlib_root() / name).read_text(encoding="utf-8"))


def answers(state: QuotientState) -> tuple[bool, bool]:
    return state.viable, state.complete


def chunks(text: str, rng: random.Random) -> Iterator[str]:
    """``text`` in random pieces of 1 to 8 characters."""
    i = 0
    while i < len(text):
        j = min(len(text), i + rng.randint(1, 8))
        yield text[i:j]
        i = j


def sample_triples(count: int, seed: int) -> list[tuple[str, str, str]]:
    """(L, m, R) triples: boundary and random-span cuts of two stdlib files,
    each followed by a one-symbol or one-character mutant of its middle."""
    rng = random.Random(seed)
    triples: list[tuple[str, str, str]] = []
    for name in ("fnmatch.py", "colorsys.py"):
        source = stdlib_source(name)
        text = source.text
        spans = token_spans(text)
        for i in range(count):
            cut = boundary_cut(source, rng) if i % 2 else randspan_cut(source, rng)
            assert cut is not None
            a, b = cut.offsets
            left, middle, right = text[:a], text[a:b], text[b:]
            triples.append((left, middle, right))
            local = [(s - a, e - a) for s, e in spans if a <= s and e <= b]
            triples.append((left, make_mutant(middle, rng, local).text, right))
    return triples


# --------------------------------------------------------------------------- API contract


def test_states_are_immutable(target: tuple[int, int], ast_accepts: Accepts) -> None:
    left, right = "def f(x):\n    return x +", " 1\n"
    q = Quotient(left, right, target=target)
    s = q.initial
    assert q.initial is s
    before = answers(s)
    assert before == (True, ast_accepts(left + right))
    forks = {m: s.feed(m) for m in ["abc", " 2 *", ")", "", "\n", " (", "'"]}
    assert answers(s) == before, "feeding a state changed its answers"
    assert answers(s.feed("")) == before
    for m, fork in forks.items():
        assert fork.complete == ast_accepts(left + m + right), m
        got = answers(fork)
        fork.feed("(").feed("x").feed(")")  # feeding the fork further
        assert answers(fork) == got
        assert answers(s.feed(m)) == got, "feeding the same text twice gave other answers"
    assert answers(s) == before
    assert q.target == target


def test_forks_from_one_state_agree_with_fresh_states(
    target: tuple[int, int], ast_accepts: Accepts
) -> None:
    left, right = "items = [1, 2]\nfor item in ", ":\n    print(item)\n"
    q = Quotient(left, right, target=target)
    base = q.initial.feed("sorted(")
    tails = ["items)", "items", "items, key=abs)", "items)]", "x for x in items)", "(items))"]
    forked = [base.feed(t) for t in tails]
    for tail, state in zip(tails, forked):
        fresh = Quotient(left, right, target=target).initial.feed("sorted(" + tail)
        assert answers(state) == answers(fresh), tail
        assert state.complete == ast_accepts(left + "sorted(" + tail + right), tail


@pytest.mark.parametrize("seed", [0, 1])
def test_chunking_does_not_change_the_answers(seed: int, target: tuple[int, int]) -> None:
    """One piece, character by character and random chunks all agree, at the
    end and at every chunk boundary."""
    rng = random.Random(seed)
    for left, middle, right in sample_triples(4, seed):
        q = Quotient(left, right, target=target)
        by_char = [q.initial]
        for ch in middle:
            by_char.append(by_char[-1].feed(ch))
        whole = q.initial.feed(middle)
        assert answers(whole) == answers(by_char[-1]), (left[-40:], middle, right[:40])
        for _ in range(3):
            state, fed = q.initial, 0
            for piece in chunks(middle, rng):
                state = state.feed(piece)
                fed += len(piece)
                assert answers(state) == answers(by_char[fed]), (middle[:fed], right[:40])
            assert answers(state) == answers(whole)


# --------------------------------------------------------------------------- builder reuse


def _compare(
    builder: QuotientBuilder,
    left: str,
    right: str,
    middles: Sequence[str],
    target: tuple[int, int],
    ast_accepts: Accepts,
) -> None:
    reused = builder.build(left, right)
    fresh = Quotient(left, right, target=target)
    assert reused.target == fresh.target == target
    for m in middles:
        got, want = answers(reused.initial.feed(m)), answers(fresh.initial.feed(m))
        assert got == want, (left[-40:], m, right[:40])
        assert got[1] == ast_accepts(left + m + right), (left[-40:], m, right[:40])


def test_builder_reuse_gives_the_answers_of_a_fresh_quotient(
    target: tuple[int, int], ast_accepts: Accepts
) -> None:
    text = stdlib_source("fnmatch.py").text
    rng = random.Random(5)
    builder = QuotientBuilder(target)
    cursors = sorted(rng.sample(range(200, len(text) - 200), 5))
    for a in cursors:
        b = a + rng.randint(5, 60)
        right = text[b:]
        # Typing the middle: L grows by a character, R stays.
        for k in range(0, 4):
            middle = text[a + k : b]
            _compare(
                builder, text[: a + k], right, [middle, middle[:-2], "", ")"], target, ast_accepts
            )
        # Backspace: L shrinks.
        _compare(builder, text[: a - 3], right, [text[a - 3 : b], ""], target, ast_accepts)
        # An edit in R: the middle's last character moved into R, then a char deleted from R.
        _compare(builder, text[:a], text[b - 1 :], [text[a : b - 1], ""], target, ast_accepts)
        edited = text[b : b + 3] + text[b + 4 :]
        _compare(builder, text[:a], edited, [text[a:b], ""], target, ast_accepts)
    # Back to the first cut after more right contexts than the builder caches.
    a = cursors[0]
    _compare(builder, text[:a], text[a + 10 :], [text[a : a + 10], "("], target, ast_accepts)


def test_builder_accepts_unrelated_contexts_in_turn(
    target: tuple[int, int], ast_accepts: Accepts
) -> None:
    builder = QuotientBuilder(target)
    pairs = [
        ("x = 1\n", "\ny = 2\n"),
        ("def f():\n    return ", "\n"),
        ("", ""),
        ("x = 1\n", "\ndef def\n"),
        ("class A:\n    ", "\n    def g(self):\n        pass\n"),
        ("x = 1\n", "\ny = 2\n"),
    ]
    for left, right in pairs:
        _compare(builder, left, right, ["", "pass", "x", "1 +", "(\n"], target, ast_accepts)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("x = 1 + \\\r2 + ", "x = 1 + \\\r\n2 + "),
        ("x = 1\ry = (", "x = 1\r\ny = ("),
        ("s = '''a\rb", "s = '''a\r\nb"),
        ("if x:\r    y = 1\r    ", "if x:\r\n    y = 1\r\n    "),
    ],
    ids=["continuation", "bracket", "string", "block"],
)
def test_builder_reuse_when_a_lone_cr_becomes_crlf(
    before: str, after: str, target: tuple[int, int], ast_accepts: Accepts
) -> None:
    """A line start after a lone CR in the previous left context is not a line
    start of the new one, where the CR is followed by LF."""
    builder = QuotientBuilder(target)
    right = "3\n"
    builder.build(before, right)
    _compare(builder, after, right, ["", "1", "\n", "(", "+ 2", "\r\n"], target, ast_accepts)


# --------------------------------------------------------------------------- the bench


@pytest.fixture(scope="module")
def report(target: tuple[int, int]) -> Report:
    root = stdlib_root()
    files = [CorpusFile(name, root / name) for name in SAMPLE_FILES if (root / name).is_file()]
    assert len(files) == len(SAMPLE_FILES), "the stdlib sample is missing files"
    cfg = Config(target=target, seed=0, variants=10, time_limit=60.0)
    with Oracle(sys.executable) as oracle:
        return check_corpus(files, cfg, oracle, n=SAMPLE_CUTS, corpus_name=str(root))


def _listing(found: Sequence[Failure]) -> str:
    return "\n".join(
        f"{f.file}:{f.where} {f.offsets} [{f.kind}] index={f.index} {f.detail}"
        + ("" if f.middle is None else f"\n    middle={f.middle!r}")
        for f in found
    )


def test_sample_has_every_cut(report: Report) -> None:
    data = report.to_dict()
    assert data["cuts_by_kind"] == {"boundary": SAMPLE_CUTS, "randspan": SAMPLE_CUTS}
    assert data["variants"] == 10 * 2 * SAMPLE_CUTS
    assert data["variants_without_verdict"] == 0


def test_sample_true_middles_are_viable_and_complete(report: Report) -> None:
    found = report.failures("not_viable") + report.failures("not_complete")
    assert report.to_dict()["completeness_failures"] == 0, _listing(found)


def test_sample_has_no_unsound_verdicts(report: Report) -> None:
    found = report.failures("unsound")
    assert report.to_dict()["unsound_verdicts"] == 0, _listing(found)
    assert isinstance(report.to_dict()["complete_verdicts"], int)


def test_sample_has_no_incomplete_verdicts(report: Report) -> None:
    found = report.failures("incomplete")
    assert report.to_dict()["incomplete_verdicts"] == 0, _listing(found)


@pytest.mark.parametrize("kind", ["inconsistent", "crash", "timeout", "oracle"])
def test_sample_has_no_other_findings(report: Report, kind: str) -> None:
    found = report.failures(kind)
    assert not found, _listing(found)
    assert report.clean


def test_report_has_the_documented_keys(report: Report) -> None:
    data = report.to_dict()
    for key in (
        "cuts", "completeness_failures", "complete_verdicts", "unsound_verdicts",
        "incomplete_verdicts", "build_ms_median", "build_ms_p90", "build_ms_by_size",
        "rebuild_ms_median", "step_us_median", "step_us_p90", "eos_us_median", "eos_us_p90",
        "failures", "target", "oracle_version", "seed", "elapsed_s",
    ):  # fmt: skip
        assert key in data, key
    assert data["cuts"] == 2 * SAMPLE_CUTS
    for key in ("build_ms_median", "rebuild_ms_median", "step_us_p90", "eos_us_p90"):
        assert isinstance(data[key], float), key
    by_size = data["build_ms_by_size"]
    assert isinstance(by_size, dict)
    assert list(by_size) == [label for label, _, _ in SIZE_BUCKETS]
    assert sum(b["count"] for b in by_size.values()) == data["cuts"]
    json.dumps(data)  # serialisable
    assert "completeness" in report.summary()


# --------------------------------------------------------------------------- the harness


def _cuts(target: tuple[int, int], kind: str, n: int, seed: int) -> list[Cut]:
    root = stdlib_root()
    files = [CorpusFile(name, root / name) for name in SAMPLE_FILES]
    with Oracle(sys.executable) as oracle:
        return make_cuts(Corpus(files, oracle), kind, n, seed)


def test_cuts_are_deterministic(target: tuple[int, int]) -> None:
    for kind in ("boundary", "randspan"):
        first = _cuts(target, kind, 15, 3)
        assert first == _cuts(target, kind, 15, 3)
        assert first != _cuts(target, kind, 15, 4)
        assert len(first) == 15


def test_boundary_cuts_join_tokens_at_the_same_depth(target: tuple[int, int]) -> None:
    for cut in _cuts(target, "boundary", 40, 1):
        text = stdlib_source(cut.file).text
        a, b = cut.offsets
        assert text[a:b] == cut.middle
        assert len(cut.middle) <= MAX_MIDDLE
        tokens = depth_tokens(text)
        second = [t for t in tokens if t.start == b]
        first = [t for t in tokens if t.start <= a <= t.start + len(t.text) and t.start < b]
        assert second and first, cut
        assert second[0].depth in {t.depth for t in first}, cut


def test_randspan_cuts_have_the_documented_size(target: tuple[int, int]) -> None:
    for cut in _cuts(target, "randspan", 40, 2):
        n = len(stdlib_source(cut.file).text)
        assert 1 <= len(cut.middle) <= max(1, min(RANDSPAN_MAX, n // 5))
        assert cut.left_end <= 0.9 * n


def test_depth_tokens() -> None:
    tokens = depth_tokens("if x:\n    y = 1\nz = 2\n")
    depths = {t.text: t.depth for t in tokens if t.text.strip()}
    assert depths == {"if": 0, "x": 0, ":": 0, "y": 1, "=": 0, "1": 1, "z": 0, "2": 0}
    assert depth_tokens("x = (\n") == []


def test_size_buckets() -> None:
    assert [size_bucket(n) for n in (0, 99, 100, 399, 400, 4999, 5000)] == [
        "<100", "<100", "100-200", "200-400", "400-1000", "1000-5000", ">5000",
    ]  # fmt: skip


def test_main_json() -> None:
    source = stdlib_root() / "colorsys.py"
    out = io.StringIO()
    status = main([str(source), "--n", "3", "--json", "--no-progress"], out=out)
    data = json.loads(out.getvalue())
    assert status == 0, data["failures"]
    assert data["cuts"] == 6 and data["files_used"] == 1


def test_bench_reports_unsound_and_incomplete_quotients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The harness notices a quotient that is wrong either way."""
    source = str(stdlib_root() / "colorsys.py")
    monkeypatch.setattr(QuotientState, "complete", property(lambda self: True))
    out = io.StringIO()
    assert main([source, "--n", "2", "--json", "--no-progress"], out=out) == 1
    data = json.loads(out.getvalue())
    assert data["unsound_verdicts"] > 0 and data["completeness_failures"] == 0
    monkeypatch.setattr(QuotientState, "complete", property(lambda self: False))
    monkeypatch.setattr(QuotientState, "viable", property(lambda self: False))
    out = io.StringIO()
    assert main([source, "--n", "2", "--json", "--no-progress"], out=out) == 1
    data = json.loads(out.getvalue())
    assert data["completeness_failures"] == 4 and data["not_viable"] == 4
    failure = data["failures"][0]
    assert failure["kind"] == "not_viable" and failure["index"] == 0
    assert data["incomplete_verdicts"] > 0
