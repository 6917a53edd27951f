"""Which files project context may read: private by construction.

A prompt may carry text from three places only:

* a document the editor has open (the user showed it to the editor: it may be read even
  where ``.gitignore`` excludes it);
* a file under a workspace folder that ``.gitignore`` does not exclude (every
  ``.gitignore`` from the folder down to the file's own directory, and the repository's
  ``.git/info/exclude``, with git's precedence: the deeper file and the later pattern
  win, and nothing under an excluded directory comes back); never anything inside
  ``.git``;
* a file under a root of the project's installed packages (its standard library and
  site-packages, :mod:`.environment`), even where that root lies in an ignored
  ``.venv``: that code is public.  The innermost root decides: a workspace folder
  inside a package root (or on ``sys.path``) keeps its ``.gitignore``.

Paths are resolved (symbolic links followed) before they are checked, so a link inside
a workspace folder cannot lead outside it.  Only Python sources (``.py``, ``.pyi``) of
at most :data:`MAX_FILE_BYTES` are read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

import pathspec

__all__ = ["MAX_FILE_BYTES", "SOURCE_SUFFIXES", "FileAccess", "GitIgnore"]

#: Larger files are never read for context (generated code, vendored bundles).
MAX_FILE_BYTES = 512 * 1024
SOURCE_SUFFIXES = (".py", ".pyi")


class GitIgnore:
    """``.gitignore`` rules under one workspace folder; the rules of each directory are
    read once and kept while the file's modification time is unchanged."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[Path, tuple[float, pathspec.GitIgnoreSpec | None]] = {}
        self._lock = threading.Lock()

    def _spec(self, directory: Path, name: str = ".gitignore") -> pathspec.GitIgnoreSpec | None:
        path = directory / name
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        with self._lock:
            known = self._specs.get(path)
        if known is not None and known[0] == mtime:
            return known[1]
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            spec: pathspec.GitIgnoreSpec | None = pathspec.GitIgnoreSpec.from_lines(lines)
        except (OSError, ValueError):
            spec = None  # unreadable or malformed rules: nothing matches from here
        with self._lock:
            self._specs[path] = (mtime, spec)
        return spec

    def ignored(self, path: Path) -> bool:
        """Whether git would ignore ``path`` (a resolved path under the root)."""
        rel = path.relative_to(self.root)
        if rel.parts and rel.parts[0] == ".git":
            return True
        # Each ancestor directory first: an excluded directory hides everything in it.
        for depth in range(1, len(rel.parts) + 1):
            is_dir = depth < len(rel.parts)
            if self._decides(rel.parts[:depth], is_dir):
                return True
        return False

    def _decides(self, parts: tuple[str, ...], is_dir: bool) -> bool:
        """Whether the rules that apply to ``parts`` (relative to the root) exclude it:
        the deepest ``.gitignore`` with a matching pattern decides, then ``info/exclude``."""
        for level in range(len(parts) - 1, -1, -1):
            spec = self._spec(self.root.joinpath(*parts[:level]))
            if spec is None:
                continue
            rel = "/".join(parts[level:]) + ("/" if is_dir else "")
            include = spec.check_file(rel).include
            if include is not None:
                return include
        exclude = self._spec(self.root / ".git" / "info", "exclude")
        if exclude is not None:
            rel = "/".join(parts) + ("/" if is_dir else "")
            return exclude.check_file(rel).include is True
        return False


class FileAccess:
    """The workspace folders and package roots a prompt may read from (see the module
    docstring); :meth:`readable` answers for one file."""

    def __init__(self, folders: Iterable[str | os.PathLike[str]] = (),
                 packages: Iterable[str | os.PathLike[str]] = ()) -> None:  # fmt: skip
        self.folders = tuple(_resolved(Path(f)) for f in folders)
        self.packages = tuple(_resolved(Path(p)) for p in packages)
        self._ignores = {folder: GitIgnore(_git_root(folder)) for folder in self.folders}

    def root_of(self, path: Path) -> Path | None:
        """The workspace folder or package root that holds ``path`` (resolved), if any:
        the innermost, whose rules apply (a ``.venv``'s site-packages inside a folder:
        the package root; a folder inside a package root, or on ``sys.path``: the
        folder, with its ``.gitignore``)."""
        holding = [r for r in (*self.packages, *self.folders) if path.is_relative_to(r)]
        return max(holding, key=lambda r: len(r.parts), default=None)

    def readable(self, path: str | os.PathLike[str]) -> bool:
        """Whether project context may read the file at ``path`` from disk (an open
        document's text is always usable and never asked here)."""
        target = _resolved(Path(path))
        if target.suffix not in SOURCE_SUFFIXES:
            return False
        root = self.root_of(target)
        if root is None:
            return False
        if root not in self.folders:
            return True  # an installed package's (a site-packages inside a folder too)
        return not self._ignores[root].ignored(target)

    def read(self, path: str | os.PathLike[str]) -> str | None:
        """The file's text when it is readable, a regular file and small enough."""
        if not self.readable(path):
            return None
        try:
            target = _resolved(Path(path))
            if not target.is_file() or target.stat().st_size > MAX_FILE_BYTES:
                return None
            return target.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None


def _git_root(folder: Path) -> Path:
    """The repository holding ``folder`` (its ``.gitignore`` files above the folder
    apply too), else the folder itself."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
