"""Serving one client over stdio or TCP with the guarded protocol.

pygls' own ``start_io``/``start_tcp`` read with its strict frame reader and write
on the event loop; :func:`serve_stdio` and :func:`serve_tcp` read with
:class:`~.framing.FrameReader`, hand each body to the protocol's
:class:`~.guard.JsonRpcGuard` and return the process's exit code (``exit`` after
``shutdown``: 0, else 1).  A body over :data:`LARGE_BODY` bytes is parsed on a thread,
in pieces that hold the GIL briefly (:mod:`lsp_server.json_pieces`), with the
protocol's :meth:`~.guard.JsonRpcGuard.prepare` (a server indexes a document's lines
there); messages are still handled one at a time, in order.  Over stdio, what the
server sends is written by :class:`ThreadedWriter`, never on the event loop, and the
process serves with a short switch interval (:data:`SWITCH_INTERVAL_S`), so the loop
waits little for the GIL behind those threads, and with start-up's objects frozen out
of the collector's reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import queue
import sys
import threading
import typing
from collections.abc import Awaitable, Callable, Iterator
from typing import IO

from .framing import DEFAULT_MAX_CONTENT_LENGTH, Body, FrameReader
from .guard import JsonRpcGuard
from .pygls_adapter import adopt_stop_event

if typing.TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

__all__ = ["LARGE_BODY", "SWITCH_INTERVAL_S", "ThreadedWriter", "serve_stdio", "serve_tcp"]

log = logging.getLogger(__name__)

#: Bodies over this many bytes are parsed off the event loop (a 256 KiB parse on it
#: costs about a millisecond).
LARGE_BODY = 1 << 18
#: A body still incomplete after the input paused this long is taken if it parses.
IDLE_SECONDS = 0.25
_CHUNK = 1 << 16  # bytes read at a time
#: The front's switch interval while it serves.  A thread running Python (a large
#: body's parse, the engine proxy's sender) keeps the GIL until the event loop has
#: waited this long for it; at CPython's 5 ms the loop's ticks came up to 13-16 ms late
#: while a 5 MB ``didOpen`` was parsed, at 1 ms 10 ms (``bench.lsp_fuzz --cases
#: 5_mb_file,1_5_mb_file``).  The engine's process keeps the default.
SWITCH_INTERVAL_S = 0.001


async def _serve_stream(
    next_chunk: Callable[[], Awaitable[bytes]],
    protocol: JsonRpcGuard,
    frames: FrameReader,
    stop: threading.Event,
) -> int:
    """Read frames until ``exit`` or the end of input; the exit code."""
    while not stop.is_set():
        chunk: bytes | None = None
        if frames.waiting_for_body:
            with contextlib.suppress(asyncio.TimeoutError):
                chunk = await asyncio.wait_for(next_chunk(), IDLE_SECONDS)
        else:
            chunk = await next_chunk()
        if chunk is None:
            events = frames.idle()
        else:
            events = frames.feed(chunk) if chunk else frames.close()
        for event in events:
            parsed = None
            if isinstance(event, Body) and len(event.data) > LARGE_BODY:
                parsed = await asyncio.to_thread(protocol.parse_large_body, event.data)
            try:
                if isinstance(event, Body):
                    protocol.receive_body(event.data, parsed)
                else:
                    protocol.receive_oversized(event.length, event.head)
            except SystemExit as exc:  # pygls' `exit` handler
                return exc.code if isinstance(exc.code, int) else 1
            except Exception:  # the guard answers what it can; nothing stops the loop
                log.exception("cannot handle a message")
            # Let what the message started run before the next one is read: a
            # coroutine handler's answer (or its cancellation by `shutdown`) then
            # goes out before an `exit` that came in the same chunk closes the output.
            await asyncio.sleep(0)
        if chunk == b"":
            break
    return 0 if protocol.is_shut_down else 1


class ThreadedWriter:
    """Writes what the server sends to a binary stream on a thread of its own, in order.

    A write on the event loop blocks it while the pipe is full (a client slow to read
    stops the whole server), and every write and flush is a system call that hands the
    GIL over and then waits to get it back (``loop_lag``).  The loop
    only queues the bytes; the thread writes what has queued up with one write and one
    flush.  After a write fails (the client closed its end) the rest is dropped.
    :meth:`close` writes what is queued and closes the stream.
    """

    def __init__(self, stream: typing.BinaryIO) -> None:
        self._stream = stream
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.failed = False
        self._thread = threading.Thread(target=self._run, name="lsp-stdout", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        self._queue.put(data)

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            pieces = [data]
            while data is not None and not self._queue.empty():
                data = self._queue.get()
                pieces.append(data)
            closing = pieces[-1] is None
            if not self.failed:
                try:
                    self._stream.write(b"".join(p for p in pieces if p is not None))
                    self._stream.flush()
                except (OSError, ValueError) as exc:
                    self.failed = True
                    log.error("cannot write to the client (%s): dropping what follows", exc)
            if closing:
                return

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (for at most ``timeout`` s), then close the stream (not
        while the thread is still blocked in a write: the client does not read)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            with contextlib.suppress(OSError, ValueError):
                self._stream.close()


def _guard(server: LanguageServer) -> JsonRpcGuard:
    protocol = server.protocol
    if not isinstance(protocol, JsonRpcGuard):
        raise TypeError("the server's protocol must derive from JsonRpcGuard")
    return protocol


@contextlib.contextmanager
def _short_gil_handoffs() -> Iterator[None]:
    """Serve with :data:`SWITCH_INTERVAL_S`, and restore the interval after (a test
    serving in its own process gets its own back)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _ready(protocol: JsonRpcGuard) -> None:
    """Make pygls' converters, then set what start-up made aside from the collector: it
    lives as long as the process, and a full collection over it (20 to 31 ms on the
    event loop, finding nothing) would stop the loop whenever one came."""
    protocol.warm_up()
    gc.collect()
    gc.freeze()


