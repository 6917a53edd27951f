"""The one exception type the model layer raises, so callers catch a single thing."""

from __future__ import annotations


class ModelError(RuntimeError):
    """A model could not be found, fetched, loaded or run; the message says what to do."""


class Interrupted(Exception):
    """A prompt evaluation stopped between chunks because the caller asked it to.

    Not an error: the chunks already decoded stay in the cache, so the next request
    with the same prompt starts where this one stopped.
    """
