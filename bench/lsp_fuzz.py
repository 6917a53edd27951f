"""A fuzzing LSP client: what a careless, broken or hostile client can send.

Usage::

    python -m bench.lsp_fuzz [--seconds S] [--messages N] [--seed S] [--model PATH]
        [--classes protocol,framing,documents,storm,random] [--server CMD] [--json]

The server (``python -m lsp_server.cli --stdio`` unless ``--server`` says otherwise)
runs in a subprocess behind raw pipes: this client writes its own frames, so it can
also write broken ones.  It runs a seeded mix of cases from five classes for a
given time or number of messages:

* ``protocol``: well-framed messages that break the protocol: params missing,
  null, arrays or of the wrong type, impossible positions, odd ids (objects,
  arrays, floats, strings, null), unknown methods, notifications with ids,
  responses to nothing, bad cancellations; and the lifecycle: requests before
  ``initialize``, a bad ``initialize``, a second one, requests after
  ``shutdown``, ``exit`` with and without ``shutdown`` (exit codes 0 and 1);
* ``framing``: lengths too long, too short, absurd (10**12) or malformed, a
  missing header, lowercase or LF-only headers, extra headers, garbage between
  frames, bodies that are not JSON, not an object or a batch, frames split
  across writes or coalesced;
* ``documents``: hostile documents (lone surrogates, NUL, 20k and 200k
  character lines, deep nesting, 5 MB files, emoji with positions inside
  surrogate pairs, integers and chains beyond CPython's limits) with
  completion requests in them;
* ``storm``: bursts of incremental changes (many versions, clamped and
  impossible ranges, versions like 2**40) with requests and cancellations
  between them, and changes sent before ``initialize``;
* ``random``: random well-formed editing sessions.

What it measures: every request id it sent and whether a response came (result,
or an error by code; a message whose id cannot be read must get an error with a
null id); crashes (exit code and the tail of stderr) and a server that stops
reading (``deaf``: no answer after a framing case); the longest stall, from a
``fimlsp/serverStatus`` probe sent about every 100 ms (its latency, which includes
time in the pipe behind megabyte messages), beside the server's own measure of its
event loop (``longest_loop_lag_ms``: how late its loop-lag monitor ran, and the case
during which a probe first saw it); resident memory (the
probe's ``rssMb``); whether the server's copy of each document equals the
client's whenever the client believes they agree (the probe with ``{"uri"}``
returns the server's length and SHA-256); and every completion received, applied
to the text it was asked for and checked with ``ast.parse`` in a separate
process (a completion that does not parse is a bug, except where CPython refuses
the file only for its recursion depth, which fimlsp does not model: those are
counted apart as ``beyond_depth_limits``; see docs/architecture.md, "CPython's
implementation limits").  Cases that kill or
silence the server are recorded and a fresh server is started, so one run
covers every class.

Exit status: 0 when nothing was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import re
import shlex
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.harness import rounded_percentile
from lexer.text import line_end_offsets
from lexer.version import NEWEST, SUPPORTED
from lsp_server.loop_lag import STALL_MS

CLASSES = ("protocol", "framing", "documents", "storm", "random")
#: Classes run only when named (``--classes engine`` or their ``--cases``): the engine
#: process killed with SIGKILL, and how the server recovers.
EXTRA_CLASSES = ("engine",)

#: A tiny random-weight model that wants to stop (end-of-sequence first, then
#: closers), so constrained decoding ends at the first complete middle and the
#: server returns completions to check; with plain random weights few would end.
STOPPING_MODEL: dict[str, Any] = {
    "stop_bias": 30.0,
    "token_bias": {")": 25.0, "]": 24.0, "}": 23.0, " x": 20.0, "\n": 15.0},
}

PROBE_INTERVAL_S = 0.1
#: How long a server may take to answer a well-formed probe after a framing case.
HEAL_TIMEOUT_S = 5.0
#: How long a case waits for its answers (a completion on a hostile document included).
CASE_TIMEOUT_S = 60.0
#: How long a case waits for answers to requests that need no model.  Waiting is only
#: pacing: a late answer still counts, and the run ends with a longer drain.
QUICK_TIMEOUT_S = 5.0
#: After ``--seconds``, how long the run may still wait for answers before it ends.
DRAIN_S = 30.0
COMPLETION_METHODS = ("textDocument/inlineCompletion", "textDocument/completion")

OMIT = object()  # a message field left out
_ID_CODES = {"parse": -32700, "invalid_request": -32600, "invalid_params": -32602}


# ---------------------------------------------------------------- the client's copy of a text


def utf16_units(text: str) -> int:
    """Length of ``text`` in UTF-16 code units."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF) if not text.isascii() else len(text)


def position_of(text: str, offset: int) -> tuple[int, int]:
    """The LSP position (UTF-16 columns) of a code-point offset."""
    starts = [0, *line_end_offsets(text[:offset])]
    return len(starts) - 1, utf16_units(text[starts[-1] : offset])


def offset_of(text: str, line: int, character: int) -> tuple[int, bool] | None:
    """The code-point offset of an LSP position, and whether it falls inside a character
    (half a surrogate pair).  A column past the line's end is its end, as the
    specification says; a line past the end of the text is None."""
    starts = [0, *line_end_offsets(text)]
    if line < 0 or character < 0 or line >= len(starts):
        return None
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    body = text[start:end].rstrip("\r\n") if line + 1 < len(starts) else text[start:end]
    units = 0
    for index, char in enumerate(body):
        if units >= character:
            return start + index, units != character
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(body), character < units


def apply_range(text: str, rng: Any, new: str) -> tuple[str | None, str]:
    """``text`` with an LSP range replaced by ``new``, or (None, why not)."""
    try:
        start = offset_of(text, int(rng["start"]["line"]), int(rng["start"]["character"]))
        end = offset_of(text, int(rng["end"]["line"]), int(rng["end"]["character"]))
    except (KeyError, TypeError, ValueError):
        return None, f"malformed range {rng!r}"
    if start is None or end is None:
        return None, f"range {rng!r} is outside the document"
    if start[1] or end[1]:
        return None, f"range {rng!r} splits a surrogate pair"
    if end[0] < start[0]:
        return None, f"range {rng!r} ends before it starts"
    return text[: start[0]] + new + text[end[0] :], ""


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def oracle_parse(source: str) -> str | None:
    """None if CPython's ``ast.parse`` accepts ``source``, else why not (runs in a
    worker process: a 5 MB parse must not stall the client's measurements)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(source)
        except (SyntaxError, ValueError, MemoryError, RecursionError, UnicodeError) as exc:
            return f"{type(exc).__name__}: {str(exc)[:160]}"
    return None


# ---------------------------------------------------------------- framing


def encode(message: Any) -> bytes:
    """JSON as clients write it (ASCII-only: lone surrogates become ``\\ud800``)."""
    return json.dumps(message, separators=(",", ":")).encode("ascii")


def frame(body: bytes, header: bytes | None = None) -> bytes:
    """One LSP frame; ``header`` replaces the standard ``Content-Length`` block."""
    if header is None:
        header = b"Content-Length: %d\r\n\r\n" % len(body)
    return header + body


class OutputParser:
    """Reads the server's frames (which must be well formed; anything else is noted)."""

    _HEADER_END = re.compile(rb"\r\n\r\n")
    _LENGTH = re.compile(rb"(?im)^content-length: *(\d+)\r?$")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.problems: list[str] = []

    def feed(self, data: bytes) -> list[Any]:
        self.buffer += data
        messages: list[Any] = []
        while True:
            end = self._HEADER_END.search(self.buffer)
            if end is None:
                return messages
            match = self._LENGTH.search(self.buffer, 0, end.start() + 2)
            if match is None:
                self.problems.append(f"frame without Content-Length: {bytes(self.buffer[:80])!r}")
                del self.buffer[: end.end()]
                continue
            length = int(match.group(1))
            if len(self.buffer) < end.end() + length:
                return messages
            body = bytes(self.buffer[end.end() : end.end() + length])
            del self.buffer[: end.end() + length]
            try:
                messages.append(json.loads(body))
            except ValueError:
                self.problems.append(f"body is not JSON: {body[:80]!r}")


# ---------------------------------------------------------------- bookkeeping


def id_key(msg_id: Any) -> str:
    """A dictionary key that keeps 1, 1.0, "1" and True apart."""
    return f"{type(msg_id).__name__}:{json.dumps(msg_id, sort_keys=True)}"


@dataclass
class Sent:
    """A request this client sent and what it expects back.

    ``expect``: ``answer`` (a response with this id), ``null_error`` (the id cannot be
    read: an error with a null id, or one with this id), ``none`` (nothing owed, e.g.
    a request inside a frame without a length).
    """

    msg_id: Any
    method: str
    cls: str
    case: str
    expect: str
    sent_at: float
    life: int
    answered_at: float | None = None
    code: int | None = None  # 0 for a result
    result: Any = None
    check: tuple[str, str, tuple[int, int]] | None = None  # (kind, text at send, position)


@dataclass
class Doc:
    """The client's copy of an open document."""

    uri: str
    text: str
    version: int
    cls: str  # the class of the case that opened it
    in_sync: bool = True  # False after a change whose meaning the protocol leaves open


@dataclass
class Tally:
    """Everything the run saw."""

    messages: int = 0
    by_class_messages: Counter[str] = field(default_factory=Counter)
    sent: list[Sent] = field(default_factory=list)
    null_received: int = 0
    null_shortfall: Counter[tuple[str, str]] = field(default_factory=Counter)  # (class, case)
    errors_by_code: Counter[int] = field(default_factory=Counter)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    deaf: list[dict[str, Any]] = field(default_factory=list)
    unresponsive: list[dict[str, Any]] = field(default_factory=list)
    exit_codes: list[dict[str, Any]] = field(default_factory=list)
    desyncs: list[dict[str, Any]] = field(default_factory=list)
    completions_checked: int = 0
    invalid: list[dict[str, Any]] = field(default_factory=list)
    #: Completions the oracle refused with a ``RecursionError``: CPython's depth limits,
    #: which fimlsp does not model (docs/architecture.md, "CPython's implementation
    #: limits"); counted apart from the invalid ones, and shown.
    beyond_depth_limits: list[dict[str, Any]] = field(default_factory=list)
    popups: list[str] = field(default_factory=list)
    log_messages: int = 0
    probe_ms: list[float] = field(default_factory=list)
    #: The longest a probe waited, and the class/case running when it was answered.
    longest_stall: tuple[float, str] = (0.0, "")
    #: The server's own loop-lag monitor (``loopLagMaxMs`` in the probe's answer): the
    #: longest its event loop ran late, and the class/case running when a probe first
    #: saw it; the largest p99 a server reported.
    loop_lag: tuple[float, str] = (0.0, "")
    loop_lag_p99: float = 0.0
    #: Per class/case: the loop-lag monitor's ticks, and its stalls (``loopLagStalls``:
    #: ticks at least ``loop_lag.STALL_MS`` late) as (ms, the loop's CPU ms meanwhile,
    #: case), told apart by tick number.
    lag_ticks: Counter[str] = field(default_factory=Counter)
    lag_stalls: list[tuple[float, float, str]] = field(default_factory=list)
    #: (when answered, front MB, engine MB or None) per probe that reported the front's
    #: memory: start, end and most in the report, and minute by minute
    #: (:func:`memory_by_minute`).
    memory: list[tuple[float, float, float | None]] = field(default_factory=list)
    engine_rss: list[float] = field(default_factory=list)
    #: Per kill of the engine process: what it interrupted and how the server recovered.
    engine_kills: list[dict[str, Any]] = field(default_factory=list)
    server_starts: int = 0
    output_problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the server process


