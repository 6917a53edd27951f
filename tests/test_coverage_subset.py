"""A small, fast run of ``bench.grammar_coverage`` on fixed stdlib files.

About thirty small modules of the running interpreter's standard library
(present in every version from 3.10 on), 5 mutants and 20 random prefix
offsets each, with this interpreter's ``ast.parse`` as the oracle.  Every kind
of finding has its own test so that a failure says what went wrong; the
findings are listed in the assertion message.

The end of the file tests the harness itself (mutants, oracle, helpers).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from bench.corpus import CorpusFile, LineIndex, select_evenly, stdlib_root
from bench.grammar_coverage import Config, Disagreement, Report, check_files
from bench.harness import percentile
from bench.mutants import make_mutants
from bench.oracle import Oracle

SUBSET = [
    "abc.py",
    "bisect.py",
    "colorsys.py",
    "contextvars.py",
    "copy.py",
    "fnmatch.py",
    "graphlib.py",
    "html/__init__.py",
    "json/__init__.py",
    "json/decoder.py",
    "json/scanner.py",
    "keyword.py",
    "linecache.py",
    "numbers.py",
    "operator.py",
    "queue.py",
    "reprlib.py",
    "sched.py",
    "stat.py",
    "string.py",
    "struct.py",
    "this.py",
    "token.py",
    "types.py",
    "asyncio/locks.py",
    "asyncio/runners.py",
    "email/base64mime.py",
    "importlib/metadata/_functools.py",
    "urllib/response.py",
    "wsgiref/util.py",
    "xml/dom/NodeFilter.py",
]

ORACLES_TO_TRY = ["3.8.18", "3.10.13", "3.12.1", "3.13.0"]


@pytest.fixture(scope="module")
def report() -> Report:
    root = stdlib_root()
    files = [CorpusFile(name, root / name) for name in SUBSET if (root / name).is_file()]
    assert len(files) >= 25, "the stdlib subset is missing files"
    cfg = Config(
        target=(sys.version_info.major, sys.version_info.minor),
        mutants=5,
        prefix_offsets=20,
        seed=0,
        time_limit=120.0,
    )
    with Oracle(sys.executable) as oracle:
        return check_files(files, cfg, oracle, corpus=str(root))


def _listing(found: Sequence[Disagreement]) -> str:
    return "\n".join(f"{d.file}:{d.line} [{d.kind}] {d.detail}" for d in found)


@pytest.mark.parametrize("kind", ["crash", "timeout", "oracle"])
def test_no_crashes_or_timeouts(report: Report, kind: str) -> None:
    found = report.disagreements(kind)
    assert not found, _listing(found)


def test_all_subset_files_are_valid(report: Report) -> None:
    assert all(r.oracle_ok for r in report.results)


def test_membership(report: Report) -> None:
    found = report.disagreements("membership")
    assert not found, _listing(found)


def test_prefixes(report: Report) -> None:
    data = report.to_dict()
    found = report.disagreements("prefix")
    assert data["prefix_failures"] == 0, _listing(found)
    assert not found, _listing(found)


def test_mutants(report: Report) -> None:
    data = report.to_dict()
    assert data["mutants"] == 5 * len(report.results)
    found = report.disagreements("mutant")
    assert data["mutant_disagreements"] == 0, _listing(found)


def test_incremental_and_whole_text_agree(report: Report) -> None:
    found = report.disagreements("consistency")
    assert not found, _listing(found)


def test_report_has_the_documented_keys(report: Report) -> None:
    data = report.to_dict()
    for key in (
        "files", "membership_disagreements", "prefix_failures", "mutants",
        "mutant_disagreements", "us_per_char_median", "us_per_char_p90", "step_us_median",
        "step_us_p90", "step_us_p99", "disagreements", "target", "oracle_version", "corpus",
        "seed", "elapsed_s",
    ):  # fmt: skip
        assert key in data, key
    assert data["files"] == len(report.results)
    assert isinstance(data["us_per_char_median"], float)
    assert isinstance(data["step_us_p99"], float)


# --------------------------------------------------------------------------- the harness


def test_line_index() -> None:
    index = LineIndex("ab\ncd\n")
    assert index.line_col(0) == (1, 1)
    assert index.line_col(2) == (1, 3)
    assert index.line_col(3) == (2, 1)
    assert index.line_col(6) == (3, 1)
    assert LineIndex("").line_col(0) == (1, 1)


def test_mutants_are_deterministic_and_differ() -> None:
    text = (stdlib_root() / "bisect.py").read_text(encoding="utf-8")
    first = make_mutants(text, 30, random.Random("s"))
    second = make_mutants(text, 30, random.Random("s"))
    assert first == second
    assert all(m.text != text for m in first)
    assert all(m.text[: m.offset] == text[: m.offset] for m in first)
    assert len({m.description.split()[0] for m in first}) >= 2  # several kinds of edit


def test_mutants_of_empty_text() -> None:
    mutants = make_mutants("", 5, random.Random(1))
    assert all(len(m.text) == 1 for m in mutants)


def test_select_evenly() -> None:
    files = [CorpusFile(str(i), Path(str(i))) for i in range(10)]
    assert [f.name for f in select_evenly(files, 3)] == ["0", "3", "6"]
    assert select_evenly(files, None) == files
    assert select_evenly(files, 50) == files


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(v) for v in range(101)], 90) == 90.0


def test_oracle_verdicts() -> None:
    with Oracle(sys.executable) as oracle:
        assert oracle.version == tuple(sys.version_info[:3])
        ok, bad, nul, cookie = oracle.check_many(
            ["x = 1\n", "x = (\n", "x = 1\0\n", b"# coding: latin-1\nx = '\xe9'\n"]
        )
        assert ok.ok is True
        assert bad.ok is False and bad.lineno == 1 and "SyntaxError" in bad.error
        assert nul.ok is False
        assert cookie.ok is True
        assert oracle.check(b"x = '\xff'\n").ok is False


@pytest.mark.parametrize("version", ORACLES_TO_TRY)
def test_oracle_runs_on_other_interpreters(version: str) -> None:
    python = Path.home() / ".pyenv" / "versions" / version / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no Python {version} here")
    with Oracle(str(python)) as oracle:
        assert ".".join(map(str, oracle.version)) == version
        match_ok = oracle.check("match x:\n    case 1:\n        pass\n").ok
        assert match_ok is (oracle.version >= (3, 10))
