"""LSP framing without I/O: a byte stream in, message bodies out, whatever arrives.

pygls reads frames with a strict header regex and ``readexactly(length)``: a
``Content-Length`` of 10**12 allocates it (``MemoryError``, the process dies), and
after one frame with a wrong length, a lowercase header or LF-only lines every
later message is lost.  :class:`FrameReader` replaces that reader for stdio and
TCP (:mod:`.serving` feeds it): headers in any case with ``\\r\\n`` or ``\\n``
line ends, unknown headers ignored, lengths bounded (a larger one is reported and
its body skipped in chunks, never allocated), garbage skipped up to the next
``Content-Length``.  A body is cut short where the next frame's header appears
inside it (a header line ends in a raw line end, which no JSON text can hold inside
a string, so a valid body never contains one); a body still incomplete when the
input pauses is taken if it is already a complete JSON text.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_CONTENT_LENGTH",
    "HEAD_KEPT",
    "Body",
    "FrameEvent",
    "FrameReader",
    "Oversized",
    "embedded_header",
]

log = logging.getLogger(__name__)

#: The largest body read (64 MiB: a 20 MB document escaped to JSON fits three times).
DEFAULT_MAX_CONTENT_LENGTH = 64 * 2**20

# A Content-Length header line, bounded so a search window is short.
_LENGTH = rb"content-length[ \t]{0,16}:[ \t]{0,16}(\d{1,40})[ \t]{0,16}\r?\n"
_LENGTH_RE = re.compile(_LENGTH, re.IGNORECASE)
_LENGTH_LINE_RE = re.compile(rb"[ \t]*" + _LENGTH, re.IGNORECASE)
_HEADER_SPAN = 110
_JSON_BLANKS = frozenset(b" \t\r\n")  # the bytes JSON allows between tokens
# Header lines (a frame's other headers, before its Content-Length); a field name is
# an RFC 7230 token, which no JSON punctuation is part of.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_HEADER_LINES_RE = re.compile(rb"(?:" + _TOKEN.encode() + rb":[^\r\n]*\r?\n|\r?\n)*")
_TRAILING_HEADER_RE = re.compile(_TOKEN.encode() + rb":[^\r\n]*\r?\n\Z")
_MAX_HEADER_LINE = 8192
#: Bytes kept of the head of a body skipped or not parsed, to find its id in.
HEAD_KEPT = 1024


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
            json.loads(bytes(body))
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
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
            end = self._json_end(cut) if _last_byte(self._body, cut) != b"}" else None
            events.append(self._take_body(end or cut, "cut short by the next frame's header"))
            self._buffer[:0] = rest
            return True
        if len(self._body) < self._length:
            return False
        size = len(self._body)
        end = self._json_end(size) if _last_byte(self._body, size) != b"}" else None
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
        # one copy of the body (a slice of a bytearray is a second)
        data = bytes(self._body) if size == len(self._body) else bytes(self._body[:size])
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
        if len(self._head) < HEAD_KEPT:
            self._head += window[len(self._carry) :][: HEAD_KEPT - len(self._head)]
        cut = embedded_header(window, 0)
        if cut is not None:
            del self._head[max(0, window_start + cut) :]
        done = cut is not None or self._skip_left == 0
        if not self._head_sent and (done or self._skipped >= HEAD_KEPT + _HEADER_SPAN):
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


def _last_byte(data: bytearray, end: int) -> bytes:
    """The last byte of ``data[:end]`` that is not JSON whitespace (empty if none),
    found without copying the body (``rstrip`` would copy megabytes on the loop)."""
    while end > 0 and data[end - 1] in _JSON_BLANKS:
        end -= 1
    return bytes(data[end - 1 : end]) if end else b""