class Server:
    """One server process behind raw pipes."""

    def __init__(self, command: Sequence[str], on_message: Callable[[Any], None]) -> None:
        self.command = list(command)
        self.on_message = on_message
        self.parser = OutputParser()
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None
        # Closed by stop(); a file, not a pipe, so a chatty server never blocks on it.
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.retiring = False  # an exit is expected from now on
        self.write_lock = asyncio.Lock()

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr,
        )
        self.reader = asyncio.create_task(self._read())

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            chunk = await self.proc.stdout.read(1 << 16)
            if not chunk:
                return
            for message in self.parser.feed(chunk):
                self.on_message(message)

    async def write(self, data: bytes, timeout: float = CASE_TIMEOUT_S) -> bool:
        """False if the server is gone or did not read it in time."""
        if not self.alive:
            return False
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            await asyncio.wait_for(self.proc.stdin.drain(), timeout)
        except (BrokenPipeError, ConnectionResetError, asyncio.TimeoutError):
            return False
        return True

    async def wait(self, timeout: float) -> int | None:
        if self.proc is None:
            return None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            return None

    def stderr_tail(self, size: int = 1500) -> str:
        self.stderr.seek(0, os.SEEK_END)
        end = self.stderr.tell()
        self.stderr.seek(max(0, end - size))
        return self.stderr.read().decode("utf-8", "replace")

    async def stop(self) -> None:
        self.retiring = True
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            await self.proc.wait()
        if self.reader is not None:
            try:
                await asyncio.wait_for(self.reader, 5)
            except (asyncio.TimeoutError, Exception):
                self.reader.cancel()
        self.stderr.close()


# ---------------------------------------------------------------- the fuzzer


@dataclass
class Options:
    seconds: float = 60.0
    messages: int | None = None
    seed: int = 0
    model: str | None = None
    classes: tuple[str, ...] = CLASSES
    server: tuple[str, ...] = (sys.executable, "-m", "lsp_server.cli", "--stdio")
    cases: tuple[str, ...] = ()  # only these cases (names as listed by --list-cases)
    sweep: bool = False  # each case once, in the catalog's order, then stop
    heal_timeout: float = HEAL_TIMEOUT_S
    storm_changes: int = 300
    rotate_s: float = 30.0  # a server's life, when the protocol class is on (lifecycle cases)
    max_tokens: int = 16
    deadline_ms: int = 1500
    verbose: bool = False


class ServerGone(Exception):
    """The server died or stopped answering: the case ends, a fresh server starts."""


