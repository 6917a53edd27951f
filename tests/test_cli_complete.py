"""``fimlsp complete`` run as a subprocess on temporary files with the tiny model."""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    TinyFactory,
    model_cache,
    tiny_factory,
    tiny_model_path,
)

from lsp_server.cli import cursor_offset

REPO = Path(__file__).resolve().parents[1]

CODE = '''import os


def greet(name: str) -> str:
    """Say hello."""
    return "hello " + name


class Point:
    def __init__(self, x: float, y: float) -> None:
        self.x = x
        self.y = y
'''

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def fimlsp(model_cache: Path) -> Run:
    """``fimlsp(*args)``: run ``python -m lsp_server.cli`` and return the finished process."""
    env = dict(os.environ, FIMLSP_CACHE_DIR=str(model_cache))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lsp_server.cli", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=120,
        )

    return run


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "example.py"
    path.write_text(CODE)
    return path


def _error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one-line message of a failed run (and no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("fimlsp: error: "), proc.stderr
    return proc.stderr


def _completion(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    result = json.loads(proc.stdout)
    assert isinstance(result, dict)
    for key, kind in (
        ("middle", str),
        ("stop_reason", str),
        ("tokens", int),
        ("timings", dict),
    ):
        assert isinstance(result[key], kind), (key, result)
    assert result["complete"] in (True, False, None)
    timings = result["timings"]
    assert isinstance(timings, dict) and "total_ms" in timings
    return result


def test_complete_json(fimlsp: Run, source: Path, tiny_model_path: Path) -> None:
    # cursor after "return " on line 6
    proc = fimlsp(
        "complete", source, "--line", "6", "--column", "12", "--model", tiny_model_path,
        "--max-tokens", "12", "--json",
    )  # fmt: skip
    result = _completion(proc)
    tokens, middle = result["tokens"], result["middle"]
    assert isinstance(tokens, int) and tokens <= 12
    assert isinstance(middle, str)
    if result["complete"]:
        lines = CODE.splitlines(keepends=True)
        offset = sum(map(len, lines[:5])) + 11
        compile(CODE[:offset] + middle + CODE[offset:], str(source), "exec")


@pytest.mark.parametrize("mode", ["unconstrained", "checked"])
def test_complete_other_modes(fimlsp: Run, source: Path, tiny_model_path: Path, mode: str) -> None:
    proc = fimlsp(
        "complete", source, "--line", "11", "--column", "18", "--model", tiny_model_path,
        "--mode", mode, "--max-tokens", "6", "--single-line", "--json",
    )  # fmt: skip
    result = _completion(proc)
    assert "\n" not in str(result["middle"])
    if mode == "unconstrained":
        assert result["complete"] is None


def test_complete_text_output(fimlsp: Run, source: Path, tiny_model_path: Path) -> None:
    proc = fimlsp(
        "complete", source, "--line", "12", "--column", "18", "--model", tiny_model_path,
        "--max-tokens", "4",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("\n")
    assert "tokens" in proc.stderr and "complete=" in proc.stderr


def test_empty_file(fimlsp: Run, tmp_path: Path, tiny_model_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_bytes(b"")
    proc = fimlsp(
        "complete", empty, "--line", "1", "--column", "1", "--model", tiny_model_path,
        "--max-tokens", "8", "--json",
    )  # fmt: skip
    result = _completion(proc)
    if result["complete"]:
        compile(str(result["middle"]), "<middle>", "exec")


def test_missing_model(fimlsp: Run, source: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model.gguf"
    proc = fimlsp("complete", source, "--line", "1", "--column", "1", "--model", missing)
    message = _error(proc)
    assert "model file not found" in message and str(missing) in message


def test_model_path_is_a_directory(fimlsp: Run, source: Path, tmp_path: Path) -> None:
    proc = fimlsp("complete", source, "--line", "1", "--column", "1", "--model", tmp_path)
    assert "not a file" in _error(proc)


def test_corrupt_model(fimlsp: Run, source: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(os.urandom(4096))
    proc = fimlsp("complete", source, "--line", "1", "--column", "1", "--model", garbage)
    assert "not a GGUF model file" in _error(proc)


def test_truncated_model(fimlsp: Run, source: Path, tmp_path: Path, tiny_model_path: Path) -> None:
    # right magic, then the file stops in the middle of the metadata
    broken = tmp_path / "truncated.gguf"
    broken.write_bytes(tiny_model_path.read_bytes()[:3000])
    proc = fimlsp("complete", source, "--line", "1", "--column", "1", "--model", broken)
    assert "cannot load model" in _error(proc)


@pytest.mark.parametrize(
    ("line", "column", "expected"),
    [
        ("14", "1", "line 14 is past the end"),
        ("40", "3", "line 40 is past the end"),
        ("1", "11", "column 11 is past the end of line 1"),
        ("6", "80", "column 80 is past the end of line 6"),
        ("0", "1", "1-based"),
        ("3", "0", "1-based"),
    ],
)
def test_cursor_outside_the_file(
    fimlsp: Run, source: Path, tiny_model_path: Path, line: str, column: str, expected: str
) -> None:
    proc = fimlsp(
        "complete", source, "--line", line, "--column", column, "--model", tiny_model_path
    )
    assert expected in _error(proc)


def test_cursor_at_the_very_end(fimlsp: Run, source: Path, tiny_model_path: Path) -> None:
    # CODE ends with a newline: line 13, column 1 is the end of the file
    proc = fimlsp(
        "complete", source, "--line", "13", "--column", "1", "--model", tiny_model_path,
        "--max-tokens", "4", "--json",
    )  # fmt: skip
    _completion(proc)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("name = 'café'\n".encode("latin-1"), "encoding"),  # found on the first two lines
        ("x = 1\n\n\nname = 'café'\n".encode("latin-1"), "not valid utf-8: byte 0xe9"),
    ],
)
def test_non_utf8_file(
    fimlsp: Run, tmp_path: Path, tiny_model_path: Path, data: bytes, expected: str
) -> None:
    latin = tmp_path / "latin.py"
    latin.write_bytes(data)
    proc = fimlsp("complete", latin, "--line", "1", "--column", "1", "--model", tiny_model_path)
    message = _error(proc)
    assert str(latin) in message and expected in message


def test_latin1_file_with_a_coding_cookie(
    fimlsp: Run, tmp_path: Path, tiny_model_path: Path
) -> None:
    latin = tmp_path / "cookie.py"
    latin.write_bytes("# -*- coding: latin-1 -*-\nname = 'café'\n".encode("latin-1"))
    proc = fimlsp(
        "complete", latin, "--line", "2", "--column", "8", "--model", tiny_model_path,
        "--max-tokens", "4", "--json",
    )  # fmt: skip
    _completion(proc)


def test_missing_file(fimlsp: Run, tmp_path: Path, tiny_model_path: Path) -> None:
    proc = fimlsp(
        "complete", tmp_path / "nope.py", "--line", "1", "--column", "1",
        "--model", tiny_model_path,
    )  # fmt: skip
    assert "cannot read" in _error(proc)


def test_context_too_small(fimlsp: Run, source: Path, tiny_model_path: Path) -> None:
    proc = fimlsp(
        "complete", source, "--line", "6", "--column", "12", "--model", tiny_model_path,
        "--ctx-size", "256", "--max-tokens", "300",
    )  # fmt: skip
    assert "leaves no room" in _error(proc)


def test_bad_target(fimlsp: Run, source: Path, tiny_model_path: Path) -> None:
    proc = fimlsp(
        "complete", source, "--line", "6", "--column", "12", "--model", tiny_model_path,
        "--target", "2.7",
    )  # fmt: skip
    _error(proc)


# ---------------------------------------------------------------- cursor positions


@pytest.mark.parametrize(
    ("text", "line", "column", "offset"),
    [
        ("", 1, 1, 0),
        ("x = 1", 1, 6, 5),
        ("x = 1\n", 2, 1, 6),
        ("a\r\nb\rc\n", 2, 2, 4),
        ("a\r\nb\rc\n", 3, 1, 5),
        # only \n, \r\n and \r end lines, as for Python and the LSP: not form feeds
        ("\x0c\nx = 1\ny = \n", 3, 5, 12),
        ("s = '\u2028'\nt\n", 2, 2, 9),
    ],
)
def testcursor_offset(text: str, line: int, column: int, offset: int) -> None:
    assert cursor_offset(text, line, column) == offset


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [("", 2, 1), ("", 1, 2), ("x\n", 3, 1), ("x\n", 2, 2), ("a\x0cb\n", 2, 3)],
)
def test_cursor_offset_outside(text: str, line: int, column: int) -> None:
    with pytest.raises(ValueError, match="past the end"):
        cursor_offset(text, line, column)


def test_check_reports_python_line_numbers(fimlsp: Run, tmp_path: Path) -> None:
    # a form feed does not end a line: the broken line is line 3, not line 4
    path = tmp_path / "formfeed.py"
    path.write_text("x = 1\x0c\ny = 2\nz = )\n")
    proc = fimlsp("check", path, "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["valid"] is False and result["line"] == 3


# ---------------------------------------------------------------- the project's target


def _project(tmp_path: Path, requires: str, code: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nrequires-python = "{requires}"\n'
    )
    package = tmp_path / "app"
    package.mkdir()
    path = package / "main.py"
    path.write_text(code)
    return path


def test_target_from_the_project(fimlsp: Run, tmp_path: Path, tiny_model_path: Path) -> None:
    path = _project(tmp_path, ">=3.12", CODE)
    proc = fimlsp(
        "complete", path, "--line", "6", "--column", "12", "--model", tiny_model_path,
        "--max-tokens", "4", "--json",
    )  # fmt: skip
    result = _completion(proc)
    assert (result["target"], result["targetSource"]) == ("3.12", "pyproject")
    assert str(tmp_path / "pyproject.toml") in str(result["targetOrigin"])
    text = fimlsp(
        "complete", path, "--line", "6", "--column", "12", "--model", tiny_model_path,
        "--max-tokens", "4",
    )  # fmt: skip
    assert "target Python 3.12 (requires-python >=3.12 in" in text.stderr


def test_syntax_newer_than_the_project(fimlsp: Run, tmp_path: Path, tiny_model_path: Path) -> None:
    code = 'name = "x"\ngreeting = t"hi {name}"\nvalues = (\n'
    path = _project(tmp_path, ">=3.12", code)
    args = ("complete", path, "--line", "3", "--column", "11", "--model", tiny_model_path,
            "--max-tokens", "4", "--json")  # fmt: skip
    message = _error(fimlsp(*args))
    assert "line 2 uses syntax from Python 3.14, newer than the target Python 3.12" in message
    assert f"requires-python >=3.12 in {tmp_path / 'pyproject.toml'}" in message
    # Raised by hand, the target is the one given.
    result = _completion(fimlsp(*args, "--target", "3.14"))
    assert (result["target"], result["targetSource"]) == ("3.14", "setting")
