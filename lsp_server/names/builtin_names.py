"""The names every module can load without binding them: builtins of the target
Python version and the module attributes the interpreter sets."""

from __future__ import annotations

import builtins
import functools

from lexer.version import TargetLike, TargetVersion

__all__ = ["ALWAYS_BOUND", "builtin_names"]

#: Builtins added after 3.8, with the version that added them (none was removed since):
#: a target older than the interpreter running fimlsp must not see them, a newer one
#: must see them even where this interpreter lacks them.
_ADDED = {
    "EncodingWarning": (3, 10),
    "aiter": (3, 10),
    "anext": (3, 10),
    "BaseExceptionGroup": (3, 11),
    "ExceptionGroup": (3, 11),
    "PythonFinalizationError": (3, 13),
    "_IncompleteInputError": (3, 13),
}

#: Bound without a binding in the file: module attributes (``__file__``, ...), a class
#: body's ``__module__`` and ``__qualname__``, a method's ``__class__`` cell and pyflakes'
#: ``WindowsError``.  Not ``_``: only the interactive interpreter binds it (pyflakes
#: reports it undefined too); a file binds it like any name (``for _ in``, ``from
#: gettext import gettext as _``).
ALWAYS_BOUND = frozenset(
    {
        "__annotations__", "__builtins__", "__cached__", "__class__", "__dict__", "__doc__",
        "__file__", "__loader__", "__module__", "__name__", "__package__", "__path__",
        "__qualname__", "__spec__", "WindowsError",
    }
)  # fmt: skip


@functools.lru_cache(maxsize=16)
def builtin_names(target: TargetLike) -> frozenset[str]:
    """The builtins of ``target`` with ``ALWAYS_BOUND``."""
    version = TargetVersion.parse(target)
    names = {name for name in dir(builtins) if _ADDED.get(name, (0, 0)) <= version}
    names.update(name for name, added in _ADDED.items() if added <= version)
    return frozenset(names) | ALWAYS_BOUND