class Fuzzer:
    """Runs cases against one server at a time and keeps the tally."""

    def __init__(self, options: Options, model: str) -> None:
        self.options = options
        self.model = model
        self.rng = random.Random(options.seed)
        self.tally = Tally()
        self.server: Server | None = None
        self.life = 0
        self.retirements = 0
        self.life_started = 0.0
        self.lag_ticks_seen = 0  # this server's loopLagTicks at its last probe
        self.docs: dict[str, Doc] = {}
        self.pending: dict[str, Sent] = {}
        self.next_id = 0
        self.cls = ""
        self.case = ""
        self.initialized = False
        self.probing = False
        self.case_started = (0, 0)  # (len(tally.sent), tally.null_received) when a case began
        self.oracle = concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn")
        )
        self.checks: set[asyncio.Task[None]] = set()
        self.last_completion_answer = 0.0  # event-loop times
        self.last_answer = 0.0  # perf_counter time of the last response from the server
        self.stop_at = float("inf")  # no wait goes past it: the run's end and a drain
        self.cases = {
            cls: [(n, c) for n, c in CASES[cls] if not options.cases or n in options.cases]
            for cls in options.classes
        }
        if not all(self.cases.values()):
            empty = [cls for cls, cases in self.cases.items() if not cases]
            raise ValueError(f"no case selected in class {', '.join(empty)}")
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        if py not in {str(version) for version in SUPPORTED}:
            py = str(NEWEST)
        self.python_version = py
        self.settings = {
            "model": model,
            "maxTokens": options.max_tokens,
            "deadlineMs": options.deadline_ms,
            "threads": 1,
            "pythonVersion": py,
        }

    # ------------------------------------------------------------ output from the server

    def on_message(self, message: Any) -> None:
        if not isinstance(message, dict):
            self.tally.output_problems.append(f"not an object: {message!r}"[:200])
            return
        if "method" in message:
            method = message["method"]
            if "id" in message:  # a request to the client: answer it
                items = (message.get("params") or {}).get("items") or []
                result = [None] * len(items) if method == "workspace/configuration" else None
                self.background(
                    self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
                )
            elif method == "window/showMessage":
                self.tally.popups.append(str((message.get("params") or {}).get("message"))[:200])
            elif method == "window/logMessage":
                self.tally.log_messages += 1
            return
        error = message.get("error")
        code = int(error.get("code", 0)) if isinstance(error, dict) else 0
        if error is not None:
            self.tally.errors_by_code[code] += 1
        self.last_answer = time.perf_counter()
        msg_id = message.get("id")
        record = self.pending.pop(id_key(msg_id), None) if msg_id is not None else None
        if record is None:
            if msg_id is None and error is not None:
                self.tally.null_received += 1
            elif msg_id is not None:
                self.tally.output_problems.append(f"response to an unknown id {msg_id!r}")
            return
        record.answered_at = time.perf_counter()
        record.code = code
        record.result = message.get("result")
        if record.method == "fimlsp/serverStatus" and record.case == "probe":
            self._probe_answered(record)
        if record.check is not None and error is None:
            self.background(self._check_completion(record))
        if record.method in COMPLETION_METHODS:
            self.last_completion_answer = asyncio.get_running_loop().time()

    def _stall(self, seconds: float, where: str) -> None:
        if seconds * 1e3 > self.tally.longest_stall[0]:
            self.tally.longest_stall = (seconds * 1e3, where)

    def background(self, work: Awaitable[None]) -> None:
        """Run ``work`` without waiting for it (the run waits for all of them at the end)."""
        task = asyncio.ensure_future(work)
        self.checks.add(task)
        task.add_done_callback(self.checks.discard)

    def _probe_answered(self, record: Sent) -> None:
        assert record.answered_at is not None
        where = f"{self.cls}/{self.case}"
        self._stall(record.answered_at - record.sent_at, where)
        self.tally.probe_ms.append((record.answered_at - record.sent_at) * 1e3)
        status = record.result if isinstance(record.result, dict) else {}
        rss, engine_rss = status.get("rssMb"), status.get("engineRssMb")
        if isinstance(engine_rss, int | float) and engine_rss > 0:
            self.tally.engine_rss.append(float(engine_rss))
        if isinstance(rss, int | float):
            engine = float(engine_rss) if isinstance(engine_rss, int | float) else None
            self.tally.memory.append((record.answered_at, float(rss), engine))
        lag, p99 = status.get("loopLagMaxMs"), status.get("loopLagP99Ms")
        if isinstance(lag, int | float) and lag > self.tally.loop_lag[0]:
            # It happened since this server's previous probe (100 ms): in this case.
            self.tally.loop_lag = (float(lag), where)
        if isinstance(p99, int | float):
            self.tally.loop_lag_p99 = max(self.tally.loop_lag_p99, float(p99))
        self._lag_by_case(status, where)

    def _lag_by_case(self, status: dict[str, Any], where: str) -> None:
        """The monitor's ticks and stalls since this server's previous probe, counted for
        the case running now (ticks are numbered: none is counted twice)."""
        ticks, stalls = status.get("loopLagTicks"), status.get("loopLagStalls")
        if not isinstance(ticks, int) or ticks <= self.lag_ticks_seen:
            return
        self.tally.lag_ticks[where] += ticks - self.lag_ticks_seen
        for stall in stalls if isinstance(stalls, list) else []:
            if isinstance(stall, list) and len(stall) == 3 and stall[0] > self.lag_ticks_seen:
                self.tally.lag_stalls.append((float(stall[1]), float(stall[2]), where))
        self.lag_ticks_seen = ticks

    async def _check_completion(self, record: Sent) -> None:
        assert record.check is not None
        kind, text, (line, character) = record.check
        result = record.result
        items = result.get("items", []) if isinstance(result, dict) else result or []
        here = {
            "start": {"line": line, "character": character},
            "end": {"line": line, "character": character},
        }
        for item in items:
            if not isinstance(item, dict):
                continue
            if kind == "inline":
                new = item.get("insertText")
                new = new.get("value") if isinstance(new, dict) else new
                rng = item.get("range") or here
            else:
                edit = item.get("textEdit")
                if isinstance(edit, dict):
                    new, rng = edit.get("newText"), edit.get("range") or edit.get("replace")
                else:
                    new, rng = item.get("insertText") or item.get("label"), here
            if not isinstance(new, str):
                continue
            self.tally.completions_checked += 1
            applied, why = apply_range(text, rng, new)
            if applied is not None:
                loop = asyncio.get_running_loop()
                try:
                    verdict = await loop.run_in_executor(self.oracle, oracle_parse, applied)
                    why = verdict or ""
                except concurrent.futures.process.BrokenProcessPool:
                    self.oracle = concurrent.futures.ProcessPoolExecutor(
                        max_workers=1, mp_context=multiprocessing.get_context("spawn")
                    )
                    why = "the oracle process died on it"
            if why:
                found = (
                    self.tally.beyond_depth_limits
                    if why.startswith("RecursionError")
                    else self.tally.invalid
                )
                found.append(
                    {
                        "class": record.cls,
                        "case": record.case,
                        "kind": kind,
                        "middle": new[:80],
                        "why": why,
                        "document": len(text),
                    }
                )

    # ------------------------------------------------------------ sending

    async def _send(self, message: Any, cls: str | None = None) -> None:
        await self.write(frame(encode(message)), cls)

    async def write(self, data: bytes, cls: str | None = None, count: int = 1) -> None:
        server = self.server
        if server is None or not server.alive:
            raise ServerGone("not running")
        async with server.write_lock:
            ok = await server.write(data)
        self.tally.messages += count
        self.tally.by_class_messages[cls or self.cls] += count
        if not ok:  # dead, or not reading its input for a minute
            await self.went_silent()

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def track(self, msg_id: Any, method: str, expect: str, check: Any = None) -> Sent:
        record = Sent(
            msg_id, method, self.cls, self.case, expect, time.perf_counter(), self.life, check=check
        )
        self.tally.sent.append(record)
        if msg_id is not None and isinstance(msg_id, int | str | float | list | dict):
            self.pending[id_key(msg_id)] = record
        return record

    def message(self, method: Any, params: Any = OMIT, msg_id: Any = OMIT) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0"}
        if msg_id is not OMIT:
            message["id"] = msg_id
        message["method"] = method
        if params is not OMIT:
            message["params"] = params
        return message

    async def request(
        self,
        method: str,
        params: Any = OMIT,
        *,
        msg_id: Any = OMIT,
        expect: str = "answer",
        check: Any = None,
        header: bytes | None = None,
    ) -> Sent:
        msg_id = self.new_id() if msg_id is OMIT else msg_id
        record = self.track(msg_id, method, expect, check)
        await self.write(frame(encode(self.message(method, params, msg_id)), header))
        return record

    async def notify(self, method: str, params: Any = OMIT) -> None:
        await self.write(frame(encode(self.message(method, params))))

    async def wait_for(
        self, records: Iterable[Sent], timeout: float | None = None, barrier: bool = True
    ) -> bool:
        """Wait until every record that owes an answer has one; False if not.

        Waiting is pacing, not judgement (a late answer still counts).  A server answers
        requests that need no model in order, so those are waited for until a status
        request sent after them is answered (a few seconds at most).  Completions get
        up to ``timeout`` (a minute by default), but when none has been answered for
        a while the server is asked for its status: if that answer comes first, the
        rest are not coming soon (one worker serves them in order, within their
        deadline).  ``barrier=False``: no status requests, just ``timeout`` (for a
        server that may have been shut down, which answers nothing more).
        """
        owed = [r for r in records if r.answered_at is None and r.expect == "answer"]
        if not owed:
            return True
        slow = any(r.method in COMPLETION_METHODS for r in owed)
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + (timeout or (CASE_TIMEOUT_S if slow else QUICK_TIMEOUT_S))
        deadline = min(deadline, self.stop_at - time.perf_counter() + started)  # run's end
        if not slow and barrier:
            last = await self.request("fimlsp/serverStatus", {})
            owed.append(last)
            while last.answered_at is None and loop.time() < deadline:
                await self.check_alive()
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # answers of asynchronous handlers
            return all(r.answered_at is not None for r in owed)
        quiet = self.options.deadline_ms / 1e3 + 1.0  # a request takes its deadline at most
        while any(r.answered_at is None for r in owed):
            await self.check_alive()
            now = loop.time()
            if now > deadline:
                return False
            if slow and barrier and now - max(self.last_completion_answer, started) > quiet:
                ping = await self.request("fimlsp/serverStatus", {})
                while ping.answered_at is None and loop.time() < deadline:
                    await self.check_alive()
                    await asyncio.sleep(0.02)
                return all(r.answered_at is not None for r in owed)
            await asyncio.sleep(0.02)
        return True

    async def check_alive(self) -> None:
        """Raise ServerGone, after recording a crash, if the server died unexpectedly."""
        server = self.server
        if server is None or server.retiring:
            return
        if server.proc is not None and server.proc.returncode is None:
            await asyncio.sleep(0)  # let a finished process be reaped
        if not server.alive:
            code = await server.wait(5)
            self.tally.crashes.append(
                {
                    "class": self.cls,
                    "case": self.case,
                    "exit_code": code,
                    "stderr_tail": server.stderr_tail(),
                }
            )
            self.log(f"CRASH in {self.case}: exit {code}")
            await self.end_life(crashed=True)
            raise ServerGone(f"exited with {code}")

    def log(self, text: str) -> None:
        if self.options.verbose:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr)

    # ------------------------------------------------------------ documents

    async def open_doc(self, text: str, uri: str | None = None) -> Doc:
        uri = uri or f"file:///fuzz/{self.cls}-{self.new_id()}.py"
        doc = self.docs[uri] = Doc(uri, text, 1, self.cls)
        await self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        return doc

    async def close_doc(self, doc: Doc) -> None:
        self.docs.pop(doc.uri, None)
        await self.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})

    async def change(
        self,
        doc: Doc,
        edits: Sequence[tuple[int, int, str]],
        version: int | None = None,
        clamp_extra: int = 0,
    ) -> None:
        """Edits given as code-point offsets into the text as each finds it, sent as one
        didChange (``clamp_extra`` adds that many columns past the end of the line to
        the range's end: the server must clamp them, as the client does)."""
        changes = []
        text = doc.text
        for start, end, new in edits:
            start_pos, end_pos = position_of(text, start), position_of(text, end)
            if (clamp_extra and end == len(text)) or (
                clamp_extra and text[end : end + 1] in "\r\n"
            ):
                end_pos = (end_pos[0], end_pos[1] + clamp_extra)
            changes.append(
                {
                    "range": {
                        "start": {"line": start_pos[0], "character": start_pos[1]},
                        "end": {"line": end_pos[0], "character": end_pos[1]},
                    },
                    "text": new,
                }
            )
            text = text[:start] + new + text[end:]
        doc.version = version if version is not None else doc.version + 1
        doc.text = text
        await self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": doc.uri, "version": doc.version}, "contentChanges": changes},
        )

    async def replace_all(self, doc: Doc) -> None:
        """A full-text change: the way back to agreement after an ambiguous edit (with
        a version the protocol's int32 can hold, whatever came before)."""
        doc.version = doc.version + 1 if -(2**31) <= doc.version < 2**31 - 1 else 1
        doc.in_sync = True
        await self.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "contentChanges": [{"text": doc.text}],
            },
        )

    async def complete(
        self, doc: Doc, offset: int, kind: str = "inline", trigger: int = 1, **kwargs: Any
    ) -> Sent:
        line, character = position_of(doc.text, offset)
        return await self.complete_at(doc, line, character, kind, trigger, **kwargs)

    async def complete_at(
        self,
        doc: Doc,
        line: int,
        character: int,
        kind: str = "inline",
        trigger: int = 1,
        expect: str = "answer",
    ) -> Sent:
        params: dict[str, Any] = {
            "textDocument": {"uri": doc.uri},
            "position": {"line": line, "character": character},
        }
        if kind == "inline":
            params["context"] = {"triggerKind": trigger}
            method = "textDocument/inlineCompletion"
        else:
            params["context"] = {"triggerKind": 1}
            method = "textDocument/completion"
        check = (kind, doc.text, (line, character)) if doc.in_sync else None
        return await self.request(method, params, check=check, expect=expect)

    async def sync_check(self, doc: Doc, expect_held: bool = False) -> None:
        """Ask for the server's copy; a different text while the client believes they
        agree is a desync (no document at all is not, unless ``expect_held``: a server
        may refuse a document it cannot hold, but never drop one over a bad change)."""
        record = await self.request("fimlsp/serverStatus", {"uri": doc.uri})
        if not await self.wait_for([record], CASE_TIMEOUT_S):
            return
        if not isinstance(record.result, dict):
            return
        held = record.result.get("document")
        if expect_held and held is None:
            self.tally.desyncs.append(
                {"class": self.cls, "case": self.case, "uri": doc.uri, "lost": True}
            )
            self.log(f"DESYNC in {self.case}: the document was dropped")
            doc.version, doc.in_sync = 1, True  # open it again, to go on
            await self.notify(
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": doc.uri,
                        "languageId": "python",
                        "version": 1,
                        "text": doc.text,
                    }
                },
            )
            return
        if not doc.in_sync:
            return
        if isinstance(held, dict) and held.get("sha256") != text_sha256(doc.text):
            self.tally.desyncs.append(
                {
                    "class": self.cls,
                    "case": self.case,
                    "uri": doc.uri,
                    "client_length": len(doc.text),
                    "server_length": held.get("length"),
                }
            )
            self.log(f"DESYNC in {self.case}: {len(doc.text)} vs {held.get('length')}")
            await self.replace_all(doc)  # count each divergence once

    # ------------------------------------------------------------ server lifetimes

    async def start_life(self) -> None:
        """A fresh server: maybe abused before and during initialize, then ready."""
        self.life += 1
        self.tally.server_starts += 1
        self.docs.clear()
        self.initialized = False
        self.server = Server(self.options.server, self.on_message)
        await self.server.start()
        self.life_started = time.perf_counter()
        self.lag_ticks_seen = 0
        self.log(f"server {self.life} started")
        early = [c for c in ("protocol", "storm") if c in self.options.classes]
        for cls in early:  # abuse before initialize, by the classes that do
            self.begin_case(cls, "before initialize")
            await BEFORE_INITIALIZE[cls](self, self.rng)
        self.cls, self.case = early[0] if early else "setup", "initialize"
        init = await self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": None,
                "capabilities": {},
                "initializationOptions": self.settings,
            },
        )
        if not await self.wait_for([init], 20, barrier=False) or init.code != 0:
            await self.check_alive()
            self.tally.unresponsive.append(
                {"class": self.cls, "case": "initialize", "answer": init.code}
            )
            await self.end_life(deaf=True)
            raise ServerGone("initialize was not answered")
        self.cls = "setup"
        await self.notify("initialized", {})
        self.initialized = True
        deadline = time.perf_counter() + 120
        while True:
            status = await self.request("fimlsp/serverStatus", {})
            await self.wait_for([status], 60)
            state = status.result.get("state") if isinstance(status.result, dict) else None
            if state in ("ready", "error", "disabled") or time.perf_counter() > deadline:
                break
            await asyncio.sleep(0.1)
        if state != "ready":
            raise RuntimeError(f"the server has no model: {status.result}")
        self.probing = True
        for doc in list(self.docs.values()):  # opened before initialize
            self.begin_case(doc.cls, "after initialize")
            await self.sync_check(doc)

    async def end_life(
        self, crashed: bool = False, deaf: bool = False, stalled: bool = False
    ) -> None:
        """Close the books on the current server (it is killed if still running); its
        probes still unanswered measure a stall, unless it died or stopped reading."""
        self.probing = False
        server, self.server = self.server, None
        if server is None:
            return
        now = time.perf_counter()
        for record in [r for r in self.pending.values() if r.life == self.life]:
            if record.case == "probe" and (stalled or not (crashed or deaf)):
                # At least this long, in the case that silenced it.
                self._stall(now - record.sent_at, f"{record.cls}/{self.case}")
        # What was sent after the server's last answer is lost with it; what it left
        # unanswered before that stays unanswered.
        for record in [r for r in self.pending.values() if r.life == self.life]:
            del self.pending[id_key(record.msg_id)]
            if (crashed or deaf) and record.sent_at >= self.last_answer:
                record.expect = "lost"
        await server.stop()

    async def retire(self) -> None:
        """End a server's life the proper way, or one of the improper ones."""
        if self.server is None:
            return
        self.probing = False
        await self.drain()
        if "protocol" in self.options.classes:
            self.cls = "protocol"
            await _retire_abusively(self, self.rng)
        else:
            self.cls, self.case = "setup", "shutdown"
            await self.expect_exit(shutdown=True, exit_code=0)
        await self.end_life()

    async def expect_exit(self, shutdown: bool, exit_code: int | None) -> None:
        """Send (shutdown and) exit; the server must leave with ``exit_code``."""
        server = self.server
        assert server is not None
        if shutdown:
            record = await self.request("shutdown")
            await self.wait_for([record], 30, barrier=False)
        server.retiring = True
        with contextlib.suppress(ServerGone):
            await self.notify("exit")
        code = await server.wait(10)
        if code is None or (exit_code is not None and code != exit_code):
            self.tally.exit_codes.append(
                {"class": self.cls, "case": self.case, "expected": exit_code, "got": code}
            )

    async def drain(self) -> None:
        """Let the answers still owed arrive: completions, then everything sent before a
        last request (a server answers the rest in order)."""
        await self.wait_for([r for r in self.pending.values() if r.method in COMPLETION_METHODS])
        barrier = await self.request("fimlsp/serverStatus", {})
        await self.wait_for([barrier], CASE_TIMEOUT_S)
        await asyncio.sleep(0.5)

    async def probe_loop(self) -> None:
        """A ``fimlsp/serverStatus`` every 100 ms: its latency is the server's stall."""
        while True:
            await asyncio.sleep(PROBE_INTERVAL_S)
            server = self.server
            if not self.probing or server is None or not server.alive:
                continue
            outstanding = [r for r in self.pending.values() if r.case == "probe"]
            if len(outstanding) > 50:
                continue  # a stalled server: the oldest probe measures it
            msg_id = f"probe-{self.new_id()}"
            record = Sent(
                msg_id,
                "fimlsp/serverStatus",
                self.cls,
                "probe",
                "answer",
                time.perf_counter(),
                self.life,
            )
            self.pending[id_key(msg_id)] = record
            self.tally.sent.append(record)
            try:
                await self.write(
                    frame(encode(self.message("fimlsp/serverStatus", {}, msg_id))), "probe"
                )
            except ServerGone:
                continue

    def begin_case(self, cls: str, name: str) -> None:
        self.cls, self.case = cls, name
        self.case_started = (len(self.tally.sent), self.tally.null_received)

    async def end_case(self) -> None:
        """A well-formed request after the case: the server must answer it (after a framing
        case within seconds, else it has stopped reading), and by then every error with
        a null id the case's messages were owed (the server answers in order)."""
        record = await self.request("fimlsp/serverStatus", {})
        timeout = self.options.heal_timeout if self.cls == "framing" else CASE_TIMEOUT_S
        if not await self.wait_for([record], timeout):
            await self.went_silent()
        sent, received = self.case_started
        owed = [
            r for r in self.tally.sent[sent:] if r.expect == "null_error" and r.answered_at is None
        ]
        got = self.tally.null_received - received
        if len(owed) > got:
            self.tally.null_shortfall[self.cls, self.case] += len(owed) - got

    async def went_silent(self) -> None:
        """No answer in time: the server stopped reading (after a framing case: ``deaf``)
        or is stalled for more than a minute (``unresponsive``); a fresh one starts."""
        await self.check_alive()
        incident = {"class": self.cls, "case": self.case}
        if self.server is not None:
            incident["stderr_tail"] = self.server.stderr_tail(600)
        (self.tally.deaf if self.cls == "framing" else self.tally.unresponsive).append(incident)
        self.log(f"SILENT after {self.case}")
        await self.end_life(deaf=True, stalled=self.cls != "framing")
        raise ServerGone("silent")

    # ------------------------------------------------------------ the run

    async def run(self) -> dict[str, Any]:
        options = self.options
        started = time.perf_counter()
        self.stop_at = started + options.seconds + DRAIN_S
        probe = asyncio.create_task(self.probe_loop())
        schedule = [(cls, entry) for cls in options.classes for entry in self.cases[cls]]
        turn = 0
        try:
            while time.perf_counter() - started < options.seconds and (
                options.messages is None
                or self.tally.messages - self.tally.by_class_messages["probe"] < options.messages
            ):
                if options.sweep and turn == len(schedule):
                    break
                try:
                    if self.server is None:
                        await self.start_life()
                    if options.sweep:
                        cls, (name, case) = schedule[turn]
                    else:
                        cls = options.classes[turn % len(options.classes)]
                        name, case = self.rng.choice(self.cases[cls])
                    turn += 1
                    self.begin_case(cls, name)
                    self.log(f"{cls}/{name}")
                    await case(self, self.rng)
                    await self.check_alive()
                    await self.end_case()
                    if time.perf_counter() - self.life_started > options.rotate_s and (
                        "protocol" in options.classes
                    ):
                        await self.retire()
                except ServerGone as gone:
                    self.log(f"server gone during {self.case}: {gone}")
                    if self.server is not None:
                        await self.end_life(deaf=True)
            if self.server is not None:
                try:
                    await self.retire()
                except ServerGone:
                    await self.end_life(deaf=True)
            if self.checks:
                await asyncio.wait(self.checks, timeout=120)
        finally:
            probe.cancel()
            if self.server is not None:
                await self.server.stop()
            self.oracle.shutdown(cancel_futures=True)
        return self.summary(time.perf_counter() - started)

    def summary(self, elapsed: float) -> dict[str, Any]:
        t = self.tally
        front_rss = [front for _, front, _ in t.memory]
        requests = [r for r in t.sent if r.expect != "lost"]
        owed = [r for r in requests if r.expect == "answer"]
        unanswered = [r for r in owed if r.answered_at is None]
        by_class: dict[str, dict[str, int]] = {}
        for cls in (*self.options.classes, "setup", "probe"):
            by_class[cls] = {
                "messages": t.by_class_messages[cls],
                "requests": sum(1 for r in requests if r.cls == cls and r.case != "probe")
                if cls != "probe"
                else sum(1 for r in requests if r.case == "probe"),
                "unanswered": sum(1 for r in unanswered if r.cls == cls and r.case != "probe")
                + sum(n for (c, _), n in t.null_shortfall.items() if c == cls),
                "crashes": sum(1 for c in t.crashes if c["class"] == cls),
                "deaf": sum(1 for c in t.deaf + t.unresponsive if c["class"] == cls),
                "desyncs": sum(1 for d in t.desyncs if d["class"] == cls),
                "invalid_completions": sum(1 for i in t.invalid if i["class"] == cls),
                "exit_code_mismatches": sum(1 for e in t.exit_codes if e["class"] == cls),
            }
        by_class["probe"]["unanswered"] = sum(1 for r in unanswered if r.case == "probe")
        unanswered_cases = Counter(f"{r.cls}/{r.case} {r.method}" for r in unanswered)
        return {
            "seconds": round(elapsed, 1),
            "seed": self.options.seed,
            "classes": list(self.options.classes),
            "server": " ".join(self.options.server),
            "model": self.model,
            "server_starts": t.server_starts,
            "messages_sent": t.messages,
            "requests_sent": len(requests),
            "answered": sum(1 for r in requests if r.answered_at is not None),
            "results": sum(1 for r in requests if r.code == 0),
            "errors_by_code": {str(k): v for k, v in sorted(t.errors_by_code.items())},
            "unanswered": len(unanswered) + sum(t.null_shortfall.values()),
            "unanswered_by_case": dict(unanswered_cases.most_common()),
            "null_id_errors_owed_not_sent": {
                f"{c}/{k}": n for (c, k), n in t.null_shortfall.items()
            },
            "lost_with_a_dead_server": sum(1 for r in t.sent if r.expect == "lost"),
            "crashes": t.crashes,
            "deaf": t.deaf,
            "unresponsive": t.unresponsive,
            "exit_code_mismatches": t.exit_codes,
            "longest_stall_ms": round(t.longest_stall[0], 1),
            "longest_stall_class": t.longest_stall[1].partition("/")[0],
            "longest_stall_case": t.longest_stall[1],
            "probe_ms_p50": rounded_percentile(t.probe_ms, 50),
            "probe_ms_p99": rounded_percentile(t.probe_ms, 99),
            "probes": len(t.probe_ms),
            "longest_loop_lag_ms": round(t.loop_lag[0], 1),
            "longest_loop_lag_case": t.loop_lag[1],
            "loop_lag_p99_ms": round(t.loop_lag_p99, 1),
            "loop_lag_ticks": sum(t.lag_ticks.values()),
            "loop_lag_stall_ms": STALL_MS,
            "loop_lag_stalls": len(t.lag_stalls),
            "loop_lag_stalls_ms": round(sum(ms for ms, _, _ in t.lag_stalls), 1),
            "loop_lag_stalls_loop_cpu_ms": round(sum(cpu for _, cpu, _ in t.lag_stalls), 1),
            "loop_lag_worst": [
                [round(ms, 1), round(cpu, 1), where]
                for ms, cpu, where in sorted(t.lag_stalls)[::-1][:10]
            ],
            "loop_lag_by_case": lag_by_case(t.lag_ticks, t.lag_stalls),
            "rss_mb_start": front_rss[0] if front_rss else None,
            "rss_mb_end": front_rss[-1] if front_rss else None,
            "rss_mb_max": max(front_rss) if front_rss else None,
            "engine_rss_mb_start": t.engine_rss[0] if t.engine_rss else None,
            "engine_rss_mb_end": t.engine_rss[-1] if t.engine_rss else None,
            "engine_rss_mb_max": max(t.engine_rss) if t.engine_rss else None,
            "memory_by_minute": memory_by_minute(t.memory),
            "engine_kills": t.engine_kills,
            "desyncs": len(t.desyncs),
            "desync_cases": dict(Counter(f"{d['class']}/{d['case']}" for d in t.desyncs)),
            "completions_checked": t.completions_checked,
            "invalid_completions": len(t.invalid),
            "invalid_samples": t.invalid[:8],
            "beyond_depth_limits": len(t.beyond_depth_limits),
            "beyond_depth_limits_cases": dict(
                Counter(f"{i['class']}/{i['case']}" for i in t.beyond_depth_limits)
            ),
            "popups": len(t.popups),
            "popup_samples": sorted(set(t.popups))[:8],
            "log_messages": t.log_messages,
            "output_problems": t.output_problems[:8],
            "by_class": by_class,
        }


