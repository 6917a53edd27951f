"""What the server's event loop pays per message, against document size and line length.

Usage::

    python -m bench.event_loop_costs [--quick] [--sizes 50000,500000,5000000] [--json]

Everything in the server that runs on the event loop thread, timed in process on
the real objects (median of a few runs, milliseconds): the guard's parse and
deserialization of a message with the server's handler (a body over
``transport.serving.LARGE_BODY`` is parsed on a thread first, as ``fimlsp`` does, and only what
follows runs on the loop; the loop's longest wait for the GIL while that thread
parses is its own row), ``Document.replace`` for a
one-character change (typing in one place, and alternating between the two ends of
the document), the completion request's snapshot (offset and position), the
completion item's word search and range, the document's SHA-256 (which
``fimlsp/serverStatus`` computes off the loop, once per text), settings merges, and
serializing a completion item.  The loop stalls for the sum of what one message
costs.  (The model, the quotients and decoding run in the engine process, so they
hold no GIL the loop waits for.)

Each row says which size varies; ``x`` is the ratio of the time at the largest size
to the time at the previous one, against the ratio of the sizes (linear: equal;
quadratic: its square).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from lsprotocol import types

from bench.lsp_fuzz import big_text, position_of
from lsp_server import completion_item as items
from lsp_server.documents import Document, cut_pieces
from lsp_server.request import Request
from lsp_server.server import create_server
from lsp_server.settings import Settings
from lsp_server.transport.guard import JsonRpcGuard
from lsp_server.transport.serving import LARGE_BODY


def timed(work: Callable[[], object], repeat: int = 5) -> float:
    """Median milliseconds of ``work``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def code_of_size(size: int, seed: int = 0) -> str:
    import random

    return big_text(random.Random(seed), size)[:size]


class Rows:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, name: str, varies: str, sizes: Sequence[int], ms: Sequence[float]) -> None:
        self.rows.append(
            {
                "operation": name,
                "varies": varies,
                "sizes": list(sizes),
                "ms": [round(m, 3) for m in ms],
            }
        )


