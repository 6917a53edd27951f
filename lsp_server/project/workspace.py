"""What the editor has shown the server: open documents, and the order they were edited.

Fed by the engine on every ``didOpen``/``didChange`` (a snapshot, no copy: the text is
joined on the worker when project context reads it) and ``didClose``.  Thread-safe: the
event loop writes, the model worker reads.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path

from ..documents import TextSnapshot, text_of
from ..target import path_of_uri

__all__ = ["OpenDocument", "ProjectView"]


@dataclass(frozen=True)
class OpenDocument:
    """An open document: its URI, its file (None for ``untitled:`` and the like), its
    text, how many times it changed since the server saw it, where its last edit ended
    (when known), and when it was last edited (a counter; 0: never since it opened)."""

    uri: str
    path: Path | None
    source: str | TextSnapshot
    changes: int
    edited_to: int | None
    edited_at: int

    @property
    def text(self) -> str:
        return text_of(self.source)


class ProjectView:
    """The open documents, by URI."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._documents: dict[str, OpenDocument] = {}
        self._clock = itertools.count(1)

    def document_changed(
        self, uri: str, source: str | TextSnapshot, edited_to: int | None = None
    ) -> None:
        """A document was opened (first time seen) or changed."""
        with self._lock:
            known = self._documents.get(uri)
            if known is None:
                self._documents[uri] = OpenDocument(uri, path_of_uri(uri), source, 0, None, 0)
            else:
                self._documents[uri] = OpenDocument(
                    uri, known.path, source, known.changes + 1, edited_to, next(self._clock)
                )

    def closed(self, uri: str) -> None:
        with self._lock:
            self._documents.pop(uri, None)

    def documents(self) -> list[OpenDocument]:
        """The open documents, the most recently edited first (then those never edited,
        in the order they were opened)."""
        with self._lock:
            docs = list(self._documents.values())
        return sorted(docs, key=lambda d: -d.edited_at)

    def by_path(self) -> dict[Path, OpenDocument]:
        """The open documents that are files, by resolved path."""
        out = {}
        for doc in self.documents():
            if doc.path is not None:
                try:
                    out[doc.path.resolve()] = doc
                except (OSError, RuntimeError):
                    out[doc.path.absolute()] = doc
        return out
