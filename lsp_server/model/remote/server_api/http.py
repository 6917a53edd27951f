"""HTTP for the server client: JSON requests and server-sent event streams that stop at once.

Everything blocking (connect, TLS handshake, sending, waiting for the status line, reading
the body or the stream) runs in a short-lived worker thread per exchange, which hands what
it reads to the caller through a queue.  The caller waits on that queue in slices of
``POLL_S`` and checks its ``cancel`` flag and deadline between them; when either fires,
the socket is shut down from the caller's thread, which wakes the worker's blocked read
immediately and tells the server the client is gone (llama-server then stops generating
for that request).  So a request ends within ``POLL_S`` of a cancel, whatever the server
is doing, and a slow or silent server is bounded by ``read_timeout``.

Only the standard library: ``http.client`` speaks HTTP/1.1 with chunked transfer and
keep-alive, ``ssl`` does TLS with certificate verification.  Idle connections are kept
for reuse (a TLS handshake costs several round trips); a kept connection the server has
closed meanwhile is replaced once, transparently.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .errors import (
    ServerAuthError,
    ServerError,
    ServerHTTPError,
    ServerProtocolError,
    ServerTimeout,
    ServerTLSError,
    ServerUnreachable,
)

__all__ = ["POLL_S", "EventStream", "HttpClient", "ServerAddress", "Stopped", "parse_server_url"]

#: How often a waiting caller checks its cancel flag and deadline (seconds).
POLL_S = 0.01
#: Idle connections kept per client for reuse.
MAX_IDLE = 4
_MAX_ERROR_BODY = 64 * 1024

Cancel = Callable[[], bool]


class Stopped(Exception):
    """The caller's cancel flag or deadline ended the exchange; ``reason`` says which
    ("cancelled" or "deadline").  Not an error: the connection is already closed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ServerAddress:
    """Where a server listens: ``http(s)://host:port`` plus an optional path prefix."""

    scheme: str
    host: str
    port: int
    prefix: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"


def parse_server_url(url: str) -> ServerAddress:
    """``http://host:port[/prefix]`` or ``https://...``; ValueError says what is wrong.

    A trailing ``/v1`` is dropped: OpenAI clients are given base URLs that end in it, and
    the client adds it to the OpenAI paths itself."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"server URL {url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"server URL {url!r} has no host name")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ValueError(f"server URL {url!r} has a bad port: {exc}") from exc
    if parts.query or parts.fragment:
        raise ValueError(f"server URL {url!r} must not have a query or fragment")
    prefix = parts.path.rstrip("/").removesuffix("/v1")
    return ServerAddress(parts.scheme, parts.hostname, port, prefix)


def _error_message(body: bytes) -> str:
    """The server's own words from an error body (llama-server, OpenAI, vLLM, FastAPI)."""
    text = body[:_MAX_ERROR_BODY].decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(err.get(key), str):
                    return str(err[key])
        if isinstance(err, str):
            return err
        if isinstance(data.get("detail"), (str, list)):
            return str(data["detail"])
    return text[:300]


