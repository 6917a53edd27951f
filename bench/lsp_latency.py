"""How quickly the language server answers while someone types.

Usage::

    python -m bench.lsp_latency [PATHS...] [--model SPEC] [--requests N] [--seed S]
        [--max-tokens N] [--deadline-ms MS] [--typing-ms MS] [--cancel explicit|supersede]
        [--threads N] [--cold-open N] [--cold-package NAME] [--cold-pause-ms MS] [--json]

The real server (``python -m lsp_server.cli --stdio``) runs in a subprocess and a
client replays *typing sessions* over files of the corpus (PATHS, default the
standard library): a random line of a random file is cleared from a random
column to its end, then typed back one character at a time, ``--typing-ms``
apart, with an inline completion request after every keystroke, as editors send
them.  At the end of each word (before a space or punctuation) the typist pauses
until the answer to the last request arrives, as people pause to read a
suggestion.  Requests still running when the next keystroke comes are cancelled
with ``$/cancelRequest`` (``--cancel explicit``, what VS Code does) or left to be
superseded by the next request for the same document (``--cancel supersede``,
what Neovim does).

Reported: latency from request to response (p50 / p95) over requests answered
with a completion list, split into those answered at a pause and all of them;
how many requests were cancelled and how many of those the server stopped
(``served``/``cancelled`` counters of ``fimlsp/serverStatus``); error responses
other than cancellation; the server's resident memory after all requests; the share
of prompt tokens the requests read themselves (the rest came from the KV cache) and
the CPU time the server spent reading ahead.

Then the *cold-open* case, reported separately: ``--cold-open`` files of 300 to 5,000
lines from a package the other benchmarks never read (``--cold-package``, by default
``hypothesis``, a development dependency), each opened, left alone for
``--cold-pause-ms`` (2 s), then edited at a random line as a user starting to type
would (the line's end cleared from a random column, one character typed) with one
request at once: the first impression of a file.

The server runs with ``--threads`` llama.cpp threads, 1 by default: the development
machine has two cores, shared with the benchmark's client.  Every run is seeded
(``--seed``), so the same command replays the same keystrokes; ``--json`` writes one
object with the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from bench.grammar_coverage import CorpusFile, discover, percentile, stdlib_corpus
from lexer.text import count_line_ends, line_end_offsets
from lsp_server.status import SERVER_STATUS_REQUEST, STATUS_NOTIFICATION, EngineState

_WORD_END = set(" .,:;()[]{}=+-*/%<>!\"'")


def lsp_position(text: str, offset: int) -> types.Position:
    """The protocol position (UTF-16 columns) of a string offset."""
    before = text[:offset]
    ends = line_end_offsets(before)
    line, line_start = len(ends), (ends[-1] if ends else 0)
    column = len(before[line_start:].encode("utf-16-le")) // 2
    return types.Position(line=line, character=column)


@dataclass
class Tally:
    """What the client saw."""

    latencies_ms: list[float] = field(default_factory=list)  # answered with a list
    pause_latencies_ms: list[float] = field(default_factory=list)  # the ones waited for
    cancel_ack_ms: list[float] = field(default_factory=list)  # cancelled: time to the reply
    requests: int = 0
    answered: int = 0
    with_items: int = 0
    cancel_sent: int = 0
    cancelled_replies: int = 0
    errors: list[str] = field(default_factory=list)
    sessions: int = 0


class Typist:
    """Replays typing sessions against one server."""

    def __init__(self, client: LanguageClient, args: argparse.Namespace, tally: Tally):
        self.client = client
        self.args = args
        self.tally = tally
        self.pending: tuple[str, float, asyncio.Future[Any]] | None = None
        self.next_id = 0

    async def request(self, uri: str, text: str, offset: int) -> None:
        """Send an inline completion request (cancelling the previous one if asked)."""
        if self.pending is not None and not self.pending[2].done():
            if self.args.cancel == "explicit":
                self.client.protocol.notify(
                    types.CANCEL_REQUEST, types.CancelParams(id=self.pending[0])
                )
                self.tally.cancel_sent += 1
        self.next_id += 1
        msg_id = f"bench-{self.next_id}"
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=lsp_position(text, offset),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        sent = time.perf_counter()
        future = asyncio.ensure_future(
            self.client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
            )
        )
        future.add_done_callback(lambda f: self._done(f, sent))
        self.pending = (msg_id, sent, future)
        self.tally.requests += 1

    def _done(self, future: asyncio.Future[Any], sent: float) -> None:
        elapsed = (time.perf_counter() - sent) * 1e3
        exc = future.exception()
        if exc is not None:
            if "cancel" in str(exc).lower():
                self.tally.cancelled_replies += 1
                self.tally.cancel_ack_ms.append(elapsed)
            else:
                self.tally.errors.append(str(exc)[:200])
            return
        self.tally.answered += 1
        self.tally.latencies_ms.append(elapsed)
        result = future.result()
        items = getattr(result, "items", result) or []
        if items:
            self.tally.with_items += 1

    async def pause(self) -> None:
        """Wait for the answer to the last request, as a reader of the suggestion would."""
        if self.pending is None:
            return
        _, sent, future = self.pending
        try:
            await future
        except Exception:
            return
        self.tally.pause_latencies_ms.append((time.perf_counter() - sent) * 1e3)

    async def session(self, uri: str, text: str, rng: random.Random, version: int) -> int:
        """Clear the end of a random line and type it back; returns the last version."""
        place = typing_place(text, rng)
        if place is None:
            return version
        start, typed = place
        # Clear what will be typed.
        version += 1
        self.change(uri, text, start, start + len(typed), "", version)
        text = text[:start] + text[start + len(typed) :]
        self.tally.sessions += 1
        for i, char in enumerate(typed):
            if self.tally.requests >= self.args.requests:
                break
            version += 1
            self.change(uri, text, start + i, start + i, char, version)
            text = text[: start + i] + char + text[start + i :]
            await self.request(uri, text, start + i + 1)
            if char in _WORD_END or i == len(typed) - 1:
                await self.pause()
            else:
                await asyncio.sleep(self.args.typing_ms / 1e3)
        await self.pause()
        return version

    def change(self, uri: str, text: str, start: int, end: int, new: str, version: int) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=lsp_position(text, start), end=lsp_position(text, end)
                        ),
                        text=new,
                    )
                ],
            )
        )


def typing_place(text: str, rng: random.Random) -> tuple[int, str] | None:
    """Where a typist starts on a random line (8 characters of code at least), and what
    it types: from a random column after the indentation to the line's end."""
    starts = [0, *line_end_offsets(text)]
    candidates = [
        i for i in range(len(starts) - 1) if len(text[starts[i] : starts[i + 1]].strip()) >= 8
    ]
    if not candidates:
        return None
    line = rng.choice(candidates)
    line_text = text[starts[line] : starts[line + 1]].rstrip("\r\n")
    indent = len(line_text) - len(line_text.lstrip())
    column = rng.randrange(indent, len(line_text))
    return starts[line] + column, line_text[column:]


