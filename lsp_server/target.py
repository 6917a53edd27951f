"""The target Python version of a file, read from its project.

A completion must not use syntax the user's Python cannot run.  When the
``pythonVersion`` setting is not given, the target comes from the project,
the way ruff and mypy find it:

1. the lower bound of ``requires-python`` in the nearest ``pyproject.toml``
   (``[project]`` table) in the file's folder or above it, else
   ``python_requires`` in ``setup.cfg``'s ``[options]`` in the same folder
   (the nearest folder with either wins);
2. else the version of the project's interpreter: ``.venv`` or ``venv`` in a
   workspace folder (the one holding the file first), read from its
   ``pyvenv.cfg`` without running it;
3. else ``python3`` on ``PATH`` (its version from the file name it links to,
   ``python3.12``, or by running it once);
4. else the newest supported version.

A version outside the supported range is clamped to it (``>=3.6`` gives
3.8).  The answer is a :class:`ProjectTarget`: the version and a sentence
saying where it came from, for status messages::

    >>> lower_bound(">=3.9,<4"), lower_bound("~=3.11"), lower_bound(">3.8")
    ((3, 9), (3, 11), (3, 9))

Contract for the server and the CLI: :func:`project_target` is pure apart
from reading files (and, at most once per interpreter, running ``python3``);
it never raises for a missing, unreadable or malformed file (it goes on to
the next source and says so in ``origin``), and answers from a cache per
file that is invalidated when the file's modification time changes, so it
may be called on every request.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lexer.version import NEWEST, OLDEST, SUPPORTED, TargetVersion

from .settings import AUTO_TARGET

__all__ = ["ProjectTarget", "lower_bound", "path_of_uri", "project_target", "target_in_force"]

#: Where a target came from (``ProjectTarget.kind``); ``setting``: ``pythonVersion``.
KINDS = ("setting", "pyproject", "setup.cfg", "venv", "python3", "default")


@dataclass(frozen=True)
class ProjectTarget:
    """The target in force for a file and where it came from.

    ``kind`` is one of :data:`KINDS`; ``origin`` is a sentence such as
    ``"requires-python >=3.10 in /work/app/pyproject.toml"``; ``path`` is the
    file it was read from (None for ``default``).
    """

    version: TargetVersion
    kind: str
    origin: str
    path: Path | None = None


# -- PEP 440 lower bounds ---------------------------------------------------------------------

_CLAUSE_RE = re.compile(
    r"\s*(===|==|~=|!=|<=|>=|<|>)\s*v?(\d+)(?:\.(\d+|\*))?(?:\.(\d+|\*))?\S*\s*"
)


def lower_bound(specifiers: str) -> tuple[int, int] | None:
    """The oldest ``(major, minor)`` a PEP 440 specifier set admits, or None.

    ``>=3.10`` and ``~=3.10`` give (3, 10); ``>3.8`` gives (3, 9), ``>3.8.1``
    (3, 8); ``==3.12.*`` (3, 12); clauses without a lower bound (``<4``,
    ``!=3.9.*``) give none, and the bound of several clauses is the highest.
    Raises ValueError for text that is not a specifier set.
    """
    best: tuple[int, int] | None = None
    for clause in specifiers.split(","):
        if not clause.strip():
            continue
        match = _CLAUSE_RE.fullmatch(clause)
        if match is None:
            raise ValueError(f"not a version specifier: {clause.strip()!r}")
        op, major_text, minor_text, micro_text = match.groups()
        if op in ("<", "<=", "!="):
            continue
        major = int(major_text)
        minor = int(minor_text) if minor_text and minor_text != "*" else 0
        if op == ">" and (micro_text is None or micro_text == "*"):
            minor += 1  # ">3.8": 3.8 itself is excluded
        bound = (major, minor)
        if best is None or bound > best:
            best = bound
    return best


def _clamp(version: tuple[int, int]) -> TargetVersion:
    if version < OLDEST:
        return OLDEST
    if version > NEWEST:
        return NEWEST
    return TargetVersion(*version) if version in SUPPORTED else NEWEST


def _from_specifiers(spec: str, where: str, kind: str, path: Path) -> ProjectTarget:
    bound = lower_bound(spec)
    if bound is None:
        origin = f"{where} {spec} in {path} has no lower bound: the oldest supported, {OLDEST}"
        return ProjectTarget(OLDEST, kind, origin, path)
    version = _clamp(bound)
    origin = f"{where} {spec} in {path}"
    if version != bound:
        origin += f" (clamped to the supported {OLDEST} to {NEWEST})"
    return ProjectTarget(version, kind, origin, path)


# -- reading files, cached by modification time ----------------------------------------------

_cache: dict[tuple[str, Path], tuple[int, object]] = {}


def _cached(kind: str, path: Path, read: Callable[[Path], object]) -> object:
    """``read(path)``, remembered until the file's modification time changes."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    key = (kind, path)
    hit = _cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    value = read(path)
    _cache[key] = (stamp, value)
    return value


def _read_requires_python(path: Path) -> str | None:
    """``[project] requires-python`` of a pyproject.toml, or None."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        try:
            import tomli as tomllib
        except ImportError:
            return _scan_requires_python(text)
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return None
    value = project.get("requires-python") if isinstance(project, dict) else None
    return value if isinstance(value, str) else None


_TABLE_RE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY_RE = re.compile(
    r"""^\s*(?:"requires-python"|'requires-python'|requires-python)\s*=\s*"""
    r"""(?:"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(?:#.*)?$"""
)


