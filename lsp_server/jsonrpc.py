"""The JSON-RPC transport and message layer, hardened against what clients send.

pygls reads frames with a strict header regex and ``readexactly(length)``: a
``Content-Length`` of 10**12 allocates it (``MemoryError``, the process dies), and
after one frame with a wrong length, a lowercase header or LF-only lines every
later message is lost.  Its message handling drops what it cannot deserialize
with a ``window/showMessage`` popup instead of an answer.  This module replaces
both for stdio and TCP:

* :class:`FrameReader` turns a byte stream into message bodies, whatever arrives:
  headers in any case with ``\\r\\n`` or ``\\n`` line ends, unknown headers
  ignored, lengths bounded (a larger one is reported and its body skipped in
  chunks, never allocated), garbage skipped up to the next ``Content-Length``.
  A body is cut short where the next frame's header appears inside it (a
  header line ends in a raw line end, which no JSON text can hold inside a
  string, so a valid body never contains one); a body still incomplete when
  the input pauses is taken if it is already a complete JSON text.
* :class:`JsonRpcGuard`, a mixin for pygls' ``LanguageServerProtocol``, parses
  and validates every message in one place: ``-32700`` for a body that is not
  JSON, ``-32600`` for one that is not an object (batches included), for an id
  that is neither an integer nor a string and for requests after ``shutdown``,
  ``-32002`` before ``initialize``, ``-32602`` with the request's id and the
  field at fault when params do not fit the method's type, ``-32603`` when a
  handler fails before pygls took charge of the answer.  Notifications that
  cannot be used are dropped with a log line and :meth:`notification_rejected`.
* :func:`serve_stdio` and :func:`serve_tcp` run a pygls server with both and
  return the process's exit code (``exit`` after ``shutdown``: 0, else 1).  A body
  over :data:`LARGE_BODY` bytes is parsed on a thread, in pieces that hold the GIL
  briefly (:mod:`lsp_server.json_pieces`), with the protocol's
  :meth:`~JsonRpcGuard.prepare` (a server indexes a document's lines there); messages
  are still handled one at a time, in order.  Over stdio, what the server sends is
  written by :class:`ThreadedWriter`, never on the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import logging
import math
import os
import queue
import re
import sys
import threading
import typing
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any

import attrs
from cattrs.errors import ClassValidationError
from cattrs.v import transform_error
from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from .json_pieces import join_long_strings, loads_in_pieces

if typing.TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

__all__ = [
    "DEFAULT_MAX_CONTENT_LENGTH",
    "LARGE_BODY",
    "Body",
    "FrameReader",
    "JsonRpcGuard",
    "Oversized",
    "Parsed",
    "ThreadedWriter",
    "serve_stdio",
    "serve_tcp",
]

log = logging.getLogger(__name__)

#: The largest body read (64 MiB: a 20 MB document escaped to JSON fits three times).
DEFAULT_MAX_CONTENT_LENGTH = 64 * 2**20
#: Bodies over this many bytes are parsed off the event loop (a 256 KiB parse on it
#: costs about a millisecond).
LARGE_BODY = 1 << 18
#: A body still incomplete after the input paused this long is taken if it parses.
IDLE_SECONDS = 0.25

# JSON-RPC and LSP error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002

# ---------------------------------------------------------------- framing

# A Content-Length header line, bounded so a search window is short.
_LENGTH = rb"content-length[ \t]{0,16}:[ \t]{0,16}(\d{1,40})[ \t]{0,16}\r?\n"
_LENGTH_RE = re.compile(_LENGTH, re.IGNORECASE)
_LENGTH_LINE_RE = re.compile(rb"[ \t]*" + _LENGTH, re.IGNORECASE)
_HEADER_SPAN = 110
# Header lines (a frame's other headers, before its Content-Length); a field name is
# an RFC 7230 token, which no JSON punctuation is part of.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_HEADER_LINES_RE = re.compile(rb"(?:" + _TOKEN.encode() + rb":[^\r\n]*\r?\n|\r?\n)*")
_TRAILING_HEADER_RE = re.compile(_TOKEN.encode() + rb":[^\r\n]*\r?\n\Z")
_MAX_HEADER_LINE = 8192
_HEAD_KEPT = 1024  # of a skipped body, to find its id
_CHUNK = 1 << 16


def embedded_header(data: bytes | bytearray, start: int = 0) -> int | None:
    """Where a frame's headers begin inside ``data``, judging by a Content-Length line
    that ends at a line end at or after ``start`` (a JSON text cannot contain one: a
    raw line end is never inside a string).  Other header lines just before it count
    as the frame's too."""
    newline = data.find(b"\n", start)
    while newline >= 0:
        match = _LENGTH_RE.search(data, max(0, newline - _HEADER_SPAN), newline + 1)
        if match is not None and match.end() == newline + 1:
            cut = match.start()
            while True:
                trailing = _TRAILING_HEADER_RE.search(data, max(0, cut - 512), cut)
                if trailing is None:
                    return cut
                cut = trailing.start()
        newline = data.find(b"\n", newline + 1)
    return None