Case = Callable[[Fuzzer, random.Random], Awaitable[None]]
CASES: dict[str, list[tuple[str, Case]]] = {cls: [] for cls in (*CLASSES, *EXTRA_CLASSES)}


def case(cls: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[cls].append((fn.__name__.lstrip("_"), fn))
        return fn

    return register


# ---------------------------------------------------------------- texts

SMALL = "import os\n\n\ndef f(x):\n    return x + 1\n\n\nvalues = [1, 2, 3]\ntotal = sum(\n"
SMALL_CURSOR = (8, 12)  # after "total = sum("

_corpus: list[Path] = []


def corpus_text(rng: random.Random, low: int = 2_000, high: int = 40_000) -> str:
    """A standard-library file of moderate size, chosen by ``rng``."""
    if not _corpus:
        from bench.corpus import stdlib_corpus

        _corpus.extend(
            f.path
            for f in stdlib_corpus()
            if low <= f.path.stat().st_size <= high and "test" not in f.name.split("/")[0]
        )
    for _ in range(20):
        try:
            return rng.choice(_corpus).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return SMALL


def big_text(rng: random.Random, size: int) -> str:
    parts, total = [], 0
    while total < size:
        text = corpus_text(rng)
        parts.append(text if text.endswith("\n") else text + "\n")
        total += len(parts[-1])
    return "".join(parts)


# ---------------------------------------------------------------- protocol abuse


def _bad_position_params(uri: str, inline: bool) -> list[Any]:
    td, pos = {"uri": uri}, {"line": SMALL_CURSOR[0], "character": SMALL_CURSOR[1]}
    context = {"triggerKind": 1}

    def p(**fields: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"textDocument": td, "position": pos, "context": context}
        params.update(fields)
        return {k: v for k, v in params.items() if v is not OMIT}

    return [
        OMIT,
        None,
        [],
        "params",
        5,
        p(position=OMIT),
        p(position=None),
        p(position=[8, 12]),
        p(position={"line": "four", "character": 0}),
        p(position={"line": -1, "character": 0}),
        p(position={"line": 0, "character": -5}),
        p(position={"line": 2**63, "character": 0}),
        p(position={"line": 0, "character": 2**63}),
        p(position={"line": 1.5, "character": 0}),
        p(position={"line": None, "character": 0}),
        p(position={"line": 10**6, "character": 0}),
        p(position={"line": 8, "character": 10**6}),
        p(textDocument=None),
        p(textDocument={}),
        p(textDocument=OMIT),
        p(textDocument={"uri": 5}),
        p(textDocument={"uri": None}),
        p(textDocument={"uri": "file:///fuzz/never-opened.py"}),
        p(context=None),
        p(context="invoked"),
        p(context={"triggerKind": 99}),
        p(context={}),
        p(context=OMIT) if inline else p(context={"triggerKind": "x"}),
    ]


@case("protocol")
async def _bad_params(fz: Fuzzer, rng: random.Random) -> None:
    doc = await fz.open_doc(SMALL)
    records = []
    for _ in range(10):
        inline = rng.random() < 0.5
        method = "textDocument/inlineCompletion" if inline else "textDocument/completion"
        params = rng.choice(_bad_position_params(doc.uri, inline))
        records.append(await fz.request(method, params))
    for params in (OMIT, None, [], "x", {"uri": 5}):
        records.append(await fz.request("fimlsp/serverStatus", params))
    await fz.wait_for(records)
    await fz.close_doc(doc)


#: Ids the protocol forbids (an error with a null id is owed) and odd ones it allows.
BAD_IDS: list[Any] = [{"a": 1}, [1], 1.5, 2.0, True, False, None]
ODD_IDS: list[Any] = ["", "x" * 10_000, -1, 0, 2**53, 2**63, "\ud800", "ü", "1"]


@case("protocol")
async def _odd_ids(fz: Fuzzer, rng: random.Random) -> None:
    records = []
    for msg_id in rng.sample(BAD_IDS, 3):
        records.append(
            await fz.request("fimlsp/serverStatus", {}, msg_id=msg_id, expect="null_error")
        )
    for msg_id in rng.sample(ODD_IDS, 4):
        if id_key(msg_id) not in fz.pending:
            records.append(await fz.request("fimlsp/serverStatus", {}, msg_id=msg_id))
    await fz.wait_for(records)


async def _send_message(fz: Fuzzer, message: Any, expect: str, label: str) -> Sent:
    msg_id = message.get("id") if isinstance(message, dict) else None
    record = fz.track(msg_id if expect == "answer" else None, label, expect)
    if expect == "answer":
        fz.pending[id_key(msg_id)] = record
    await fz.write(frame(encode(message)))
    return record


@case("protocol")
async def _bad_envelopes(fz: Fuzzer, rng: random.Random) -> None:
    status: dict[str, Any] = {"method": "fimlsp/serverStatus", "params": {}}
    messages: list[tuple[Any, str]] = [
        ({"id": fz.new_id(), **status}, "answer"),  # no "jsonrpc"
        ({"jsonrpc": "1.0", "id": fz.new_id(), **status}, "answer"),
        ({"jsonrpc": 2, "id": fz.new_id(), **status}, "answer"),
        ({"jsonrpc": "2.0", "id": fz.new_id(), "method": 5}, "answer"),
        ({"jsonrpc": "2.0", "id": fz.new_id(), "method": None}, "answer"),
        ({"jsonrpc": "2.0", "id": fz.new_id(), "method": ["a"]}, "answer"),
        ({"jsonrpc": "2.0", "id": fz.new_id()}, "answer"),  # neither request nor response
        ({"jsonrpc": "2.0", "id": fz.new_id(), **status, "extra": [1, 2]}, "answer"),
        ({"jsonrpc": "2.0"}, "null_error"),
        ({}, "null_error"),
        ({"jsonrpc": "2.0", "method": "fimlsp/serverStatus", "params": 5}, "none"),
    ]
    records = [await _send_message(fz, m, e, "envelope") for m, e in rng.sample(messages, 6)]
    await fz.wait_for(records)


@case("protocol")
async def _unknown_methods(fz: Fuzzer, rng: random.Random) -> None:
    records = []
    for method in ("fimlsp/noSuchThing", "$/noSuchThing", "textDocument/hover", "", "x" * 5000):
        records.append(await fz.request(method, {}))
    for method in ("fimlsp/noSuchThing", "$/noSuchThing", "textDocument/noSuchThing"):
        await fz.notify(method, {"x": 1})
    await fz.wait_for(records)


@case("protocol")
async def _notifications_with_ids(fz: Fuzzer, rng: random.Random) -> None:
    """A message with an id is a request, whatever its method: it gets an answer."""
    doc = await fz.open_doc(SMALL)
    records = [
        await fz.request("textDocument/didSave", {"textDocument": {"uri": doc.uri}}),
        await fz.request("initialized", {}),
        await fz.request("$/cancelRequest", {"id": 123456}),
        await fz.request("$/setTrace", {"value": "off"}),
        await fz.request("workspace/didChangeConfiguration", {"settings": {"fimlsp": fz.settings}}),
    ]
    await fz.wait_for(records)
    await fz.close_doc(doc)


@case("protocol")
async def _responses_to_nothing(fz: Fuzzer, rng: random.Random) -> None:
    for message in (
        {"jsonrpc": "2.0", "id": 987654321, "result": None},
        {"jsonrpc": "2.0", "id": "stray", "error": {"code": -32000, "message": "no"}},
        {"jsonrpc": "2.0", "id": None, "result": 1},
        {"jsonrpc": "2.0", "id": 5, "result": 1, "error": {"code": 1, "message": "both"}},
        {"jsonrpc": "2.0", "id": 6, "error": "not an object"},
    ):
        await fz.write(frame(encode(message)))
    record = await fz.request("fimlsp/serverStatus", {})
    await fz.wait_for([record])


@case("protocol")
async def _bad_cancellations(fz: Fuzzer, rng: random.Random) -> None:
    for params in (OMIT, None, {}, {"id": {}}, {"id": 10**30}, [], "x", {"id": None}):
        await fz.notify("$/cancelRequest", params)
    doc = await fz.open_doc(SMALL)
    records = []
    for _ in range(3):  # cancelled at once: still owed an answer (a result or -32800)
        record = await fz.complete_at(doc, *SMALL_CURSOR, kind=rng.choice(["inline", "completion"]))
        await fz.notify("$/cancelRequest", {"id": record.msg_id})
        records.append(record)
    await fz.wait_for(records)
    await fz.close_doc(doc)


@case("protocol")
async def _initialize_again(fz: Fuzzer, rng: random.Random) -> None:
    good = {"processId": None, "capabilities": {}, "initializationOptions": fz.settings}
    params = rng.choice(
        [OMIT, None, [], {"processId": "x", "capabilities": {}}, {"capabilities": 5}, good]
    )
    record = await fz.request("initialize", params)
    await fz.wait_for([record])


@case("protocol")
async def _bad_configuration(fz: Fuzzer, rng: random.Random) -> None:
    junk = {
        "maxTokens": "many",
        "deadlineMs": -5,
        "pythonVersion": "2.7",
        "topK": None,
        "model": 5,
        "lineMode": 7,
        "noSuchSetting": True,
    }
    for params in (
        OMIT,
        None,
        {},
        {"settings": None},
        {"settings": [1]},
        {"settings": {"fimlsp": junk}},
        {"settings": {"fimlsp": "x"}},
    ):
        await fz.notify("workspace/didChangeConfiguration", params)
    await fz.notify("workspace/didChangeConfiguration", {"settings": {"fimlsp": fz.settings}})
    record = await fz.request("fimlsp/serverStatus", {})
    await fz.wait_for([record])


async def _before_initialize_protocol(fz: Fuzzer, rng: random.Random) -> None:
    """Requests before ``initialize`` (owed -32002), then a bad ``initialize``."""
    fz.case = "before initialize"
    doc = await fz.open_doc(SMALL)
    records = [
        await fz.request("fimlsp/serverStatus", {}),
        await fz.complete_at(doc, *SMALL_CURSOR, kind="inline"),
        await fz.complete_at(doc, *SMALL_CURSOR, kind="completion"),
    ]
    if rng.random() < 0.15:
        records.append(await fz.request("shutdown"))
    fz.case = "bad initialize"
    for params in rng.sample(
        [
            OMIT,
            None,
            [],
            {"processId": "x", "capabilities": {}},
            {"capabilities": 5},
            {"processId": None},
        ],
        2,
    ):
        records.append(await fz.request("initialize", params))
    await fz.wait_for(records, QUICK_TIMEOUT_S, barrier=False)  # no pings: maybe shut down


RETIREMENTS = (
    "exit without shutdown",
    "requests after shutdown",
    "shutdown and exit",
    "end of input",
)


async def _retire_abusively(fz: Fuzzer, rng: random.Random) -> None:
    """End the server's life in turn each way a client can (the first time: exit
    without shutdown)."""
    how = RETIREMENTS[fz.retirements % len(RETIREMENTS)]
    fz.retirements += 1
    fz.case = how
    server = fz.server
    assert server is not None
    if how == "requests after shutdown":
        record = await fz.request("shutdown")
        await fz.wait_for([record], 30, barrier=False)
        doc = Doc("file:///fuzz/after-shutdown.py", SMALL, 1, fz.cls)
        records = [
            await fz.request("fimlsp/serverStatus", {}),
            await fz.complete_at(doc, *SMALL_CURSOR),
            await fz.request("shutdown"),
            await fz.request("initialize", {"processId": None, "capabilities": {}}),
        ]
        await fz.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": doc.uri, "languageId": "python", "version": 1, "text": SMALL}},
        )
        await fz.wait_for(records, QUICK_TIMEOUT_S, barrier=False)
        await fz.expect_exit(shutdown=False, exit_code=0)
    elif how == "exit without shutdown":
        await fz.expect_exit(shutdown=False, exit_code=1)
    elif how == "shutdown and exit":
        await fz.expect_exit(shutdown=True, exit_code=0)
    else:
        server.retiring = True
        assert server.proc is not None and server.proc.stdin is not None
        server.proc.stdin.close()
        if await server.wait(10) is None:
            fz.tally.exit_codes.append(
                {
                    "class": fz.cls,
                    "case": how,
                    "expected": "any",
                    "got": "still running 10 s after its input closed",
                }
            )


