"""What users see when the server is down, slow, wrong or broken, and how fast a cancel ends
a request.  Real servers throughout: llama-server for what it does (API keys, TLS, errors,
dying mid-stream, a busy slot), and small socket servers in the test for the answers no
sane server gives (garbage, truncated streams, silence)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from model_fixtures import (
    model_cache,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)
from test_llama_server import llama_server_binary

from bench.llama_server import LlamaServer, free_port, running_llama_server, start_llama_server
from lsp_server.model import FimModel
from lsp_server.model.remote.server_api import (
    Backoff,
    ServerAuthError,
    ServerAvailability,
    ServerClient,
    ServerError,
    ServerHTTPError,
    ServerProtocolError,
    ServerTimeout,
    ServerTLSError,
    ServerUnreachable,
)

__all__ = [  # fixtures used by name
    "llama_server_binary",
    "model_cache",
    "tiny_factory",
    "tiny_model",
    "tiny_model_path",
    "tiny_session_model",
]

PROMPT_TEXT = ("def add(a, b):\n    return ", "\n")


@pytest.fixture(scope="module")
def server(
    llama_server_binary: Path, tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One slot with room for a long generation (thousands of tokens: seconds of work)."""
    with running_llama_server(
        llama_server_binary,
        tiny_model_path,
        parallel=1,
        ctx_size=8192,
        log_dir=tmp_path_factory.mktemp("llama-server"),
    ) as running:
        yield running


# ---------------------------------------------------------------- a socket server for garbage


class CannedServer:
    """A real TCP (or TLS) server on 127.0.0.1 answering every request with canned bytes
    (``answer(path) -> bytes``, sent as they are), or staying silent until the client
    leaves (``answer`` None).  After a whole answer (``Content-Length``) without
    ``Connection: close`` it keeps the connection for the next request, at most
    ``requests_per_connection`` times.  It counts connections and records when a silent
    server's client left."""

    def __init__(
        self,
        answer: Callable[[str], bytes] | None,
        tls: ssl.SSLContext | None = None,
        requests_per_connection: int = 100,
    ) -> None:
        self.answer = answer
        self.tls = tls
        self.requests_per_connection = requests_per_connection
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.client_left = threading.Event()
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn: socket.socket) -> str | None:
        """The path of the next request on ``conn`` (its body read too); None at EOF."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += conn.recv(65536)
        return head.split(b" ", 2)[1].decode()

    def _handle(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            for _ in range(self.requests_per_connection):
                path = self._read_request(conn)
                if path is None:
                    return
                if self.answer is None:
                    conn.settimeout(30)
                    while conn.recv(65536):  # silent: wait for the client to go away
                        pass
                    self.client_left.set()
                    return
                answer = self.answer(path)
                conn.sendall(answer)
                head = answer.partition(b"\r\n\r\n")[0]
                if b"Content-Length" not in head or b"Connection: close" in head:
                    return  # garbage and streams end with the connection
        except (OSError, ssl.SSLError):
            self.client_left.set()
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def canned() -> Iterator[Callable[..., CannedServer]]:
    servers: list[CannedServer] = []

    def make(
        answer: Callable[[str], bytes] | None,
        tls: ssl.SSLContext | None = None,
        requests_per_connection: int = 100,
    ) -> CannedServer:
        servers.append(CannedServer(answer, tls, requests_per_connection))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def http_answer(status: str, body: bytes, keep_alive: bool = False) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + (b"" if keep_alive else b"Connection: close\r\n") + b"\r\n" + body


def sse_answer(*chunks: bytes, end: bool = True) -> bytes:
    """A chunked ``text/event-stream`` answer; ``end=False`` leaves it without its last chunk."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
    return head + body + (b"0\r\n\r\n" if end else b"")


