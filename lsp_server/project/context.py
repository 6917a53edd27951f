"""Project context for a request: what goes in, in which order, within a token budget.

In priority order, each only while the budget lasts:

1. **imported definitions**: for each ``import``/``from`` statement of the file
   (:mod:`.imports`), the outline of each name it imports from the project or the
   installed packages (signature and docstring, :mod:`.definitions`); for a whole module,
   the definitions the file uses as ``module.name``;
2. **recent edits**: the lines around the last edit of the other documents, most
   recently edited first;
3. **similar chunks**: chunks of the other open documents and of the modules next to
   the file, most similar to the code around the cursor first (:mod:`.chunks`);
4. then the imported definitions' whole bodies, while they fit.

Nothing repeats what the file has, and only files :mod:`.privacy` allows are read.

The choice is kept for the next request in the same document, and reused while the
imports, the other documents and the budget are unchanged and the code around the
cursor still looks like it did (:data:`REFRESH_BELOW`): the context heads the prompt,
so the KV cache keeps it across keystrokes only if it stays the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model.prompt import RepoContext
from ..target import path_of_uri
from .chunks import (
    Chunk,
    chunk_around,
    chunks_of,
    cursor_window,
    identifiers,
    jaccard,
    line_set,
    most_similar,
    repeats_file,
)
from .definitions import ModuleOutline, module_outline
from .environment import package_roots
from .imports import ImportStatement, ModuleResolver, find_imports, used_attributes
from .privacy import FileAccess
from .workspace import OpenDocument, ProjectView

__all__ = ["REFRESH_BELOW", "ProjectContext"]

#: The context is chosen again when the code around the cursor has this little in common
#: (Jaccard index of identifiers) with where it was last chosen.
REFRESH_BELOW = 0.5
#: Documents whose last edit is shown.
RECENT_DOCUMENTS = 3
#: Definitions taken from a module imported whole that the file does not visibly use.
MODULE_DEFINITIONS = 6
#: Modules next to the file read for similar chunks.
SIBLINGS = 24
#: Share of the budget the imported definitions may fill with whole bodies.
BODY_SHARE = 0.6
#: Token counts kept (by text).
_COUNTS_KEPT = 8192

Tokenize = Callable[[str], list[int]]


@dataclass(frozen=True)
class Piece:
    """Text from one file for the context: its kind (``import``, ``recent``,
    ``similar``), the file, how the prompt names it, its lines, the text, and for an
    import the whole body to grow into."""

    kind: str
    file: Path | str
    shown: str
    start: int
    end: int
    text: str
    full: str = ""


@dataclass
class _Chosen:
    key: tuple[object, ...]
    query: frozenset[str]
    context: RepoContext | None


class ProjectContext:
    """Chooses the project context of requests (on the model worker)."""

    def __init__(self, view: ProjectView) -> None:
        self.view = view
        self._lock = threading.Lock()
        self._chosen: dict[str, _Chosen] = {}
        self._access: tuple[tuple[str, ...], FileAccess] | None = None
        self._counts: dict[str, int] = {}
        self.built = 0  # contexts chosen (not reused)

    def forget(self, uri: str) -> None:
        with self._lock:
            self._chosen.pop(uri, None)

    def access(self, folders: Sequence[str]) -> FileAccess:
        """The files the workspace folders and their interpreter allow (kept per folders)."""
        key = tuple(folders)
        known = self._access
        if known is None or known[0] != key:
            known = self._access = (key, FileAccess(key, package_roots(key)))
        return known[1]

    # ---------------------------------------------------------------- the choice

    def for_request(
        self,
        uri: str,
        left: str,
        right: str,
        folders: Sequence[str],
        budget: int,
        tokenize: Tokenize,
        refresh: bool = True,
    ) -> RepoContext | None:
        """The context for a request at the end of ``left`` in ``uri``, within ``budget``
        tokens (the last one for the document when still good: see the module
        docstring); None when nothing fits or there is nothing to show.  Without
        ``refresh``, the last one chosen for the document, whatever changed since (a
        request takes it, so that it reads nothing new; read-ahead refreshes it)."""
        with self._lock:
            last = self._chosen.get(uri)
        if not refresh or budget <= 0:
            return last.context if last is not None and budget > 0 else None
        others = [d for d in self.view.documents() if d.uri != uri]
        imports = find_imports(left) + find_imports(right)
        key: tuple[object, ...] = (tuple(folders), budget, imports,
                                   tuple((d.uri, d.changes) for d in others))  # fmt: skip
        query = identifiers(cursor_window(left, right))
        if last is not None and last.key == key and jaccard(query, last.query) >= REFRESH_BELOW:
            return last.context
        context = self._choose(uri, left, right, folders, budget, tokenize, imports, others)
        if last is not None and last.context == context:
            context = last.context  # the same object: the prompt builder's tokens are kept
        with self._lock:
            self._chosen[uri] = _Chosen(key, query, context)
            self.built += 1
        return context

    def _choose(
        self,
        uri: str,
        left: str,
        right: str,
        folders: Sequence[str],
        budget: int,
        tokenize: Tokenize,
        imports: Sequence[ImportStatement],
        others: Sequence[OpenDocument],
    ) -> RepoContext | None:
        access = self.access(folders)
        sources = _Sources(access, self.view.by_path())
        file = path_of_uri(uri)
        here = _resolved(file) if file is not None else None
        text = left + right
        resolver = ModuleResolver(here, access.folders, access.packages, sources.exists)
        pieces = _imported(imports, resolver, sources, access, here, text)
        pieces += _recent(others, access)
        pieces += _similar(others, here, sources, access, cursor_window(left, right), text)
        file_lines = line_set(text)
        kept = _without_repeats(pieces, here, file_lines)
        current = _shown(here, access) if here is not None else uri.rsplit("/", 1)[-1]
        name = _repo_name(here, access)
        chosen = self._fit(kept, budget, tokenize, name, current)
        if not chosen:
            return None
        return RepoContext(name, _files(chosen), current)

    def _fit(
        self, pieces: list[Piece], budget: int, tokenize: Tokenize, name: str, current: str
    ) -> list[Piece]:
        """The pieces in priority order while they fit, then imports grown to bodies."""
        used = self._count(name, tokenize) + self._count(current, tokenize) + 4
        shown: set[str] = set()
        chosen: list[Piece] = []
        for piece in pieces:
            cost = self._count(piece.text, tokenize) + 1
            if piece.shown not in shown:
                cost += self._count(piece.shown, tokenize) + 2
            if used + cost > budget:
                continue
            used += cost
            shown.add(piece.shown)
            chosen.append(piece)
        imports_used = sum(self._count(p.text, tokenize) for p in chosen if p.kind == "import")
        for i, piece in enumerate(chosen):
            if piece.kind != "import" or not piece.full or piece.full == piece.text:
                continue
            extra = self._count(piece.full, tokenize) - self._count(piece.text, tokenize)
            if used + extra <= budget and imports_used + extra <= BODY_SHARE * budget:
                used += extra
                imports_used += extra
                chosen[i] = Piece(piece.kind, piece.file, piece.shown, piece.start, piece.end,
                                  piece.full)  # fmt: skip
        return chosen

    def _count(self, text: str, tokenize: Tokenize) -> int:
        known = self._counts.get(text)
        if known is None:
            if len(self._counts) > _COUNTS_KEPT:
                self._counts.clear()
            known = self._counts[text] = len(tokenize(text))
        return known


# -------------------------------------------------------------------- sources


class _Sources:
    """Text of a file: the open document's, else the file's where it may be read."""

    def __init__(self, access: FileAccess, open_documents: dict[Path, OpenDocument]) -> None:
        self.access = access
        self.open = open_documents
        self._texts: dict[Path, str | None] = {}

    def exists(self, path: Path) -> bool:
        target = _resolved(path)
        return target in self.open or (target.is_file() and self.access.readable(target))

    def text(self, path: Path) -> str | None:
        target = _resolved(path)
        if target not in self._texts:
            doc = self.open.get(target)
            self._texts[target] = doc.text if doc is not None else self.access.read(target)
        return self._texts[target]


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _shown(path: Path, access: FileAccess) -> str:
    """The file's path as the prompt names it: relative to its workspace folder or
    package root."""
    root = access.root_of(path)
    if root is None:
        return path.name
    return path.relative_to(root).as_posix()


def _repo_name(here: Path | None, access: FileAccess) -> str:
    folders = [f for f in access.folders if here is not None and here.is_relative_to(f)]
    folder = folders[0] if folders else (access.folders[0] if access.folders else None)
    return folder.name if folder is not None else "project"


# -------------------------------------------------------------------- the kinds of piece


def _imported(
    imports: Sequence[ImportStatement],
    resolver: ModuleResolver,
    sources: _Sources,
    access: FileAccess,
    here: Path | None,
    text: str,
) -> list[Piece]:
    """The imported definitions' outlines: the workspace's own first, then the installed
    packages', each in the order the file imports them."""
    out: list[Piece] = []
    for statement in imports:
        module_path = resolver.module_file(statement.module, statement.level)
        if not statement.is_from:
            if module_path is not None:
                alias = statement.alias or statement.module
                out += _module_pieces(module_path, sources, access, used_attributes(text, alias))
            continue
        for name, alias in statement.names:
            if name == "*":
                continue
            found = _definition(module_path, name, sources, access, resolver) if module_path else []
            if not found:
                sub = resolver.module_file(f"{statement.module}.{name}".strip("."),
                                           statement.level)  # fmt: skip
                if sub is not None:
                    found = _module_pieces(sub, sources, access, used_attributes(text, alias))
            out += found
    own = [p for p in out if p.file != here and _in_folders(p.file, access)]
    return own + [p for p in out if p.file != here and not _in_folders(p.file, access)]