async def _server_status(client: LanguageClient) -> dict[str, Any]:
    result = await client.protocol.send_request_async(SERVER_STATUS_REQUEST, {})
    if hasattr(result, "_asdict"):
        result = result._asdict()
    return dict(result)


async def _wait_ready(client: LanguageClient, timeout: float) -> dict[str, Any]:
    deadline = time.perf_counter() + timeout
    while True:
        status = await _server_status(client)
        if status["state"] != EngineState.LOADING:
            return status
        if time.perf_counter() > deadline:
            raise RuntimeError(f"the model did not load in {timeout:.0f} s: {status}")
        await asyncio.sleep(0.2)


def _load_corpus(args: argparse.Namespace) -> list[CorpusFile]:
    files = discover(args.paths) if args.paths else stdlib_corpus()
    return [f for f in files if "test" not in f.name.split("/")[0]] or files


async def _launch(client: LanguageClient) -> None:
    """Start ``fimlsp --stdio`` (logging to a file: its stderr is not read)."""
    log_file = Path(tempfile.gettempdir()) / f"fimlsp-bench-{os.getpid()}.log"
    await client.start_io(
        sys.executable, "-m", "lsp_server.cli", "--stdio", "--log-file", str(log_file)
    )


async def _initialize(client: LanguageClient, args: argparse.Namespace) -> None:
    """Initialize the server with the benchmark's settings and wait for its model."""
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={
                "model": args.model,
                "maxTokens": args.max_tokens,
                "deadlineMs": args.deadline_ms,
                "threads": args.threads,
                "projectContext": args.project_context,
                "knownNames": args.known_names,
            },
        )
    )
    client.initialized(types.InitializedParams())
    status = await _wait_ready(client, timeout=600)
    if status["state"] != EngineState.READY:
        raise RuntimeError(f"the server has no model: {status.get('message')}")


