"""JSON-RPC messages: bodies decoded, ids read and checked, field errors described.

The pieces :mod:`.guard` checks each message with, free of any protocol state: the
JSON-RPC and LSP error codes, :func:`decode_body` (UTF-8 JSON, where nesting too deep
is a :class:`TooDeep` ``ValueError`` like any other text that is not a message),
:func:`sniff_id` (the id of a body that cannot be parsed whole, so its sender still
gets an answer), :func:`valid_id`, :func:`describe_structure_error` (``-32602`` names
the field at fault) and :func:`records` (untyped params as pygls' handlers take them,
without a class made per message).
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import attrs
from cattrs.errors import ClassValidationError
from cattrs.v import transform_error
from lsprotocol import types

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVER_NOT_INITIALIZED",
    "Parsed",
    "TooDeep",
    "all_optional",
    "decode_body",
    "describe_structure_error",
    "id_key",
    "is_notification",
    "params_type",
    "records",
    "sniff_id",
    "valid_id",
]

log = logging.getLogger(__name__)

# JSON-RPC and LSP error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002

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


def id_key(msg_id: int | str) -> tuple[bool, int | str]:
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


def records(params: Any) -> Any:
    """Untyped params (a method lsprotocol does not know) as pygls makes them, an object
    as named tuples all the way down, but of classes made once per name and keys: pygls
    makes a class for every object of every message (``namedtuple``), about 6 KB of
    cyclic garbage each, kept until a full collection (``fimlsp/serverStatus`` polled
    ten times a second made 60 KB/s)."""
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


def is_notification(method: str) -> bool:
    """A method lsprotocol knows as a notification (its message type has no id)."""
    entry = types.METHOD_TO_TYPES.get(method)
    return entry is not None and "id" not in attrs.fields_dict(entry[0])


def params_type(method: str) -> Any:
    """The params class lsprotocol gives ``method`` (None: unknown, or none)."""
    entry = types.METHOD_TO_TYPES.get(method)
    return entry[2] if entry is not None and len(entry) > 2 else None


def all_optional(cls: Any) -> bool:
    """An attrs class whose every field has a default (its params may be left out)."""
    return attrs.has(cls) and all(f.default is not attrs.NOTHING for f in attrs.fields(cls))
