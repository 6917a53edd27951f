"""What ``Quotient.right_line_can_be_code`` costs (issue 17): whether R's first line may
be code, asked once per right context by ``QuotientState.lands``, steering's comment
filter and the natural distance.

Two sets of cursors, each after ``QuotientBuilder.warm`` on its document (as the
server warms a document's backward parse):

* the cuts of a ``bench.fim_quality --json --details`` report (the same files and
  offsets);
* in each of the ``--large`` largest standard-library files, a cursor near the top
  inside a comment's words (R's first line is prose) and one in code.

    python3 -m bench.right_line_cost --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.corpus import stdlib_corpus, stdlib_root
from bench.harness import rounded_percentile
from quotient_parser.quotient import QuotientBuilder

REPORT = "bench/results/2026-11-24-dev-2cpu-evening/fim_quality_n50.json"


def measure(text: str, offsets: tuple[int, int], target: tuple[int, int]) -> tuple[bool, float]:
    """(the answer, milliseconds) for the cursor cut at ``offsets`` of ``text``."""
    builder = QuotientBuilder(target)
    builder.warm(text)
    quotient = builder.build(text[: offsets[0]], text[offsets[1] :])
    t0 = time.perf_counter()
    answer = quotient.right_line_can_be_code
    return answer, (time.perf_counter() - t0) * 1e3


def large_file_cursors(count: int) -> list[tuple[str, str, int]]:
    """(file, kind, offset): near the top of the ``count`` largest files, a cursor inside
    a comment's words and one in code."""
    files = sorted(stdlib_corpus(), key=lambda f: f.path.stat().st_size, reverse=True)
    cursors = []
    for corpus_file in files[:count]:
        text = corpus_file.path.read_text(encoding="utf-8", errors="replace")
        start = text.find("\n", len(text) // 50) + 1
        comment, code = text.find("# ", start), text.find(" = ", start)
        if comment >= 0:
            cursors.append((corpus_file.name, "comment", comment + 6))
        if code >= 0:
            cursors.append((corpus_file.name, "code", code + 1))
    return cursors


def summary(rows: Sequence[dict[str, object]]) -> dict[str, object]:
    times = [float(str(row["ms"])) for row in rows]
    return {
        "cursors": len(rows),
        "not_code": sum(not row["can_be_code"] for row in rows),
        "ms_median": rounded_percentile(times, 50, 2),
        "ms_p90": rounded_percentile(times, 90, 2),
        "ms_max": round(max(times), 2) if times else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default=REPORT, help="a fim_quality --json --details report")
    parser.add_argument("--large", type=int, default=5, help="largest files to put cursors in")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    target = (sys.version_info.major, sys.version_info.minor)
    root = stdlib_root()
    cut_rows: list[dict[str, object]] = []
    for case in json.loads(Path(args.report).read_text())["details"]:
        text = (root / case["file"]).read_text(encoding="utf-8", errors="replace")
        answer, ms = measure(text, tuple(case["offsets"]), target)
        cut_rows.append({"file": case["file"], "where": case["where"], "can_be_code": answer,
                         "ms": round(ms, 3)})  # fmt: skip
    large_rows: list[dict[str, object]] = []
    for name, kind, offset in large_file_cursors(args.large):
        text = (root / name).read_text(encoding="utf-8", errors="replace")
        answer, ms = measure(text, (offset, offset), target)
        lines = text.count("\n")
        large_rows.append({"file": name, "lines": lines, "cursor": kind, "can_be_code": answer,
                           "ms": round(ms, 3)})  # fmt: skip
    result = {
        "report": args.report,
        "cuts": summary(cut_rows),
        "large_files": summary(large_rows),
        "large_file_cursors": large_rows,
        "cut_rows": cut_rows,
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"report cuts: {result['cuts']}")
        print(f"large files: {result['large_files']}")
        for row in large_rows:
            print(f"  {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