async def _type(
    client: LanguageClient,
    args: argparse.Namespace,
    files: Sequence[CorpusFile],
    rng: random.Random,
    tally: Tally,
    typist: Typist | None = None,
) -> None:
    """Typing sessions in random files of the corpus until ``--requests`` are sent
    (``typist``: one that records more, as ``bench.team_load``'s does)."""
    typist = typist or Typist(client, args, tally)
    opened: set[str] = set()
    while tally.requests < args.requests:
        corpus_file = rng.choice(files)
        try:
            text = corpus_file.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        uri = corpus_file.path.resolve().as_uri()
        if uri in opened:  # fresh copy: close and reopen
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=uri)
                )
            )
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        opened.add(uri)
        await typist.session(uri, text, rng, 1)
        if args.progress:
            print(f"\r{tally.requests}/{args.requests} requests", end="", file=sys.stderr)
    if args.progress:
        print(file=sys.stderr)
    await typist.pause()  # let the last reply arrive


def cold_corpus(package: str, count: int, rng: random.Random) -> list[Path]:
    """``count`` files of 300 to 5,000 lines from ``package``'s sources, drawn at random."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"--cold-package {package}: not an installed package")
    root = Path(next(iter(spec.submodule_search_locations)))
    fitting = []
    for path in sorted(root.rglob("*.py")):
        try:
            lines = count_line_ends(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if 300 <= lines <= 5000:
            fitting.append(path)
    if not fitting:
        raise RuntimeError(f"--cold-package {package}: no file of 300 to 5,000 lines")
    return rng.sample(fitting, min(count, len(fitting)))


@dataclass
class ColdTally:
    """The cold-open case: one request per newly opened file."""

    files: list[str] = field(default_factory=list)
    #: Per file: where the request was, its latency, and its status's main figures.
    requests: list[dict[str, Any]] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    with_items: int = 0
    errors: list[str] = field(default_factory=list)


_STATUS_KEYS = ("stopReason", "tokens", "quotientMs", "promptMs", "generateMs",
                "promptTokens", "promptEvaluated", "contextTokens", "parserMs", "lineMode",
                "steeredTokens", "restarted", "stayInside")  # fmt: skip


async def _cold_open(
    client: LanguageClient,
    args: argparse.Namespace,
    rng: random.Random,
    tally: ColdTally,
    statuses: Sequence[dict[str, Any]],
) -> None:
    """Open each file, wait, start typing at a random line, and time the one request."""
    for path in cold_corpus(args.cold_package, args.cold_open, rng):
        text = path.read_text(encoding="utf-8")
        place = typing_place(text, rng)
        if place is None:
            continue
        uri = path.resolve().as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=text
                )
            )
        )
        await asyncio.sleep(args.cold_pause_ms / 1e3)
        start, typed = place
        typist = Typist(client, args, Tally())
        typist.change(uri, text, start, start + len(typed), typed[0], 2)
        text = text[:start] + typed[0] + text[start + len(typed) :]
        where = f"{path.parent.name}/{path.name}:{count_line_ends(text[:start]) + 1}"
        tally.files.append(where)
        seen = len(statuses)
        sent = time.perf_counter()
        try:
            result = await client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION,
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=lsp_position(text, start + 1),
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Automatic
                    ),
                ),
            )
        except Exception as exc:
            tally.errors.append(str(exc)[:200])
        else:
            latency = (time.perf_counter() - sent) * 1e3
            tally.latencies_ms.append(latency)
            if getattr(result, "items", result):
                tally.with_items += 1
            mine = [st for st in statuses[seen:] if st.get("uri") == uri]
            figures = {k: mine[-1].get(k) for k in _STATUS_KEYS} if mine else {}
            tally.requests.append({"where": where, "ms": round(latency, 1), **figures})
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    files = _load_corpus(args) if args.requests else []
    tally = Tally()
    cold = ColdTally()
    client = LanguageClient("fimlsp-bench", "1")
    statuses: list[dict[str, Any]] = []

    @client.feature(STATUS_NOTIFICATION)
    def on_status(params: Any) -> None:
        statuses.append(params._asdict() if hasattr(params, "_asdict") else dict(params))

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        pass  # the server's diagnostics: not part of what is measured

    load_before = os.getloadavg()
    await _launch(client)
    started = time.perf_counter()
    try:
        await _initialize(client, args)
        load_s = time.perf_counter() - started
        loaded = await _server_status(client)
        await _type(client, args, files, rng, tally)
        await asyncio.sleep(0.2)
        final = await _server_status(client)
        elapsed = time.perf_counter() - started
        typed_statuses = len(statuses)
        if args.cold_open:
            await _cold_open(client, args, random.Random(args.seed), cold, statuses)
        after_cold = await _server_status(client)
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    report = _report(args, tally, statuses[:typed_statuses], final, load_s, elapsed)
    report["read_ahead_cpu_ms"] = _delta(final, loaded, "readAheadCpuMs")
    report["read_ahead_tokens"] = _delta(final, loaded, "readAheadTokens")
    report["prompt_tokens_per_s_measured"] = final.get("promptTokensPerSecond")
    report["load_average_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    if args.cold_open:
        report["cold_open"] = _cold_report(args, cold, after_cold, final)
    return report


def _delta(after: dict[str, Any], before: dict[str, Any], key: str) -> float | None:
    if key not in after or key not in before:
        return None
    return round(float(after[key]) - float(before[key]), 1)


def _cold_report(
    args: argparse.Namespace, cold: ColdTally, after: dict[str, Any], before: dict[str, Any]
) -> dict[str, Any]:
    return {
        "package": args.cold_package,
        "pause_ms": args.cold_pause_ms,
        "files": len(cold.files),
        "answered": len(cold.latencies_ms),
        "with_completion": cold.with_items,
        "latency_ms_p50": _ms(cold.latencies_ms, 50),
        "latency_ms_p95": _ms(cold.latencies_ms, 95),
        "latency_ms_max": _ms(cold.latencies_ms, 100),
        "errors": len(cold.errors),
        "error_samples": cold.errors[:5],
        "read_ahead_cpu_ms": _delta(after, before, "readAheadCpuMs"),
        "rss_mb_after": after.get("rssMb"),
        "engine_rss_mb_after": after.get("engineRssMb"),
        **_collector_figures(after),
        "requests": cold.requests,
    }


def _collector_figures(status: dict[str, Any]) -> dict[str, Any]:
    """The engine's garbage-collection counters in a server status
    (``lsp_server.collector``)."""
    return {
        "engine_gc_ms": status.get("gcMs"),
        "engine_gc_full": status.get("gcFullCollections"),
        "engine_gc_full_ms": status.get("gcFullMs"),
    }


def _median_of(statuses: Sequence[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the statuses that carry it (None: none do)."""
    values = [s[key] for s in statuses if s.get(key)]
    return statistics.median(values) if values else None


