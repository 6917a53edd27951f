"""The VS Code extension end to end, in a real VS Code (code-server) driven by Chromium.

Runs ``editors/vscode/test/e2e/run.sh``: it installs Node 24, code-server and
playwright-core into ``editors/vscode/.e2e/`` (once, several minutes and about 600 MB),
packs the extension into a .vsix, installs it into a fresh code-server profile set to
start this checkout's server (``python -m lsp_server.cli --stdio``) with a tiny test
model, then types in a Python file, accepts the ghost text with Tab and checks that the
file parses. Screenshots, logs and ``timings.json`` go to the test's temporary folder.

Only runs when asked: ``FIMLSP_E2E=1 python -m pytest tests/test_vscode_e2e.py``. Needs
npm with access to the npm registry, and Debian's ``chromium``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parent.parent / "editors" / "vscode"
RUN = EXTENSION / "test" / "e2e" / "run.sh"

pytestmark = pytest.mark.skipif(
    os.environ.get("FIMLSP_E2E") != "1",
    reason="end-to-end test in code-server: set FIMLSP_E2E=1 to run it",
)


def test_ghost_text_accepted_with_tab_makes_the_file_parse(tmp_path: Path) -> None:
    for tool in ("bash", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    pytest.importorskip("gguf", reason="the gguf package builds the tiny test model")

    out = tmp_path / "e2e"
    env = {**os.environ, "FIMLSP_PYTHON": sys.executable, "CHROMIUM": chromium}
    result = subprocess.run(
        ["bash", str(RUN), str(out)],
        env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    log = result.stdout + result.stderr
    (tmp_path / "run.log").write_text(log, encoding="utf-8")
    print(log[-3000:])
    assert result.returncode == 0, f"run.sh failed; output in {out}:\n{log[-6000:]}"

    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["passed"] is True
    assert report["ghostTexts"]["demo.py"], report
    for name in ("screenshot.png", "ghost-text.png"):
        assert (out / name).stat().st_size > 10_000, name
    # The driver checked it too; check again here, with this interpreter.
    for name in ("demo.py", "block.py"):
        source = (out / "workspace" / name).read_text(encoding="utf-8")
        ast.parse(source)
    demo = (out / "workspace" / "demo.py").read_text(encoding="utf-8")
    assert "total = sum(values" in demo and demo != "values = [1, 2, 3]\n\nprint(total)\n"
    timings = json.loads((out / "timings.json").read_text(encoding="utf-8"))
    print(f"timings (s): {timings}; screenshot: {out / 'screenshot.png'}")
