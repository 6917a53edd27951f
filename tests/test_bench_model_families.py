"""bench.model_families on a few cuts with the families whose vocabulary ships with fimlsp."""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from model_fixtures import model_cache  # noqa: F401

from bench import model_families, parser_split
from lsp_server.modes import MODES

STDLIB = Path(sys.modules["json"].__file__ or "").parent  # a small package of real code


def test_report_per_family(model_cache: Path) -> None:
    out = io.StringIO()
    argv = [str(STDLIB), "--family", "starcoder2", "--family", "mellum", "--n", "1",
            "--max-tokens", "6", "--ctx-size", "1024", "--json"]  # fmt: skip
    status = model_families.main(argv, out=out)
    report = json.loads(out.getvalue())
    assert status == 0, report
    assert report["cuts"] == 2
    rows = {row["family"]: row for row in report["families"]}
    assert set(rows) == {"starcoder2", "mellum"}
    assert (rows["starcoder2"]["layout"], rows["mellum"]["layout"]) == ("psm", "spm_infill")
    assert rows["mellum"]["detected_family"] == "mellum"
    for row in rows.values():
        assert row["vocab_size"] == 49152 and row["cases"] == 2
        assert row["claimed_success_but_invalid"] == 0
        assert set(row["success"]) == set(MODES)
        assert row["parser_samples"] > 0
        assert row["parser_us_per_token_median"] <= row["parser_us_per_token_p99"]
        assert row["index_build_ms"] > 0 and row["index_load_ms"] > 0
        assert row["wall_ratio_constrained_over_unconstrained"] is not None
        assert any(t["text"] == "<|endoftext|>" for t in row["end_tokens"])
    assert "mellum" in model_families.summary(report)


def test_parser_split_accounts_for_each_step(model_cache: Path) -> None:
    out = io.StringIO()
    argv = [str(STDLIB), "--family", "starcoder2", "--n", "1", "--max-tokens", "6",
            "--ctx-size", "1024", "--json"]  # fmt: skip
    assert parser_split.main(argv, out=out) == 0
    (row,) = json.loads(out.getvalue())["families"]
    assert row["family"] == "starcoder2" and row["steps"] > 0 and row["tried_median"] >= 1
    parts = sum(row[f"{part}_us_median"] for part in parser_split.PARTS)
    # steering may take every token from a witness, trying no candidate: then only
    # the other parts cost time
    assert row["total_us_median"] > 0 and parts > 0
    assert parts <= 3 * row["total_us_p90"]  # the parts are pieces of the total