def _prompt_shares(statuses: Sequence[dict[str, Any]]) -> list[float]:
    """Per answered request that read a prompt: the share of its tokens it read itself."""
    return [
        s.get("promptEvaluated", 0) / s["promptTokens"] for s in statuses if s.get("promptTokens")
    ]


def _report(
    args: argparse.Namespace,
    tally: Tally,
    statuses: Sequence[dict[str, Any]],
    final: dict[str, Any],
    load_s: float,
    elapsed: float,
) -> dict[str, Any]:
    """The benchmark's figures: what the client saw and the server's counters at the end."""
    shares = _prompt_shares(statuses)
    tokens, evaluated = final.get("promptTokens"), final.get("promptEvaluated")
    return {
        "model": args.model,
        "llama_threads": args.threads,
        "requests": tally.requests,
        "sessions": tally.sessions,
        "answered": tally.answered,
        "with_completion": tally.with_items,
        "latency_ms_p50": _ms(tally.latencies_ms, 50),
        "latency_ms_p95": _ms(tally.latencies_ms, 95),
        "pause_latency_ms_p50": _ms(tally.pause_latencies_ms, 50),
        "pause_latency_ms_p95": _ms(tally.pause_latencies_ms, 95),
        "cancel_style": args.cancel,
        "cancel_sent": tally.cancel_sent,
        "cancelled": tally.cancelled_replies,
        "cancel_ack_ms_p50": _ms(tally.cancel_ack_ms, 50),
        "status_notifications": len(statuses),
        "prompt_tokens": tokens,
        "prompt_tokens_evaluated": evaluated,
        "prompt_share_evaluated": round(evaluated / tokens, 3) if tokens else None,
        "prompt_share_evaluated_p50": round(statistics.median(shares), 3) if shares else None,
        "prompt_share_evaluated_mean": round(statistics.mean(shares), 3) if shares else None,
        "project_context": args.project_context,
        "known_names": args.known_names,
        "with_project_context": sum(1 for s in statuses if s.get("contextTokens")),
        "context_tokens_p50": _median_of(statuses, "contextTokens"),
        "server_served": final.get("served"),
        "server_cancelled": final.get("cancelled"),
        "server_pending_after": final.get("pendingRequests"),
        "errors": len(tally.errors),
        "error_samples": tally.errors[:5],
        "rss_mb_after": final.get("rssMb"),
        "engine_rss_mb_after": final.get("engineRssMb"),
        **_collector_figures(final),
        "max_tokens": args.max_tokens,
        "deadline_ms": args.deadline_ms,
        "typing_ms": args.typing_ms,
        "seed": args.seed,
        "model_load_s": round(load_s, 2),
        "elapsed_s": round(elapsed, 1),
    }