def _raw_reader(stream: IO[bytes]) -> Callable[[int], bytes]:
    """A read that returns what is available: ``os.read`` on the file descriptor when
    there is one (a thread blocked in a buffered stream's read holds its lock, and
    the interpreter aborts at exit trying to take it), else ``read1`` or ``read``."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return getattr(stream, "read1", None) or stream.read
    return lambda size: os.read(fd, size)


def serve_stdio(
    server: LanguageServer,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    max_content_length: int = DEFAULT_MAX_CONTENT_LENGTH,
) -> int:
    """Serve one client over stdin/stdout; returns the exit code for the process."""
    protocol = _guard(server)
    stdin = stdin or sys.stdin.buffer
    writer = ThreadedWriter(typing.cast(typing.BinaryIO, stdout or sys.stdout.buffer))
    protocol.set_writer(writer)
    _ready(protocol)
    stop = adopt_stop_event(server)
    read = _raw_reader(stdin)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[bytes] = asyncio.Queue(maxsize=64)  # backpressure: 4 MiB

        def pump() -> None:  # a thread: reading stdin blocks, on every platform
            while True:
                try:
                    chunk = read(_CHUNK)
                except (OSError, ValueError):
                    chunk = b""
                try:
                    asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
                except Exception:  # the loop has ended (exit): nobody is reading
                    return
                if not chunk:
                    return

        threading.Thread(target=pump, name="lsp-stdin", daemon=True).start()
        return await _serve_stream(chunks.get, protocol, FrameReader(max_content_length), stop)

    try:
        with _short_gil_handoffs():
            return asyncio.run(main())
    except BrokenPipeError:
        log.error("the client closed its end of the connection")
        return 1
    finally:
        server.shutdown()
        writer.close()  # what was answered before the input ended still goes out


def serve_tcp(
    server: LanguageServer,
    host: str,
    port: int,
    max_content_length: int = DEFAULT_MAX_CONTENT_LENGTH,
) -> int:
    """Serve the first client that connects on ``host:port``; returns the exit code."""
    protocol = _guard(server)
    _ready(protocol)
    stop = adopt_stop_event(server)

    async def main() -> int:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if done.done():
                writer.close()
                return
            protocol.set_writer(writer)  # it has write() and close()
            frames = FrameReader(max_content_length)
            code = await _serve_stream(lambda: reader.read(_CHUNK), protocol, frames, stop)
            if not done.done():
                done.set_result(code)

        listener = await asyncio.start_server(connection, host, port)
        log.info("serving on %s", ", ".join(str(s.getsockname()) for s in listener.sockets))
        async with listener:
            return await done

    try:
        with _short_gil_handoffs():
            return asyncio.run(main())
    finally:
        server.shutdown()
