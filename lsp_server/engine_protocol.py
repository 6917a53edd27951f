"""The messages between the LSP front and the engine process, and the channel they go by.

The front (:mod:`lsp_server.engine_proxy`) sends what the server asks of the engine;
the engine process (:mod:`lsp_server.engine_process`) sends back answers, its state
and its counters.  Each message is a small dataclass pickled whole, so the requests
and settings inside (:class:`~lsp_server.request.Request`,
:class:`~lsp_server.settings.Settings`) travel with every field they have, present
and future, without a change here.

A document's text goes once per version, and only the pieces an edit changed:
:class:`Channel` sends a :class:`~lsp_server.documents.TextSnapshot` as its pieces,
each either new or a reference to a piece of the snapshot sent before for its document
(a document re-cuts only the pieces an edit touches: the others are the same objects,
so a keystroke in a 1.5 MB file sends a piece or two); a snapshot already sent goes as
a reference to it (a change, then the requests at that version), so that both sides
share one object per version, as they did in one process
(:func:`~lsp_server.documents.same_text` compares snapshots by identity).
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from .documents import TextSnapshot
from .request import Answer, Request
from .settings import Settings
from .status import EngineState

__all__ = [
    "Answered",
    "Cancel",
    "Channel",
    "Configure",
    "Counters",
    "DocumentChanged",
    "Failed",
    "Forget",
    "Inspect",
    "Inspected",
    "Progress",
    "Shutdown",
    "StateChanged",
    "Submit",
    "WorkspaceFolders",
]

# ------------------------------------------------------------ front -> engine


@dataclass(frozen=True)
class Configure:
    """The settings in force (the engine loads the model they name when it changed)."""

    settings: Settings


@dataclass(frozen=True)
class WorkspaceFolders:
    """The client's workspace folders: where an ``auto`` target is read from."""

    folders: tuple[str, ...]


@dataclass(frozen=True)
class DocumentChanged:
    """A document was opened or changed (read-ahead's focus); ``edited_to``: where the
    last edit ended, when known."""

    uri: str
    source: str | TextSnapshot
    edited_to: int | None


@dataclass(frozen=True)
class Forget:
    """A document was closed."""

    uri: str


@dataclass(frozen=True)
class Submit:
    """A completion request, answered by :class:`Answered` or :class:`Failed` with its id."""

    id: int
    request: Request

    @property
    def uri(self) -> str:
        return self.request.uri


@dataclass(frozen=True)
class Cancel:
    """``$/cancelRequest`` or a newer request: stop the request with this id."""

    id: int


@dataclass(frozen=True)
class Inspect:
    """Call ``function`` (``module:name``) in the engine process with the engine and
    ``params``; its picklable result comes back as :class:`Inspected` (benchmarks look
    at the engine's heap this way)."""

    id: int
    function: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Shutdown:
    """Cancel everything and exit."""


# ------------------------------------------------------------ engine -> front


@dataclass(frozen=True)
class StateChanged:
    """The model's state changed; ``detected``: what was found about a loaded model."""

    state: EngineState
    message: str
    detected: dict[str, object] | None


@dataclass(frozen=True)
class Progress:
    """A model load or download went this far."""

    percent: int
    message: str


@dataclass(frozen=True)
class Answered:
    id: int
    answer: Answer


@dataclass(frozen=True)
class Failed:
    """The request raised; ``error`` says what."""

    id: int
    error: str


@dataclass(frozen=True)
class Inspected:
    id: int
    result: Any
    error: str | None


@dataclass(frozen=True)
class Counters:
    """What the engine holds (sent when it changed, and before each answer, so that
    ``fimlsp/serverStatus`` is answered by the front alone, never waiting for the
    engine's GIL)."""

    counters: dict[str, float]


# ------------------------------------------------------------ the channel

#: The persistent ids of a snapshot: sent in full, or the one sent last for the document.
_NEW, _SAME = "text", "same"


class Channel:
    """Pickled messages over one end of a socket pair, each document's text once per
    version.  Sending and receiving may run on two threads; two threads must not send
    at once."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._sent: dict[str, TextSnapshot] = {}  # per document, the snapshot sent last
        self._received: dict[str, TextSnapshot] = {}
        self.bytes_sent = 0

    def send(self, message: Any) -> None:
        uri = getattr(message, "uri", None)
        if isinstance(message, Forget):
            self._sent.pop(message.uri, None)
        buffer = io.BytesIO()
        pickler = _Pickler(buffer, self._sent, uri)
        pickler.dump(message)
        self.connection.send_bytes(buffer.getbuffer())
        self.bytes_sent += buffer.tell()
        self._sent.update(pickler.sending)  # only once sent: the other side has them

    def recv(self) -> Any:
        """The next message; raises EOFError once the other end has closed."""
        data = self.connection.recv_bytes()
        message = _Unpickler(io.BytesIO(data), self._received).load()
        if isinstance(message, Forget):
            self._received.pop(message.uri, None)
        return message

    def close(self) -> None:
        self.connection.close()


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, sent: dict[str, TextSnapshot], uri: str | None):
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.sent, self.uri = sent, uri
        self.sending: dict[str, TextSnapshot] = {}

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is not TextSnapshot or self.uri is None:
            return None
        before = self.sending.get(self.uri) or self.sent.get(self.uri)
        if before is obj:
            return (_SAME, self.uri)
        self.sending[self.uri] = obj
        if before is None:
            return (_NEW, self.uri, obj.pieces, obj.length)
        # A piece the snapshot before also had (the same object) goes as its index there.
        kept = {id(piece): index for index, piece in enumerate(before.pieces)}
        pieces = [kept.get(id(piece), piece) for piece in obj.pieces]
        return (_NEW, self.uri, pieces, obj.length)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, received: dict[str, TextSnapshot]):
        super().__init__(file)
        self.received = received

    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == _SAME:
            return self.received[pid[1]]
        _, uri, pieces, length = pid
        before = self.received.get(uri)
        if before is not None:
            known = before.pieces
            pieces = [known[p] if type(p) is int else p for p in pieces]
        snapshot = self.received[uri] = TextSnapshot(tuple(pieces), length)
        return snapshot
