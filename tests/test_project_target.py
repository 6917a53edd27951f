"""lsp_server.target: the target version read from the user's project.

Real files in temporary project folders: pyproject.toml, setup.cfg,
virtual environments' pyvenv.cfg, and a real interpreter as ``python3`` on
``PATH``.
"""

from __future__ import annotations

import doctest
import os
import sys
import time
from pathlib import Path

import pytest

from lexer.version import NEWEST, OLDEST, TargetVersion
from lsp_server import target as target_module
from lsp_server.target import ProjectTarget, lower_bound, project_target


@pytest.mark.parametrize(
    ("spec", "bound"),
    [
        (">=3.10", (3, 10)),
        ("~=3.11", (3, 11)),
        ("~=3.11.2", (3, 11)),
        (">=3.9,<4", (3, 9)),
        ("<4, >=3.9", (3, 9)),
        ("==3.12.*", (3, 12)),
        ("==3.12", (3, 12)),
        ("===3.12.1", (3, 12)),
        (">3.8", (3, 9)),
        (">3.8.1", (3, 8)),
        (">=3.8.0rc1", (3, 8)),
        (">= 3.10 , != 3.11.*", (3, 10)),
        (">=3.8, >=3.11", (3, 11)),
        (">=3", (3, 0)),
        (">=2.7, !=3.0.*, !=3.1.*", (2, 7)),
        ("<4", None),
        ("!=3.9.*", None),
        ("", None),
    ],
)
def test_lower_bound(spec: str, bound: tuple[int, int] | None) -> None:
    assert lower_bound(spec) == bound


@pytest.mark.parametrize("spec", [">=three", "3.10", ">=3.10 or 3.11", "=>3.10"])
def test_lower_bound_rejects_what_is_not_a_specifier(spec: str) -> None:
    with pytest.raises(ValueError):
        lower_bound(spec)


@pytest.fixture
def no_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No python3 on PATH, so that only the project's own files decide."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_requires_python_of_the_nearest_pyproject(tmp_path: Path, no_python: None) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "outer"\nrequires-python = ">=3.9"\n')
    inner = write(
        tmp_path / "pkg" / "pyproject.toml",
        '[build-system]\nrequires = ["x"]\n\n[project]\nrequires-python = "~=3.12"  # new\n',
    )
    source = write(tmp_path / "pkg" / "src" / "mod.py", "x = 1\n")
    found = project_target(source, [tmp_path])
    assert found == ProjectTarget(
        TargetVersion(3, 12), "pyproject", f"requires-python ~=3.12 in {inner}", inner
    )
    outer = project_target(write(tmp_path / "top.py", ""), [tmp_path])
    assert outer.version == (3, 9) and outer.path == tmp_path / "pyproject.toml"