@dataclass(frozen=True)
class Body:
    """A frame's body (``problem``: why it may not be the whole message)."""

    data: bytes
    problem: str | None = None


@dataclass(frozen=True)
class Oversized:
    """A frame whose length is over the limit: its body was skipped, not read."""

    length: int
    head: bytes


FrameEvent = Body | Oversized


class FrameReader:
    """LSP framing without I/O: feed bytes, get bodies (see the module docstring).

    ``feed`` and ``close`` (at the end of input) return the events completed;
    ``idle`` is called when the input pauses while a body is incomplete.  Nothing
    raises: every problem is counted in ``problems`` and logged once.
    """

    def __init__(self, max_content_length: int = DEFAULT_MAX_CONTENT_LENGTH) -> None:
        self.max_content_length = max_content_length
        self.problems: Counter[str] = Counter()
        self.frames = 0
        self._buffer = bytearray()
        self._state = "headers"  # or "fields", "body", "skip"
        self._length = 0
        self._body = bytearray()
        self._scanned = 0  # body bytes already searched for a header
        self._tried_idle = -1  # body size at the last idle attempt
        self._skip_left = 0
        self._head = bytearray()
        self._head_sent = False
        self._carry = b""  # the last bytes skipped
        self._skipped = 0  # bytes of the oversized body skipped so far

    @property
    def waiting_for_body(self) -> bool:
        """A body is incomplete: a pause in the input may mean its length was too long."""
        return self._state == "body" and bool(self._body)

    def feed(self, data: bytes) -> list[FrameEvent]:
        self._buffer += data
        events: list[FrameEvent] = []
        while self._step(events):
            pass
        return events

    def idle(self) -> list[FrameEvent]:
        """The input paused: a body that is already a whole JSON text is taken as is."""
        body = self._body
        if self._state != "body" or len(body) == self._tried_idle:
            return []
        self._tried_idle = len(body)
        if bytes(body.rstrip()[-1:]) not in (b"}", b"]"):
            return []
        try:
            _loads(bytes(body))
        except ValueError:
            return []
        self._problem("short body", f"{len(body)} of {self._length} bytes came, then a pause")
        return [self._take_body(len(body), "shorter than its Content-Length")]

    def close(self) -> list[FrameEvent]:
        """The input ended: what was read of a body is passed on (it may not parse)."""
        events: list[FrameEvent] = []
        if self._state == "body" and self._body:
            self._problem("short body", f"input ended after {len(self._body)} bytes")
            events.append(self._take_body(len(self._body), "the input ended inside it"))
        elif self._state == "skip" and not self._head_sent:
            events.append(Oversized(self._length, bytes(self._head)))
        elif self._buffer.strip():
            self._problem("garbage", f"{len(self._buffer)} bytes at the end of input")
        self._buffer.clear()
        self._state = "headers"
        return events

    # ------------------------------------------------------------ states

    def _step(self, events: list[FrameEvent]) -> bool:
        """Advance one state; False when more input is needed."""
        if self._state == "headers":
            return self._find_header()
        if self._state == "fields":
            return self._read_fields()
        if self._state == "body":
            return self._read_body(events)
        return self._skip(events)

    def _find_header(self) -> bool:
        buffer = self._buffer
        match = _LENGTH_RE.search(buffer)
        if match is None:
            # Keep what could be the start of a header; the rest is not a frame.
            keep = len(buffer) - _HEADER_SPAN
            if keep > 0 and buffer[:keep].strip():
                self._garbage(buffer[:keep])
            if keep > 0:
                del buffer[:keep]
            return False
        before = buffer[: match.start()]
        if before and _HEADER_LINES_RE.fullmatch(before) is None:
            self._garbage(before)
        self._length = int(match.group(1))
        del buffer[: match.end()]
        self._state = "fields"
        return True

    def _read_fields(self) -> bool:
        buffer = self._buffer
        if bytes(buffer[:1]) in (b"{", b"["):  # no blank line before the body
            self._problem("header", "no blank line between the headers and the body")
            return self._begin_body()
        end = buffer.find(b"\n")
        if end < 0:
            if len(buffer) > _MAX_HEADER_LINE:
                self._problem("header", f"a header line of over {_MAX_HEADER_LINE} bytes")
                self._state = "headers"
                return True
            return False
        line = bytes(buffer[: end + 1])
        del buffer[: end + 1]
        if not line.strip():
            return self._begin_body()
        again = _LENGTH_LINE_RE.fullmatch(line)
        if again is not None:  # a second Content-Length: the later one wins
            self._length = int(again.group(1))
        return True

    def _begin_body(self) -> bool:
        self.frames += 1
        if self._length > self.max_content_length:
            self._problem(
                "oversized",
                f"Content-Length {self._length} is over the limit of "
                f"{self.max_content_length} bytes: the body is skipped",
            )
            self._state, self._skip_left = "skip", self._length
            self._head.clear()
            self._head_sent = False
            self._carry = b""
            self._skipped = 0
            return True
        self._state = "body"
        self._body.clear()
        self._scanned = 0
        self._tried_idle = -1
        return True

    def _read_body(self, events: list[FrameEvent]) -> bool:
        take = min(len(self._buffer), self._length - len(self._body))
        self._body += self._buffer[:take]
        del self._buffer[:take]
        cut = embedded_header(self._body, self._scanned)
        self._scanned = len(self._body)
        if cut is not None:
            self._problem(
                "cut body",
                f"the next frame's header came {cut} bytes into a body of {self._length}",
            )
            rest = bytes(self._body[cut:])
            # Bytes between the JSON and that header are not the message's.
            end = self._json_end(cut) if bytes(self._body[:cut].rstrip()[-1:]) != b"}" else None
            events.append(self._take_body(end or cut, "cut short by the next frame's header"))
            self._buffer[:0] = rest
            return True
        if len(self._body) < self._length:
            return False
        end = self._json_end(len(self._body)) if bytes(self._body.rstrip()[-1:]) != b"}" else None
        if end is not None:
            # A length too long by a few bytes: the next frame's header begins inside
            # the body but its line does not end there.
            self._problem(
                "cut body",
                f"the body is {end} bytes of JSON, its Content-Length says {self._length}",
            )
            rest = bytes(self._body[end:])
            events.append(self._take_body(end, "longer than its JSON"))
            self._buffer[:0] = rest
            return True
        events.append(self._take_body(self._length, None))
        return True

    def _json_end(self, size: int) -> int | None:
        """Where the JSON text at the start of the body's first ``size`` bytes ends, if
        it ends before them (asked only of bodies that do not end in ``}``, which every
        whole message does)."""
        text = self._body[:size].decode("latin-1")  # a character a byte: indexes are offsets
        try:
            _, end = json.JSONDecoder().raw_decode(text)
        except (ValueError, RecursionError):
            return None
        rest = text[end:].lstrip(" \t\r\n")
        return len(text) - len(rest) if rest else None

    def _take_body(self, size: int, problem: str | None) -> Body:
        data = bytes(self._body[:size])
        self._body.clear()
        self._state = "headers"
        return Body(data, problem)

    def _skip(self, events: list[FrameEvent]) -> bool:
        """Discard an oversized body in chunks, keeping its head (for its id) and the last
        bytes (a header may span two chunks), until its end or the next frame's header.

        The head is reported once nothing can shorten it any more: at the end of the
        skip, or when a header starting inside it would have been seen.
        """
        take = min(len(self._buffer), self._skip_left)
        if not take and self._skip_left:
            return False
        window_start = self._skipped - len(self._carry)
        window = self._carry + bytes(self._buffer[:take])
        del self._buffer[:take]
        self._skip_left -= take
        self._skipped += take
        if len(self._head) < _HEAD_KEPT:
            self._head += window[len(self._carry) :][: _HEAD_KEPT - len(self._head)]
        cut = embedded_header(window, 0)
        if cut is not None:
            del self._head[max(0, window_start + cut) :]
        done = cut is not None or self._skip_left == 0
        if not self._head_sent and (done or self._skipped >= _HEAD_KEPT + _HEADER_SPAN):
            events.append(Oversized(self._length, bytes(self._head)))
            self._head_sent = True
        self._carry = window[-_HEADER_SPAN:]
        if cut is not None:
            self._buffer[:0] = window[cut:]
        if done:
            self._state = "headers"
        return done

    # ------------------------------------------------------------ problems

    def _garbage(self, data: bytes | bytearray) -> None:
        self._problem("garbage", f"{len(data)} bytes that are not a frame: {bytes(data[:40])!r}")

    def _problem(self, kind: str, detail: str) -> None:
        self.problems[kind] += 1
        log.warning("LSP input: %s", detail)


