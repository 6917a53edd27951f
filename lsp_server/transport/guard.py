"""The checks every message passes: one place that parses and validates them all.

:class:`JsonRpcGuard` is pygls' protocol (through :mod:`.pygls_adapter`'s hooks) with
every message checked before pygls' dispatch, so every handler, present and future,
gets this for free: ``-32700`` for a body that is not JSON, ``-32600`` for one that is
not an object (batches included), for an id that is neither an integer nor a string
and for requests after ``shutdown``, ``-32002`` before ``initialize``, ``-32602`` with the
request's id and the field at fault when params do not fit the method's type,
``-32603`` when a handler fails before pygls took charge of the answer.  pygls drops
what it cannot deserialize with a ``window/showMessage`` popup instead of an answer.
Notifications that cannot be used are dropped with a log line and
:meth:`~JsonRpcGuard.notification_rejected`.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from typing import Any

from lsprotocol import types
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from ..json_pieces import join_long_strings, loads_in_pieces
from .framing import HEAD_KEPT
from .messages import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    SERVER_NOT_INITIALIZED,
    Parsed,
    TooDeep,
    all_optional,
    decode_body,
    describe_structure_error,
    id_key,
    is_notification,
    params_type,
    records,
    sniff_id,
    valid_id,
)
from .pygls_adapter import PyglsAdapter

__all__ = ["JsonRpcGuard"]

log = logging.getLogger(__name__)

_MISSING = object()


class JsonRpcGuard(PyglsAdapter):
    """Every message parsed and validated in one place (see the module docstring).

    Meant to come first among a protocol class's bases
    (``class _Protocol(JsonRpcGuard, LanguageServerProtocol)``); it only adds to
    pygls' dispatch, so every handler gets it.  The reader calls
    :meth:`receive_body` with each frame's body.  Of pygls' internals it uses only
    what :class:`~.pygls_adapter.PyglsAdapter` offers (:meth:`on_response`,
    :meth:`send_raw`, :attr:`is_shut_down`, :attr:`converter`, :attr:`exiting`).
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
        :mod:`.serving`), then passed to :meth:`receive_body` on the loop."""
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
                sniff_id(data[:HEAD_KEPT]),
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
        if self.is_shut_down:
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
        if is_notification(method):
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
        key = id_key(msg_id)
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

    def on_response(self, msg_id: Any, error: Any) -> None:
        """A request is answered: it is no longer owed (and ``initialize``'s answer, a
        result, lets other requests in)."""
        if valid_id(msg_id):
            key = id_key(msg_id)
            self.owed.discard(key)
            if key == self._initialize_id:
                self._initialize_id = None
                self._initialized = error is None

    def _reply_error(
        self, msg_id: int | str | float | None, code: int, message: str, kind: str
    ) -> None:
        """An error response (``msg_id`` None: the id could not be read)."""
        self.message_problems[kind] += 1
        log.warning("answering %s with %d: %s", msg_id, code, message)
        if isinstance(msg_id, int | str):
            self.owed.discard(id_key(msg_id))
        self.send_raw({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

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
        if self.is_shut_down or not self._initialized:
            # The specification: before initialize, notifications are dropped (the
            # client learns of it when it asks about that document).
            self.message_problems["notification dropped"] += 1
            log.warning(
                "dropping %s: the server is %s",
                method[:100],
                "shutting down" if self.is_shut_down else "not initialized",
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

    def _structure(self, method: str, message: dict[str, Any], request: bool) -> Any:
        """The message as pygls' handlers take it, or what is wrong with it (a str)."""
        message_type = self.get_message_type(method)
        if message_type is None:  # a method lsprotocol does not know: params untyped
            message_type = JsonRPCRequestMessage if request else JsonRPCNotification
            message = {"params": None, **message}
        elif "params" not in message or message["params"] is None:
            params_cls = params_type(method)
            if params_cls is not None and all_optional(params_cls):
                message = {**message, "params": {}}  # e.g. `initialized` without params
        try:
            if message_type in (JsonRPCRequestMessage, JsonRPCNotification):
                message = {**message, "params": records(message["params"])}
            return self.converter.structure(message, message_type)
        except Exception as exc:
            return describe_structure_error(exc)