def test_a_pyproject_without_requires_python_is_passed_over(
    tmp_path: Path, no_python: None
) -> None:
    write(tmp_path / "setup.cfg", "[metadata]\nname = x\n\n[options]\npython_requires = >=3.10\n")
    write(tmp_path / "sub" / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")
    found = project_target(tmp_path / "sub" / "m.py", [tmp_path])
    assert found.version == (3, 10) and found.kind == "setup.cfg"
    assert found.origin == f"python_requires >=3.10 in {tmp_path / 'setup.cfg'}"


def test_versions_outside_the_supported_range_are_clamped(tmp_path: Path, no_python: None) -> None:
    write(tmp_path / "old" / "pyproject.toml", '[project]\nrequires-python = ">=3.6"\n')
    write(tmp_path / "new" / "pyproject.toml", '[project]\nrequires-python = ">=3.99"\n')
    write(tmp_path / "open" / "pyproject.toml", '[project]\nrequires-python = "<4"\n')
    old = project_target(tmp_path / "old" / "a.py", [])
    assert old.version == OLDEST and "clamped" in old.origin
    assert project_target(tmp_path / "new" / "a.py", []).version == NEWEST
    unbounded = project_target(tmp_path / "open" / "a.py", [])
    assert unbounded.version == OLDEST and "no lower bound" in unbounded.origin


def test_a_malformed_file_is_skipped_and_said(tmp_path: Path, no_python: None) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nrequires-python = ">=3.11"\n')
    bad = write(tmp_path / "a" / "pyproject.toml", '[project]\nrequires-python = "three"\n')
    write(tmp_path / "b" / "pyproject.toml", "[project\nrequires-python = '>=3.8'\n")
    found = project_target(tmp_path / "a" / "m.py", [])
    assert found.version == (3, 11)
    assert f"requires-python in {bad} ignored" in found.origin
    assert project_target(tmp_path / "b" / "m.py", []).version == (3, 11)


def test_the_cache_sees_an_edited_file(tmp_path: Path, no_python: None) -> None:
    config = write(tmp_path / "pyproject.toml", '[project]\nrequires-python = ">=3.10"\n')
    assert project_target(tmp_path / "m.py", []).version == (3, 10)
    write(config, '[project]\nrequires-python = ">=3.13"\n')
    later = time.time() + 5
    os.utime(config, (later, later))  # a new modification time whatever the clock's grain
    assert project_target(tmp_path / "m.py", []).version == (3, 13)


def test_the_workspace_virtual_environment(tmp_path: Path, no_python: None) -> None:
    other = tmp_path / "other"
    project = tmp_path / "project"
    write(other / "venv" / "pyvenv.cfg", "home = /usr/bin\nversion = 3.9.18\n")
    cfg = write(
        project / ".venv" / "pyvenv.cfg",
        "home = /usr/bin\nimplementation = CPython\nversion_info = 3.12.1.final.0\n",
    )
    found = project_target(project / "app" / "main.py", [other, project])
    assert found.version == (3, 12) and found.kind == "venv" and found.path == cfg
    assert project_target(None, [other, project]).version == (3, 9)


def test_python3_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real interpreter as python3: named by version (a link), or run once (a script)."""
    real = Path(sys.executable).resolve()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "python3").symlink_to(real)
    monkeypatch.setenv("PATH", str(linked))
    expected = TargetVersion(*sys.version_info[:2])
    found = project_target(tmp_path / "m.py", [tmp_path])
    assert found.version == expected and found.kind == "python3"
    scripted = tmp_path / "scripted"
    script = write(scripted / "python3", f'#!/bin/sh\nexec "{real}" "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(scripted))
    found = project_target(tmp_path / "m.py", [tmp_path])
    assert found.version == expected and str(script) in found.origin


def test_the_newest_when_nothing_says(tmp_path: Path, no_python: None) -> None:
    found = project_target(tmp_path / "m.py", [tmp_path])
    assert found == ProjectTarget(NEWEST, "default", f"the newest supported version, {NEWEST}")


@pytest.mark.parametrize(
    "text",
    [
        '[project]\nrequires-python = ">=3.11"\n',
        "[project]\nname = 'x'\nrequires-python = '>=3.11'  # comment\n",
        '[ project ]\n"requires-python" = ">=3.11"\n[tool.x]\nrequires-python = ">=3.9"\n',
        '[tool.x]\nrequires-python = ">=3.9"\n[project]\nrequires-python = ">=3.11"\n',
        '[[tool.list]]\nrequires-python = ">=3.9"\n[project]\nrequires-python=">=3.11"\n',
    ],
)
def test_the_minimal_toml_reader_agrees_with_tomllib(text: str) -> None:
    """The fallback for Python 3.10 without tomli reads what tomllib reads."""
    tomllib = pytest.importorskip("tomllib")
    expected = tomllib.loads(text)["project"]["requires-python"]
    assert target_module._scan_requires_python(text) == expected == ">=3.11"


def test_the_minimal_toml_reader_finds_nothing_outside_project() -> None:
    assert target_module._scan_requires_python('[tool.x]\nrequires-python = ">=3.9"\n') is None


def test_docstring_examples() -> None:
    result = doctest.testmod(target_module)
    assert result.attempted > 0 and result.failed == 0