# ---------------------------------------------------------------- messages

_MISSING = object()
_ID_RE = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,19}|"(?:[^"\\]|\\.){0,200}")'
    rb"\s*[,}]"
)


def decode_body(data: bytes) -> Any:
    """The JSON value of a body (UTF-8, as LSP says).  A value followed by more than
    whitespace is the message, and the rest is logged: that is what a frame whose
    length was too long holds when it swallowed a frame without a header."""
    text = data.decode("utf-8")
    try:
        return _loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise
        log.warning("LSP input: %d bytes after the JSON of a message", len(text) - exc.pos)
        return _loads(text[: exc.pos])


class TooDeep(ValueError):
    """A JSON text nested deeper than the decoder's recursion allows (``[[[[...``)."""


def _loads(text: str | bytes) -> Any:
    """``json.loads``, where nesting too deep to decode is a ``ValueError`` like any
    other text that is not a message (the C decoder raises ``RecursionError``)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep("nested too deeply") from None


@dataclass(frozen=True)
class Parsed:
    """A body parsed off the event loop: its value, or why it is not JSON."""

    value: Any
    error: ValueError | None = None


def sniff_id(head: bytes) -> int | str | None:
    """The id of a message that cannot be parsed whole, when it is the first member
    (or follows ``"jsonrpc"``, as clients write it): a client waiting for that
    request gets its error instead of waiting forever."""
    match = _ID_RE.match(head)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


def valid_id(msg_id: object) -> bool:
    """JSON-RPC ids are integers or strings (LSP: ``integer | string``)."""
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


def _id_key(msg_id: int | str) -> tuple[bool, int | str]:
    return isinstance(msg_id, int), msg_id


def _camel(path: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)


def _type_name(type_: object) -> str:
    name = getattr(type_, "__name__", None)
    return name if isinstance(name, str) and "[" not in repr(type_) else repr(type_)


def _explain(exc: BaseException, type_: object) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ClassValidationError):  # a check in the class itself (a range)
        return "; ".join(_explain(sub, None) for sub in exc.exceptions)
    text = str(exc)
    if isinstance(exc, ValueError) and "should be" in text:
        return text.rstrip(".")  # lsprotocol's range checks: "Position.line should be in ..."
    return f"expected {_type_name(type_).replace('typing.', '')}"


def describe_structure_error(exc: BaseException) -> str:
    """What is wrong with a message's fields, with their JSON paths."""
    if isinstance(exc, ClassValidationError):
        problems = transform_error(exc, path="$", format_exception=_explain)
        parts = []
        for problem in problems:
            what, _, where = problem.rpartition(" @ ")
            parts.append(f"{_camel(where.removeprefix('$.'))}: {what}")
        return "; ".join(parts)
    return f"{type(exc).__name__}: {exc}"


