"""Where the model layer keeps files it makes or fetches (vocabularies, assembled models)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(sub: str = "") -> Path:
    """Return (and create) fimlsp's cache folder, or a sub-folder of it.

    ``FIMLSP_CACHE_DIR`` wins, then ``$XDG_CACHE_HOME/fimlsp``, then ``~/.cache/fimlsp``; one
    place so that tests can redirect everything with a single variable.
    """
    root = os.environ.get("FIMLSP_CACHE_DIR")
    if root:
        base = Path(root).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "fimlsp"
    path = base / sub if sub else base
    path.mkdir(parents=True, exist_ok=True)
    return path