def _in_folders(file: Path | str, access: FileAccess) -> bool:
    """Whether the file is the workspace's own code (not an installed package's)."""
    return isinstance(file, Path) and access.root_of(file) in access.folders


def _outline_of(path: Path, sources: _Sources) -> ModuleOutline | None:
    text = sources.text(path)
    return module_outline(str(path), text) if text is not None else None


def _definition(
    module_path: Path,
    name: str,
    sources: _Sources,
    access: FileAccess,
    resolver: ModuleResolver,
    hops: int = 2,
) -> list[Piece]:
    """The definition of ``name`` in the module, following re-exports (``from .x import
    name`` in a package's ``__init__``) up to ``hops`` times."""
    outline = _outline_of(module_path, sources)
    if outline is None:
        return []
    found = outline.definitions.get(name)
    if found is not None:
        file = _resolved(module_path)
        return [Piece("import", file, _shown(file, access), found.start, found.end,
                      found.outline, found.full)]  # fmt: skip
    origin = outline.imported.get(name)
    if origin is None or hops == 0:
        return []
    module, level, original = origin
    inner = ModuleResolver(module_path, access.folders, access.packages, sources.exists)
    target = inner.module_file(module, level)
    if target is None:
        return []
    return _definition(target, original, sources, access, resolver, hops - 1)


