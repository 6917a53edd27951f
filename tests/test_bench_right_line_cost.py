"""bench.right_line_cost: one command, JSON out, the answers of real cuts."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench import right_line_cost
from bench.corpus import stdlib_root


def test_report_cuts_are_measured(tmp_path: Path) -> None:
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the cut's offsets are the 3.11 standard library's")
    text = (stdlib_root() / "pickle.py").read_text()
    comment = text.index("# Terminate the current frame ") + len("# Terminate the current frame ")
    code = text.index("self.commit_frame(force=True)")
    details = [
        {"file": "pickle.py", "where": "comment", "offsets": [comment, comment]},
        {"file": "pickle.py", "where": "code", "offsets": [code, code + 4]},
    ]
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"details": details}))
    out = io.StringIO()
    with redirect_stdout(out):
        assert right_line_cost.main(["--report", str(report), "--large", "0", "--json"]) == 0
    result = json.loads(out.getvalue())
    answers = {row["where"]: row["can_be_code"] for row in result["cut_rows"]}
    assert answers == {"comment": False, "code": True}
    assert result["cuts"]["cursors"] == 2 and result["cuts"]["not_code"] == 1
