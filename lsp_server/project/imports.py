"""The modules a file imports, read from its text (which need not parse), and the files
they resolve to.

Import statements are found with a regular expression over the whole text, at any
indentation (an import inside a function counts; one inside a string costs a lookup
and nothing else).  A module resolves as Python's path finder would find it, over these
roots in order: the folder above the file's outermost package (so ``email.utils`` is
found from inside ``email/``), the workspace folders and their ``src``, the file's own
folder, then the installed packages (:mod:`.environment`).  Relative imports resolve
from the file's package.  ``exists`` decides what counts as present (an open document,
or a file project context may read: :mod:`.privacy`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ImportStatement", "ModuleResolver", "find_imports", "used_attributes"]

_IMPORT_RE = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<dots>\.*)[ \t]*(?P<module>[\w.]*)[ \t]+import[ \t]+"
    r"(?P<names>\([^)]*\)?|[^\n#;]*)|import[ \t]+(?P<plain>[^\n#;]*))",
    re.MULTILINE,
)
_NAME_RE = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\s+as\s+([A-Za-z_]\w*))?$")


@dataclass(frozen=True)
class ImportStatement:
    """``import module [as alias]`` (``names`` empty) or ``from .module import name [as
    alias], ...`` (``level`` leading dots; ``names`` as (name, alias) pairs, ``*`` for a
    star import)."""

    module: str
    level: int = 0
    names: tuple[tuple[str, str], ...] = ()
    alias: str = ""

    @property
    def is_from(self) -> bool:
        return bool(self.names) or self.level > 0


def find_imports(text: str) -> tuple[ImportStatement, ...]:
    """Every import statement in ``text``, in order, repeats dropped."""
    found: dict[ImportStatement, None] = {}
    for match in _IMPORT_RE.finditer(text):
        plain = match.group("plain")
        if plain is not None:
            for item in _split_names(plain):
                named = _NAME_RE.match(item)
                if named is not None:
                    module, alias = named.group(1), named.group(2) or ""
                    found[ImportStatement(module, 0, (), alias)] = None
            continue
        names: list[tuple[str, str]] = []
        for item in _split_names(match.group("names")):
            if item == "*":
                names.append(("*", "*"))
                continue
            named = _NAME_RE.match(item)
            if named is not None and "." not in named.group(1):
                names.append((named.group(1), named.group(2) or named.group(1)))
        level, module = len(match.group("dots")), match.group("module")
        if names and (module or level):
            found[ImportStatement(module, level, tuple(names))] = None
    return tuple(found)


def _split_names(text: str) -> list[str]:
    text = text.strip().strip("()").replace("\\\n", " ")
    return [" ".join(part.split()) for part in text.split(",") if part.strip()]


def used_attributes(text: str, alias: str) -> set[str]:
    """Names the text reads as attributes of ``alias`` (``alias.name``)."""
    if not alias:
        return set()
    return set(re.findall(rf"(?<![\w.]){re.escape(alias)}\.([A-Za-z_]\w*)", text))


class ModuleResolver:
    """Module names to files for one file of the project."""

    def __init__(
        self,
        file: Path | None,
        folders: Sequence[Path],
        packages: Sequence[Path],
        exists: Callable[[Path], bool],
    ) -> None:
        self.file = file
        self.exists = exists
        roots: list[Path] = []
        if file is not None:
            roots.append(_above_packages(file.parent))
        for folder in folders:
            roots += [folder, folder / "src"]
        if file is not None:
            roots.append(file.parent)
        roots += packages
        self.roots = list(dict.fromkeys(roots))

    def module_file(self, module: str, level: int = 0) -> Path | None:
        """The file of ``module`` (``level`` leading dots: relative to this file's
        package), or None where it is not found or may not be read."""
        parts = [p for p in module.split(".") if p]
        if level > 0:
            if self.file is None:
                return None
            base = self.file.parent
            for _ in range(level - 1):
                base = base.parent
            return self._in_root(base, parts)
        if not parts:
            return None
        for root in self.roots:
            found = self._in_root(root, parts)
            if found is not None:
                return found
        return None

    def _in_root(self, root: Path, parts: list[str]) -> Path | None:
        where = root.joinpath(*parts)
        candidates = (
            [where / "__init__.py", where / "__init__.pyi"]
            if not parts
            else [
                where.with_name(where.name + ".py"),
                where / "__init__.py",
                where.with_name(where.name + ".pyi"),
                where / "__init__.pyi",
            ]
        )
        return next((c for c in candidates if self.exists(c)), None)


def _above_packages(folder: Path) -> Path:
    """The folder above the outermost package holding ``folder`` (``folder`` itself when
    it is no package)."""
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder
