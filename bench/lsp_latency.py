"""How quickly the language server answers while someone types.

Usage::

    python -m bench.lsp_latency [PATHS...] [--model SPEC] [--requests N] [--seed S]
        [--max-tokens N] [--deadline-ms MS] [--typing-ms MS] [--cancel explicit|supersede]
        [--json]

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
other than cancellation; and the server's resident memory after all requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
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
from lexer.text import line_end_offsets
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
        starts = [0, *line_end_offsets(text)]
        candidates = [
            i for i in range(len(starts) - 1) if len(text[starts[i] : starts[i + 1]].strip()) >= 8
        ]
        if not candidates:
            return version
        line = rng.choice(candidates)
        line_text = text[starts[line] : starts[line + 1]].rstrip("\r\n")
        indent = len(line_text) - len(line_text.lstrip())
        column = rng.randrange(indent, len(line_text))
        start = starts[line] + column
        typed = line_text[column:]
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
) -> None:
    """Typing sessions in random files of the corpus until ``--requests`` are sent."""
    typist = Typist(client, args, tally)
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


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    files = _load_corpus(args)
    tally = Tally()
    client = LanguageClient("fimlsp-bench", "1")
    statuses: list[Any] = []

    @client.feature(STATUS_NOTIFICATION)
    def on_status(params: Any) -> None:
        statuses.append(params)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        pass  # the server's diagnostics: not part of what is measured

    await _launch(client)
    started = time.perf_counter()
    try:
        await _initialize(client, args)
        load_s = time.perf_counter() - started
        await _type(client, args, files, rng, tally)
        await asyncio.sleep(0.2)
        final = await _server_status(client)
        elapsed = time.perf_counter() - started
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    return _report(args, tally, len(statuses), final, load_s, elapsed)


def _report(
    args: argparse.Namespace,
    tally: Tally,
    notifications: int,
    final: dict[str, Any],
    load_s: float,
    elapsed: float,
) -> dict[str, Any]:
    """The benchmark's figures: what the client saw and the server's counters at the end."""
    return {
        "model": args.model,
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
        "status_notifications": notifications,
        "server_served": final.get("served"),
        "server_cancelled": final.get("cancelled"),
        "server_pending_after": final.get("pendingRequests"),
        "errors": len(tally.errors),
        "error_samples": tally.errors[:5],
        "rss_mb_after": final.get("rssMb"),
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
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--typing-ms", type=float, default=80.0, metavar="MS",
                   help="time between keystrokes within a word (default 80)")  # fmt: skip
    p.add_argument("--cancel", choices=["explicit", "supersede"], default="explicit")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    return p


def summary(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"lsp latency: {r['requests']} requests in {r['sessions']} typing sessions, "
            f"model {r['model']}, {r['elapsed_s']} s",
            f"  answered   {r['answered']} ({r['with_completion']} with a completion); "
            f"latency p50 {r['latency_ms_p50']} ms, p95 {r['latency_ms_p95']} ms",
            f"  at pauses  p50 {r['pause_latency_ms_p50']} ms, p95 {r['pause_latency_ms_p95']} ms",
            f"  cancelled  {r['cancelled']} replies to {r['cancel_sent']} $/cancelRequest "
            f"({r['cancel_style']}); server stopped {r['server_cancelled']} of "
            f"{r['server_served']} requests; ack p50 {r['cancel_ack_ms_p50']} ms",
            f"  errors     {r['errors']}; server memory after: {r['rss_mb_after']} MB",
        ]
    )


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
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
