"""bench.overhead and bench.report on a small sample: figures, files and plots appear."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bench import overhead, report


def test_pieces_cover_the_middle() -> None:
    middle = "x = foo(12, 'a b')\n    return  y"
    assert "".join(overhead.pieces(middle)) == middle
    assert overhead.pieces("foo_bar1 23") == ["foo_bar1", " ", "23"]


def test_overhead_small_sample() -> None:
    out = io.StringIO()
    assert overhead.main(["--n", "6", "--json", "--no-progress", "--seed", "2"], out=out) == 0
    result = json.loads(out.getvalue())
    assert result["cuts_measured"] >= 3
    for row in result["bins"]:
        assert row["constrained_viable_us_median"] > 0
        assert row["ast_parse_us_median"] > 0
    assert len(result["points"]) == result["cuts_measured"]


def test_report_writes_json_markdown_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = io.StringIO()
    status = report.main(
        ["--quick", "--only", "overhead", "--out", str(tmp_path), "--seed", "1"], out=out
    )
    assert status == 0
    for name in ("overhead.json", "config.json", "report.md", "overhead.png", "construction.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["quick"] is True and config["machine"]["cores"]
    assert "Figure 11" in (tmp_path / "report.md").read_text()


def test_report_only_keeps_earlier_figures(tmp_path: Path) -> None:
    """A run in parts: --only reruns one benchmark, the folder's other figures stay."""
    pytest.importorskip("matplotlib")
    (tmp_path / "quotient.json").write_text(json.dumps({"cuts": 7, "unsound": 0}))
    argv = ["--quick", "--only", "overhead", "--out", str(tmp_path), "--seed", "1"]
    assert report.main(argv, out=io.StringIO()) == 0
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["kept_from_earlier_runs"] == ["quotient"]
    assert list(config["benchmarks"]) == ["overhead"]
    text = (tmp_path / "report.md").read_text()
    assert "## FIM quotient" in text and "| cuts | 7 |" in text
    assert "python -m bench.overhead" in text


def test_render_redraws_from_the_folder(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    argv = ["--quick", "--only", "overhead", "--out", str(tmp_path), "--seed", "1"]
    assert report.main(argv, out=io.StringIO()) == 0
    (tmp_path / "report.md").unlink()
    (tmp_path / "overhead.png").unlink()
    assert report.main(["--render", "--out", str(tmp_path)], out=io.StringIO()) == 0
    assert "Figure 11" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "overhead.png").stat().st_size > 0
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["kept_from_earlier_runs"] == ["overhead"]
    assert "python -m bench.overhead" in config["benchmarks"]["overhead"]["command"]