class _Exchange:
    """One request and its response, read by a worker thread and handed over a queue.

    Queue items: ``("head", HTTPResponse)``, ``("chunk", bytes)`` for each line of a
    stream or the whole body, ``("end", None)``, ``("error", exception)``.
    """

    def __init__(
        self,
        client: HttpClient,
        method: str,
        path: str,
        body: bytes | None,
        stream: bool,
        read_timeout: float,
    ) -> None:
        self._client = client
        self._items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._aborted = False
        self._args = (method, path, body, stream, read_timeout)
        threading.Thread(target=self._run, name="fimlsp-http", daemon=True).start()

    # ------------------------------------------------------------ worker side

    def _run(self) -> None:
        method, path, body, stream, read_timeout = self._args
        client = self._client
        conn, reused = client._take_idle()
        try:
            while True:
                if conn is None:
                    conn = client._new_connection()
                with self._lock:
                    if self._aborted:
                        return
                    self._conn = conn
                try:
                    response = self._send(conn, method, path, body, read_timeout)
                    break
                except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                    if not reused:
                        raise
                    conn.close()  # a kept connection the server closed meanwhile: once more
                    conn, reused = None, False
            self._items.put(("head", response))
            if stream and response.status == 200:
                for line in iter(response.readline, b""):
                    self._items.put(("chunk", line))
            else:
                self._items.put(("chunk", response.read()))
            self._items.put(("end", None))
            with self._lock:  # once handed back, an abort must not touch it
                keep = not (self._aborted or response.will_close)
                self._conn = None
            if keep:
                client._give_back(conn)
                conn = None
        except BaseException as exc:
            self._items.put(("error", exc))
        finally:
            if conn is not None:
                conn.close()

    def _send(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        path: str,
        body: bytes | None,
        read_timeout: float,
    ) -> http.client.HTTPResponse:
        if conn.sock is None:
            conn.connect()  # under the connect timeout the connection was made with
        with self._lock:
            if self._aborted:  # cancelled while connecting: abort() saw no socket yet
                raise Stopped("cancelled")
        assert conn.sock is not None
        conn.sock.settimeout(read_timeout)
        conn.request(method, path, body=body, headers=self._client._headers(body is not None))
        return conn.getresponse()

    # ------------------------------------------------------------ caller side

    def abort(self) -> None:
        """Shut the socket down now: the worker's read returns, the server sees the close."""
        with self._lock:
            self._aborted = True
            conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # the plain socket's: no TLS goodbye
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def next(self, cancel: Cancel | None, deadline: float | None) -> tuple[str, Any]:
        """The next item, or ``Stopped`` (after aborting) when cancel or deadline fire:
        checked before each item, so a fast stream stops as promptly as a silent one."""
        while True:
            if cancel is not None and cancel():
                self.abort()
                raise Stopped("cancelled")
            wait = POLL_S
            if deadline is not None:
                left = deadline - time.perf_counter()
                if left <= 0:
                    self.abort()
                    raise Stopped("deadline")
                wait = min(wait, left)
            try:
                return self._items.get(timeout=wait)
            except queue.Empty:
                pass


class EventStream:
    """The JSON of each ``data:`` event of a server-sent event stream, as it arrives.

    Iteration ends at ``data: [DONE]`` or when the server ends the answer after a whole
    event; a stream cut off mid-event raises ``ServerProtocolError``, an error event
    ``ServerHTTPError``, a cancel or deadline ``Stopped``.  ``close`` (idempotent) closes
    the connection at once unless the stream already ended.
    """

    def __init__(
        self,
        client: HttpClient,
        exchange: _Exchange,
        path: str,
        cancel: Cancel | None,
        deadline: float | None,
    ) -> None:
        self._client = client
        self._exchange = exchange
        self._path = path
        self._cancel = cancel
        self._deadline = deadline
        self._finished = False

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Any:
        client, path = self._client, self._path
        event: list[bytes] = []
        if self._finished:
            raise StopIteration
        try:
            while True:
                kind, data = self._exchange.next(self._cancel, self._deadline)
                if kind == "error":
                    raise client._translate(data, path)
                if kind == "end":
                    if any(part.strip() for part in event):
                        raise ServerProtocolError(
                            f"the stream from {client.url}{path} stopped in the middle of an event"
                        )
                    self._finished = True
                    raise StopIteration
                line: bytes = data
                if not line.endswith(b"\n"):
                    raise ServerProtocolError(
                        f"the stream from {client.url}{path} stopped in the middle of a line"
                    )
                line = line.rstrip(b"\r\n")
                if line:
                    event.append(line)
                    continue
                payload = client._event_data(event, path)
                event = []
                if payload is None:
                    continue
                if payload == b"[DONE]":
                    self._finished = True
                    raise StopIteration
                return client._event_json(payload, path)
        except StopIteration:
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self._finished:
            self._finished = True
            self._exchange.abort()


