"""lsp_server.transport: the frame reader on byte streams, the message guard against pygls'
own handling (each case shows pygls' behaviour and the guard's), and the real server
(``fimlsp``, whose protocol is guarded) over stdio and TCP.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, _dict_to_object

from bench.lsp_fuzz import SMALL, OutputParser, encode, frame, oracle_parse
from lsp_server.transport.framing import Body, FrameReader, Oversized
from lsp_server.transport.guard import JsonRpcGuard
from lsp_server.transport.messages import decode_body, records
from lsp_server.transport.serving import LARGE_BODY, ThreadedWriter

# --------------------------------------------------------------------------- the reader


def message(msg_id: int, size: int = 0) -> bytes:
    return encode({"jsonrpc": "2.0", "id": msg_id, "method": "m", "params": {"x": "y" * size}})


ONE, TWO = message(1), message(2)


def read_all(data: bytes, reader: FrameReader | None = None) -> list[Body | Oversized]:
    reader = reader or FrameReader()
    return reader.feed(data) + reader.close()


def bodies(events: list[Body | Oversized]) -> list[bytes]:
    return [e.data for e in events if isinstance(e, Body)]


FRAMINGS: dict[str, tuple[bytes, list[bytes]]] = {
    "standard": (frame(ONE) + frame(TWO), [ONE, TWO]),
    "lowercase header": (b"content-length: %d\r\n\r\n" % len(ONE) + ONE + frame(TWO), [ONE, TWO]),
    "no space, upper case": (b"CONTENT-LENGTH:%d\r\n\r\n" % len(ONE) + ONE, [ONE]),
    "LF-only lines": (b"Content-Length: %d\n\n" % len(ONE) + ONE + frame(TWO), [ONE, TWO]),
    "spaces and tabs": (b"Content-Length: \t%d \t\r\n\r\n" % len(ONE) + ONE, [ONE]),
    "headers before": (
        b"Content-Type: x\r\nX-A: b\r\nContent-Length: %d\r\n\r\n" % len(ONE) + ONE,
        [ONE],
    ),
    "headers after": (b"Content-Length: %d\r\nContent-Type: x\r\n\r\n" % len(ONE) + ONE, [ONE]),
    "no blank line": (b"Content-Length: %d\r\n" % len(ONE) + ONE + frame(TWO), [ONE, TWO]),
    "garbage between": (frame(ONE) + b"\x00\xff junk \r\n\r\nmore\n" + frame(TWO), [ONE, TWO]),
    "garbage glued to a header": (b"xyz}}" + frame(ONE), [ONE]),
    "a long header line": (b"X-Junk: " + b"a" * 100_000 + b"\r\n" + frame(ONE), [ONE]),
    "length too short": (
        b"Content-Length: %d\r\n\r\n" % (len(ONE) - 5) + ONE + frame(TWO),
        [ONE[:-5], TWO],
    ),
    "length too long by 1": (
        b"Content-Length: %d\r\n\r\n" % (len(ONE) + 1) + ONE + frame(TWO),
        [ONE, TWO],
    ),
    "length too long by 500": (
        b"Content-Length: %d\r\n\r\n" % (len(ONE) + 500) + ONE + frame(TWO),
        [ONE, TWO],
    ),
    "length too long, input ends": (b"Content-Length: %d\r\n\r\n" % (len(ONE) + 9) + ONE, [ONE]),
    "missing length": (b"Content-Type: x\r\n\r\n" + ONE + frame(TWO), [TWO]),
    "malformed length": (b"Content-Length: abc\r\n\r\n" + ONE + frame(TWO), [TWO]),
    "negative length": (b"Content-Length: -5\r\n\r\n" + ONE + frame(TWO), [TWO]),
    "empty body": (b"Content-Length: 0\r\n\r\n" + frame(TWO), [b"", TWO]),
    "not JSON": (frame(b"not json") + frame(TWO), [b"not json", TWO]),
}


@pytest.mark.parametrize("name", FRAMINGS)
def test_frames_are_found_whatever_the_framing(name: str) -> None:
    data, expected = FRAMINGS[name]
    assert bodies(read_all(data)) == expected


@pytest.mark.parametrize("length", [10**12, 2**63, 10**30, 65 * 2**20])
def test_an_absurd_length_is_reported_and_the_next_frame_found(length: int) -> None:
    events = read_all(b"Content-Length: %d\r\n\r\n" % length + ONE + frame(TWO))
    assert isinstance(events[0], Oversized)
    assert events[0].length == length and events[0].head.startswith(ONE)
    assert bodies(events) == [TWO]


def test_an_oversized_body_is_skipped_in_chunks_without_being_held() -> None:
    reader = FrameReader(max_content_length=2**20)
    chunk = b"x" * 2**16
    tracemalloc.start()
    try:
        events = reader.feed(b"Content-Length: %d\r\n\r\n" % (8 * 2**20))
        for _ in range(128):  # 8 MiB of body, four times the limit
            events += reader.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    events += reader.feed(frame(TWO))
    assert [type(e) for e in events] == [Oversized, Body] and bodies(events) == [TWO]
    assert peak < 2**20, f"peak {peak} bytes while skipping"


def test_a_short_body_is_taken_when_the_input_pauses() -> None:
    reader = FrameReader()
    assert reader.feed(b"Content-Length: %d\r\n\r\n" % (len(ONE) + 40) + ONE) == []
    assert reader.waiting_for_body
    assert bodies(reader.idle()) == [ONE]
    assert reader.problems["short body"] == 1
    assert bodies(reader.feed(frame(TWO))) == [TWO]


def test_an_incomplete_body_is_not_taken_at_a_pause() -> None:
    reader = FrameReader()
    assert reader.feed(b"Content-Length: %d\r\n\r\n" % len(ONE) + ONE[:20]) == []
    assert reader.idle() == []
    assert bodies(reader.feed(ONE[20:])) == [ONE]


def test_a_body_cut_by_the_next_header_keeps_that_frames_other_headers() -> None:
    cut = b"Content-Length: %d\r\n\r\n" % (len(ONE) + 200) + ONE
    events = read_all(cut + b"Content-Type: x\r\n" + frame(TWO) + b" " * 200)
    assert bodies(events) == [ONE, TWO]


def test_problems_are_counted() -> None:
    reader = FrameReader()
    read_all(b"junk\r\n" + b"Content-Length: 10\r\n\r\n{}" + frame(ONE), reader)
    assert reader.problems["garbage"] == 1 and reader.problems["cut body"] == 1


def test_a_value_followed_by_junk_is_decoded() -> None:
    assert decode_body(ONE + b"Content-Type: x\r\n\r\n{") == json.loads(ONE)
    with pytest.raises(ValueError):
        decode_body(b'{"a": \xff}')


# A stream of frames, each correct or broken in one way, cut into arbitrary chunks.
KINDS = [
    "good",
    "lowercase",
    "lf",
    "extra headers",
    "garbage before",
    "too long",
    "too short",
    "missing length",
    "oversized",
]
RECOVERED = {"good", "lowercase", "lf", "extra headers", "garbage before", "too long"}


def _framed(kind: str, body: bytes, extra: int) -> bytes:
    n = len(body)
    return {
        "good": frame(body),
        "lowercase": b"content-length: %d\r\n\r\n" % n + body,
        "lf": b"Content-Length: %d\n\n" % n + body,
        "extra headers": b"Content-Type: a/b\r\nContent-Length: %d\r\nX: y\r\n\r\n" % n + body,
        "garbage before": b"\x00\xfe garbage \n" * (extra % 3 + 1) + frame(body),
        "too long": b"Content-Length: %d\r\n\r\n" % (n + extra) + body,
        "too short": b"Content-Length: %d\r\n\r\n" % max(1, n - extra) + body,
        "missing length": b"Content-Type: a/b\r\n\r\n" + body,
        "oversized": b"Content-Length: %d\r\n\r\n" % 10**12 + body,
    }[kind]


@given(
    st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(1, 300), st.integers(0, 200)),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(1, 400), min_size=1, max_size=30),
)
def test_any_stream_in_any_chunks(frames: list[tuple[str, int, int]], cuts: list[int]) -> None:
    """Chunk boundaries change nothing, and every frame that can be recovered is: its
    message comes out, in order, whatever broken frames surround it."""
    stream = b""
    wanted = []
    for index, (kind, extra, size) in enumerate(frames):
        body = message(index, size)
        stream += _framed(kind, body, extra)
        if kind in RECOVERED:
            wanted.append(json.loads(body))
    whole = read_all(stream)
    reader, chunked, at = FrameReader(), [], 0
    for size in cuts * (len(stream) // sum(cuts) + 1):
        chunked += reader.feed(stream[at : at + size])
        at += size
        if at >= len(stream):
            break
    chunked += reader.close()
    assert chunked == whole
    decoded = []
    for body in bodies(whole):
        try:
            decoded.append(decode_body(body))
        except ValueError:
            continue
    found = iter(decoded)
    assert all(any(d == w for d in found) for w in wanted), (wanted, decoded)


# --------------------------------------------------------------------------- the guard


class Collect:
    """A pygls writer that keeps what the server sends."""

    def __init__(self) -> None:
        self.parser = OutputParser()
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.messages += self.parser.feed(data)

    def close(self) -> None:
        pass


def toy_server(guard: bool) -> tuple[LanguageServer, Collect, Callable[[bytes], None]]:
    """A pygls server with one feature, fed bodies the way pygls' reader does (today) or
    through the guard (new)."""
    protocol_cls = JsonRpcGuard if guard else LanguageServerProtocol
    server = LanguageServer("toy", "1", protocol_cls=protocol_cls)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION)
    def completion(ls: LanguageServer, params: types.CompletionParams) -> types.CompletionList:
        return types.CompletionList(is_incomplete=False, items=[])

    out = Collect()
    server.protocol.set_writer(out)
    protocol = server.protocol

    def pygls_receive(body: bytes) -> None:  # pygls.io_.run_async's handling of a body
        try:
            protocol.handle_message(json.loads(body, object_hook=protocol.structure_message))
        except Exception as exc:
            server.report_server_error(exc, JsonRpcException)

    receive = protocol.receive_body if isinstance(protocol, JsonRpcGuard) else pygls_receive
    return server, out, receive


def msg(**fields: Any) -> bytes:
    return encode({"jsonrpc": "2.0", **fields})


def did_open(uri: str, text: str) -> bytes:
    return msg(
        method="textDocument/didOpen",
        params={"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
    )


INIT = msg(id=0, method="initialize", params={"processId": None, "capabilities": {}})
SHUTDOWN = msg(id=100, method="shutdown")
POS = {"textDocument": {"uri": "file:///a.py"}, "position": {"line": 0, "character": 0}}
COMPLETE = msg(id=1, method="textDocument/completion", params=POS)

# (setup, body, what plain pygls does, what the guard does); an answer is (id, code), code 0
# for a result; "popup" is a window/showMessage and no answer; None is silence.
PROTOCOL_CASES: dict[str, tuple[list[bytes], bytes, Any, Any]] = {
    "not JSON": ([INIT], b"{oops", "popup", (None, -32700)),
    "not JSON, id readable": (
        [INIT],
        b'{"jsonrpc":"2.0","id":7,"method":"x", oops',
        "popup",
        (7, -32700),
    ),
    "not an object": ([INIT], b"42", "popup", (None, -32600)),
    "a batch": ([INIT], b"[" + COMPLETE + b"]", "popup", (None, -32600)),
    "an object id": (
        [INIT],
        msg(id={"a": 1}, method="textDocument/completion", params=POS),
        ({"a": 1}, 0),
        (None, -32600),
    ),
    "a request with a result": (
        [INIT],
        msg(id=8, method="textDocument/completion", params=POS, result=1),
        (8, 0),
        (8, -32600),
    ),
    "a float id": (
        [INIT],
        msg(id=1.5, method="textDocument/completion", params=POS),
        (1.5, 0),
        (1.5, -32600),
    ),
    "a null id": (
        [INIT],
        msg(id=None, method="textDocument/completion", params=POS),
        (None, 0),
        (None, -32600),
    ),
    "line 'four'": (
        [INIT],
        msg(
            id=1,
            method="textDocument/completion",
            params={**POS, "position": {"line": "four", "character": 0}},
        ),
        "popup",
        (1, -32602),
    ),
    "a negative line": (
        [INIT],
        msg(
            id=1,
            method="textDocument/completion",
            params={**POS, "position": {"line": -1, "character": 0}},
        ),
        "popup",
        (1, -32602),
    ),
    "params null": (
        [INIT],
        msg(id=1, method="textDocument/completion", params=None),
        "popup",
        (1, -32602),
    ),
    "no uri": (
        [INIT],
        msg(id=1, method="textDocument/completion", params={**POS, "textDocument": {}}),
        "popup",
        (1, -32602),
    ),
    "no jsonrpc": (
        [INIT],
        encode({"id": 1, "method": "textDocument/completion", "params": POS}),
        "popup",
        (1, -32600),
    ),
    "a method that is a number": ([INIT], msg(id=1, method=5), "popup", (1, -32600)),
    "neither a request nor a response": ([INIT], msg(id=4), "popup", (4, -32600)),
    "a response with a result and an error": (
        [INIT],
        msg(id=5, result=1, error={"code": 1, "message": "both"}),
        None,
        None,
    ),
    "a response with an object id": ([INIT], msg(id={"a": 1}, result=1), None, None),
    "a notification with an id": (
        [INIT],
        msg(id=1, method="textDocument/didSave", params={"textDocument": {"uri": "file:///a.py"}}),
        None,
        (1, -32600),
    ),
    "an unknown method": ([INIT], msg(id=1, method="x/y", params={}), (1, -32601), (1, -32601)),
    "before initialize": ([], COMPLETE, (1, 0), (1, -32002)),
    "initialize twice": ([INIT], INIT.replace(b'"id":0', b'"id":9'), (9, 0), (9, -32600)),
    "a bad initialize": (
        [],
        msg(id=3, method="initialize", params={"processId": "x", "capabilities": {}}),
        "popup",
        (3, -32602),
    ),
    "after shutdown": ([INIT, SHUTDOWN], COMPLETE, None, (1, -32600)),
    "a notification with bad params": (
        [INIT],
        msg(
            method="textDocument/didChange",
            params={
                "textDocument": {"uri": "file:///a.py", "version": 2**40},
                "contentChanges": [{"text": "x"}],
            },
        ),
        "popup",
        "log",
    ),
}


def outcome(messages: list[dict[str, Any]]) -> Any:
    if not messages:
        return None
    first = messages[0]
    if first.get("method") == "window/showMessage":
        return "popup"
    if first.get("method") == "window/logMessage":
        return "log"
    return first.get("id"), (first.get("error") or {}).get("code", 0)


@pytest.mark.parametrize("name", PROTOCOL_CASES)
def test_pygls_today_and_the_guard(name: str) -> None:
    setup, body, today, guarded = PROTOCOL_CASES[name]
    for guard, expected in ((False, today), (True, guarded)):
        _, out, receive = toy_server(guard)
        for earlier in setup:
            receive(earlier)
        out.messages.clear()
        receive(body)
        assert outcome(out.messages) == expected, ("guard" if guard else "pygls", out.messages)
        assert len(out.messages) <= 1


def test_invalid_params_say_which_field() -> None:
    _, out, receive = toy_server(guard=True)
    receive(INIT)
    receive(
        msg(
            id=5,
            method="textDocument/completion",
            params={**POS, "position": {"line": "four", "character": 2**40}},
        )
    )
    error = out.messages[-1]["error"]
    assert out.messages[-1]["id"] == 5
    assert "params.position.line" in error["message"], error


def test_notification_handlers_leave_no_futures() -> None:
    """pygls keeps a future per notification run by a generator handler (its own
    didOpen/didChange/didClose); the guard lets them go."""
    opened = did_open("file:///a.py", "x = 1\n")
    changed = msg(
        method="textDocument/didChange",
        params={
            "textDocument": {"uri": "file:///a.py", "version": 2},
            "contentChanges": [{"text": "x = 2\n"}],
        },
    )
    for guard, left in ((False, 101), (True, 0)):
        server, _, receive = toy_server(guard)
        receive(INIT)
        receive(opened)
        for _ in range(100):
            receive(changed)
        assert len(server.protocol._request_futures) == left


@pytest.mark.parametrize("name", ["line 'four'", "params null", "a negative line"])
def test_a_large_body_parsed_off_the_loop_is_answered_the_same(name: str) -> None:
    """What ``_serve_stream`` does with a body over LARGE_BODY: parsed in pieces (on a
    thread there), then received; padded so that its strings are cut in pieces."""
    setup, body, _, guarded = PROTOCOL_CASES[name]
    message = json.loads(body)
    message["padding"] = 'é😀\\"x' * (LARGE_BODY // 4)
    large = encode(message)
    assert len(large) > LARGE_BODY
    _, out, receive = toy_server(guard=True)
    for earlier in setup:
        receive(earlier)
    out.messages.clear()
    protocol = _guard_of(receive)
    protocol.receive_body(large, protocol.parse_large_body(large))
    assert outcome(out.messages) == guarded


def test_a_large_body_that_is_not_json_gets_a_parse_error() -> None:
    _, out, receive = toy_server(guard=True)
    protocol = _guard_of(receive)
    broken = b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": {"t": "' + b"a" * LARGE_BODY
    protocol.receive_body(broken, protocol.parse_large_body(broken))
    assert outcome(out.messages) == (7, -32700)
    junk_after = COMPLETE[:-1] + b', "t": "' + b"a" * LARGE_BODY + b'"}\r\nContent-Type: x\r\n'
    assert protocol.parse_large_body(junk_after).value == json.loads(junk_after.split(b"\r")[0])


def _guard_of(receive: Callable[[bytes], None]) -> JsonRpcGuard:
    protocol = getattr(receive, "__self__", None)
    assert isinstance(protocol, JsonRpcGuard)
    return protocol


def test_a_failing_protocol_hook_still_answers() -> None:
    class Failing(JsonRpcGuard):
        def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
            raise AttributeError("no capabilities yet")

    server = LanguageServer("toy", "1", protocol_cls=Failing)
    out = Collect()
    server.protocol.set_writer(out)
    guard = server.protocol
    assert isinstance(guard, JsonRpcGuard)
    guard._initialized = True
    guard.receive_body(COMPLETE)
    assert outcome(out.messages) == (1, -32603)
    assert "no capabilities yet" in out.messages[0]["error"]["message"]
    assert not guard.owed


# --------------------------------------------------------------------------- a real server

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

from lsp_fixtures import stopping_model  # noqa: E402
from model_fixtures import model_cache, tiny_factory  # noqa: E402

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name

SERVER_COMMAND = (sys.executable, "-m", "lsp_server.cli")


class RawClient:
    """Frames written by hand to a server, its answers collected by a thread."""

    def __init__(self, write: Callable[[bytes], None], read: Callable[[int], bytes]) -> None:
        self.write = write
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        parser = OutputParser()

        def pump() -> None:
            while chunk := read(1 << 16):
                for item in parser.feed(chunk):
                    if "method" in item:
                        self.notifications.append(item)
                    else:
                        self.answers.put(item)

        threading.Thread(target=pump, daemon=True).start()

    def send(self, data: bytes) -> None:
        self.write(data)

    def answer(self, timeout: float = 20) -> dict[str, Any]:
        return self.answers.get(timeout=timeout)

    def ask(self, data: bytes) -> dict[str, Any]:
        self.send(data)
        return self.answer()


def status(msg_id: Any, uri: str | None = None) -> bytes:
    return msg(id=msg_id, method="fimlsp/serverStatus", params={"uri": uri} if uri else {})


def initialize(model: Path) -> bytes:
    return msg(
        id="init",
        method="initialize",
        params={
            "processId": None,
            "capabilities": {},
            "initializationOptions": {
                "model": str(model),
                "maxTokens": 16,
                "pythonVersion": f"{sys.version_info[0]}.{sys.version_info[1]}",
            },
        },
    )


def start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*SERVER_COMMAND, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stdio_client(proc: subprocess.Popen[bytes]) -> RawClient:
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def write(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    return RawClient(write, stdout.read1)  # type: ignore[attr-defined]


def wait_ready(client: RawClient) -> None:
    for attempt in range(300):
        state = client.ask(frame(status(f"ready-{attempt}")))["result"]["state"]
        if state not in ("idle", "loading"):  # idle: settings not applied yet
            assert state == "ready"
            return
        time.sleep(0.1)


def test_the_real_server_through_the_layer(stopping_model: Path) -> None:
    proc = start()
    client = stdio_client(proc)
    try:
        # Before initialize: requests refused, notifications dropped; a bad initialize.
        assert client.ask(frame(status(1)))["error"]["code"] == -32002
        uri = "file:///early.py"
        client.send(frame(did_open(uri, SMALL)))
        bad = client.ask(
            frame(msg(id=2, method="initialize", params={"processId": "x", "capabilities": {}}))
        )
        assert bad["id"] == 2 and bad["error"]["code"] == -32602
        assert "processId" in bad["error"]["message"]
        assert "result" in client.ask(frame(initialize(stopping_model)))
        client.send(frame(msg(method="initialized", params={})))
        wait_ready(client)
        assert client.ask(frame(status(3, uri)))["result"]["document"] is None

        # Framing abuse: every request below is answered, and the stream heals.
        body = status(10)
        client.send(b"content-length: %d\n\n" % len(body) + body)
        assert client.answer()["id"] == 10
        client.send(b"garbage\r\n\x00\xff" + b"Content-Length: %d\r\n\r\n" % (len(body) + 7) + body)
        client.send(frame(status(11)))
        assert {client.answer()["id"], client.answer()["id"]} == {10, 11}
        client.send(b"Content-Length: %d\r\n\r\n" % (len(body) - 9) + body)
        truncated = client.answer()  # its id is read from what came
        assert (truncated["id"], truncated["error"]["code"]) == (10, -32700)
        client.send(b"Content-Length: %d\r\n\r\n" % 10**12 + status(12) + frame(status(13)))
        oversized, after = client.answer(), client.answer()
        assert (oversized["id"], oversized["error"]["code"]) == (12, -32600)
        assert after["id"] == 13 and "result" in after
        client.send(frame(b"[" + status(14) + b"]"))
        assert client.answer()["error"]["code"] == -32600

        # Invalid params: answered with the id, no popup.
        answer = client.ask(
            frame(
                msg(
                    id=20,
                    method="textDocument/inlineCompletion",
                    params={
                        "textDocument": {"uri": uri},
                        "position": {"line": -1, "character": 0},
                        "context": {"triggerKind": 1},
                    },
                )
            )
        )
        assert answer["id"] == 20 and answer["error"]["code"] == -32602

        # A document: a completion that parses; a change the server cannot take
        # makes it forget the document instead of answering for another text.
        uri = "file:///a.py"
        client.send(frame(did_open(uri, SMALL)))
        answer = client.ask(
            frame(
                msg(
                    id=30,
                    method="textDocument/inlineCompletion",
                    params={
                        "textDocument": {"uri": uri},
                        "position": {"line": 8, "character": 12},
                        "context": {"triggerKind": 1},
                    },
                )
            )
        )
        for item in answer["result"]["items"]:
            lines = SMALL.split("\n")
            lines[8] = lines[8][:12] + item["insertText"] + lines[8][12:]
            assert oracle_parse("\n".join(lines)) is None
        client.send(
            frame(
                msg(
                    method="textDocument/didChange",
                    params={
                        "textDocument": {"uri": uri, "version": 2**40},
                        "contentChanges": [{"text": "x = 1\n"}],
                    },
                )
            )
        )
        # A version no int32 holds: the change is applied all the same, and said.
        document = client.ask(frame(status(31, uri)))["result"]["document"]
        assert document["length"] == len("x = 1\n"), document
        assert any(
            "repaired textDocument/didChange" in n["params"]["message"]
            for n in client.notifications
            if n["method"] == "window/logMessage"
        )
        assert any(
            "repaired" in n["params"].get("warning", "")
            for n in client.notifications
            if n["method"] == "fimlsp/status"
        )

        # Shutdown: requests refused, then exit with 0.
        assert "result" in client.ask(frame(msg(id=40, method="shutdown")))
        assert client.ask(frame(status(41)))["error"]["code"] == -32600
        client.send(frame(msg(method="exit")))
        assert proc.wait(20) == 0
        assert not [n for n in client.notifications if n["method"] == "window/showMessage"]
    finally:
        proc.kill()
        proc.wait()


def test_exit_without_shutdown_is_an_error(stopping_model: Path) -> None:
    proc = start()
    client = stdio_client(proc)
    try:
        assert "result" in client.ask(frame(initialize(stopping_model)))
        client.send(frame(msg(method="exit")))
        assert proc.wait(20) == 1
    finally:
        proc.kill()
        proc.wait()


def test_tcp(stopping_model: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = start("--tcp", "--port", str(port))
    try:
        for _ in range(200):
            try:
                conn = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the server did not listen")
        client = RawClient(conn.sendall, conn.recv)
        assert "result" in client.ask(frame(initialize(stopping_model)))
        client.send(b"Content-Length: %d\r\n\r\n" % 10**12 + status(1) + frame(status(2)))
        assert [client.answer()["id"], client.answer()["id"]] == [1, 2]
        assert "result" in client.ask(frame(msg(id=3, method="shutdown")))
        client.send(frame(msg(method="exit")))
        assert proc.wait(20) == 0
        conn.close()
    finally:
        proc.kill()
        proc.wait()


# ----------------------------------------------------------------------------- the writer


class _Stream:
    """A binary stream that records its writes; ``fail`` makes writes raise, ``gate``
    holds a write until it is set."""

    def __init__(self, fail: bool = False) -> None:
        self.written: list[bytes] = []
        self.flushes = 0
        self.closed = False
        self.fail = fail
        self.gate = threading.Event()
        self.gate.set()

    def write(self, data: bytes) -> int:
        self.gate.wait()
        if self.fail:
            raise BrokenPipeError("the client closed its end")
        self.written.append(data)
        return len(data)

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        self.closed = True


def test_threaded_writer_writes_in_order_and_drains_on_close() -> None:
    stream = _Stream()
    stream.gate.clear()  # the first write blocks: the rest queue up behind it
    writer = ThreadedWriter(stream)  # type: ignore[arg-type]
    messages = [f"message {i};".encode() for i in range(200)]
    for message in messages:
        writer.write(message)
    stream.gate.set()
    writer.close()
    assert b"".join(stream.written) == b"".join(messages)
    assert len(stream.written) < len(messages)  # what queued up went out together
    assert stream.flushes == len(stream.written) and stream.closed


def test_threaded_writer_drops_what_follows_a_failed_write() -> None:
    stream = _Stream(fail=True)
    writer = ThreadedWriter(stream)  # type: ignore[arg-type]
    writer.write(b"lost")
    writer.close()
    writer.write(b"after close: dropped, no error")
    assert writer.failed and stream.written == [] and stream.closed


def test_threaded_writer_does_not_close_a_stream_it_is_still_writing_to() -> None:
    stream = _Stream()
    stream.gate.clear()  # a client that never reads
    writer = ThreadedWriter(stream)  # type: ignore[arg-type]
    writer.write(b"stuck")
    writer.close(timeout=0.05)
    assert not stream.closed
    stream.gate.set()


# --------------------------------------------------------------------------- untyped params

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "def", "1x", "type_name"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(JSON)
def test_untyped_params_are_what_pygls_makes(value: Any) -> None:
    """A method lsprotocol does not know gets its params as pygls would make them (or
    the same error: a ``type_name`` that names no class)."""

    def made(convert: Callable[[Any], Any]) -> tuple[str, str]:
        try:
            made = convert(dict(value) if isinstance(value, dict) else value)
        except (ValueError, TypeError) as exc:
            return type(exc).__name__, str(exc)
        return type(made).__name__, repr(made)

    assert made(records) == made(_dict_to_object)


def test_untyped_params_reuse_their_classes() -> None:
    """pygls makes a class per object per message (about 6 KB of cyclic garbage each);
    the same keys get the same class here."""
    first, second = (
        records({"uri": "a", "at": {"line": 1}}),
        records({"uri": "b", "at": {"line": 2}}),
    )
    assert type(first) is type(second) and type(first.at) is type(second.at)
    assert second.uri == "b" and second.at.line == 2


@pytest.mark.parametrize("depth", [5_000, 1_000_000])
def test_a_body_nested_too_deeply_gets_a_parse_error(depth: int) -> None:
    """``[[[[...`` deeper than the JSON decoder recurses: an error answer, never a crash
    (an independent fuzzing client stopped the server with one)."""
    _, out, receive = toy_server(guard=True)
    receive(INIT)
    protocol = _guard_of(receive)
    nested = b"[" * depth + b"]" * depth
    request = b'{"jsonrpc": "2.0", "id": 9, "method": "textDocument/completion", "params": '
    for body in (b"[" * depth, request + nested + b"}"):
        for large in (False, True):
            out.messages.clear()
            if large:
                padded = body + b" " * LARGE_BODY
                protocol.receive_body(padded, protocol.parse_large_body(padded))
            else:
                receive(body)
            expected = (9 if body.startswith(b"{") else None, -32700)
            assert outcome(out.messages) == expected, out.messages
            assert "nested too deeply" in out.messages[0]["error"]["message"]
