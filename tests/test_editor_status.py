"""The editors name the server's states, stop reasons, modes and status methods as it does.

The lists are read from the editors' sources (TypeScript and Lua, parsed here with
regular expressions, no Node or Neovim needed) and compared with
:class:`lsp_server.status.EngineState`, :class:`lsp_server.status.StopReason` and
:mod:`lsp_server.modes`, in order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lsp_server.model.remote.server_api import SERVER_APIS
from lsp_server.modes import LINE_MODES, MODES
from lsp_server.status import SERVER_STATUS_REQUEST, STATUS_NOTIFICATION, EngineState, StopReason

EDITORS = Path(__file__).resolve().parent.parent / "editors"
VSCODE_STATUS = EDITORS / "vscode" / "src" / "status.ts"
VSCODE_CONFIG = EDITORS / "vscode" / "src" / "config.ts"
NVIM_STATUS = EDITORS / "nvim" / "lua" / "fimlsp" / "status.lua"
NVIM_CONFIG = EDITORS / "nvim" / "lua" / "fimlsp" / "config.lua"

_STRING = re.compile(r"""'([^']*)'|"([^"]*)\"""")


def _strings(body: str) -> list[str]:
    """The quoted strings of a list's body, in order."""
    return [single or double for single, double in _STRING.findall(body)]


def ts_string(path: Path, name: str) -> str:
    """``export const NAME = '...';`` in a TypeScript file."""
    match = re.search(rf"export const {name} = '([^']*)';", path.read_text())
    assert match, f"{name} not found in {path}"
    return match.group(1)


def lua_string(path: Path, name: str) -> str:
    """``M.NAME = "..."`` in a Lua file."""
    match = re.search(rf'^M\.{name} = "([^"]*)"', path.read_text(), re.M)
    assert match, f"M.{name} not found in {path}"
    return match.group(1)


def ts_const(path: Path, name: str) -> list[str]:
    """``export const NAME = [...] as const;`` in a TypeScript file."""
    match = re.search(rf"export const {name} = \[(.*?)\] as const;", path.read_text(), re.S)
    assert match, f"{name} not found in {path}"
    return _strings(match.group(1))


def lua_list(path: Path, name: str) -> list[str]:
    """``M.NAME = { ... }`` in a Lua file."""
    match = re.search(rf"^M\.{name} = \{{(.*?)\}}", path.read_text(), re.S | re.M)
    assert match, f"M.{name} not found in {path}"
    return _strings(match.group(1))


def lua_choices(path: Path, setting: str) -> list[str]:
    """``setting = one_of(...)`` in the Neovim plugin's settings checks."""
    match = re.search(rf"^\s*{setting} = one_of\((.*?)\)", path.read_text(), re.M)
    assert match, f"{setting} = one_of(...) not found in {path}"
    return _strings(match.group(1))


ENGINE_STATES = [state.value for state in EngineState]
STOP_REASONS = [reason.value for reason in StopReason]


#: What each editor file must list: (reader, file, list's name, the server's values).
MIRRORS = {
    "vscode-states": (ts_const, VSCODE_STATUS, "ENGINE_STATES", ENGINE_STATES),
    "vscode-stop-reasons": (ts_const, VSCODE_STATUS, "STOP_REASONS", STOP_REASONS),
    "nvim-states": (lua_list, NVIM_STATUS, "ENGINE_STATES", ENGINE_STATES),
    "nvim-stop-reasons": (lua_list, NVIM_STATUS, "STOP_REASONS", STOP_REASONS),
    "vscode-modes": (ts_const, VSCODE_CONFIG, "MODES", list(MODES)),
    "vscode-line-modes": (ts_const, VSCODE_CONFIG, "LINE_MODES", list(LINE_MODES)),
    "nvim-modes": (lua_choices, NVIM_CONFIG, "mode", list(MODES)),
    "nvim-line-modes": (lua_choices, NVIM_CONFIG, "lineMode", list(LINE_MODES)),
    "vscode-server-apis": (ts_const, VSCODE_CONFIG, "SERVER_APIS", list(SERVER_APIS)),
    "nvim-server-apis": (lua_choices, NVIM_CONFIG, "serverApi", list(SERVER_APIS)),
}


@pytest.mark.parametrize("mirror", list(MIRRORS))
def test_editor_lists_mirror_the_server(mirror: str) -> None:
    read, path, name, expected = MIRRORS[mirror]
    assert read(path, name) == expected


def test_editors_name_the_status_methods_as_the_server() -> None:
    assert ts_string(VSCODE_STATUS, "STATUS_NOTIFICATION") == STATUS_NOTIFICATION
    assert ts_string(VSCODE_STATUS, "SERVER_STATUS_REQUEST") == SERVER_STATUS_REQUEST
    assert lua_string(NVIM_STATUS, "NOTIFICATION") == STATUS_NOTIFICATION
    assert lua_string(NVIM_STATUS, "SERVER_STATUS") == SERVER_STATUS_REQUEST


def test_vscode_settings_offer_the_server_modes() -> None:
    manifest = json.loads((EDITORS / "vscode" / "package.json").read_text(encoding="utf-8"))
    properties = manifest["contributes"]["configuration"]["properties"]
    assert properties["fimlsp.mode"]["enum"] == list(MODES)
    assert properties["fimlsp.lineMode"]["enum"] == list(LINE_MODES)
    assert properties["fimlsp.serverApi"]["enum"] == list(SERVER_APIS)


def test_the_lists_are_read_not_assumed(tmp_path: Path) -> None:
    """The parsers find what is there, and nothing where there is nothing."""
    source = tmp_path / "x.ts"
    source.write_text("export const NAMES = [\n  'a',\n  \"b\", // note\n] as const;\n")
    assert ts_const(source, "NAMES") == ["a", "b"]
    with pytest.raises(AssertionError):
        ts_const(source, "OTHER")
    lua = tmp_path / "x.lua"
    lua.write_text('local M = {}\nM.NAMES = { "a", "b" }\n  mode = one_of("x", "y"),\n')
    assert lua_list(lua, "NAMES") == ["a", "b"]
    assert lua_choices(lua, "mode") == ["x", "y"]
