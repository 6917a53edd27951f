"""llama.cpp's shared library: imported once, with its log routed into Python's logging.

llama.cpp writes its diagnostics to stderr, which is the language server's log channel
and, with ``--stdio``, right next to the protocol.  The library is therefore imported
through :func:`library`, which installs a log callback first: every line goes to the
``lsp_server.model.llama_cpp`` logger (one level quieter than llama.cpp rates it), and
the recent warnings and errors are kept so that a failed load or decode can say what
llama.cpp complained about (:func:`log_mark`, :func:`native_errors`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections import deque
from types import ModuleType
from typing import Any

from .errors import ModelError

__all__ = ["NATIVE_LOGGER", "library", "log_mark", "native_errors"]

#: The logger that carries llama.cpp's own lines.
NATIVE_LOGGER = "lsp_server.model.llama_cpp"

_native_log = logging.getLogger(NATIVE_LOGGER)

_lib_lock = threading.Lock()
_lib_module: ModuleType | None = None
_log_callback: Any = None  # the ctypes callback must outlive every call into llama.cpp
_recent_log: deque[tuple[int, int, str]] = deque(maxlen=64)  # (serial, level, line)
_log_serial = 0
_last_level = 1

# ggml_log_level: 0 none, 1 debug, 2 info, 3 warn, 4 error, 5 continue-previous. Demoted
# one step: llama.cpp warns about many harmless model quirks, and real errors become
# ModelError messages anyway.
_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.DEBUG, 3: logging.INFO,
           4: logging.WARNING}  # fmt: skip
_WARNING = 3


def _on_native_log(level: int, text: bytes | None, _user: Any) -> None:
    """Route llama.cpp's stderr chatter to logging and keep recent lines for error messages."""
    global _last_level, _log_serial
    if level == 5:
        level = _last_level
    _last_level = level
    line = (text or b"").decode("utf-8", errors="replace").rstrip("\n")
    if line:
        _log_serial += 1
        _recent_log.append((_log_serial, level, line))
        _native_log.log(_LEVELS.get(level, logging.DEBUG), "%s", line)


def library() -> ModuleType:
    """``llama_cpp``, imported once, after setting the OpenMP wait policy.

    libgomp reads ``OMP_WAIT_POLICY`` when the shared library loads; busy-waiting worker
    threads make decoding collapse on a loaded 2-core machine, hence PASSIVE by default.
    """
    global _lib_module, _log_callback
    with _lib_lock:
        if _lib_module is None:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                import llama_cpp
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ModelError(
                    "llama-cpp-python is not installed: pip install 'llama-cpp-python>=0.3.16'"
                ) from exc
            _log_callback = llama_cpp.llama_log_callback(_on_native_log)
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _lib_module = llama_cpp
        return _lib_module


def log_mark() -> int:
    """A mark in llama.cpp's log: :func:`native_errors` reports only what comes after it."""
    return _log_serial


def native_errors(since: int = 0) -> str:
    """The last warning and error lines llama.cpp logged after mark ``since``, joined."""
    recent = list(_recent_log)
    lines = [text for serial, level, text in recent if serial > since and level >= _WARNING]
    return "; ".join(lines[-3:])