def _module_pieces(
    path: Path, sources: _Sources, access: FileAccess, used: set[str]
) -> list[Piece]:
    """A module imported whole: the definitions the file uses from it, else its first
    public ones."""
    outline = _outline_of(path, sources)
    if outline is None:
        return []
    file = _resolved(path)
    shown = _shown(file, access)
    names = [n for n in outline.definitions if n in used]
    if not names:
        names = [n for n in outline.definitions if not n.startswith("_")][:MODULE_DEFINITIONS]
    return [
        Piece("import", file, shown, d.start, d.end, d.outline, d.full)
        for d in (outline.definitions[n] for n in names)
    ]


def _recent(others: Sequence[OpenDocument], access: FileAccess) -> list[Piece]:
    """The lines around the last edit of the most recently edited other documents."""
    out = []
    for doc in [d for d in others if d.edited_at][:RECENT_DOCUMENTS]:
        text = doc.text
        chunk = chunk_around(text, doc.edited_to if doc.edited_to is not None else 0)
        if chunk is not None:
            out.append(_chunk_piece("recent", doc, chunk, access))
    return out


def _chunk_piece(kind: str, doc: OpenDocument | Path, chunk: Chunk, access: FileAccess) -> Piece:
    if isinstance(doc, Path):
        return Piece(kind, doc, _shown(doc, access), chunk.start, chunk.end, chunk.text)
    file: Path | str = _resolved(doc.path) if doc.path is not None else doc.uri
    shown = _shown(file, access) if isinstance(file, Path) else doc.uri.rsplit("/", 1)[-1]
    return Piece(kind, file, shown, chunk.start, chunk.end, chunk.text)


def _similar(
    others: Sequence[OpenDocument],
    here: Path | None,
    sources: _Sources,
    access: FileAccess,
    window: str,
    text: str,
) -> list[Piece]:
    """Chunks of the other open documents and of the modules next to the file, most
    similar to the window first."""
    candidates: dict[str, tuple[OpenDocument | Path, str]] = {}
    for doc in others:
        candidates[str(doc.path or doc.uri)] = (doc, doc.text)
    if here is not None:
        try:
            siblings = sorted(here.parent.glob("*.py"))[: 4 * SIBLINGS]
        except OSError:
            siblings = []
        taken = 0
        for sibling in siblings:
            if taken >= SIBLINGS or sibling == here or str(sibling) in candidates:
                continue
            body = sources.text(sibling)
            if body is not None:
                candidates[str(sibling)] = (sibling, body)
                taken += 1
    chunks = [(name, chunk) for name, (_, body) in candidates.items() for chunk in chunks_of(body)]
    scored = most_similar(chunks, window, line_set(text))
    return [_chunk_piece("similar", candidates[name][0], chunk, access)
            for _, name, chunk in scored]  # fmt: skip


def _without_repeats(
    pieces: Sequence[Piece], here: Path | None, file_lines: frozenset[str]
) -> list[Piece]:
    """The pieces less those of the current file, those it mostly repeats, and those
    overlapping an earlier piece of the same file."""
    taken: dict[Path | str, list[tuple[int, int]]] = {}
    out = []
    for piece in pieces:
        if here is not None and piece.file == here:
            continue
        if piece.kind != "import" and repeats_file(piece.text, file_lines):
            continue
        spans = taken.setdefault(piece.file, [])
        if any(piece.start < end and start < piece.end for start, end in spans):
            continue
        spans.append((piece.start, piece.end))
        out.append(piece)
    return out


def _files(pieces: Sequence[Piece]) -> tuple[tuple[str, str], ...]:
    """The pieces as files in the order each first appears, each file's pieces in the
    order of their lines."""
    grouped: dict[str, list[Piece]] = {}
    for piece in pieces:
        grouped.setdefault(piece.shown, []).append(piece)
    files = []
    for shown, group in grouped.items():
        group.sort(key=lambda p: p.start)
        body = "".join(p.text if p.text.endswith("\n") else p.text + "\n" for p in group)
        files.append((shown, body))
    return tuple(files)