def _message(method: str, params: Any, msg_id: int | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if msg_id is not None:
        body["id"] = msg_id
    return json.dumps(body).encode()


def _receive(protocol: Any) -> Callable[[bytes], None]:
    """The guard's handling of one body, as ``serve_stdio`` does it (a large body's
    parse, on a thread there, is done here too: untimed callers only)."""
    return lambda body: protocol.receive_body(body, _parsed_off_loop(protocol, body))


def _parsed_off_loop(protocol: Any, body: bytes) -> Any:
    return protocol.parse_large_body(body) if len(body) > LARGE_BODY else None


def on_loop_ms(protocol: Any, body: bytes, repeat: int = 5) -> float:
    """Median milliseconds the loop spends on one body (a large body's parse on the
    thread is not the loop's, and is left out of the clock)."""
    times = []
    for _ in range(repeat):
        parsed = _parsed_off_loop(protocol, body)
        started = time.perf_counter()
        protocol.receive_body(body, parsed)
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def per_message(rows: Rows, sizes: Sequence[int]) -> None:
    """The guard's parse, validation and dispatch, with the server's own handlers."""
    server = create_server()
    protocol = server.protocol
    protocol.set_writer(_Sink())
    assert isinstance(protocol, JsonRpcGuard)
    protocol.warm_up()  # as serve_stdio does before serving
    receive = _receive(protocol)
    receive(_message("initialize", {"processId": None, "capabilities": {}}, 1))
    opens, changes, first_changes, whole, far, captures, digests, gaps = ([] for _ in range(8))
    for size in sizes:
        text = code_of_size(size)
        uri = f"file:///cost-{size}.py"
        opened = _message(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        parse = functools.partial(_parsed_off_loop, protocol, opened)
        gap = statistics.median(longest_gap(parse)[0] for _ in range(3))  # each run: a max
        gaps.append(gap if len(opened) > LARGE_BODY else 0.0)
        opens.append(on_loop_ms(protocol, opened, 3))
        doc = server.documents[uri]
        middle = len(doc.text) // 2
        line, character = position_of(doc.text, middle)
        change = _change(uri, line, character)
        first_changes.append(on_loop_ms(protocol, change, 1))  # the first: the index is used
        changes.append(on_loop_ms(protocol, change))
        replaced = _message(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": 3},
                "contentChanges": [{"text": "# whole\n" + doc.text}],
            },
        )
        whole.append(on_loop_ms(protocol, replaced, 3))
        # Alternating between the first and the last line: the farthest apart two
        # edits can be (the worst case of the former lazily shifted line index).
        ends = [_change(uri, 0, 0), _change(uri, doc.line_count - 1, 0)]
        far.append(timed(lambda e=ends: [receive(b) for b in e]) / 2)  # type: ignore[misc]
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        capture_ms: list[float] = []
        for _ in range(5):
            receive(change)  # a change first, as typing does
            started = time.perf_counter()
            server.capture("id", params)
            capture_ms.append((time.perf_counter() - started) * 1e3)
            server.requests.cancel("id")  # nothing accumulates between samples
        captures.append(statistics.median(capture_ms))

        cut = cut_pieces(doc.text)

        def digest(d: Document = doc, c: tuple[list[str], list[list[int]]] = cut) -> None:
            d.set_text(d.text, c)  # a new text (cut ahead, as the server does): no digest
            d.sha256()

        digests.append(timed(digest))
    rows.add("didOpen: parse + handler", "document chars", sizes, opens)
    rows.add(
        "didOpen: longest loop gap while its body is parsed on the thread (median of 3)",
        "document chars",
        sizes,
        gaps,
    )
    rows.add(
        "first didChange after didOpen (1 char mid-document)",
        "document chars",
        sizes,
        first_changes,
    )
    rows.add("didChange of 1 char mid-document: parse + handler", "document chars", sizes, changes)
    rows.add("didChange with the whole text: parse + handler", "document chars", sizes, whole)
    rows.add("didChange alternating first and last line", "document chars", sizes, far)
    rows.add("completion request snapshot (after a change)", "document chars", sizes, captures)
    rows.add("SHA-256 of a new text (serverStatus: off the loop)", "document chars", sizes, digests)
    server.engine.shutdown(timeout=1)


def _change(uri: str, line: int, character: int) -> bytes:
    here = {"line": line, "character": character}
    return _message(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": here, "end": here}, "text": "x"}],
        },
    )


