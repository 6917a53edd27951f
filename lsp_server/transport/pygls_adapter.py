"""Every use of pygls' private methods and fields, in one place.

fimlsp departs from pygls' defaults in a few places that pygls offers no public hook
for.  Each override and each private name read is here, with why it exists, so that
an upgrade of pygls (pinned ``<3``) is checked against this one module; the rest of
the server (:mod:`.guard`, :mod:`lsp_server.protocol`, :mod:`.serving`) uses only the
hooks and accessors :class:`PyglsAdapter` documents, and :func:`adopt_stop_event`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import typing
from typing import Any

from cattrs import Converter
from lsprotocol import types
from pygls.protocol import LanguageServerProtocol

if typing.TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

__all__ = ["PyglsAdapter", "adopt_stop_event"]

log = logging.getLogger(__name__)

#: What the server sends of its own (besides answers): warmed up with the handled methods.
_SENT_METHODS = (
    types.WINDOW_LOG_MESSAGE,
    types.WINDOW_SHOW_MESSAGE,
    types.WINDOW_WORK_DONE_PROGRESS_CREATE,
    types.PROGRESS,
    types.WORKSPACE_CONFIGURATION,
)


class PyglsAdapter(LanguageServerProtocol):
    """pygls' ``LanguageServerProtocol`` with its private parts behind public hooks.

    Hooks a subclass overrides (each does nothing here): :meth:`on_request`,
    :meth:`on_cancel`, :meth:`on_response`.  Accessors: :attr:`server`,
    :attr:`converter`, :attr:`is_shut_down`, :meth:`send_raw`; setting
    :attr:`exiting` drops whatever would be sent after it.  Besides, notification
    handlers leave no future behind (:meth:`_execute_handler`) and :meth:`warm_up`
    makes the converter's functions before serving.
    """

    #: ``exit`` has arrived: pygls' ``exit`` handler closes the writer, and it reports
    #: every later write as an error, so nothing more is sent (see :meth:`_send_data`).
    exiting: bool = False

    # ------------------------------------------------------------ hooks

    def on_request(self, msg_id: Any, method: str, params: Any) -> None:
        """A request is about to reach its handler (structured params), synchronously,
        when its message arrives: a coroutine handler itself only starts on a later
        turn of the event loop.  An exception here is the request's failure."""

    def on_cancel(self, msg_id: Any) -> None:
        """A ``$/cancelRequest`` for ``msg_id`` arrived, before pygls cancels the
        request's future (which only stops a handler that has not started)."""

    def on_response(self, msg_id: Any, error: Any) -> None:
        """pygls is about to send the answer to request ``msg_id`` (``error`` None: a
        result)."""

    # ------------------------------------------------------------ accessors

    @property
    def server(self) -> LanguageServer:
        """The server this protocol belongs to."""
        # pygls keeps it as the private `_server` (and has no public name for it).
        return self._server

    @property
    def converter(self) -> Converter:
        """The cattrs converter pygls (un)structures messages with."""
        # pygls keeps it as the private `_converter`.
        return self._converter

    @property
    def is_shut_down(self) -> bool:
        """The ``shutdown`` request was handled (an ``exit`` now ends with 0)."""
        # pygls' `shutdown` handler sets the private `_shutdown`.
        return self._shutdown

    def send_raw(self, data: Any) -> None:
        """Send ``data`` (a JSON-ready dict) as it is, e.g. an error response that
        pygls' types cannot hold (``id`` null, or a fractional number)."""
        # pygls' writer behind its private `_send_data` (framing, JSON, headers).
        self._send_data(data)

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
                self.converter.get_structure_hook(message_type)
                self.converter.get_unstructure_hook(message_type)
                if response_type is not None:
                    self.converter.get_unstructure_hook(response_type)
                    self.converter.get_structure_hook(response_type)

    # ------------------------------------------------------------ overrides

    # Calls on_request: the only point where a request's structured params are known
    # synchronously on arrival (pygls has no hook there).
    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        self.on_request(msg_id, method_name, params)
        super()._handle_request(msg_id, method_name, params)

    # Calls on_cancel: pygls only cancels the handler's future (an asyncio handler
    # stops at its next await), which never reaches work handed to another thread.
    def _handle_cancel_notification(self, msg_id: Any) -> None:
        self.on_cancel(msg_id)
        super()._handle_cancel_notification(msg_id)

    # Calls on_response: every answer pygls sends, results and errors, goes through here.
    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        self.on_response(msg_id, error)
        super()._send_response(msg_id, result, error)

    # Drops what is sent after `exit`: pygls' exit handler closes the output, then
    # reports each later write as an error.
    def _send_data(self, data: Any) -> None:
        if self.exiting:  # the output is closed: pygls would report each write as an error
            log.debug("after exit, not sent: %s", str(data)[:200])
            return
        super()._send_data(data)

    # Forgets notification futures: pygls' `_request_futures` lost about 1.9 KB for good
    # per notification handled by a generator (measured: bench/memory_growth.py).
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
        # A request's callback is pygls' `_send_handler_result`, which pops the future.
        answers = getattr(callback, "func", None) == self._send_handler_result
        future = None if answers else self._request_futures.get(msg_id)
        if future is not None:
            if future.done():
                del self._request_futures[msg_id]
            else:
                future.add_done_callback(functools.partial(self._forget_future, msg_id))

    # Not pygls' own: _execute_handler's callback, which removes from `_request_futures`.
    def _forget_future(self, msg_id: Any, _: object) -> None:
        self._request_futures.pop(msg_id, None)


def adopt_stop_event(server: LanguageServer) -> threading.Event:
    """A new event that ``server.shutdown()`` sets, as it does while pygls' own
    ``start_io``/``start_tcp`` serve: a read loop that serves in their place checks it."""
    # pygls' JsonRPCServer.shutdown() sets its private `_stop_event`, which only its
    # own start_* methods create.
    server._stop_event = stop = threading.Event()
    return stop
