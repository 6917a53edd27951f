"""The corpora the benchmarks read: standard libraries and user paths.

A corpus is a sorted list of :class:`CorpusFile`; ``--limit`` picks files
spread evenly over it so that a small sample still covers every package.
:class:`LineIndex` maps offsets in a file's text to lines and columns for
reports.
"""

from __future__ import annotations

import bisect
import os
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lexer.text import split_lines

__all__ = [
    "CorpusFile",
    "LineIndex",
    "discover",
    "select_evenly",
    "stdlib_corpus",
    "stdlib_root",
]


@dataclass(frozen=True)
class CorpusFile:
    name: str  # shown in reports: relative to the corpus root, or as given
    path: Path


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def _walk_py(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        found.extend(Path(dirpath, f) for f in filenames if f.endswith(".py"))
    return found


def stdlib_corpus() -> list[CorpusFile]:
    """All ``*.py`` files of the running interpreter's standard library, sorted."""
    root = stdlib_root()
    files = [CorpusFile(p.relative_to(root).as_posix(), p) for p in _walk_py(root)]
    return sorted(files, key=lambda f: f.name)


def discover(paths: Sequence[str]) -> list[CorpusFile]:
    """Files named in ``paths``; directories are searched for ``*.py``."""
    files: list[CorpusFile] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            for q in _walk_py(p):
                files.append(CorpusFile((Path(arg) / q.relative_to(p)).as_posix(), q))
        elif p.is_file():
            files.append(CorpusFile(p.as_posix(), p))
        else:
            raise FileNotFoundError(arg)
    return sorted(set(files), key=lambda f: f.name)


def select_evenly(files: Sequence[CorpusFile], limit: int | None) -> list[CorpusFile]:
    """At most ``limit`` files spread evenly over the (sorted) corpus."""
    if limit is None or limit >= len(files):
        return list(files)
    if limit <= 0:
        return []
    return [files[i * len(files) // limit] for i in range(limit)]


class LineIndex:
    """Maps character offsets to 1-based (line, column) pairs."""

    def __init__(self, text: str) -> None:
        self.starts = [0]
        for line in split_lines(text):
            self.starts.append(self.starts[-1] + len(line))
        if len(self.starts) > 1 and not text.endswith(("\n", "\r")):
            self.starts.pop()  # the last line has no terminator

    def line_col(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1

    def where(self, offset: int) -> str:
        line, col = self.line_col(offset)
        return f"{line}:{col}"
