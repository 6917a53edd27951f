"""What can go wrong talking to an inference server, one exception type per thing a user
can act on; every message says what happened and where, in words a user understands."""

from __future__ import annotations

from ...errors import ModelError


class ServerError(ModelError):
    """The inference server could not be used.  ``transient`` says whether trying again
    later may help (server down, slow, overloaded) or whether a setting must change first
    (wrong API key, certificate, URL)."""

    transient = True


class ServerUnreachable(ServerError):
    """No connection: refused (server down), name not resolved, network unreachable, or the
    connection dropped before an answer."""


class ServerTimeout(ServerError):
    """The server accepted the connection but did not answer in time."""


class ServerAuthError(ServerError):
    """401 or 403: the API key is missing or wrong."""

    transient = False


class ServerTLSError(ServerError):
    """The TLS handshake failed: most often a certificate that cannot be verified."""

    transient = False


class ServerHTTPError(ServerError):
    """The server answered with an error status; ``status`` and the server's own message."""

    def __init__(self, message: str, status: int, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        # 4xx other than 408/429 means this request is wrong: repeating it will not help.
        self.transient = status >= 500 or status in (408, 429)


class ServerProtocolError(ServerError):
    """The answer is not what the API promises: not JSON, truncated, a stream that stopped
    mid-event, or fields of the wrong shape."""
