"""A team's editors typing at once against one inference server.

Usage::

    python -m bench.team_load (--model GGUF|tiny | --server-url URL) [PATHS...]
        [--editors 1,4,16,64] [--seconds S] [--server-api llama.cpp|openai]
        [--parallel N] [--slot-ctx N] [--server-args "..."] [--drivers K]
        [--faults] [--fault-editors N] [--fault-seconds S] [--big-file-bytes N]
        [--max-tokens N] [--deadline-ms MS] [--typing-ms MS] [--cancel explicit|supersede]
        [--model-vocab GGUF] [--seed S] [--out FILE.json] [--json]

Each simulated editor is a real fimlsp: ``python -m lsp_server.cli --stdio``, one process
per editor as in a team (each developer runs their own), with ``model`` set to the one
server's URL, driven over stdio by ``bench.lsp_latency``'s ``Typist``: typing sessions over
files of the corpus (PATHS, default the standard library without its tests), a keystroke
every ``--typing-ms``, a request after each, the previous one cancelled or superseded, a
pause at each word's end until the answer comes.  Driving the server process rather than
the decoding library keeps what a team really runs in the measurement: supersede and
cancel, the deadline, read-ahead, the outage backoff.  The editors are spread over
``--drivers`` client processes (an asyncio loop each), so that the clients' own loop does
not become the bottleneck at 64 editors; each driver's loop lag is reported.

The tool starts ``llama-server`` itself (``--model``; ``tiny`` is ``bench.remote``'s
tiny random-weight model, ``tiny-stopping`` the same biased to stop) with ``--parallel``
slots of ``--slot-ctx`` tokens, as many as fit: it halves the slots until the server
starts), or uses the one at ``--server-url`` (restarts are then skipped). Per load level
(``--editors``), the first N editors type for ``--seconds``; one JSON row per level:

* ``latency_p50_ms`` / ``p95`` / ``p99``: request to answer, over answered requests
  (cancelled ones excluded), pooled over editors; ``worst_editor_p95_ms``;
* ``answered_with_completion``: the share of answered requests with a suggestion;
* ``requests_per_completion``: HTTP requests the editors' remote backends sent (streams,
  one per rejected token, probes, prefills: ``remoteRequests`` of ``fimlsp/serverStatus``)
  per answer with a suggestion;
* ``server_tokens_per_s``: generated tokens per second over the level, from llama-server's
  ``/metrics`` (``tokens_predicted_total``), beside prompt tokens read and cached;
* ``client_parser_share``: per generating request, (``quotientMs`` + ``parserMs``) /
  ``elapsedMs`` of its ``fimlsp/status``, the median;
* ``valid``: every answered middle, put between its left and right, parses with
  ``ast.parse`` (``middles_checked``, ``middles_invalid``).

``--warmup-s`` first lets every editor type that long (a row of kind ``warmup``): the
levels then see warm processes. ``--faults`` adds a level of ``--fault-editors`` editors
for ``--fault-seconds`` in which editor 0 switches to a ``--big-file-bytes`` file (2 MB;
it opens it afresh for every typing session) at a fifth of the time and llama-server is
stopped and started again on its port at two fifths: latencies of the other editors per
window (before, with the big file, after the restart), the big file's own, whether any
editor hung (a reply missing long after every deadline), and each editor's time from the
server's return to its first completion.

``--out`` writes ``{"meta": ..., "rows": [...]}``; ``bench/gpu/team_report.py`` turns such
files into a summary and a plot.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import ctypes
import json
import math
import multiprocessing
import os
import random
import shlex
import signal
import statistics
import sys
import tempfile
import time
import traceback
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from bench.corpus import CorpusFile
from bench.grammar_coverage import discover, percentile, stdlib_corpus
from bench.llama_server import (
    BuildFailed,
    BuildUnavailable,
    LlamaServer,
    build_llama_server,
    start_llama_server,
)
from bench.lsp_latency import Tally, Typist, _server_status, _type, _wait_ready
from lsp_server.status import STATUS_NOTIFICATION, EngineState

#: Seconds a level's editors wait, past its end and every deadline, before one counts as hung.
HANG_GRACE_S = 15.0
#: When, in the fault level, editor 0 opens the big file and the server restarts (shares
#: of the level's time): the rest is for the editors' backoff to find the server again.
BIG_FILE_AT, RESTART_AT = 0.2, 0.4
#: ``remoteRequests`` and friends of ``fimlsp/serverStatus`` (see ``lsp_server.engine``).
REMOTE_KEYS = (
    "remoteRequests",
    "remoteGenerations",
    "remoteRejected",
    "remoteProbes",
    "remotePrefills",
)
#: llama-server's counters (``/metrics``) a level reports as differences.
METRIC_COUNTERS = (
    "tokens_predicted_total",
    "prompt_tokens_total",
    "prompt_tokens_cached_total",
    "n_decode_total",
    "busy_slot_decodes",
)


# --------------------------------------------------------------------------- one editor


class LoadTypist(Typist):
    """``Typist`` that also keeps, per answer, when it was sent, its latency, and the
    middles with the text they were offered in (checked after the level)."""

    def __init__(self, client: LanguageClient, args: argparse.Namespace, tally: Tally) -> None:
        super().__init__(client, args, tally)
        self.origin = 0.0  # the level's start (perf_counter: one clock for every process)
        #: (seconds since the level's start, latency ms, with a suggestion)
        self.answers: list[tuple[float, float, bool]] = []
        self.middles: list[tuple[str, int, str]] = []  # (text, cursor offset, middle)

    async def request(self, uri: str, text: str, offset: int) -> None:
        await super().request(uri, text, offset)
        assert self.pending is not None
        _, sent, future = self.pending
        future.add_done_callback(lambda f: self._answered(f, sent, text, offset))

    def _answered(self, future: asyncio.Future[Any], sent: float, text: str, offset: int) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        latency = (time.perf_counter() - sent) * 1e3
        result = future.result()
        items = getattr(result, "items", result) or []
        self.answers.append((sent - self.origin, latency, bool(items)))
        for item in items:
            middle = item.insert_text if isinstance(item.insert_text, str) else ""
            self.middles.append((text, offset, middle))


@dataclass
class Editor:
    """One fimlsp process and its client."""

    index: int
    client: LanguageClient
    statuses: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    collecting: bool = False


def invalid_middle(text: str, offset: int, middle: str) -> str | None:
    """Why L + middle + R does not parse (None: it does)."""
    try:
        ast.parse(text[:offset] + middle + text[offset:])
    except (SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


async def start_editor(index: int, settings: dict[str, Any], log_dir: Path) -> Editor:
    """Start ``fimlsp --stdio`` (logging to its own file), initialize it with ``settings``
    and wait until its model (the server's) is ready."""
    client = LanguageClient("fimlsp-team-load", "1")
    editor = Editor(index, client)

    @client.feature(STATUS_NOTIFICATION)
    def on_status(params: Any) -> None:
        if editor.collecting:
            status = params._asdict() if hasattr(params, "_asdict") else dict(params)
            editor.statuses.append((time.perf_counter(), status))

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        pass  # the server's diagnostics: not part of what is measured

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(params: types.ShowMessageParams) -> None:
        pass  # an outage's warning: the fault level reads the status instead

    log_file = log_dir / f"fimlsp-editor-{index}.log"
    await client.start_io(
        sys.executable,
        "-m",
        "lsp_server.cli",
        "--stdio",
        "--log-file",
        str(log_file),
        preexec_fn=_die_with_parent,
    )
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options=settings
        )
    )
    client.initialized(types.InitializedParams())
    status = await _wait_ready(client, timeout=600)
    if status["state"] != EngineState.READY:
        raise RuntimeError(f"editor {index}: the server has no model: {status.get('message')}")
    return editor