EVENT = b'data: {"index":0,"content":"a","tokens":[64],"stop":false,"tokens_predicted":1}\n\n'
GARBAGE: dict[str, tuple[bytes, type[ServerError], str]] = {
    "not json": (http_answer("200 OK", b"hello"), ServerProtocolError, "not JSON"),
    "cut short": (http_answer("200 OK", b'{"tokens": [1, 2')[:-4], ServerProtocolError, "cut off"),
    "not http": (b"garbage garbage\r\n\r\n", ServerProtocolError, "did not answer with HTTP"),
    "no answer": (b"", ServerUnreachable, "closed the connection without answering"),
    "server error": (
        http_answer("500 Internal Server Error", b'{"error": {"code": 500, "message": "kaput"}}'),
        ServerHTTPError,
        "answered 500: kaput",
    ),
    "wrong shape": (http_answer("200 OK", b'{"tokens": "x"}'), ServerProtocolError, "not a list"),
}
STREAM_GARBAGE: dict[str, tuple[bytes, str]] = {
    "cut mid-event": (sse_answer(EVENT, b'data: {"tok', end=False), "middle of a line"),
    "closed mid-event": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        + EVENT
        + b'data: {"tok',
        "middle of a line",
    ),
    "event not json": (sse_answer(EVENT, b"data: {oops\n\n"), "not JSON"),
    "not an event": (sse_answer(b"hello there\n\n"), "not an event"),
    "no final event": (sse_answer(EVENT), "without saying why"),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_answers_raise_clear_errors(canned: Callable[..., CannedServer], case: str) -> None:
    raw, kind, message = GARBAGE[case]
    server = canned(lambda path: raw)
    with ServerClient(server.url, server_api="llama.cpp") as client, pytest.raises(kind) as caught:
        client.tokenize("x")
    assert message in str(caught.value) and server.url in str(caught.value)


@pytest.mark.parametrize("case", sorted(STREAM_GARBAGE))
def test_broken_streams_raise_clear_errors(canned: Callable[..., CannedServer], case: str) -> None:
    raw, message = STREAM_GARBAGE[case]
    server = canned(lambda path: raw)
    started = time.monotonic()
    with ServerClient(server.url, server_api="llama.cpp") as client:
        stream = client.stream([1, 2, 3], n_predict=8)
        with pytest.raises(ServerProtocolError, match=message):
            list(stream)
    assert time.monotonic() - started < 10  # never a hang


def test_an_error_event_mid_stream_carries_the_servers_message(
    canned: Callable[..., CannedServer],
) -> None:
    error = (
        b'data: {"error": {"code": 500, "message": "out of memory", "type": "server_error"}}\n\n'
    )
    server = canned(lambda path: sse_answer(EVENT, error))
    with ServerClient(server.url, server_api="llama.cpp") as client:
        stream = client.stream([1, 2, 3], n_predict=8)
        assert next(stream).token == 64
        with pytest.raises(ServerHTTPError, match="out of memory"):
            next(stream)


def test_connections_are_reused_and_a_stale_one_replaced(
    canned: Callable[..., CannedServer],
) -> None:
    tokens = http_answer("200 OK", b'{"tokens": [1, 2]}', keep_alive=True)
    server = canned(lambda path: tokens)
    with ServerClient(server.url, server_api="llama.cpp") as client:
        for _ in range(3):
            assert client.tokenize("x") == [1, 2]
    assert server.connections == 1  # kept alive between requests
    # A server that closes each connection after one answer (as at an idle timeout):
    # the kept connection is dead by the next request, which goes out again on a new one.
    closing = canned(lambda path: tokens, requests_per_connection=1)
    with ServerClient(closing.url, server_api="llama.cpp") as client:
        for _ in range(3):
            assert client.tokenize("x") == [1, 2]
            time.sleep(0.05)  # let the close arrive
    assert closing.connections == 3


# ---------------------------------------------------------------- unreachable, slow


def test_nothing_listening_is_unreachable() -> None:
    with (
        ServerClient(f"http://127.0.0.1:{free_port()}") as client,
        pytest.raises(ServerUnreachable, match="refused: is the server running") as caught,
    ):
        client.detect()
    assert caught.value.transient


def test_an_unknown_host_name_says_so() -> None:
    with (
        ServerClient("http://fimlsp-no-such-host.invalid:8080") as client,
        pytest.raises(
            ServerUnreachable, match=r"cannot resolve the host name 'fimlsp-no-such-host\.invalid'"
        ),
    ):
        client.detect(deadline=time.perf_counter() + 30)


def test_a_silent_server_times_out(canned: Callable[..., CannedServer]) -> None:
    server = canned(None)
    started = time.monotonic()
    with (
        ServerClient(server.url, server_api="llama.cpp", read_timeout=0.3) as client,
        pytest.raises(ServerTimeout, match="did not answer in time"),
    ):
        client.complete([1, 2, 3], n_predict=4)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_cancel_and_deadline_end_a_wait_at_once(
    canned: Callable[..., CannedServer], how: str
) -> None:
    """Mid-read, nothing arriving: the call returns at once and the connection is closed
    (the server sees the client leave), for whole answers and streams alike."""
    for streaming in (False, True):
        server = canned(None)
        flag = threading.Event()
        fired: list[float] = []

        def fire(flag: threading.Event = flag, fired: list[float] = fired) -> None:
            fired.append(time.perf_counter())
            flag.set()

        timer = threading.Timer(0.3, fire)
        cancel = flag.is_set if how == "cancel" else None
        deadline = time.perf_counter() + 0.3 if how == "deadline" else None
        timer.start()
        with ServerClient(server.url, server_api="llama.cpp", read_timeout=30) as client:
            if streaming:
                stream = client.stream([1, 2, 3], n_predict=4, cancel=cancel, deadline=deadline)
                assert list(stream) == []
                assert stream.end is not None
                stop = stream.end.stop
            else:
                answer = client.complete([1, 2, 3], n_predict=4, cancel=cancel, deadline=deadline)
                assert answer.steps == ()
                stop = answer.end.stop
        returned = time.perf_counter()
        timer.join()
        assert stop == ("cancelled" if how == "cancel" else "deadline")
        assert returned - (fired[0] if how == "cancel" else deadline or 0.0) < 0.25
        assert server.client_left.wait(2)  # the connection is closed, not left to linger


