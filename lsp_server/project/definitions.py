"""The definitions a module offers, as text for a prompt: an outline (signature and
docstring) and the whole source.

A module file that project context reads parses (it is another file of the project or
an installed package; one that does not is skipped).  Each top-level function, class
and assignment becomes a :class:`Definition`: the outline first, since it says how to
call the thing in a few tokens, the body where the budget allows.  A class's outline
keeps its assignments and each method's outline.  Long docstrings keep their first
:data:`DOC_LINES` lines.
"""

from __future__ import annotations

import ast
import threading
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["DOC_LINES", "Definition", "ModuleOutline", "module_outline"]

#: Lines of a docstring an outline keeps (then the closing quotes).
DOC_LINES = 6
#: Lines of a module-level assignment kept in an outline.
ASSIGN_LINES = 4
#: Modules whose definitions are kept (by path and text).
_KEPT = 64


@dataclass(frozen=True)
class Definition:
    """One top-level definition: its name, its lines (0-based, end exclusive), its
    outline and its whole source."""

    name: str
    start: int
    end: int
    outline: str
    full: str


@dataclass(frozen=True)
class ModuleOutline:
    """A module's docstring (first lines) and its top-level definitions by name, in
    source order; ``imported``: names it imports (a package's ``__init__`` re-exports),
    as ``name -> (module, level, original name)``."""

    docstring: str
    definitions: dict[str, Definition]
    imported: dict[str, tuple[str, int, str]]


_cache: OrderedDict[tuple[str, int], ModuleOutline | None] = OrderedDict()
_lock = threading.Lock()


def module_outline(path: str, text: str) -> ModuleOutline | None:
    """The module's outline, or None when it does not parse; kept per (path, text)."""
    key = (path, hash(text))
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    outline = _outline(text)
    with _lock:
        _cache[key] = outline
        while len(_cache) > _KEPT:
            _cache.popitem(last=False)
    return outline


def _outline(text: str) -> ModuleOutline | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = text.splitlines(keepends=True)
    definitions: dict[str, Definition] = {}
    imported: dict[str, tuple[str, int, str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start, end = _span(node)
            outline = (
                _class_outline(node, lines)
                if isinstance(node, ast.ClassDef)
                else _function_outline(node, lines)
            )
            full = "".join(lines[start:end])
            definitions[node.name] = Definition(node.name, start, end, outline, full)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            start, end = _span(node)
            full = "".join(lines[start:end])
            outline = "".join(lines[start : min(end, start + ASSIGN_LINES)])
            for target in targets:
                if isinstance(target, ast.Name):
                    definitions[target.id] = Definition(target.id, start, end, outline, full)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module or "", node.level,
                                                        alias.name)  # fmt: skip
    doc = ast.get_docstring(tree, clean=False)
    docstring = ""
    if doc is not None and isinstance(tree.body[0], ast.Expr):
        docstring = _docstring(tree.body[0], lines)
    return ModuleOutline(docstring, definitions, imported)


def _span(node: ast.stmt) -> tuple[int, int]:
    """The statement's lines, decorators included (0-based, end exclusive)."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)]) - 1
    end = node.end_lineno or node.lineno
    return start, end


def _docstring(node: ast.Expr, lines: list[str]) -> str:
    """A docstring statement's source, cut to :data:`DOC_LINES` lines (then closed with
    its own quotes)."""
    start, end = node.lineno - 1, node.end_lineno or node.lineno
    if end - start <= DOC_LINES:
        return "".join(lines[start:end])
    first = lines[start]
    indent = first[: len(first) - len(first.lstrip())]
    body = first.lstrip()
    quote = '"""' if '"""' in body[:6] else "'''" if "'''" in body[:6] else '"""'
    return "".join(lines[start : start + DOC_LINES]) + f"{indent}{quote}\n"


def _first_docstring(body: list[ast.stmt]) -> ast.Expr | None:
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _function_outline(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> str:
    """The header (decorators and signature), the docstring and ``...``."""
    start, end = _span(node)
    first = node.body[0]
    if first.lineno - 1 <= node.lineno - 1:  # body on the header's line
        return "".join(lines[start:end])
    header = "".join(lines[start : first.lineno - 1])
    body_line = lines[first.lineno - 1]
    indent = body_line[: len(body_line) - len(body_line.lstrip())]
    doc = _first_docstring(node.body)
    text = header + (_docstring(doc, lines) if doc is not None else "")
    return text + f"{indent}...\n"


def _class_outline(node: ast.ClassDef, lines: list[str]) -> str:
    """The header, the docstring, then assignments and each method's outline."""
    start, end = _span(node)
    first = node.body[0]
    if first.lineno - 1 <= node.lineno - 1:
        return "".join(lines[start:end])
    out = ["".join(lines[start : first.lineno - 1])]
    for statement in node.body:
        if statement is first and _first_docstring(node.body) is not None:
            out.append(_docstring(first, lines))  # type: ignore[arg-type]
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(_function_outline(statement, lines))
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            s, e = _span(statement)
            out.append("".join(lines[s : min(e, s + ASSIGN_LINES)]))
    if len(out) == 1:
        body_line = lines[first.lineno - 1]
        out.append(body_line[: len(body_line) - len(body_line.lstrip())] + "...\n")
    return "".join(out)
