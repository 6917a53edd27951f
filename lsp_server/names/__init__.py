"""Which bare names a middle may load: those bound where the cursor is.

``known_names`` reads L and R (``scopes.py``) into the names bound at the cursor;
``NameGuard`` (``guard.py``) follows a middle as it grows and says when it loads a name
bound nowhere.  Both read the lexer's symbols (``walker.py``), never ``ast``: L and R are
pieces of code that do not parse alone.  See ``docs/architecture.md`` (*Known names*).
"""

from .builtin_names import builtin_names
from .guard import NameGuard
from .scopes import KnownNames, known_names

__all__ = ["KnownNames", "NameGuard", "builtin_names", "known_names"]