# ---------------------------------------------------------------- the real server


def _slot_busy(server: LlamaServer) -> bool:
    with ServerClient(server.url) as client:
        slots = client.http.request("GET", "/slots")
    return any(slot["is_processing"] for slot in slots)


def test_cancelling_a_stream_stops_the_servers_work(
    server: LlamaServer, tiny_model: FimModel
) -> None:
    prompt = tiny_model.build_fim_prompt(*PROMPT_TEXT)
    stop = threading.Event()
    with ServerClient(server.url) as client:
        stream = client.stream(prompt, n_predict=6000, n_probs=2, cancel=stop.is_set)
        for step in stream:
            if step.position == 3:
                stop.set()
                set_at = time.perf_counter()
        ended = time.perf_counter()
        assert stream.end is not None and stream.end.stop == "cancelled"
        assert stream.steps_seen == 4 and ended - set_at < 0.1
        # 6000 tokens take the tiny model seconds; the server stops as soon as it notices.
        deadline = time.monotonic() + 2
        while _slot_busy(server) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _slot_busy(server)
        assert len(client.complete(prompt, n_predict=2).tokens) == 2  # the slot serves again


def test_a_deadline_ends_a_request_queued_behind_a_busy_slot(
    server: LlamaServer, tiny_model: FimModel
) -> None:
    """The only slot is busy: the second request waits for the server's first byte, and its
    deadline ends it there."""
    prompt = tiny_model.build_fim_prompt(*PROMPT_TEXT)
    with ServerClient(server.url) as client:
        with client.stream(prompt, n_predict=6000) as busy:
            next(busy)
            deadline = time.perf_counter() + 0.3
            answer = client.complete(prompt, n_predict=4, deadline=deadline)
            assert answer.end.stop == "deadline" and time.perf_counter() - deadline < 0.25
        assert len(client.complete(prompt, n_predict=2).tokens) == 2


def test_http_errors_carry_the_servers_message(server: LlamaServer, tiny_model: FimModel) -> None:
    with ServerClient(server.url) as client:
        with pytest.raises(ServerHTTPError) as caught:
            client.complete([tiny_model.vocab.n_vocab + 5], n_predict=2)
        assert caught.value.status == 400 and not caught.value.transient
        assert caught.value.detail and caught.value.detail in str(caught.value)
        with pytest.raises(ServerHTTPError, match="context") as caught:
            client.complete([1] * 9000, n_predict=2)  # longer than the slot's 8192
    with (
        ServerClient(server.url + "/not-here") as client,
        pytest.raises(ServerHTTPError, match=r"does not exist \(404\)"),
    ):
        client.detect()


def test_a_server_killed_mid_stream_is_an_error_not_a_hang(
    llama_server_binary: Path, tiny_model_path: Path, tiny_model: FimModel, tmp_path: Path
) -> None:
    prompt = tiny_model.build_fim_prompt(*PROMPT_TEXT)
    running = start_llama_server(
        llama_server_binary, tiny_model_path, ctx_size=8192, log_dir=tmp_path
    )
    try:
        with ServerClient(running.url, read_timeout=10) as client:
            stream = client.stream(prompt, n_predict=6000)
            next(stream)
            running.process.kill()
            started = time.monotonic()
            with pytest.raises(ServerError):
                list(stream)
            assert time.monotonic() - started < 10
            running.process.wait()  # gone, its port closed
            with pytest.raises(ServerUnreachable, match="refused"):
                client.complete(prompt, n_predict=2)
    finally:
        running.stop()