def _scan_requires_python(text: str) -> str | None:
    """A minimal reader for Python 3.10 without tomli: ``requires-python`` as a
    one-line string in the ``[project]`` table (what every build tool writes)."""
    table = None
    for line in text.splitlines():
        header = _TABLE_RE.match(line)
        if header is not None and not line.lstrip().startswith("[["):
            table = header.group(1).replace(" ", "").replace('"', "").replace("'", "")
            continue
        if line.lstrip().startswith("[["):
            table = None
            continue
        if table == "project":
            key = _KEY_RE.match(line)
            if key is not None:
                basic, literal = key.groups()
                if basic is not None:
                    return basic.encode("latin-1", "backslashreplace").decode("unicode_escape")
                return literal
    return None


def _read_python_requires(path: Path) -> str | None:
    """``[options] python_requires`` of a setup.cfg, or None."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    value = parser.get("options", "python_requires", fallback=None)
    return value.strip() if value else None


_PYVENV_VERSION_RE = re.compile(r"^\s*(?:version|version_info)\s*=\s*(\d+)\.(\d+)", re.MULTILINE)


def _read_pyvenv_version(path: Path) -> tuple[int, int] | None:
    """The Python version a virtual environment's ``pyvenv.cfg`` records."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = _PYVENV_VERSION_RE.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


_VERSIONED_NAME_RE = re.compile(r"python(\d+)\.(\d+)$")


def _run_version(path: Path) -> tuple[int, int] | None:
    """An interpreter's version: from the name it links to, else by running it."""
    match = _VERSIONED_NAME_RE.search(path.resolve().name)
    if match is not None:
        return int(match.group(1)), int(match.group(2))
    try:
        out = subprocess.run(
            [str(path), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


# -- the search -------------------------------------------------------------------------------


def _config_target(start: Path, notes: list[str]) -> ProjectTarget | None:
    """The nearest folder at or above ``start`` whose project files name a target.

    A malformed specifier is skipped, with a note saying so.
    """
    for folder in (start, *start.parents):
        for kind, name, key, read in _CONFIG_FILES:
            path = folder / name
            spec = _cached(kind, path, read)
            if isinstance(spec, str):
                try:
                    return _from_specifiers(spec.strip(), key, kind, path)
                except ValueError as exc:
                    notes.append(f"{key} in {path} ignored ({exc})")
    return None


_CONFIG_FILES: tuple[tuple[str, str, str, Callable[[Path], object]], ...] = (
    ("pyproject", "pyproject.toml", "requires-python", _read_requires_python),
    ("setup.cfg", "setup.cfg", "python_requires", _read_python_requires),
)


def _venv_target(folders: Sequence[Path]) -> ProjectTarget | None:
    for folder in folders:
        for name in (".venv", "venv"):
            cfg = folder / name / "pyvenv.cfg"
            found = _cached("pyvenv", cfg, _read_pyvenv_version)
            if isinstance(found, tuple):
                version = _clamp(found)
                origin = f"the Python {found[0]}.{found[1]} of {cfg.parent}"
                if version != found:
                    origin += f" (clamped to {version})"
                return ProjectTarget(version, "venv", origin, cfg)
    return None


def _path_python_target() -> ProjectTarget | None:
    found = shutil.which("python3")
    if found is None:
        return None
    path = Path(found)
    version = _cached("python3", path, _run_version)
    if not isinstance(version, tuple):
        return None
    target = _clamp(version)
    origin = f"python3 on PATH ({path}) is Python {version[0]}.{version[1]}"
    if target != version:
        origin += f" (clamped to {target})"
    return ProjectTarget(target, "python3", origin, path)


def project_target(
    file: str | os.PathLike[str] | None, workspace_folders: Sequence[str | os.PathLike[str]]
) -> ProjectTarget:
    """The target for ``file`` (a path, or None) in these workspace folders.

    See the module docstring for the order of the sources.  Without a file,
    the project files are searched from the first workspace folder up.
    """
    folders = [Path(f).absolute() for f in workspace_folders]
    start: Path | None = None
    if file is not None:
        start = Path(file).absolute().parent
        # The workspace folder holding the file is the project's first.
        folders.sort(key=lambda f: not start.is_relative_to(f))  # type: ignore[union-attr]
    elif folders:
        start = folders[0]
    notes: list[str] = []
    found = (
        (_config_target(start, notes) if start is not None else None)
        or _venv_target(folders)
        or _path_python_target()
        or ProjectTarget(NEWEST, "default", f"the newest supported version, {NEWEST}")
    )
    if notes:
        origin = f"{found.origin}; {'; '.join(notes)}"
        return ProjectTarget(found.version, found.kind, origin, found.path)
    return found


def path_of_uri(uri: str) -> Path | None:
    """The file a ``file:`` URI names (percent-escapes decoded); None for other schemes
    (``untitled:``, remote file systems), whose project cannot be read."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme != "file":
        return None
    path = urllib.request.url2pathname(parsed.path)
    if parsed.netloc and parsed.netloc != "localhost":  # a UNC path
        path = f"//{parsed.netloc}{path}"
    return Path(path) if path else None


def target_in_force(
    python_version: str, uri: str, workspace_folders: Sequence[str | os.PathLike[str]]
) -> ProjectTarget:
    """The target for the document at ``uri``: the ``pythonVersion`` setting when it
    names one, else (``auto``) the project's (:func:`project_target`)."""
    if python_version != AUTO_TARGET:
        version = TargetVersion.parse(python_version)
        return ProjectTarget(version, "setting", f"the pythonVersion setting ({version})")
    return project_target(path_of_uri(uri), workspace_folders)
