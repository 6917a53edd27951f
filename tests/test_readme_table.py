"""The README's figures table is what bench.report builds from the kept JSON files."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from bench import figures, report

ROOT = figures.README.parent


def test_readme_block_is_the_generated_table() -> None:
    """Rerun ``python3 -m bench.report --readme-table --write`` when this fails."""
    text = figures.README.read_text(encoding="utf-8")
    assert figures.block_of(text) == figures.table()


def test_every_row_links_to_a_kept_page_and_file() -> None:
    block = figures.block_of(figures.README.read_text(encoding="utf-8"))
    rows = block.splitlines()[2:]
    assert len(rows) >= 8
    for row in rows:
        link = re.search(r"\]\(([^)]+)\) `([^`]+)` \|$", row)
        assert link, row
        page, name = link.groups()
        assert (ROOT / page).is_file(), row
        assert (ROOT / page).parent.joinpath(name).is_file(), row


def test_the_readmes_relative_links_resolve() -> None:
    text = figures.README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#:]+)\)", text)
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_write_replaces_only_the_marked_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    before = "# title\n\ntext before\n\n"
    after = "\n\n## Later\n\ntext after\n"
    readme.write_text(f"{before}{figures.BEGIN}\n| stale | table |\n{figures.END}{after}")
    out = io.StringIO()
    assert report.main(["--readme-table", "--write", "--readme", str(readme)], out=out) == 0
    text = readme.read_text()
    assert text.startswith(before + figures.BEGIN + "\n")
    assert text.endswith(figures.END + after)
    assert "stale" not in text
    # Links are relative to the README's folder, here outside the repository.
    assert figures.block_of(text) == figures.table(figures.RESULTS, tmp_path)
    assert "rewritten" in out.getvalue()
    # A second run finds nothing to change.
    assert report.main(["--readme-table", "--write", "--readme", str(readme)], out=out) == 0
    assert readme.read_text() == text and "unchanged" in out.getvalue()


def test_a_readme_without_markers_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no block\n")
    with pytest.raises(ValueError, match="figures:begin"):
        report.main(["--readme-table", "--write", "--readme", str(readme)], out=io.StringIO())
    assert readme.read_text() == "# no block\n"


def _copy(run: str, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(figures.RESULTS / run, folder / name)


def test_the_newest_standard_run_is_chosen(tmp_path: Path) -> None:
    """Newer dates win; quick runs, runs at a named older commit and other
    configurations are passed over."""
    quality = "2026-11-24-dev-2cpu-restarts/fim_quality_n200.json"
    older = "2026-11-23-dev-2cpu/quality.json"
    _copy(quality, tmp_path / "2026-01-01-a", "quality.json")
    _copy(older, tmp_path / "2026-01-02-b", "fim_quality_n200.json")
    found = figures.Results(tmp_path)
    newest = found.newest(("quality", "fim_quality"))
    assert newest and newest.path.parent.name == "2026-01-02-b"

    # A newer folder of a --quick run, and a newer file named with a commit: ignored.
    _copy(quality, tmp_path / "2026-02-01-quick", "quality.json")
    (tmp_path / "2026-02-01-quick" / "config.json").write_text(json.dumps({"quick": True}))
    _copy(quality, tmp_path / "2026-02-02-c", "fim_quality_n200_e9d045f_loaded.json")
    # A newer run on 100 cuts: not the standard 400.
    _copy(
        "2026-11-24-dev-2cpu-final/fim_quality_n50.json", tmp_path / "2026-02-03-d", "quality.json"
    )
    rows = figures.rows(tmp_path)
    assert rows[0][2].path == tmp_path / "2026-01-02-b" / "fim_quality_n200.json"
    assert rows[0][1].startswith("constrained 341 (85.2 %), unconstrained 96")


def test_the_line_mode_comes_from_the_json_or_the_file_name(tmp_path: Path) -> None:
    """Only lineMode auto, the server's default, makes the usefulness rows."""
    folder = tmp_path / "2026-01-01-a"
    _copy("2026-11-27-dev-2cpu-usefulness/humaneval_single_line_multi.json", folder,
          "humaneval_single_line_multi.json")  # fmt: skip
    assert not [r for r in figures.rows(tmp_path) if "single-line" in r[0]]
    data = json.loads((folder / "humaneval_single_line_multi.json").read_text())
    (folder / "humaneval-single-line.json").write_text(json.dumps(data | {"line_mode": "auto"}))
    (row,) = [r for r in figures.rows(tmp_path) if "single-line" in r[0]]
    assert row[2].path.name == "humaneval-single-line.json"
    assert row[1].startswith("constrained 0.52 / 0.62,")
