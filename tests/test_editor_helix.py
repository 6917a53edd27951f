"""Helix with ``editors/other/helix/languages.toml``: ``hx --health python`` finds fimlsp.

Helix has no Debian 12 package and no PyPI or npm package, so this is skipped wherever
``hx`` is not installed by hand; ``test_editor_configs.py`` checks the same file without
Helix, and starts the server the way it says.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "editors" / "other" / "helix" / "languages.toml"


@pytest.mark.skipif(shutil.which("hx") is None, reason="Helix (hx) is not installed")
def test_hx_health_lists_fimlsp(tmp_path: Path) -> None:
    config_home = tmp_path / "config"
    (config_home / "helix").mkdir(parents=True)
    shutil.copy(CONFIG, config_home / "helix" / "languages.toml")
    fimlsp = Path(sys.executable).parent / "fimlsp"
    path = os.environ.get("PATH", "")
    if fimlsp.is_file():
        path = f"{fimlsp.parent}{os.pathsep}{path}"
    proc = subprocess.run(
        ["hx", "--health", "python"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "PATH": path,
            "HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(config_home),
        },
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    # Helix reports a languages.toml it cannot read instead of using it.
    for complaint in ("Bad language config", "unknown field", "TOML parse error"):
        assert complaint not in output, output
    lines = [line for line in output.splitlines() if "fimlsp" in line]
    assert lines, output
    found = shutil.which("fimlsp", path=path)
    assert found is not None
    # The server's line names the binary Helix found, or marks it found.
    assert any(found in line or "✓" in line for line in lines), output