def test_api_keys(llama_server_binary: Path, tiny_model_path: Path, tmp_path: Path) -> None:
    with running_llama_server(
        llama_server_binary, tiny_model_path, ctx_size=512, api_key="sekrit", log_dir=tmp_path
    ) as running:
        with (
            ServerClient(running.url) as anonymous,
            pytest.raises(ServerAuthError, match=r"401.*needs an API key") as caught,
        ):
            anonymous.detect()
        assert not caught.value.transient
        with (
            ServerClient(running.url, api_key="wrong") as wrong,
            pytest.raises(ServerAuthError, match=r"Invalid API Key.*the API key was rejected"),
        ):
            wrong.complete([1, 2], n_predict=1)
        with ServerClient(running.url, api_key="sekrit") as right:
            assert right.detect() == "llama.cpp"
            assert len(right.complete([1, 2], n_predict=2).tokens) == 2


# ---------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key), made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate for the TLS tests")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_certificates_are_checked(
    canned: Callable[..., CannedServer], certificate: tuple[Path, Path]
) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    props = json.dumps({"total_slots": 1, "default_generation_settings": {"n_ctx": 64}}).encode()
    server = canned(lambda path: http_answer("200 OK", props), tls=context)
    with (
        ServerClient(server.url) as client,
        pytest.raises(ServerTLSError, match=r"cannot verify the TLS certificate.*SSL_CERT_FILE"),
    ):
        client.detect()
    with ServerClient(server.url, verify=str(certificate[0])) as client:
        assert client.detect() == "llama.cpp"
    with ServerClient(server.url, verify=False) as client:
        assert client.detect() == "llama.cpp"


def test_llama_server_over_https(
    llama_server_binary: Path, tiny_model_path: Path, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    try:
        running = start_llama_server(
            llama_server_binary, tiny_model_path, ctx_size=512, tls=certificate, log_dir=tmp_path
        )
    except RuntimeError as exc:
        if "without SSL support" in str(exc):
            pytest.skip("this llama-server was built without OpenSSL (no libssl-dev)")
        raise
    try:
        with ServerClient(running.url, verify=str(certificate[0])) as client:
            assert client.detect() == "llama.cpp"
            assert len(client.complete([1, 2], n_predict=2).tokens) == 2
            assert len(list(client.stream([1, 2], n_predict=3))) == 3
        with ServerClient(running.url) as client, pytest.raises(ServerTLSError, match="verify"):
            client.detect()
        plain = running.url.replace("https://", "http://")
        with ServerClient(plain) as client, pytest.raises(ServerError):
            client.detect()
    finally:
        running.stop()
    with running_llama_server(
        llama_server_binary, tiny_model_path, ctx_size=512, log_dir=tmp_path
    ) as http_only:
        https = http_only.url.replace("http://", "https://")
        with (
            ServerClient(https, connect_timeout=1) as client,
            pytest.raises(ServerTLSError, match="does the server speak https"),
        ):
            client.detect()


# ---------------------------------------------------------------- completions off, back on


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_backoff_turns_completions_off_and_probes_at_growing_intervals() -> None:
    clock = FakeClock()
    availability = ServerAvailability(Backoff(initial=1, factor=2, maximum=8, jitter=0), clock)
    down = ServerUnreachable("connection refused")
    assert availability.ready() and not availability.down
    assert availability.failed(down)  # the outage starts: tell the user once
    waits = []
    for _ in range(5):
        assert not availability.ready()
        waits.append(availability.seconds_to_retry())
        clock.now += waits[-1]
        assert availability.ready()  # time for one probe
        assert not availability.failed(down)  # still down: nothing new to say
    assert waits == [1, 2, 4, 8, 8]
    assert availability.succeeded()  # back: tell the user
    assert not availability.succeeded() and availability.ready()
    availability.failed(ServerAuthError("wrong key"))  # a setting must change: wait longest
    assert availability.seconds_to_retry() == 8
    defaults = ServerAvailability(clock=clock, rng=lambda: 0.0)  # float powers overflow
    defaults.failed(ServerAuthError("wrong key"))
    assert defaults.seconds_to_retry() == Backoff().maximum


def test_availability_follows_a_real_server_going_down_and_up(
    llama_server_binary: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    port = free_port()
    availability = ServerAvailability(Backoff(initial=0.05, jitter=0))
    with ServerClient(f"http://127.0.0.1:{port}") as client:
        changes = []
        for _ in range(3):
            try:
                client.health()
                changes.append(availability.succeeded())
            except ServerError as exc:
                changes.append(availability.failed(exc))
        assert changes == [True, False, False] and isinstance(
            availability.last_error, ServerUnreachable
        )
        with running_llama_server(
            llama_server_binary, tiny_model_path, ctx_size=256, port=port, log_dir=tmp_path
        ):
            time.sleep(availability.seconds_to_retry())
            assert availability.ready()
            client.health()
            assert availability.succeeded() and not availability.down
