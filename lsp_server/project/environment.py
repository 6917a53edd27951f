"""Where the project's installed packages live: the roots imports resolve against
after the workspace's own code, and the only places outside the workspace folders that
project context reads (:mod:`.privacy`).

The project's interpreter is found as :mod:`lsp_server.target` finds its version: a
virtual environment ``.venv`` or ``venv`` in a workspace folder (its site-packages, and
the standard library of the interpreter it was made from, read from ``pyvenv.cfg``
without running anything), else ``python3`` on ``PATH``, whose ``sys.path`` is asked
once per interpreter.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["package_roots"]

_HOME_RE = re.compile(r"^\s*home\s*=\s*(.+?)\s*$", re.MULTILINE)
_VERSION_RE = re.compile(r"^\s*(?:version|version_info)\s*=\s*(\d+)\.(\d+)", re.MULTILINE)


def package_roots(folders: Sequence[str | Path]) -> tuple[Path, ...]:
    """The standard library and site-packages folders of the project's interpreter."""
    for folder in folders:
        for name in (".venv", "venv"):
            cfg = Path(folder) / name / "pyvenv.cfg"
            if cfg.is_file():
                return _venv_roots(cfg)
    found = shutil.which("python3")
    return _interpreter_roots(found) if found else ()


def _venv_roots(cfg: Path) -> tuple[Path, ...]:
    """A virtual environment's site-packages and its base interpreter's standard library."""
    venv = cfg.parent
    roots = sorted(venv.glob("lib/python3*/site-packages")) + sorted(venv.glob("Lib/site-packages"))
    try:
        text = cfg.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    home, version = _HOME_RE.search(text), _VERSION_RE.search(text)
    if home is not None and version is not None:
        base = Path(home.group(1)).parent  # home is the folder of the base's executable
        stdlib = base / "lib" / f"python{version.group(1)}.{version.group(2)}"
        if stdlib.is_dir():
            roots.insert(0, stdlib)
        elif (base / "Lib").is_dir():
            roots.insert(0, base / "Lib")
    return tuple(roots)


@functools.cache
def _interpreter_roots(python: str) -> tuple[Path, ...]:
    """``sys.path`` of an interpreter (folders only), asked once."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys, json; print(json.dumps(sys.path))"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd="/",
        ).stdout
        paths = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    if not isinstance(paths, list):
        return ()
    return tuple(Path(p) for p in paths if isinstance(p, str) and p and Path(p).is_dir())