class JsonRpcGuard(LanguageServerProtocol):
    """Every message parsed and validated in one place (see the module docstring).

    Meant to come first among a protocol class's bases
    (``class _Protocol(JsonRpcGuard, LanguageServerProtocol)``); it only adds to
    pygls' dispatch, so every handler gets it.  The reader calls
    :meth:`receive_body` with each frame's body.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.init_guard()

    def init_guard(self) -> None:
        """The guard's state."""
        self.owed: set[tuple[bool, int | str]] = set()  # requests not answered yet
        self.message_problems: Counter[str] = Counter()
        self._initialized = False  # initialize was answered with a result
        self._initialize_id: tuple[bool, int | str] | None = None
        self.exiting = False  # `exit` was received

    # ------------------------------------------------------------ bodies

    def parse_large_body(self, data: bytes) -> Parsed:
        """A large body parsed in pieces and prepared; called on a thread (see
        :func:`_serve_stream`), then passed to :meth:`receive_body` on the loop."""
        try:
            message = loads_in_pieces(data, pieces=True)
        except RecursionError:
            return Parsed(None, TooDeep("nested too deeply"))
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                return Parsed(None, exc)
            message = decode_body(data)  # logs and drops what follows the JSON
        except ValueError as exc:  # UnicodeDecodeError included
            return Parsed(None, exc)
        try:
            self.prepare(message)
        except Exception:  # a preparation is only a head start: the handler does it all
            log.exception("cannot prepare a message")
        return Parsed(join_long_strings(message))

    def prepare(self, message: Any) -> None:
        """Work a large message's handler would do on the event loop, done ahead on the
        parsing thread (a subclass indexes a document there); nothing by default.
        Long strings in ``message`` are still :class:`~lsp_server.json_pieces.LongString`
        pieces here: one it replaces is never joined, the rest are after it."""

    def receive_body(self, data: bytes, parsed: Parsed | None = None) -> None:
        """One frame's body: parse it (unless it was, off the loop), check it, hand it
        to pygls.  Never raises (except ``SystemExit`` from ``exit``)."""
        try:
            if parsed is not None and parsed.error is not None:
                raise parsed.error
            message = decode_body(data) if parsed is None else parsed.value
        except ValueError as exc:  # UnicodeDecodeError included
            self._reply_error(
                sniff_id(data[:_HEAD_KEPT]),
                PARSE_ERROR,
                f"Parse error: the message is not JSON ({exc})",
                "parse",
            )
            return
        if isinstance(message, list):
            self._reply_error(
                None, INVALID_REQUEST, "Invalid Request: LSP does not allow batches", "batch"
            )
            return
        if not isinstance(message, dict):
            self._reply_error(
                None,
                INVALID_REQUEST,
                f"Invalid Request: a message must be a JSON object, not {type(message).__name__}",
                "not an object",
            )
            return
        self.receive_message(message)

    def receive_oversized(self, length: int, head: bytes) -> None:
        """A frame over the size limit, whose body was skipped."""
        self._reply_error(
            sniff_id(head),
            INVALID_REQUEST,
            f"Invalid Request: a message of {length} bytes is over the limit",
            "oversized",
        )

    def receive_message(self, message: dict[str, Any]) -> None:
        """A parsed message: a request, a notification or a response to the server."""
        has_id = "id" in message
        msg_id = message.get("id")
        method = message.get("method", _MISSING)
        if method is _MISSING:
            self._receive_response(message, has_id, msg_id)
            return
        if has_id and not valid_id(msg_id):
            # JSON-RPC allows any number as an id (LSP only integers): a client that sent
            # 1.5 finds its answer by that id; an id of another type cannot be echoed.
            echoed = msg_id if isinstance(msg_id, float) and math.isfinite(msg_id) else None
            self._reply_error(
                echoed,
                INVALID_REQUEST,
                "Invalid Request: an id must be an integer "
                f"or a string, not {json.dumps(msg_id)[:40]}",
                "bad id",
            )
            return
        answer_to: int | str | None = msg_id if has_id else None
        if message.get("jsonrpc") != "2.0":
            self._refuse(
                answer_to,
                INVALID_REQUEST,
                'Invalid Request: "jsonrpc" must be "2.0"',
                "bad jsonrpc",
            )
            return
        if not isinstance(method, str):
            self._refuse(
                answer_to,
                INVALID_REQUEST,
                "Invalid Request: the method must be a string",
                "bad method",
            )
            return
        if "result" in message or "error" in message:
            self._refuse(
                answer_to,
                INVALID_REQUEST,
                "Invalid Request: a message with a method has no result or error",
                "bad members",
            )
            return
        params = message.get("params", _MISSING)
        if params is not _MISSING and params is not None and not isinstance(params, dict | list):
            self._refuse(
                answer_to,
                INVALID_PARAMS,
                f"Invalid params for {method[:100]}: params must be an object or an array",
                "bad params",
            )
            return
        if answer_to is not None:
            self._receive_request(answer_to, method, message)
        else:
            self._receive_notification(method, message)

    # ------------------------------------------------------------ requests

    def _receive_request(self, msg_id: int | str, method: str, message: dict[str, Any]) -> None:
        if self._shutdown:
            self._reply_error(
                msg_id,
                INVALID_REQUEST,
                "Invalid Request: the server is shutting down",
                "after shutdown",
            )
            return
        if method == types.INITIALIZE:
            if self._initialized or self._initialize_id is not None:
                self._reply_error(
                    msg_id,
                    INVALID_REQUEST,
                    "Invalid Request: initialize may be sent only once",
                    "initialize again",
                )
                return
        elif not self._initialized:
            self._reply_error(
                msg_id,
                SERVER_NOT_INITIALIZED,
                f"{method[:100]}: the server is not initialized; send initialize first",
                "before initialize",
            )
            return
        if _is_notification(method):
            self._reply_error(
                msg_id,
                INVALID_REQUEST,
                f"Invalid Request: {method} is a notification; send it without an id",
                "notification with id",
            )
            return
        structured = self._structure(method, message, request=True)
        if isinstance(structured, str):
            self._reply_error(
                msg_id,
                INVALID_PARAMS,
                f"Invalid params for {method[:100]}: {structured}",
                "invalid params",
            )
            return
        key = _id_key(msg_id)
        self.owed.add(key)
        if method == types.INITIALIZE:
            self._initialize_id = key
        try:
            self.handle_message(structured)
        except Exception as exc:
            # pygls answers whatever fails inside its request handling; this is what
            # fails before it (a protocol subclass's hooks, for instance).
            log.exception("request %s %r failed", msg_id, method)
            if key in self.owed:
                self._reply_error(
                    msg_id,
                    INTERNAL_ERROR,
                    f"Internal error: {method[:100]}: {type(exc).__name__}: {exc}",
                    "handler failed",
                )

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        """pygls keeps the future of every handler run under ``_request_futures``, and
        only a request's answer removes it: each notification handled by a generator
        (``didOpen``, ``didChange``, ``didClose`` in pygls' own protocol) left one
        behind for good, about 1.9 KB.  Those go when their handler is done."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        answers = getattr(callback, "func", None) == self._send_handler_result
        future = None if answers else self._request_futures.get(msg_id)
        if future is not None:
            if future.done():
                del self._request_futures[msg_id]
            else:
                future.add_done_callback(functools.partial(self._forget_future, msg_id))

    def _forget_future(self, msg_id: Any, _: object) -> None:
        self._request_futures.pop(msg_id, None)

    def _send_data(self, data: Any) -> None:
        if self.exiting:  # the output is closed: pygls would report each write as an error
            log.debug("after exit, not sent: %s", str(data)[:200])
            return
        super()._send_data(data)

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if valid_id(msg_id):
            key = _id_key(msg_id)
            self.owed.discard(key)
            if key == self._initialize_id:
                self._initialize_id = None
                self._initialized = error is None
        super()._send_response(msg_id, result, error)

    def _reply_error(
        self, msg_id: int | str | float | None, code: int, message: str, kind: str
    ) -> None:
        """An error response (``msg_id`` None: the id could not be read)."""
        self.message_problems[kind] += 1
        log.warning("answering %s with %d: %s", msg_id, code, message)
        if isinstance(msg_id, int | str):
            self.owed.discard(_id_key(msg_id))
        self._send_data(
            {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        )

    def _refuse(self, msg_id: int | str | None, code: int, message: str, kind: str) -> None:
        """An error for a request; for a notification (no id), a log line."""
        if msg_id is not None:
            self._reply_error(msg_id, code, message, kind)
        else:
            self.message_problems[kind] += 1
            log.warning("dropping a notification: %s", message)

    # ------------------------------------------------------------ notifications

    def _receive_notification(self, method: str, message: dict[str, Any]) -> None:
        if method == types.EXIT:
            self.exiting = True  # pygls closes the output: later answers are dropped
            self.handle_message(
                self._structure(method, {"jsonrpc": "2.0", "method": method}, request=False)
            )
            return
        if self._shutdown or not self._initialized:
            # The specification: before initialize, notifications are dropped (the
            # client learns of it when it asks about that document).
            self.message_problems["notification dropped"] += 1
            log.warning(
                "dropping %s: the server is %s",
                method[:100],
                "shutting down" if self._shutdown else "not initialized",
            )
            return
        structured = self._structure(method, message, request=False)
        if isinstance(structured, str) and (repaired := self.repair(method, message)):
            log.warning("%s repaired: %s", method[:100], structured)
            self.notification_repaired(method, message.get("params"), structured)
            structured = self._structure(method, repaired, request=False)
        if isinstance(structured, str):
            self.message_problems["invalid notification"] += 1
            log.warning("dropping %s: %s", method[:100], structured)
            self.notification_rejected(method, message.get("params"), structured)
            return
        if method == types.CANCEL_REQUEST and not valid_id(structured.params.id):
            self.message_problems["invalid notification"] += 1
            log.warning("dropping a cancellation of id %r", structured.params.id)
            return
        try:
            self.handle_message(structured)
        except Exception:
            log.exception("notification %r failed", method[:100])

    def repair(self, method: str, message: dict[str, Any]) -> dict[str, Any] | None:
        """A notification whose params do not fit its method, made to fit where its
        meaning is still clear (none by default).  A server whose state follows a
        notification repairs what it can rather than lose that state."""
        return None

    def notification_repaired(self, method: str, params: Any, reason: str) -> None:
        """A notification was repaired (see :meth:`repair`): say so in the log."""
        self._tell(f"repaired {method[:100]}: {reason}")

    def _tell(self, text: str) -> None:
        name = self.server_info.name if self.server_info else "server"
        self.notify(
            types.WINDOW_LOG_MESSAGE,
            types.LogMessageParams(type=types.MessageType.Warning, message=f"{name}: {text}"),
        )

    def notification_rejected(self, method: str, params: Any, reason: str) -> None:
        """A notification whose params do not fit its method was dropped.

        The client is told with ``window/logMessage``.  A server whose state follows
        notifications overrides this: a ``textDocument/didChange`` that cannot be
        applied leaves its copy of the document behind the client's, so it should
        forget the document (its requests then get "not open") rather than answer
        for a text the client does not have.
        """
        self._tell(f"ignored {method[:100]}: {reason}")

    # ------------------------------------------------------------ responses

    def _receive_response(self, message: dict[str, Any], has_id: bool, msg_id: Any) -> None:
        is_response = (
            has_id
            and ("result" in message) != ("error" in message)
            and (msg_id is None or valid_id(msg_id))
            and message.get("jsonrpc") == "2.0"
            and (not isinstance(message.get("error"), dict) or "code" in message["error"])
        )
        if not is_response and ("result" in message or "error" in message):
            # A broken response (both members, a bad id): never answered, since the
            # client would get an answer to one of its own ids, and two peers that
            # answer each other's broken responses never stop.
            self.message_problems["invalid response"] += 1
            log.warning("dropping an invalid response: %s", str(message)[:200])
            return
        if not is_response:
            self._reply_error(
                msg_id if valid_id(msg_id) else None,
                INVALID_REQUEST,
                "Invalid Request: not a request, a notification or a response",
                "not a message",
            )
            return
        if msg_id is None:
            log.warning("a response without an id: %s", str(message)[:200])
            return
        try:
            self.handle_message(self.structure_message(message))
        except Exception:
            log.exception("cannot take the response to %r", msg_id)

    # ------------------------------------------------------------ deserializing

    def warm_up(self) -> None:
        """Have the converter make its functions for every method handled and sent now,
        before serving: cattrs generates each message type's (un)structuring code on
        first use, 2-4 ms on the event loop for the first ``didOpen``, ``didChange`` or
        completion request of a session (0.5 ms once warm; ``initialize``'s answer still
        makes the functions of the capabilities it holds, once).  About 50 ms."""
        for method in {*self.fm.features, *_SENT_METHODS}:
            entry = types.METHOD_TO_TYPES.get(method)
            if entry is None:
                continue
            message_type, response_type = entry[0], entry[1]
            with contextlib.suppress(Exception):  # a hook cattrs cannot make: made at use
                self._converter.get_structure_hook(message_type)
                self._converter.get_unstructure_hook(message_type)
                if response_type is not None:
                    self._converter.get_unstructure_hook(response_type)
                    self._converter.get_structure_hook(response_type)

    def _structure(self, method: str, message: dict[str, Any], request: bool) -> Any:
        """The message as pygls' handlers take it, or what is wrong with it (a str)."""
        message_type = self.get_message_type(method)
        if message_type is None:  # a method lsprotocol does not know: params untyped
            message_type = JsonRPCRequestMessage if request else JsonRPCNotification
            message = {"params": None, **message}
        elif "params" not in message or message["params"] is None:
            params_type = _params_type(method)
            if params_type is not None and _all_optional(params_type):
                message = {**message, "params": {}}  # e.g. `initialized` without params
        try:
            if message_type in (JsonRPCRequestMessage, JsonRPCNotification):
                message = {**message, "params": records(message["params"])}
            return self._converter.structure(message, message_type)
        except Exception as exc:
            return describe_structure_error(exc)


