"""The VS Code extension (editors/vscode): its settings match the server's, and its unit tests.

* The settings that ``package.json`` contributes (section ``fimlsp``) are checked against
  :class:`lsp_server.settings.Settings` in plain Python: every server setting is there,
  with the server's default and the values it accepts.
* ``npm ci`` (only when ``node_modules`` is missing or older than the lockfile), then
  ``npm test``: compiles the TypeScript (strict) and runs the unit tests with Node's test
  runner, without VS Code. Skipped when ``npm`` or Node 20+ is missing; about 40 s with an
  install, 5 to 10 s without.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lsp_server.modes import LINE_MODES, MODES
from lsp_server.settings import Settings

EXTENSION = Path(__file__).resolve().parent.parent / "editors" / "vscode"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _properties() -> dict[str, dict[str, Any]]:
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    properties: dict[str, dict[str, Any]] = manifest["contributes"]["configuration"]["properties"]
    return properties


def test_every_server_setting_is_contributed_with_its_default() -> None:
    properties = _properties()
    for field in dataclasses.fields(Settings):
        key = f"fimlsp.{_camel(field.name)}"
        assert key in properties, f"{key} is missing from package.json"
        default = properties[key]["default"]
        server_default = field.default
        if field.name == "gpu_layers":
            assert (default, server_default) == (-1, None)  # -1: "all", sent as null
        elif field.name in ("model_repo", "model_file", "api_key", "model_vocab"):
            assert (default, server_default) == ("", None)  # empty: not used
        else:
            assert default == server_default, key
    extension_only = {"fimlsp.server.command", "fimlsp.server.args", "fimlsp.trace.server"}
    server_keys = {f"fimlsp.{_camel(f.name)}" for f in dataclasses.fields(Settings)}
    assert set(properties) == server_keys | extension_only


def test_contributed_settings_are_accepted_by_the_server() -> None:
    """Every enum value and both ends of every range merge without a problem."""
    properties = _properties()
    for key, spec in properties.items():
        name = key.removeprefix("fimlsp.")
        if name.startswith(("server.", "trace.")):
            continue
        values: list[Any] = [spec["default"], *spec.get("enum", [])]
        if name != "gpuLayers":
            values += [spec[bound] for bound in ("minimum", "maximum") if bound in spec]
        for value in values:
            _, problems = Settings().merged({name: value})
            assert problems == [], (key, value, problems)
    # Just outside a range the server objects: the ranges are the server's.
    for key, spec in properties.items():
        name = key.removeprefix("fimlsp.")
        if spec.get("type") != "integer" or name == "gpuLayers":
            continue
        for outside in (spec["minimum"] - 1, spec["maximum"] + 1):
            _, problems = Settings().merged({name: outside})
            assert problems, (key, outside)


def test_enum_settings_cover_what_the_server_accepts() -> None:
    properties = _properties()
    for name, values in {
        "mode": MODES,
        "lineMode": LINE_MODES,
        "pythonVersion": ("auto", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"),
    }.items():
        assert tuple(properties[f"fimlsp.{name}"]["enum"]) == values
        for wrong in ("", "other", "3.7"):
            _, problems = Settings().merged({name: wrong})
            assert problems, (name, wrong)


def _node_major() -> int | None:
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    match = re.match(r"v(\d+)\.", out.stdout.strip())
    return int(match.group(1)) if match else None


def _needs_install() -> bool:
    installed = EXTENSION / "node_modules" / ".package-lock.json"
    lock = EXTENSION / "package-lock.json"
    return not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime


def test_extension_compiles_and_its_unit_tests_pass() -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the extension's unit tests need Node.js 20+ and npm")
    major = _node_major()
    if major is None or major < 20:
        pytest.skip(f"Node.js 20 or newer is needed, found {major}")
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    if _needs_install():
        install = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert install.returncode == 0, install.stdout[-4000:] + install.stderr[-4000:]
    result = subprocess.run(
        [npm, "test"],
        cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    passed = re.search(r"(?:ℹ|#) pass (\d+)", output)
    failed = re.search(r"(?:ℹ|#) fail (\d+)", output)
    assert passed and int(passed.group(1)) > 0, output[-3000:]
    assert failed and int(failed.group(1)) == 0, output[-3000:]