class HttpClient:
    """JSON over HTTP(S) to one server, with an API key, TLS settings and timeouts.

    ``verify``: True checks the certificate against the system's authorities, a path
    names a CA bundle (a company's own authority), False skips the check (insecure).
    ``read_timeout`` bounds each wait for data from the server, ``connect_timeout`` the
    connection and TLS handshake.  Thread-safe: concurrent requests use their own
    connections.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        verify: bool | str = True,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        user_agent: str = "fimlsp",
    ) -> None:
        self.address = parse_server_url(url)
        self.api_key = api_key or None
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.user_agent = user_agent
        self._ssl: ssl.SSLContext | None = None
        if self.address.scheme == "https":
            if verify is False:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif isinstance(verify, str):
                try:
                    context = ssl.create_default_context(cafile=verify)
                except (OSError, ssl.SSLError) as exc:
                    raise ServerTLSError(f"cannot read the CA bundle {verify}: {exc}") from exc
            else:
                context = ssl.create_default_context()
            self._ssl = context
        self._idle: list[http.client.HTTPConnection] = []
        self._idle_lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.address.url

    # ------------------------------------------------------------ connections

    def _new_connection(self) -> http.client.HTTPConnection:
        host, port = self.address.host, self.address.port
        if self._ssl is not None:
            return http.client.HTTPSConnection(
                host, port, timeout=self.connect_timeout, context=self._ssl
            )
        return http.client.HTTPConnection(host, port, timeout=self.connect_timeout)

    def _take_idle(self) -> tuple[http.client.HTTPConnection | None, bool]:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop(), True
        return None, False

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._idle_lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the kept connections (requests in flight finish on their own)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"User-Agent": self.user_agent, "Accept": "application/json, text/event-stream"}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    # ------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        cancel: Cancel | None = None,
        deadline: float | None = None,
        read_timeout: float | None = None,
    ) -> Any:
        """Send a JSON request and return the decoded JSON answer.

        Raises a ``ServerError`` subclass for every failure and ``Stopped`` when ``cancel``
        or ``deadline`` (``time.perf_counter()`` seconds) end it first.
        """
        exchange = self._start(method, path, body, False, read_timeout)
        status_line = self._head(exchange, path, cancel, deadline)
        kind, data = exchange.next(cancel, deadline)
        if kind == "error":
            raise self._translate(data, path)
        raw: bytes = data
        if status_line.status >= 400:
            raise self._status_error(status_line.status, raw, path)
        try:
            return json.loads(raw)
        except ValueError:
            snippet = raw[:80].decode("utf-8", errors="replace")
            raise ServerProtocolError(
                f"{self.url}{path} answered with something that is not JSON: {snippet!r}"
            ) from None

    def stream(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        cancel: Cancel | None = None,
        deadline: float | None = None,
        read_timeout: float | None = None,
    ) -> EventStream:
        """POST ``body`` and return the server-sent events once the answer has begun.

        Waits for the status line, so an error the server sends instead of a stream
        raises here, as ``request`` does (and ``Stopped`` when cancel or deadline fire
        first).  See ``EventStream`` for the events.
        """
        exchange = self._start("POST", path, body, True, read_timeout)
        try:
            status_line = self._head(exchange, path, cancel, deadline)
            if status_line.status != 200:
                kind, data = exchange.next(cancel, deadline)
                if kind == "error":
                    raise self._translate(data, path)
                raise self._status_error(status_line.status, data, path)
        except BaseException:
            exchange.abort()
            raise
        return EventStream(self, exchange, path, cancel, deadline)

    # ------------------------------------------------------------ helpers

    def _start(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        stream: bool,
        read_timeout: float | None,
    ) -> _Exchange:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        full_path = self.address.prefix + path
        timeout = self.read_timeout if read_timeout is None else read_timeout
        return _Exchange(self, method, full_path, data, stream, timeout)

    def _head(
        self, exchange: _Exchange, path: str, cancel: Cancel | None, deadline: float | None
    ) -> http.client.HTTPResponse:
        kind, data = exchange.next(cancel, deadline)
        if kind == "error":
            raise self._translate(data, path)
        response: http.client.HTTPResponse = data
        return response

    def _event_data(self, lines: list[bytes], path: str) -> bytes | None:
        """The ``data:`` payload of one event; None for comments and pings."""
        data: list[bytes] = []
        for line in lines:
            if line.startswith(b":"):
                continue  # a comment: llama-server's keep-alive ping
            field, _, value = line.partition(b":")
            if field == b"data":
                data.append(value[1:] if value.startswith(b" ") else value)
            elif field == b"error":
                return b'{"error": ' + value.strip() + b"}"
            elif field not in (b"event", b"id", b"retry"):
                snippet = line[:80].decode("utf-8", errors="replace")
                raise ServerProtocolError(
                    f"the stream from {self.url}{path} has a line that is not an event: {snippet!r}"
                )
        return b"\n".join(data) if data else None

    def _event_json(self, payload: bytes, path: str) -> Any:
        try:
            value = json.loads(payload)
        except ValueError:
            snippet = payload[:80].decode("utf-8", errors="replace")
            raise ServerProtocolError(
                f"the stream from {self.url}{path} sent an event that is not JSON: {snippet!r}"
            ) from None
        if isinstance(value, dict) and "error" in value and len(value) == 1:
            message = _error_message(payload)
            raise ServerHTTPError(
                f"{self.url} reported an error during generation: {message}", 500, message
            )
        return value

    def _status_error(self, status: int, body: bytes, path: str) -> ServerError:
        detail = _error_message(body)
        where = f"{self.url}{path}"
        if status in (401, 403):
            key = "the API key was rejected" if self.api_key else "it needs an API key"
            return ServerAuthError(
                f"{self.url} refused the request ({status}: {detail or 'unauthorized'}): "
                f"{key}; check the apiKey setting"
            )
        if status == 404:
            return ServerHTTPError(
                f"{where} does not exist (404): is this the right server, and serverApi the "
                "right API?",
                status,
                detail,
            )
        if status == 503:
            return ServerHTTPError(
                f"{self.url} is not ready (503: {detail or 'unavailable'}); it may still be "
                "loading the model",
                status,
                detail,
            )
        return ServerHTTPError(
            f"{where} answered {status}: {detail or 'no detail'}", status, detail
        )

    def _translate(self, exc: BaseException, path: str) -> ServerError:
        """A clear ``ServerError`` for an exception raised while talking to the server."""
        url = self.url
        if isinstance(exc, ServerError):
            return exc
        if isinstance(exc, ssl.SSLCertVerificationError):
            return ServerTLSError(
                f"cannot verify the TLS certificate of {url}: {exc.verify_message or exc}; "
                "add the authority's certificate to the system's store or point the "
                "SSL_CERT_FILE environment variable at a bundle that holds it, or use http://"
            )
        if isinstance(exc, ssl.SSLError):
            hint = ""
            if "WRONG_VERSION_NUMBER" in str(exc) or "wrong version number" in str(exc):
                hint = " (does the server speak plain http?)"
            return ServerTLSError(f"TLS handshake with {url} failed{hint}: {exc.reason or exc}")
        if isinstance(exc, socket.gaierror):
            return ServerUnreachable(
                f"cannot resolve the host name {self.address.host!r} of {url}: {exc.strerror}"
            )
        if isinstance(exc, ConnectionRefusedError):
            return ServerUnreachable(f"connection to {url} refused: is the server running?")
        if isinstance(exc, TimeoutError) and "handshake" in str(exc):
            return ServerTLSError(
                f"no TLS handshake with {url} within {self.connect_timeout:g} s: does the "
                "server speak https?"
            )
        if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError since 3.10
            return ServerTimeout(f"{url} did not answer in time ({exc or 'timed out'})")
        if isinstance(exc, http.client.RemoteDisconnected):
            return ServerUnreachable(f"{url} closed the connection without answering")
        if isinstance(exc, http.client.IncompleteRead):
            return ServerProtocolError(f"the answer from {url}{path} was cut off")
        if isinstance(exc, http.client.HTTPException):
            return ServerProtocolError(f"{url} did not answer with HTTP: {exc!r}")
        if isinstance(exc, (ConnectionError, OSError)):
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            return ServerUnreachable(f"connection to {url} failed: {reason}")
        return ServerProtocolError(f"unexpected failure talking to {url}: {exc!r}")