def records(params: Any) -> Any:
    """Untyped params (a method lsprotocol does not know) as pygls makes them, an object
    as named tuples all the way down, but of classes made once per name and keys: pygls
    makes a class for every object of every message (``namedtuple``), about 6 KB of
    cyclic garbage each, which the collector pacing (``gc_pacing``) may freeze for
    minutes (``fimlsp/serverStatus`` polled ten times a second made 60 KB/s)."""
    if not isinstance(params, dict):
        return params
    params = dict(params)
    return _records(params, params.pop("type_name", "Object"))


def _records(value: Any, name: Any) -> Any:
    if isinstance(value, list):
        return [_records(item, name) for item in value]
    if not isinstance(value, dict):
        return value
    values = [_records(item, name) for item in value.values()]
    if not isinstance(name, str):  # pygls' error, whatever namedtuple raises
        return collections.namedtuple(name, tuple(value), rename=True)(*values)
    return _record_class(name, tuple(value))(*values)


@functools.lru_cache(maxsize=1024)
def _record_class(name: str, fields: tuple[str, ...]) -> Any:
    return collections.namedtuple(name, fields, rename=True)


#: What the server sends of its own (besides answers): warmed up with the handled methods.
_SENT_METHODS = (
    types.WINDOW_LOG_MESSAGE,
    types.WINDOW_SHOW_MESSAGE,
    types.WINDOW_WORK_DONE_PROGRESS_CREATE,
    types.PROGRESS,
    types.WORKSPACE_CONFIGURATION,
)