def per_line(rows: Rows, lengths: Sequence[int]) -> None:
    """A change and a position on one long line (a literal, a data table)."""
    ascii_ms: list[float] = []
    other_ms: list[float] = []
    offset_ms: list[float] = []
    first_ms: list[float] = []
    for length in lengths:
        for store, fill in ((ascii_ms, "a"), (other_ms, "é😀")):
            doc = Document("file:///line.py", 's = "' + fill * (length // len(fill)) + '"\n')
            at = (0, 5 + length // 2)
            if store is other_ms:  # before any position was asked: code units not counted
                first_ms.append(timed(lambda d=doc, a=at: d.offset_at(*a), 1))  # type: ignore[misc]
            store.append(timed(lambda d=doc, a=at: d.replace(a, a, "x")))  # type: ignore[misc]
            if store is other_ms:
                offset_ms.append(timed(lambda d=doc, a=at: d.offset_at(*a)))  # type: ignore[misc]
    rows.add("Document.replace on a long ASCII line", "line chars", lengths, ascii_ms)
    rows.add("Document.replace on a long line of é and emoji", "line chars", lengths, other_ms)
    rows.add("Document.offset_at (UTF-16) on that line", "line chars", lengths, offset_ms)
    rows.add("the first Document.offset_at on that line", "line chars", lengths, first_ms)


def completion_item(rows: Rows, words: Sequence[int], sizes: Sequence[int]) -> None:
    """The completion item: the word before the cursor and its range."""
    search_ms, item_ms = [], []
    for word in words:  # a long run of word characters anywhere before the cursor
        left = 's = "' + "a" * word + '"\nvalues = (' + "b" * word
        search_ms.append(timed(lambda t=left: items.word_before(t, len(t)), 3))  # type: ignore[misc]
    rows.add("word_before the cursor after a word run", "word chars", words, search_ms)
    for size in sizes:
        text = code_of_size(size) + "values = ("
        request = Request("file:///item.py", text, len(text), Settings())
        cursor = types.Position(*Document("file:///item.py", text).position_at(len(text)))
        item_ms.append(
            timed(
                lambda r=request, c=cursor: items.completion_item(  # type: ignore[misc]
                    r, c, ")", 1, "utf-16"
                )
            )
        )
    rows.add("completion_item", "document chars", sizes, item_ms)


def small_work(rows: Rows) -> None:
    layers = [{"maxTokens": 32, "lineMode": "single"}, {"fimlsp": {"deadlineMs": 900}}]
    rows.add(
        "Settings.merged (two layers)",
        "-",
        [1],
        [timed(lambda: [Settings().merged(layer) for layer in layers], 50)],
    )
    item = types.CompletionItem(label="x" * 200_000, filter_text="x" * 200_000)
    server = create_server()
    rows.add(
        "serialize a completion item with a 200k prefix",
        "-",
        [200_000],
        [timed(lambda: json.dumps(server.protocol._converter.unstructure(item)))],
    )
    server.engine.shutdown(timeout=1)


def longest_gap(work: Callable[[], object]) -> tuple[float, float]:
    """Run ``work`` on a thread while this one ticks every millisecond: the longest
    gap between ticks (ms; a tick's millisecond included) and how long the work took
    (ms)."""
    done = threading.Event()
    took: list[float] = []

    def run() -> None:
        started = time.perf_counter()
        work()
        took.append((time.perf_counter() - started) * 1e3)
        done.set()

    worker = threading.Thread(target=run)
    gap, last = 0.0, time.perf_counter()
    worker.start()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        gap, last = max(gap, (now - last) * 1e3), now
    worker.join()
    return gap, took[0]


class _Sink:
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


async def run(quick: bool, sizes: Sequence[int] | None = None) -> list[dict[str, Any]]:
    rows = Rows()
    sizes = sizes or ([50_000, 500_000] if quick else [50_000, 500_000, 5_000_000])
    per_message(rows, sizes)
    per_line(rows, [20_000, 200_000] if quick else [20_000, 200_000, 2_000_000])
    completion_item(
        rows, [2_000, 5_000, 10_000] if quick else [2_000, 5_000, 10_000, 20_000], sizes
    )
    small_work(rows)
    return rows.rows


async def messages_only(quick: bool, sizes: Sequence[int] | None = None) -> list[dict[str, Any]]:
    rows = Rows()
    per_message(rows, sizes or ([50_000, 500_000] if quick else [50_000, 500_000, 5_000_000]))
    return rows.rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = ["event-loop costs (median ms)"]
    for row in rows:
        sizes, ms = row["sizes"], row["ms"]
        cells = ", ".join(f"{s:,}: {m:.3f}" for s, m in zip(sizes, ms))
        growth = ""
        if len(ms) > 1 and ms[-2] > 0:
            growth = f"  (x{ms[-1] / ms[-2]:.1f} for x{sizes[-1] / sizes[-2]:.0f} {row['varies']})"
        elif row["varies"] != "-":
            growth = f"  ({row['varies']})"
        lines.append(f"  {row['operation']}: {cells}{growth}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.event_loop_costs", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smaller sizes (seconds, not a minute)")
    p.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        help="document sizes of the per-message rows, comma-separated characters",
    )
    p.add_argument(
        "--messages-only", action="store_true", help="only the per-message rows (seconds)"
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    work = messages_only if args.messages_only else run
    rows = asyncio.run(work(args.quick, args.sizes))
    out = out or sys.stdout
    print(json.dumps(rows, indent=1) if args.json else format_rows(rows), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
