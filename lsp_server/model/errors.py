"""The one exception type the model layer raises, so callers catch a single thing."""

from __future__ import annotations


class ModelError(RuntimeError):
    """A model could not be found, fetched, loaded or run; the message says what to do."""