def _ms(values: Sequence[float], q: float) -> float | None:
    value = percentile(values, q)
    return None if value is None else round(value, 1)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.lsp_latency",
        description="Replay typing sessions through the real server and time its answers.",
    )
    p.add_argument("paths", nargs="*", metavar="PATHS", help="files or directories "
                   "(default: the standard library without its tests)")  # fmt: skip
    p.add_argument("--model", default="default", help="GGUF path, hf://..., or default")
    p.add_argument("--requests", type=int, default=1000, metavar="N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=32, metavar="N")
    p.add_argument("--deadline-ms", type=int, default=3000, metavar="MS")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama.cpp threads (default 1: the 2-core development machine)",
    )
    p.add_argument("--typing-ms", type=float, default=80.0, metavar="MS",
                   help="time between keystrokes within a word (default 80)")  # fmt: skip
    p.add_argument("--cancel", choices=["explicit", "supersede"], default="explicit")
    p.add_argument(
        "--cold-open",
        type=int,
        default=30,
        metavar="N",
        help="files for the cold-open case (0: skip it; default 30)",
    )
    p.add_argument(
        "--cold-package",
        default="hypothesis",
        help="the package whose files the cold-open case opens",
    )
    p.add_argument(
        "--cold-pause-ms",
        type=float,
        default=2000.0,
        metavar="MS",
        help="time between opening a file and the request (default 2000)",
    )
    p.add_argument("--no-project-context", dest="project_context", action="store_false",
                   help="projectContext off (on by default; only models with a repository "
                   "format use it)")  # fmt: skip
    p.add_argument("--no-known-names", dest="known_names", action="store_false",
                   help="knownNames off (on by default)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def summary(r: dict[str, Any]) -> str:
    lines = [
        f"lsp latency: {r['requests']} requests in {r['sessions']} typing sessions, "
        f"model {r['model']}, {r['llama_threads']} llama.cpp thread(s), {r['elapsed_s']} s, "
        f"load {r['load_average_before_after']}",
        f"  answered   {r['answered']} ({r['with_completion']} with a completion); "
        f"latency p50 {r['latency_ms_p50']} ms, p95 {r['latency_ms_p95']} ms",
        f"  at pauses  p50 {r['pause_latency_ms_p50']} ms, p95 {r['pause_latency_ms_p95']} ms",
        f"  cancelled  {r['cancelled']} replies to {r['cancel_sent']} $/cancelRequest "
        f"({r['cancel_style']}); server stopped {r['server_cancelled']} of "
        f"{r['server_served']} requests; ack p50 {r['cancel_ack_ms_p50']} ms",
        f"  errors     {r['errors']}; memory after: front {r['rss_mb_after']} MB, engine "
        f"{r['engine_rss_mb_after']} MB",
        f"  prompt     {r['prompt_share_evaluated']} of {r['prompt_tokens']} prompt tokens "
        f"read by the requests (per request: median {r['prompt_share_evaluated_p50']}); "
        f"read-ahead {r['read_ahead_cpu_ms']} ms CPU, {r['read_ahead_tokens']} tokens; "
        f"{r['prompt_tokens_per_s_measured']} prompt tokens/s",
        f"  project    context {'on' if r['project_context'] else 'off'}: in "
        f"{r['with_project_context']} prompts, median {r['context_tokens_p50']} tokens",
    ]
    cold = r.get("cold_open")
    if cold:
        lines.append(
            f"cold open: {cold['files']} files of {cold['package']}, a request "
            f"{cold['pause_ms']:.0f} ms after opening: {cold['with_completion']} with a "
            f"completion; latency p50 {cold['latency_ms_p50']} ms, p95 {cold['latency_ms_p95']} "
            f"ms, max {cold['latency_ms_max']} ms; errors {cold['errors']}; read-ahead "
            f"{cold['read_ahead_cpu_ms']} ms CPU; memory after: front {cold['rss_mb_after']} MB, "
            f"engine {cold['engine_rss_mb_after']} MB"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    try:
        report = asyncio.run(run(args))
    except RuntimeError as exc:
        print(f"bench.lsp_latency: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=1), file=out)
    else:
        print(summary(report), file=out)
    cold_errors = report.get("cold_open", {}).get("errors", 0)
    return 1 if report["errors"] or cold_errors else 0


if __name__ == "__main__":
    sys.exit(main())