def _die_with_parent() -> None:
    """In the editor's process before it runs: SIGTERM when its driver dies (Linux), so a
    driver killed mid-run leaves no fimlsp behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass(frozen=True)
class Typing:
    """What the editors of one level do (sent to every driver)."""

    editors: int
    start: float  # perf_counter time at which every editor starts
    seconds: float
    seed: int
    typing_ms: float
    cancel: str
    grace_s: float
    big_file: str | None = None  # editor 0 switches to it ...
    big_at_s: float = 0.0  # ... this long after the start


async def type_for(editor: Editor, job: Typing, files: Sequence[CorpusFile]) -> dict[str, Any]:
    """One editor's share of a level: typing sessions until the level ends; then its
    answers, statuses, remote counters and checked middles."""
    args = argparse.Namespace(
        requests=1 << 60, cancel=job.cancel, typing_ms=job.typing_ms, progress=False
    )
    tally = Tally()
    typist = LoadTypist(editor.client, args, tally)
    typist.origin = job.start
    mine = list(files)
    rng = random.Random(job.seed * 100_003 + editor.index)
    before = await _server_status(editor.client)
    editor.statuses.clear()
    await asyncio.sleep(max(0.0, job.start - time.perf_counter()))
    editor.collecting = True
    loop = asyncio.get_running_loop()
    # The end: no new keystroke after it (the Typist stops at its request limit).
    loop.call_at(loop.time() + job.seconds, setattr, args, "requests", 0)
    big = job.big_file is not None and editor.index == 0
    if big:
        assert job.big_file is not None
        switch = CorpusFile("big-file.py", Path(job.big_file))
        loop.call_at(loop.time() + job.big_at_s, mine.__setitem__, slice(None), [switch])
    hung = False
    try:
        typing = _type(editor.client, args, mine, rng, tally, typist)
        await asyncio.wait_for(typing, timeout=job.seconds + job.grace_s)
    except TimeoutError:
        hung = True
    editor.collecting = False
    try:
        after = await asyncio.wait_for(_server_status(editor.client), timeout=job.grace_s)
    except TimeoutError:
        after, hung = {}, True
    problems = [
        (why, text, off)
        for text, off, m in typist.middles
        if (why := invalid_middle(text, off, m)) is not None
    ]
    return {
        "editor": editor.index,
        "big_file": big,
        "hung": hung,
        "requests": tally.requests,
        "answered": tally.answered,
        "with_items": tally.with_items,
        "cancelled": tally.cancelled_replies,
        "errors": len(tally.errors),
        "error_samples": tally.errors[:3],
        "answers": typist.answers,
        "pause_latencies_ms": tally.pause_latencies_ms,
        "statuses": [_status_figures(t - job.start, s) for t, s in editor.statuses],
        "before": {k: before.get(k) for k in REMOTE_KEYS},
        "after": {k: after.get(k) for k in REMOTE_KEYS},
        "middles_checked": len(typist.middles),
        "middles_invalid": len(problems),
        "invalid_samples": [
            {"why": why, "line": text[:off].count("\n") + 1} for why, text, off in problems[:3]
        ],
    }


def _status_figures(t: float, status: dict[str, Any]) -> dict[str, Any]:
    keys = ("elapsedMs", "quotientMs", "parserMs", "tokens", "stopReason", "state")
    return {"t": round(t, 3), **{k: status[k] for k in keys if k in status}}


async def loop_lag(stop: asyncio.Event, lags: list[float], tick: float = 0.05) -> None:
    """How late the driver's event loop wakes (ms): high, and the latencies are the
    driver's, not the server's."""
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(tick)
        lags.append((time.perf_counter() - before - tick) * 1e3)


# --------------------------------------------------------------------------- a driver


def _driver_main(
    conn: Connection, indices: list[int], settings: dict[str, Any], paths: list[str], logs: str
) -> None:
    """A driver process: its editors, then levels as the main process asks."""
    try:
        asyncio.run(_driver(conn, indices, settings, paths, Path(logs)))
    except Exception:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


async def _driver(
    conn: Connection, indices: list[int], settings: dict[str, Any], paths: list[str], logs: Path
) -> None:
    files = [CorpusFile(Path(p).name, Path(p)) for p in paths]
    started = time.perf_counter()
    editors = await asyncio.gather(*(start_editor(i, settings, logs) for i in indices))
    conn.send(("ready", {"start_s": round(time.perf_counter() - started, 2)}))
    try:
        while True:
            command, job = await asyncio.to_thread(conn.recv)
            if command == "stop":
                break
            active = [e for e in editors if e.index < job.editors]
            stop, lags = asyncio.Event(), list[float]()
            watcher = asyncio.create_task(loop_lag(stop, lags))
            results = await asyncio.gather(*(type_for(e, job, files) for e in active))
            stop.set()
            await watcher
            conn.send(("done", {"editors": results, "loop_lag_ms": lags}))
    finally:
        for editor in editors:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(editor.client.shutdown_async(None), 10)
                editor.client.exit(None)
            with contextlib.suppress(Exception):
                await editor.client.stop()


class Drivers:
    """The driver processes (spawned: each runs its own asyncio loop)."""

    def __init__(
        self, n_editors: int, n_drivers: int, settings: dict[str, Any], paths: list[str], logs: Path
    ) -> None:
        context = multiprocessing.get_context("spawn")
        n_drivers = max(1, min(n_drivers, n_editors))
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for d in range(n_drivers):
            indices = list(range(d, n_editors, n_drivers))
            mine, theirs = context.Pipe()
            proc = context.Process(
                target=_driver_main, args=(theirs, indices, settings, paths, str(logs)), daemon=True
            )
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)
        self.start_s = [info["start_s"] for info in self._collect("ready", 900)]

    def _collect(self, expected: str, timeout: float) -> list[Any]:
        out = []
        for conn in self.conns:
            if not conn.poll(timeout):
                raise RuntimeError(f"a driver did not answer in {timeout:.0f} s")
            kind, payload = conn.recv()
            if kind != expected:
                raise RuntimeError(f"a driver failed:\n{payload}")
            out.append(payload)
        return out

    def start_level(self, job: Typing) -> None:
        for conn in self.conns:
            conn.send(("type", job))

    def results(self, job: Typing) -> tuple[list[dict[str, Any]], list[float]]:
        done = self._collect("done", job.seconds + 2 * job.grace_s + 120)
        editors = sorted((e for d in done for e in d["editors"]), key=lambda e: e["editor"])
        return editors, [lag for d in done for lag in d["loop_lag_ms"]]

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(("stop", None))
        for proc in self.procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()


# --------------------------------------------------------------------------- the server


class Server:
    """The one llama-server: started here (and restartable on its port), or given."""

    def __init__(self, args: argparse.Namespace, slots: int, logs: Path) -> None:
        self.url: str = args.server_url or ""
        self.running: LlamaServer | None = None
        self.slots = slots
        self._args = args
        self._logs = logs
        if not args.server_url:
            self.binary = Path(args.llama_server) if args.llama_server else build_llama_server()
            self._start_fitting()

    def _start(self, port: int | None = None) -> LlamaServer:
        a = self._args
        return start_llama_server(
            self.binary,
            self.model,
            parallel=self.slots,
            ctx_size=self.slots * a.slot_ctx,
            threads=a.threads,
            extra_args=shlex.split(a.server_args),
            port=port,
            log_dir=self._logs,
            startup_timeout=300,
        )

    @property
    def model(self) -> Path:
        return model_file(self._args.model)

    def _start_fitting(self) -> None:
        """As many slots as asked for, halved until the server starts (memory)."""
        while True:
            try:
                self.running = self._start()
                break
            except RuntimeError as exc:
                if self.slots <= 1:
                    raise
                print(
                    f"llama-server with {self.slots} slots failed; halving: {str(exc)[-300:]}",
                    file=sys.stderr,
                )
                self.slots //= 2
        self.url = self.running.url

    def restart(self) -> tuple[float, float]:
        """Stop the server (SIGTERM: it refuses new requests at once, then finishes) and
        start it again on its port: the times the stop was asked for and of its health."""
        assert self.running is not None
        asked = time.perf_counter()
        self.running.stop()
        self.running = self._start(port=self.running.port)
        return asked, time.perf_counter()

    def metrics(self) -> dict[str, float]:
        """llama-server's Prometheus counters and gauges ({} where /metrics is off)."""
        try:
            with urllib.request.urlopen(self.url + "/metrics", timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return {}
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("llamacpp:") and " " in line:
                name, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    out[name.removeprefix("llamacpp:")] = float(value)
        if "n_busy_slots_per_decode" in out and "n_decode_total" in out:
            out["busy_slot_decodes"] = out["n_busy_slots_per_decode"] * out["n_decode_total"]
        return out

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()


def model_file(spec: str) -> Path:
    """``tiny``: bench.remote's tiny random-weight model; ``tiny-stopping``: the same, with
    the end token and closers favoured (``testmodels.tiny.STOPPING_MODEL``: it completes);
    else a GGUF path."""
    if spec in ("tiny", "tiny-stopping"):
        from testmodels.tiny import STOPPING_MODEL, tiny_model_cached

        return tiny_model_cached("starcoder", **(STOPPING_MODEL if spec != "tiny" else {}))
    path = Path(spec).expanduser()
    if not path.is_file():
        raise SystemExit(f"--model {spec}: no such file")
    return path


def metric_deltas(
    segments: Sequence[tuple[dict[str, float], dict[str, float]]],
) -> dict[str, float]:
    """Counter differences summed over (before, after) pairs: one pair per server life."""
    return {
        k: sum(after.get(k, 0.0) - before.get(k, 0.0) for before, after in segments)
        for k in METRIC_COUNTERS
    }


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine (/proc/stat), for the level's CPU share."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


# --------------------------------------------------------------------------- figures


def _ms(values: Sequence[float], q: float) -> float | None:
    value = percentile(values, q)
    return None if value is None else round(value, 1)


def _remote_sent(editor: dict[str, Any], key: str) -> int:
    """Requests an editor's backend sent in the level; a counter that went down was
    reset by a reopened backend (after a restart), and counts from 0."""
    before, after = editor["before"].get(key), editor["after"].get(key)
    if after is None:
        return 0
    return int(after) if before is None or after < before else int(after - before)


def level_row(
    job: Typing,
    editors: list[dict[str, Any]],
    lags: list[float],
    metrics: dict[str, float],
    wall_s: float,
    cpu: float | None,
) -> dict[str, Any]:
    """One JSON row: the figures of a level (see the module docstring)."""
    latencies = [ms for e in editors for _, ms, _ in e["answers"]]
    with_items = sum(e["with_items"] for e in editors)
    answered = sum(e["answered"] for e in editors)
    sent = {k: sum(_remote_sent(e, k) for e in editors) for k in REMOTE_KEYS}
    generating = [s for e in editors for s in e["statuses"] if s.get("elapsedMs") and "tokens" in s]
    shares = [
        (s.get("quotientMs", 0.0) + s.get("parserMs", 0.0)) / s["elapsedMs"] for s in generating
    ]
    editor_p95 = [_ms([ms for _, ms, _ in e["answers"]], 95) for e in editors if e["answers"]]
    checked = sum(e["middles_checked"] for e in editors)
    invalid = sum(e["middles_invalid"] for e in editors)
    tokens = metrics.get("tokens_predicted_total", 0.0)
    prompt = metrics.get("prompt_tokens_total", 0.0)
    cached = metrics.get("prompt_tokens_cached_total", 0.0)
    decodes = metrics.get("n_decode_total", 0.0)
    return {
        "editors": job.editors,
        "seconds": job.seconds,
        "requests": sum(e["requests"] for e in editors),
        "answered": answered,
        "cancelled": sum(e["cancelled"] for e in editors),
        "errors": sum(e["errors"] for e in editors),
        "error_samples": [s for e in editors for s in e["error_samples"]][:3],
        "hung_editors": sum(e["hung"] for e in editors),
        "latency_p50_ms": _ms(latencies, 50),
        "latency_p95_ms": _ms(latencies, 95),
        "latency_p99_ms": _ms(latencies, 99),
        "latency_max_ms": _ms(latencies, 100),
        "pause_latency_p50_ms": _ms([ms for e in editors for ms in e["pause_latencies_ms"]], 50),
        "pause_latency_p95_ms": _ms([ms for e in editors for ms in e["pause_latencies_ms"]], 95),
        "worst_editor_p95_ms": max((p for p in editor_p95 if p is not None), default=None),
        "completions": with_items,
        "answered_with_completion": round(with_items / answered, 3) if answered else None,
        "server_requests": sent["remoteRequests"],
        "requests_per_completion": round(sent["remoteRequests"] / with_items, 2)
        if with_items
        else None,
        "generations": sent["remoteGenerations"],
        "rejected_tokens": sent["remoteRejected"],
        "probes": sent["remoteProbes"],
        "prefills": sent["remotePrefills"],
        "server_tokens_per_s": round(tokens / wall_s, 1) if metrics else None,
        "server_prompt_tokens_per_s": round(prompt / wall_s, 1) if metrics else None,
        "prompt_cached_share": round(cached / (cached + prompt), 3) if cached + prompt else None,
        "busy_slots_per_decode": round(metrics.get("busy_slot_decodes", 0.0) / decodes, 2)
        if decodes
        else None,
        "client_parser_share": round(statistics.median(shares), 3) if shares else None,
        "client_parser_share_p95": round(percentile(shares, 95) or 0.0, 3) if shares else None,
        "stop_reasons": dict(
            Counter(s.get("stopReason") for e in editors for s in e["statuses"]).most_common()
        ),
        "middles_checked": checked,
        "middles_invalid": invalid,
        "invalid_samples": [s for e in editors for s in e["invalid_samples"]][:3],
        "valid": invalid == 0,
        "driver_loop_lag_p95_ms": _ms(lags, 95),
        "machine_cpu_busy": cpu,
        "wall_s": round(wall_s, 1),
    }


def fault_figures(
    editors: list[dict[str, Any]], big_at: float, restart: tuple[float, float] | None, end: float
) -> dict[str, Any]:
    """The fault level's windows: the other editors' latencies before the big file, with
    it, and after the server came back; the big file's own; recovery after the restart."""
    others = [e for e in editors if not e["big_file"]]
    big = [e for e in editors if e["big_file"]]

    def window(group: list[dict[str, Any]], lo: float, hi: float) -> dict[str, Any]:
        ms = [m for e in group for t, m, _ in e["answers"] if lo <= t < hi]
        items = sum(1 for e in group for t, _, i in e["answers"] if lo <= t < hi and i)
        why = Counter(
            f"{s.get('state')}/{s.get('stopReason')}"
            for e in group
            for s in e["statuses"]
            if lo <= s["t"] < hi
        )
        return {
            "from_s": round(lo, 1),
            "to_s": round(hi, 1),
            "answered": len(ms),
            "with_completion": items,
            "p50_ms": _ms(ms, 50),
            "p95_ms": _ms(ms, 95),
            "p99_ms": _ms(ms, 99),
            "states": dict(why.most_common()),
        }

    restart_at = restart[0] if restart else end
    out: dict[str, Any] = {
        "big_file_at_s": round(big_at, 1),
        "others_before": window(others, 0.0, big_at),
        "others_with_big_file": window(others, big_at, restart_at),
        "big_file_editor": window(big, big_at, restart_at),
    }
    if restart is not None:
        down, up = restart

        def first_after(times: list[float]) -> float | None:
            later = [t - up for t in times if t >= up]
            return min(later) if later else None

        # Back: the editor's fimlsp answered from the model again (state ready);
        # served: it got a completion. Seconds after the server's health came back.
        back = [
            first_after([s["t"] for s in e["statuses"] if s.get("state") == "ready"])
            for e in editors
        ]
        served = [first_after([t for t, _, items in e["answers"] if items]) for e in editors]
        back_s = [b for b in back if b is not None]
        served_s = [f for f in served if f is not None]
        out |= {
            "restart_at_s": round(down, 1),
            "server_back_at_s": round(up, 1),
            "server_down_s": round(up - down, 2),
            "everyone_during_restart": window(editors, down, up),
            "others_after_restart": window(others, up, end),
            "editors_total": len(editors),
            "editors_recovered": len(back_s),
            "recovery_s_p50": round(statistics.median(back_s), 2) if back_s else None,
            "recovery_s_max": round(max(back_s), 2) if back_s else None,
            "editors_with_completion_after": len(served_s),
            "first_completion_s_p50": round(statistics.median(served_s), 2) if served_s else None,
            "first_completion_s_max": round(max(served_s), 2) if served_s else None,
        }
    return out


# --------------------------------------------------------------------------- the run


def big_file(files: Sequence[CorpusFile], size: int, into: Path) -> Path:
    """A Python file of about ``size`` bytes that parses: whole corpus files that parse on
    their own (none with a ``__future__`` import), one after another, a comment to fill."""
    parts, total = [], 0
    for cf in files:
        try:
            text = cf.path.read_text(encoding="utf-8")
            if "__future__" in text:
                continue
            ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        piece = text if text.endswith("\n") else text + "\n"
        if total + len(piece.encode()) > size - 100:
            continue
        parts.append(piece)
        total += len(piece.encode())
        if total > size - 1000:
            break
    fill = size - total - 1
    parts.append("#" + "x" * max(0, fill - 1) + "\n" if fill > 0 else "")
    path = into / "big_file.py"
    path.write_text("".join(parts), encoding="utf-8")
    ast.parse(path.read_text(encoding="utf-8"))
    return path


def editor_settings(args: argparse.Namespace, url: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "model": url,
        "serverApi": args.server_api,
        "maxTokens": args.max_tokens,
        "deadlineMs": args.deadline_ms,
        "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
    if args.model_vocab:
        settings["modelVocab"] = str(Path(args.model_vocab).resolve())
    for item in args.setting:
        key, _, value = item.partition("=")
        settings[key] = json.loads(value)
    return settings


def corpus_paths(args: argparse.Namespace) -> list[CorpusFile]:
    files = discover(args.paths) if args.paths else stdlib_corpus()
    return [f for f in files if "test" not in f.name.split("/")[0]] or files


def run_level(
    drivers: Drivers,
    server: Server,
    args: argparse.Namespace,
    editors: int,
    seconds: float,
    big: Path | None = None,
    restart_at_s: float | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """One level: every driver's editors below ``editors`` type for ``seconds``; the
    server restarted ``restart_at_s`` in when asked (and started here)."""
    job = Typing(
        editors=editors,
        start=time.perf_counter() + 1.0,
        seconds=seconds,
        seed=args.seed + editors if seed is None else seed,
        typing_ms=args.typing_ms,
        cancel=args.cancel,
        grace_s=args.deadline_ms / 1e3 + HANG_GRACE_S,
        big_file=str(big) if big else None,
        big_at_s=seconds * BIG_FILE_AT,
    )
    before, cpu_before = server.metrics(), cpu_busy()
    drivers.start_level(job)
    segments, restart = [], None
    if restart_at_s is not None and server.running is not None:
        time.sleep(max(0.0, job.start + restart_at_s - time.perf_counter()))
        mid = server.metrics()
        down, up = server.restart()
        segments.append((before, mid))
        before, restart = {}, (down - job.start, up - job.start)
    results, lags = drivers.results(job)
    after, cpu_after = server.metrics(), cpu_busy()
    segments.append((before, after))
    wall = seconds  # the typing time: the rate while editors type
    busy = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
    row = level_row(
        job,
        results,
        lags,
        metric_deltas(segments) if after else {},
        wall,
        round(busy[0] / busy[1], 3) if busy[1] else None,
    )
    row["kind"] = "faults" if big or restart_at_s is not None else "load"
    if row["kind"] == "faults":
        row["faults"] = fault_figures(results, job.big_at_s, restart, seconds)
    return row


def _save(args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Write ``--out`` (after every level: a run stopped by a time limit keeps its rows)."""
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")


def run(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(n) for n in args.editors.split(",") if n.strip()]
    fault_editors = args.fault_editors or max([n for n in levels if n <= 16] or [min(levels)])
    most = max([*levels, fault_editors if args.faults else 0])
    started = time.perf_counter()
    files = corpus_paths(args)
    rng = random.Random(args.seed)
    paths = [str(f.path) for f in rng.sample(files, min(len(files), 400))]
    logs = Path(tempfile.mkdtemp(prefix="team-load-"))
    server = Server(args, args.parallel or most, logs)
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "model": args.model if not args.server_url else None,
        "server_url": args.server_url,
        "server_api": args.server_api,
        "slots": server.slots,
        "slot_ctx": args.slot_ctx,
        "server_args": args.server_args,
        "max_tokens": args.max_tokens,
        "deadline_ms": args.deadline_ms,
        "typing_ms": args.typing_ms,
        "cancel": args.cancel,
        "seed": args.seed,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "logs": str(logs),
    }
    try:
        settings = editor_settings(args, server.url)
        launched = time.perf_counter()
        drivers = Drivers(most, args.drivers or default_drivers(most), settings, paths, logs)
        meta["drivers"] = len(drivers.conns)
        meta["editors_start_s"] = round(time.perf_counter() - launched, 1)
        try:
            if args.warmup_s and _fits(args, started, args.warmup_s, meta, "warm-up"):
                # every editor once, unrecorded in the load rows: first-use costs (parser
                # tables, token index, the server's first prompts) out of the levels
                warm = run_level(drivers, server, args, most, args.warmup_s, seed=args.seed - 1)
                rows.append({**warm, "kind": "warmup", "slots": server.slots})
                _progress(rows[-1])
            for n in levels:
                if not _fits(args, started, args.seconds, meta, f"{n} editors"):
                    continue
                rows.append(run_level(drivers, server, args, n, args.seconds))
                rows[-1]["slots"] = server.slots
                _progress(rows[-1])
                _save(args, {"meta": meta, "rows": rows})
            if args.faults and _fits(args, started, args.fault_seconds, meta, "faults"):
                big = big_file(
                    [CorpusFile(Path(p).name, Path(p)) for p in paths], args.big_file_bytes, logs
                )
                restart = args.fault_seconds * RESTART_AT if server.running is not None else None
                row = run_level(
                    drivers, server, args, fault_editors, args.fault_seconds, big, restart
                )
                row["slots"] = server.slots
                row["faults"]["big_file_bytes"] = big.stat().st_size
                rows.append(row)
                _progress(row)
                _save(args, {"meta": meta, "rows": rows})
        finally:
            drivers.close()
    finally:
        server.stop()
    return {"meta": meta, "rows": rows}


#: Seconds a level costs beyond its typing time (start, the last answers, the checks).
LEVEL_OVERHEAD_S = 12.0


def _fits(
    args: argparse.Namespace, started: float, seconds: float, meta: dict[str, Any], what: str
) -> bool:
    """Whether a level of ``seconds`` fits in what is left of ``--budget-s`` (else it is
    skipped, and ``meta["skipped"]`` says so)."""
    if not args.budget_s:
        return True
    left = args.budget_s - (time.perf_counter() - started)
    if left >= seconds + LEVEL_OVERHEAD_S:
        return True
    meta.setdefault("skipped", []).append(what)
    print(f"bench.team_load: SKIPPED {what}: {left:.0f} s of the budget left", file=sys.stderr)
    return False


def default_drivers(editors: int) -> int:
    """One driver process per 16 editors, at most a quarter of the cores."""
    return max(1, min(math.ceil(editors / 16), (os.cpu_count() or 1) // 4))


def _progress(row: dict[str, Any]) -> None:
    print(summary_line(row), file=sys.stderr, flush=True)


def summary_line(row: dict[str, Any]) -> str:
    return (
        f"{row['kind']} {row['editors']} editors: p50 {row['latency_p50_ms']} p95 "
        f"{row['latency_p95_ms']} p99 {row['latency_p99_ms']} ms; with completion "
        f"{row['answered_with_completion']} of {row['answered']}; requests/completion "
        f"{row['requests_per_completion']}; server {row['server_tokens_per_s']} tok/s; "
        f"parser share {row['client_parser_share']}; valid {row['valid']} "
        f"({row['middles_checked']} checked); hung {row['hung_editors']}; errors {row['errors']}"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.team_load",
        description="Many fimlsp editors typing at once against one inference server.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATHS",
        help="files or directories (default: the standard library without its tests)",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--model", help="a GGUF to serve (or tiny), with a llama-server started here"
    )
    where.add_argument("--server-url", help="a running llama-server (restarts are skipped)")
    p.add_argument("--llama-server", help="the binary (default: bench.llama_server's CPU build)")
    p.add_argument("--editors", default="1,4,16,64", help="load levels (default 1,4,16,64)")
    p.add_argument("--seconds", type=float, default=30.0, help="typing time per level")
    p.add_argument("--server-api", choices=["llama.cpp", "openai"], default="llama.cpp")
    p.add_argument(
        "--parallel",
        type=int,
        default=0,
        help="slots (default: the most editors, halved until the server starts)",
    )
    p.add_argument("--slot-ctx", type=int, default=4096, help="context per slot (4096)")
    p.add_argument("--threads", type=int, default=1, help="llama-server threads (1)")
    p.add_argument(
        "--server-args", default="", help="more llama-server arguments ('--n-gpu-layers 999')"
    )
    p.add_argument("--drivers", type=int, default=0, help="client processes (default: 1 per 16)")
    p.add_argument(
        "--warmup-s",
        type=float,
        default=0.0,
        help="first, every editor types this long, reported apart (kind warmup)",
    )
    p.add_argument("--faults", action="store_true", help="add the fault level")
    p.add_argument("--fault-editors", type=int, default=0, help="default: the largest level <= 16")
    p.add_argument("--fault-seconds", type=float, default=40.0)
    p.add_argument("--big-file-bytes", type=int, default=2_000_000)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--deadline-ms", type=int, default=3000)
    p.add_argument("--typing-ms", type=float, default=80.0)
    p.add_argument("--cancel", choices=["explicit", "supersede"], default="explicit")
    p.add_argument(
        "--model-vocab",
        help="modelVocab for the editors (default: none, the server describes its vocabulary)",
    )
    p.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="another fimlsp setting for every editor",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--budget-s",
        type=float,
        default=0.0,
        help="skip the levels that would end past this many seconds (0: none)",
    )
    p.add_argument("--out", type=Path, help="write the JSON here")
    p.add_argument("--json", action="store_true", help="print the JSON")
    return p


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    try:
        report = run(args)
    except (BuildUnavailable, BuildFailed, RuntimeError) as exc:
        print(f"bench.team_load: {exc}", file=sys.stderr)
        return 2
    _save(args, report)
    if args.json:
        print(json.dumps(report, indent=1), file=out)
    else:
        print("\n".join(summary_line(r) for r in report["rows"]), file=out)
    rows = report["rows"]
    bad = any(not r["valid"] or r["hung_editors"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