def _is_notification(method: str) -> bool:
    """A method lsprotocol knows as a notification (its message type has no id)."""
    entry = types.METHOD_TO_TYPES.get(method)
    return entry is not None and "id" not in attrs.fields_dict(entry[0])


def _params_type(method: str) -> Any:
    entry = types.METHOD_TO_TYPES.get(method)
    return entry[2] if entry is not None and len(entry) > 2 else None


def _all_optional(cls: Any) -> bool:
    return attrs.has(cls) and all(f.default is not attrs.NOTHING for f in attrs.fields(cls))


# ---------------------------------------------------------------- serving


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
    return 0 if protocol._shutdown else 1


class ThreadedWriter:
    """Writes what the server sends to a binary stream on a thread of its own, in order.

    A write on the event loop blocks it while the pipe is full (a client slow to read
    stops the whole server), and every write and flush is a system call that hands the
    GIL over and then waits behind the worker to get it back (``loop_lag``).  The loop
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
        raise TypeError("the server's protocol must derive from JsonRpcGuard (or use harden())")
    return protocol


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
    protocol.warm_up()
    server._stop_event = stop = threading.Event()
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
    protocol.warm_up()
    server._stop_event = stop = threading.Event()

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
        return asyncio.run(main())
    finally:
        server.shutdown()