# ---------------------------------------------------------------- framing abuse


def _status_body(msg_id: Any) -> bytes:
    return encode({"jsonrpc": "2.0", "id": msg_id, "method": "fimlsp/serverStatus", "params": {}})


def _garbage(rng: random.Random, size: int) -> bytes:
    """Bytes that cannot be mistaken for a header (no 'C' or 'c' starts one)."""
    alphabet = bytes(b for b in range(256) if b not in b"Cc")
    return bytes(rng.choice(alphabet) for _ in range(size))


@dataclass
class FramingCase:
    """Bytes to write (in pieces, with pauses) and what the request inside is owed."""

    pieces: list[bytes]
    expect: str  # for the request inside the broken frame
    pause_s: float = 0.0


def _framing(kind: str, rng: random.Random, msg_id: int) -> FramingCase:
    body = _status_body(msg_id)
    n = len(body)
    std = b"Content-Length: %d\r\n\r\n" % n
    if kind == "length too long":
        return FramingCase(
            [b"Content-Length: %d\r\n\r\n" % (n + rng.choice([1, 10, 500])) + body], "answer"
        )
    if kind == "length too short":
        return FramingCase(
            [b"Content-Length: %d\r\n\r\n" % (n - rng.randint(1, n - 1)) + body], "null_error"
        )
    if kind == "absurd length":  # the issue's: pygls allocates it
        return FramingCase([b"Content-Length: %d\r\n\r\n" % 10**12 + body], "null_error")
    if kind == "over the limit":
        length = rng.choice([2**63, 10**20, 100 * 2**20])
        return FramingCase([b"Content-Length: %d\r\n\r\n" % length + body], "null_error")
    if kind == "malformed length":
        value = rng.choice([b"abc", b"-5", b"", b"1e3", b"0x10", b"4 2"])
        return FramingCase([b"Content-Length: " + value + b"\r\n\r\n" + body], "none")
    if kind == "missing header":
        return FramingCase([b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + body], "none")
    if kind == "lowercase header":
        return FramingCase([b"content-length: %d\r\n\r\n" % n + body], "answer")
    if kind == "uppercase header without space":
        return FramingCase([b"CONTENT-LENGTH:%d\r\n\r\n" % n + body], "answer")
    if kind == "LF-only header":
        return FramingCase([b"Content-Length: %d\n\n" % n + body], "answer")
    if kind == "spaces around the length":
        return FramingCase([b"Content-Length: \t %d \t\r\n\r\n" % n + body], "answer")
    if kind == "extra headers":
        extra = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nX-Fuzz: 1\r\n"
        header = rng.choice([extra + std, b"Content-Length: %d\r\n" % n + extra + b"\r\n"])
        return FramingCase([header + body], "answer")
    if kind == "duplicate header":
        return FramingCase([b"Content-Length: %d\r\n" % n + std + body], "answer")
    if kind == "garbage between frames":
        return FramingCase([_garbage(rng, rng.choice([1, 7, 300, 5000])) + std + body], "answer")
    if kind == "garbage lines":
        junk = b"HTTP/1.1 200 OK\r\nhello\r\n\r\n\n\r\n{not a frame}\r\n\x00\x00\r\n"
        return FramingCase([junk + std + body], "answer")
    if kind == "long header line":
        return FramingCase(
            [b"X-Junk: " + b"a" * rng.choice([9_000, 200_000]) + b"\r\n" + std + body], "answer"
        )
    if kind == "body not JSON":
        bad = rng.choice(
            [
                b"this is not json",
                body[: n // 2] + b" " * (n - n // 2),
                b"{'single': 'quotes'}",
                b"\xff\xfe{}",
            ]
        )
        return FramingCase([b"Content-Length: %d\r\n\r\n" % len(bad) + bad], "null_error")
    if kind == "body not UTF-8":
        bad = body[:-2] + b',"x":"\xff\xc3"}'
        return FramingCase([b"Content-Length: %d\r\n\r\n" % len(bad) + bad], "null_error")
    if kind == "body not an object":
        bad = rng.choice([b"42", b'"text"', b"null", b"true", b"[]", b"3.5"])
        return FramingCase([b"Content-Length: %d\r\n\r\n" % len(bad) + bad], "null_error")
    if kind == "batch":
        batch = b"[" + body + b"," + _status_body(msg_id + 1_000_000) + b"]"
        return FramingCase([b"Content-Length: %d\r\n\r\n" % len(batch) + batch], "null_error")
    if kind == "empty body":
        return FramingCase([b"Content-Length: 0\r\n\r\n"], "null_error")
    if kind == "split writes":
        data = std + body
        cuts = sorted(rng.sample(range(1, len(data)), min(6, len(data) - 1)))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
        return FramingCase(pieces, "answer", pause_s=0.02)
    if kind == "coalesced frames":
        return FramingCase([(std + body) * 1 + frame(_status_body(f"{msg_id}-2"))], "answer")
    raise ValueError(kind)


FRAMING_KINDS = (
    "length too long",
    "length too short",
    "absurd length",
    "over the limit",
    "malformed length",
    "missing header",
    "lowercase header",
    "uppercase header without space",
    "LF-only header",
    "spaces around the length",
    "extra headers",
    "duplicate header",
    "garbage between frames",
    "garbage lines",
    "long header line",
    "body not JSON",
    "body not UTF-8",
    "body not an object",
    "batch",
    "empty body",
    "split writes",
    "coalesced frames",
)


def _framing_case(kind: str) -> Case:
    async def run(fz: Fuzzer, rng: random.Random) -> None:
        msg_id = fz.new_id()
        crafted = _framing(kind, rng, msg_id)
        fz.track(msg_id, "fimlsp/serverStatus", crafted.expect)
        if kind == "coalesced frames":
            fz.track(f"{msg_id}-2", "fimlsp/serverStatus", "answer")
        server = fz.server
        assert server is not None
        async with server.write_lock:  # nothing else may land inside the crafted bytes
            for piece in crafted.pieces:
                if not await server.write(piece):
                    break
                if crafted.pause_s:
                    await asyncio.sleep(crafted.pause_s)
        fz.tally.messages += 1
        fz.tally.by_class_messages["framing"] += 1
        await fz.check_alive()

    run.__name__ = re.sub(r"\W+", "_", kind.lower()).strip("_")
    return run


for _kind in FRAMING_KINDS:
    case("framing")(_framing_case(_kind))


# ---------------------------------------------------------------- hostile documents


@dataclass
class Hostile:
    """A document and where to ask for completions in it (offsets, or LSP positions)."""

    text: str
    offsets: list[int] = field(default_factory=list)
    positions: list[tuple[int, int]] = field(default_factory=list)


def _hostile(kind: str, rng: random.Random) -> Hostile:
    n = 20_000
    if kind.startswith("very "):  # 200k: minutes on a quadratic path
        kind, n = kind.removeprefix("very "), 200_000
    if kind == "long string line":
        text = 's = "' + "a" * n + '"\nvalues = (\n'
        return Hostile(text, [len(text), n // 2, n + 6])
    if kind == "long comment line":
        text = "# " + "x" * n + "\nvalues = (\n"
        return Hostile(text, [len(text), n // 2])
    if kind == "long hex blob":
        blob = "".join(rng.choice("0123456789abcdef") for _ in range(n))
        text = f'BLOB = "{blob}"\nvalues = (\n'
        return Hostile(text, [len(text), len(blob) + 9])
    if kind == "long code line":
        text = "x = [" + ", ".join(str(i) for i in range(n // 7)) + "]\ny = (\n"
        return Hostile(text, [len(text), text.index("]")])
    if kind == "lone surrogate":
        text = 's = "\ud800"\nt = "\udfff\ud83d"\nvalues = (\n'
        return Hostile(text, [len(text), 6])
    if kind == "NUL":
        text = 'x = "a\0b"\n\0\nvalues = (\n'
        return Hostile(text, [len(text), 5])
    if kind == "deep nesting":
        depth = rng.choice([100, 1_000, 10_000, 100_000])
        text = "x = " + "(" * depth + "\n"
        return Hostile(text, [len(text), 4 + depth // 2])
    if kind == "deep brackets mix":
        depth = rng.choice([200, 5_000])
        text = "x = " + "[{(" * depth + "1"
        return Hostile(text, [len(text)])
    if kind == "5 MB file":
        text = big_text(rng, 5_000_000) + "values = (\n"
        return Hostile(text, [len(text), len(text) // 2])
    if kind == "1.5 MB file":
        text = big_text(rng, 1_500_000) + "values = (\n"
        return Hostile(text, [len(text)])
    if kind == "emoji":
        text = 's = "😀😀"\nt = s\n'  # complete: any text inside the string fits
        return Hostile(text, [len(text)], [(0, 5), (0, 6), (0, 8)])  # 6, 8: inside a pair
    if kind == "line ends":
        text = 'x = 1\ry = 2\r\nz = "\u2028\x85"\n\x0cw = [\x0c\n  1,\r'
        return Hostile(text, [len(text), text.index("z")])
    if kind == "byte order mark":
        text = "\ufeffimport os\nvalues = (\n"
        return Hostile(text, [len(text), 1])
    if kind == "integer over the digit limit":
        text = "x = " + "9" * 5_000 + "\ny = (\n"
        return Hostile(text, [len(text)])
    if kind == "chain over the recursion limit":
        text = "x = " + " + ".join(["1"] * 70_000) + "\ny = (\n"
        return Hostile(text, [len(text)])
    if kind == "empty":
        return Hostile("", [0])
    if kind == "unterminated":
        text = 'def f():\n    """never closed\n\n' + "x = 1\n" * 200
        return Hostile(text, [len(text), 12])
    raise ValueError(kind)


HOSTILE_KINDS = (
    "long string line",
    "very long string line",
    "long comment line",
    "long hex blob",
    "very long hex blob",
    "long code line",
    "lone surrogate",
    "NUL",
    "deep nesting",
    "deep brackets mix",
    "5 MB file",
    "1.5 MB file",
    "emoji",
    "line ends",
    "byte order mark",
    "integer over the digit limit",
    "chain over the recursion limit",
    "empty",
    "unterminated",
)


def _document_case(kind: str) -> Case:
    async def run(fz: Fuzzer, rng: random.Random) -> None:
        hostile = _hostile(kind, rng)
        doc = await fz.open_doc(hostile.text)
        positions = [position_of(doc.text, offset) for offset in hostile.offsets]
        for line, character in positions + hostile.positions:
            for what in ("inline", "completion"):
                # One at a time: a newer request for a document cancels the older one.
                record = await fz.complete_at(doc, line, character, what, rng.choice([1, 2]))
                await fz.wait_for([record], 2 * CASE_TIMEOUT_S)
        await fz.sync_check(doc)
        await fz.close_doc(doc)

    run.__name__ = re.sub(r"\W+", "_", kind.lower()).strip("_")
    return run


for _kind in HOSTILE_KINDS:
    case("documents")(_document_case(_kind))


# ---------------------------------------------------------------- change-and-request storms

_SNIPPETS = [
    "x",
    "(",
    ")",
    " ",
    "\n",
    "    ",
    "def g(a, b):\n    return a",
    "😀",
    "é",
    "[1, 2]",
    "'s'",
    "#",
    ":",
    "\n\n",
    "\r\n",
    "\t",
    "lambda: 0",
    '"""',
    "\\",
]


def _avoid_crlf_middle(text: str, offset: int) -> int:
    """``offset``, moved back if it falls between the two characters of a CRLF (no LSP
    position names that place)."""
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        return offset - 1
    return offset


def _storm_edit(text: str, cursor: int, rng: random.Random) -> tuple[int, int, str, int]:
    """One random edit near ``cursor``: (start, end, new text, new cursor)."""
    cursor = _avoid_crlf_middle(text, max(0, min(cursor, len(text))))
    roll = rng.random()
    if roll < 0.6:  # typing
        new = rng.choice(_SNIPPETS) if rng.random() < 0.3 else rng.choice("abcxyz_=+.,:( )")
        return cursor, cursor, new, cursor + len(new)
    if roll < 0.8:  # deleting backwards
        start = _avoid_crlf_middle(text, max(0, cursor - rng.randint(1, 12)))
        return start, cursor, "", start
    start = _avoid_crlf_middle(text, rng.randrange(len(text) + 1))  # replacing elsewhere
    end = min(len(text), start + rng.randint(0, 30))
    end = end + 1 if _avoid_crlf_middle(text, end) != end else end
    new = rng.choice(_SNIPPETS)
    return start, end, new, start + len(new)


@case("storm")
async def typing_storm(fz: Fuzzer, rng: random.Random) -> None:
    doc = await fz.open_doc(corpus_text(rng))
    cursor = rng.randrange(len(doc.text) + 1)
    records: list[Sent] = []
    for step in range(fz.options.storm_changes):
        text, edits = doc.text, []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):  # several changes in one notification
            start, end, new, cursor = _storm_edit(text, cursor, rng)
            edits.append((start, end, new))
            text = text[:start] + new + text[end:]
        await fz.change(doc, edits)
        if rng.random() < 0.3:
            kind = rng.choice(["inline", "inline", "completion"])
            record = await fz.complete(doc, _avoid_crlf_middle(doc.text, cursor), kind)
            records.append(record)
            if rng.random() < 0.2:
                await fz.notify("$/cancelRequest", {"id": record.msg_id})
        if step % 50 == 49:
            await fz.sync_check(doc)
    await fz.wait_for(records)
    await fz.sync_check(doc)
    await fz.close_doc(doc)


@case("storm")
async def _odd_versions(fz: Fuzzer, rng: random.Random) -> None:
    """Versions the protocol's int32 cannot hold, repeated and decreasing versions."""
    doc = await fz.open_doc(SMALL)
    for version in rng.sample([2**40, 2**31, -1, 0, 1, 2**63, 7, 7], 4):
        await fz.change(
            doc, [(len(doc.text), len(doc.text), rng.choice(["x", "\n", " "]))], version=version
        )
        await fz.sync_check(doc, expect_held=True)
    record = await fz.complete(doc, len(doc.text))
    await fz.wait_for([record])
    await fz.close_doc(doc)


@case("storm")
async def _out_of_range_changes(fz: Fuzzer, rng: random.Random) -> None:
    """A range end past its line's end is clamped (both sides agree on that); ranges the
    protocol gives no meaning (a line past the end, an inverted range, half a surrogate
    pair) leave the client unsure, so it sends the whole text again before checking."""
    doc = await fz.open_doc('s = "😀"\nvalues = [1, 2]\n')
    await fz.change(doc, [(len('s = "😀"'), len('s = "😀"'), " + 'x'")], clamp_extra=40)
    await fz.sync_check(doc)
    lines = doc.text.count("\n")
    for start, end in (((lines + 5, 0), (lines + 6, 0)), ((1, 5), (0, 2)), ((0, 6), (0, 6))):
        doc.version += 1
        doc.in_sync = False
        await fz.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "contentChanges": [
                    {
                        "range": {
                            "start": {"line": start[0], "character": start[1]},
                            "end": {"line": end[0], "character": end[1]},
                        },
                        "text": "Z",
                    }
                ],
            },
        )
        record = await fz.complete(doc, 0)
        await fz.wait_for([record])
        await fz.sync_check(doc, expect_held=True)
        await fz.replace_all(doc)
        await fz.sync_check(doc)
    await fz.close_doc(doc)


async def _before_initialize_storm(fz: Fuzzer, rng: random.Random) -> None:
    """didOpen and incremental didChange before ``initialize``: the server must apply
    them or visibly refuse them (no document), never hold a different text."""
    fz.case = "changes before initialize"
    doc = await fz.open_doc(SMALL)
    cursor = len(doc.text)
    for _ in range(rng.randint(1, 5)):
        start, end, new, cursor = _storm_edit(doc.text, cursor, rng)
        await fz.change(doc, [(start, end, new)])
    record = await fz.complete(doc, _avoid_crlf_middle(doc.text, cursor))
    await fz.wait_for([record], QUICK_TIMEOUT_S, barrier=False)


BEFORE_INITIALIZE: dict[str, Case] = {
    "protocol": _before_initialize_protocol,
    "storm": _before_initialize_storm,
}

# ---------------------------------------------------------------- random sessions


@case("random")
async def _session(fz: Fuzzer, rng: random.Random) -> None:
    docs = [
        await fz.open_doc(rng.choice([SMALL, corpus_text(rng, 500, 6_000)]))
        for _ in range(rng.randint(1, 2))
    ]
    records: list[Sent] = []
    cursor = {doc.uri: len(doc.text) for doc in docs}
    for _ in range(rng.randint(20, 60)):
        doc = rng.choice(docs)
        roll = rng.random()
        if roll < 0.5:
            start, end, new, cursor[doc.uri] = _storm_edit(doc.text, cursor[doc.uri], rng)
            await fz.change(doc, [(start, end, new)])
        elif roll < 0.8:
            kind = rng.choice(["inline", "completion"])
            offset = _avoid_crlf_middle(doc.text, min(cursor[doc.uri], len(doc.text)))
            records.append(await fz.complete(doc, offset, kind, trigger=rng.choice([1, 2])))
        elif roll < 0.85 and records:
            await fz.notify("$/cancelRequest", {"id": rng.choice(records).msg_id})
        elif roll < 0.9:
            records.append(await fz.request("fimlsp/serverStatus", {"uri": doc.uri}))
        elif roll < 0.93:
            await fz.notify("textDocument/didSave", {"textDocument": {"uri": doc.uri}})
        elif roll < 0.96:
            settings = {**fz.settings, "lineMode": rng.choice(["auto", "single", "multi"])}
            await fz.notify("workspace/didChangeConfiguration", {"settings": {"fimlsp": settings}})
        else:
            await fz.close_doc(doc)
            docs[docs.index(doc)] = await fz.open_doc(doc.text, doc.uri)
            docs = [fz.docs[d.uri] for d in docs]
        await asyncio.sleep(rng.choice([0, 0, 0.01, 0.05]))
    await fz.wait_for(records)
    for doc in docs:
        await fz.sync_check(doc)
        await fz.close_doc(doc)


# ---------------------------------------------------------------- the engine killed


async def _status(fz: Fuzzer) -> dict[str, Any]:
    record = await fz.request("fimlsp/serverStatus", {})
    await fz.wait_for([record], QUICK_TIMEOUT_S, barrier=False)
    return record.result if isinstance(record.result, dict) else {}


async def _kill_engine(fz: Fuzzer, rng: random.Random, during: str) -> None:
    """SIGKILL to the engine process while a request runs (``request``: the quotient of a
    large file is being built) or while a model loads (``load``: another path to the
    model); then how long the pending request took to be answered, the new engine to be
    ready and the next completion to come, and whether the documents are intact."""
    pid = (await _status(fz)).get("enginePid")
    if not isinstance(pid, int) or pid <= 0:
        fz.log("no engine process to kill")
        return
    small = await fz.open_doc(SMALL)
    link = None
    if during == "request":
        big = await fz.open_doc(big_text(rng, 60_000) + "values = (\n")
        pending = await fz.complete(big, len(big.text) - 1)
        await asyncio.sleep(0.2)  # its quotient is being built
    else:
        link = Path(tempfile.mkdtemp(prefix="fimlsp-fuzz-")) / "another-path.gguf"
        link.symlink_to(Path(fz.model).resolve())
        await fz.notify("workspace/didChangeConfiguration",
                        {"settings": {"fimlsp": {**fz.settings, "model": str(link)}}})  # fmt: skip
        await asyncio.sleep(0.05)  # the engine has begun loading it
        pending = await fz.complete(small, len(small.text))
    killed = time.perf_counter()
    os.kill(pid, 9)
    await fz.wait_for([pending], CASE_TIMEOUT_S, barrier=False)
    ready_at = None
    deadline = time.perf_counter() + CASE_TIMEOUT_S
    while time.perf_counter() < deadline:
        status = await _status(fz)
        if status.get("state") == "ready" and status.get("enginePid") not in (None, 0, pid):
            ready_at = time.perf_counter()
            break
        await asyncio.sleep(0.02)
    following = await fz.complete(small, len(small.text))
    await fz.wait_for([following], CASE_TIMEOUT_S, barrier=False)
    items = following.result.get("items", []) if isinstance(following.result, dict) else []

    def ms(moment: float | None) -> float | None:
        return None if moment is None else round((moment - killed) * 1e3, 1)

    fz.tally.engine_kills.append(
        {
            "during": during,
            "answeredMs": ms(pending.answered_at),
            "code": pending.code,
            "readyMs": ms(ready_at),
            "nextCompletionMs": ms(following.answered_at),
            "nextItems": len(items),
        }
    )
    await fz.sync_check(small)
    await fz.close_doc(small)
    if during == "request":
        await fz.sync_check(big)
        await fz.close_doc(big)
    if link is not None:  # back to the model named at the start (loaded again)
        await fz.notify("workspace/didChangeConfiguration", {"settings": {"fimlsp": fz.settings}})
        link.unlink()
        link.parent.rmdir()


@case("engine")
async def _killed_mid_request(fz: Fuzzer, rng: random.Random) -> None:
    await _kill_engine(fz, rng, "request")


@case("engine")
async def _killed_mid_load(fz: Fuzzer, rng: random.Random) -> None:
    await _kill_engine(fz, rng, "load")


# ---------------------------------------------------------------- command line


def resolve_model(spec: str | None) -> str:
    """The model to serve: a path given, or the tiny stopping model (built once)."""
    if spec:
        return spec
    from testmodels.tiny import tiny_model_cached

    return str(tiny_model_cached("starcoder", **STOPPING_MODEL))


def memory_by_minute(
    memory: Sequence[tuple[float, float, float | None]],
) -> list[tuple[int, float, float | None]]:
    """(minute from the first probe, the largest front MB, the largest engine MB or None)
    for each minute the probes saw: what a long session's memory grows to, and whether
    it levels off."""
    if not memory:
        return []
    first = memory[0][0]
    minutes: dict[int, list[tuple[float, float | None]]] = {}
    for at, front, engine in memory:
        minutes.setdefault(int((at - first) // 60), []).append((front, engine))
    rows: list[tuple[int, float, float | None]] = []
    for minute, seen in sorted(minutes.items()):
        engines = [engine for _, engine in seen if engine is not None]
        rows.append((minute, max(front for front, _ in seen), max(engines, default=None)))
    return rows


def lag_by_case(
    ticks: Counter[str], stalls: Sequence[tuple[float, float, str]], top: int = 12
) -> dict[str, dict[str, float | int]]:
    """The cases with the longest loop-lag stalls, worst first: the monitor's ticks
    during each, how many were stalls, the longest, and the stalls' total against the
    loop thread's CPU time meanwhile (the rest it waited: for the GIL, or for the OS)."""
    longest: dict[str, float] = {}
    count: Counter[str] = Counter()
    total: dict[str, float] = {}
    cpu_total: dict[str, float] = {}
    for ms, cpu, where in stalls:
        longest[where] = max(longest.get(where, 0.0), ms)
        count[where] += 1
        total[where] = total.get(where, 0.0) + ms
        cpu_total[where] = cpu_total.get(where, 0.0) + cpu
    worst = sorted(longest, key=lambda where: -longest[where])[:top]
    return {
        where: {
            "ticks": ticks[where],
            "stalls": count[where],
            "max_ms": round(longest[where], 1),
            "stalls_ms": round(total[where], 1),
            "loop_cpu_ms": round(cpu_total[where], 1),
        }
        for where in worst
    }


def format_summary(r: dict[str, Any]) -> str:
    lines = [
        f"lsp fuzz: {r['messages_sent']} messages, {r['requests_sent']} requests in "
        f"{r['seconds']} s (seed {r['seed']}, classes {','.join(r['classes'])}, "
        f"{r['server_starts']} server starts)",
        f"  answered      {r['answered']} ({r['results']} results); errors by code "
        f"{r['errors_by_code']}",
        f"  unanswered    {r['unanswered']}; lost with a dead server "
        f"{r['lost_with_a_dead_server']}",
    ]
    for what, count in list(r["unanswered_by_case"].items())[:12]:
        lines.append(f"      {count:5d}  {what}")
    if r["null_id_errors_owed_not_sent"]:
        lines.append(f"      null-id errors owed and not sent: {r['null_id_errors_owed_not_sent']}")
    lines.append(f"  crashes       {len(r['crashes'])}")
    for crash in r["crashes"][:5]:
        tail = crash["stderr_tail"].strip().splitlines()[-1:] or [""]
        lines.append(
            f"      {crash['class']}/{crash['case']}: exit {crash['exit_code']}: {tail[0][:110]}"
        )
    lines.append(
        f"  deaf          {len(r['deaf'])} (no answer after a framing case); "
        f"unresponsive for a minute {len(r['unresponsive'])}"
    )
    for deaf in (r["deaf"] + r["unresponsive"])[:8]:
        lines.append(f"      {deaf['class']}/{deaf['case']}")
    lines.append(f"  exit codes    {len(r['exit_code_mismatches'])} wrong")
    for item in r["exit_code_mismatches"][:5]:
        lines.append(f"      {item['case']}: expected {item['expected']}, got {item['got']}")
    lines += [
        f"  stall         longest {r['longest_stall_ms']} ms (during {r['longest_stall_case']}); "
        f"probe p50 {r['probe_ms_p50']} ms, p99 {r['probe_ms_p99']} ms over {r['probes']}",
        f"  loop lag      longest {r['longest_loop_lag_ms']} ms (during "
        f"{r['longest_loop_lag_case']}); p99 {r['loop_lag_p99_ms']} ms (the server's monitor)",
        f"                {r['loop_lag_stalls']} ticks over {r['loop_lag_stall_ms']} ms, "
        f"{r['loop_lag_stalls_ms']} ms late in all, with {r['loop_lag_stalls_loop_cpu_ms']} ms of "
        "work on the loop (the rest: waiting for the GIL or the OS); by case, worst first:",
    ]
    for where, row in list(r["loop_lag_by_case"].items())[:8]:
        lines.append(
            f"      {row['max_ms']:6.1f} ms  {row['stalls']:4d} of {row['ticks']:5d} ticks, "
            f"{row['stalls_ms']:.0f} ms late with {row['loop_cpu_ms']:.0f} ms of work  {where}"
        )
    lines += [
        f"  memory        front {r['rss_mb_start']} MB at start, {r['rss_mb_end']} MB at end, "
        f"max {r['rss_mb_max']} MB; engine {r['engine_rss_mb_start']} MB at start, "
        f"{r['engine_rss_mb_end']} MB at end, max {r['engine_rss_mb_max']} MB",
        "                largest by minute (front / engine MB): "
        + ", ".join(f"{m}: {front:.0f} / {engine}" for m, front, engine in r["memory_by_minute"]),
        f"  desyncs       {r['desyncs']} {r['desync_cases'] or ''}",
        f"  completions   {r['completions_checked']} checked, {r['invalid_completions']} invalid; "
        f"{r['beyond_depth_limits']} beyond CPython's depth limits "
        f"{r['beyond_depth_limits_cases'] or ''}",
    ]
    for item in r["invalid_samples"][:5]:
        lines.append(
            f"      {item['class']}/{item['case']} ({item['kind']}): {item['middle']!r}: "
            f"{item['why'][:90]}"
        )
    for kill in r["engine_kills"]:
        lines.append(
            f"  engine killed during a {kill['during']}: its request answered in "
            f"{kill['answeredMs']} ms (code {kill['code']}), a new engine ready in "
            f"{kill['readyMs']} ms, the next completion in {kill['nextCompletionMs']} ms "
            f"({kill['nextItems']} items)"
        )
    lines.append(f"  popups        {r['popups']} window/showMessage")
    for text in r["popup_samples"][:4]:
        lines.append(f"      {text[:110]}")
    lines.append(
        "  by class      "
        + "; ".join(
            f"{cls}: " + ", ".join(f"{k} {v}" for k, v in row.items() if v)
            for cls, row in r["by_class"].items()
        )
    )
    return "\n".join(lines)


def found_nothing(r: dict[str, Any]) -> bool:
    return not (
        r["unanswered"]
        or r["crashes"]
        or r["deaf"]
        or r["unresponsive"]
        or r["desyncs"]
        or r["invalid_completions"]
        or r["exit_code_mismatches"]
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.lsp_fuzz", description="Fuzz the language server over raw pipes."
    )
    p.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    p.add_argument("--messages", type=int, default=None, help="stop after this many messages")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default=None, help="GGUF path (default: a tiny stopping model)")
    p.add_argument(
        "--classes",
        default=",".join(CLASSES),
        help=f"comma-separated, from {','.join(CLASSES)} (default), and {','.join(EXTRA_CLASSES)}",
    )
    p.add_argument(
        "--server", default=None, help="server command (default: python -m lsp_server.cli --stdio)"
    )
    p.add_argument("--cases", default="", help="comma-separated case names (--list-cases)")
    p.add_argument("--list-cases", action="store_true", help="list the cases and exit")
    p.add_argument(
        "--sweep", action="store_true", help="run each selected case once, in order, then stop"
    )
    p.add_argument("--deadline-ms", type=int, default=1500, help="the server's deadlineMs")
    p.add_argument(
        "--heal-seconds",
        type=float,
        default=HEAL_TIMEOUT_S,
        help="how long a server may take to answer after a framing case",
    )
    p.add_argument("--storm-changes", type=int, default=300, help="changes per storm")
    p.add_argument(
        "--rotate-seconds",
        type=float,
        default=30.0,
        help="a server's lifetime when the protocol class runs (default 30)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--verbose", action="store_true", help="log cases and findings to stderr")
    return p


def options_from(args: argparse.Namespace) -> Options:
    classes = tuple(c.strip() for c in args.classes.split(",") if c.strip())
    cases = tuple(c.strip() for c in args.cases.split(",") if c.strip())
    known = {name for entries in CASES.values() for name, _ in entries}
    if set(cases) - known:
        raise ValueError(f"unknown cases {sorted(set(cases) - known)}; see --list-cases")
    if cases:  # the classes of the cases named
        classes = tuple(c for c in CASES if any(n in cases for n, _ in CASES[c]))
    every = (*CLASSES, *EXTRA_CLASSES)
    unknown = set(classes) - set(every)
    if unknown or not classes:
        raise ValueError(f"unknown classes {sorted(unknown)}; choose from {', '.join(every)}")
    options = Options(
        seconds=args.seconds,
        messages=args.messages,
        seed=args.seed,
        model=args.model,
        classes=classes,
        cases=cases,
        sweep=args.sweep,
        deadline_ms=args.deadline_ms,
        heal_timeout=args.heal_seconds,
        storm_changes=args.storm_changes,
        rotate_s=args.rotate_seconds,
        verbose=args.verbose,
    )
    if args.server:
        options.server = tuple(shlex.split(args.server))
    return options


async def fuzz(options: Options) -> dict[str, Any]:
    """Run the fuzzer with ``options`` and return its summary."""
    return await Fuzzer(options, resolve_model(options.model)).run()


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    if args.list_cases:
        for cls, entries in CASES.items():
            print(f"{cls}: {', '.join(name for name, _ in entries)}", file=out)
        return 0
    try:
        options = options_from(args)
        report = asyncio.run(fuzz(options))
    except (ValueError, RuntimeError) as exc:
        print(f"bench.lsp_fuzz: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=1) if args.json else format_summary(report), file=out)
    return 0 if found_nothing(report) else 1


if __name__ == "__main__":
    sys.exit(main())
