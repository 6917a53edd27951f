"""The shape of the code at a revision: import cycles, package sizes, longest functions.

Facts any reader can check before and after a refactor, read from the source alone
(``ast``, never importing it).  An import inside a function counts like one at the top
of its module, since hiding an import in a function hides a cycle without removing
it; ``if TYPE_CHECKING:`` imports count too.  A cycle is a strongly connected group of
first-party modules (Tarjan's algorithm over the import graph).

    python3 -m bench.code_shape                 # the working tree
    python3 -m bench.code_shape --rev 7913da6   # a commit, read with git archive
    python3 -m bench.code_shape --rev 7913da6 --json
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

#: The first-party packages whose imports are checked for cycles.
PACKAGES = ("lexer", "quotient_parser", "lsp_server", "bench", "testmodels")
#: The packages whose longest functions are listed.
LONGEST_IN = ("lsp_server", "quotient_parser")


@dataclass(frozen=True)
class Function:
    """A function or method: where it is and how many lines it spans."""

    module: str
    name: str
    lines: int


def read_tree(rev: str | None, root: str = ".") -> dict[str, str]:
    """Path → source of every ``.py`` file of the packages, from the working tree or
    from ``rev`` (``git archive``, so uncommitted changes never leak in)."""
    if rev is None:
        return {
            str(path.relative_to(root)): path.read_text(encoding="utf-8")
            for package in PACKAGES
            for path in sorted(Path(root, package).rglob("*.py"))
        }
    present = subprocess.run(
        ["git", "-C", root, "ls-tree", "--name-only", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    archive = subprocess.run(
        ["git", "-C", root, "archive", rev, *(p for p in PACKAGES if p in present)],
        check=True,
        capture_output=True,
    ).stdout
    sources = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                handle = tar.extractfile(member)
                assert handle is not None
                sources[member.name] = handle.read().decode("utf-8")
    return sources


def module_name(path: str) -> str:
    """``lsp_server/names/__init__.py`` → ``lsp_server.names``."""
    parts = PurePosixPath(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module → the first-party modules it imports (anywhere in its body)."""
    modules = {module_name(path): path for path in sources}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.endswith("__init__.py")
        targets: set[str] = set()
        for node in ast.walk(ast.parse(sources[path])):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets.update(_imported(name, is_package, node, modules))
        targets.discard(name)
        graph[name] = targets
    return graph


def _imported(
    current: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict[str, str]
) -> Iterator[str]:
    """The first-party modules an import statement loads (``from p import m`` is ``p.m``
    when that is a module, else ``p``)."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = current.split(".")
            parts = parts if is_package else parts[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        wanted = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
            for alias in node.names
        ]
    for name in wanted:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            yield name


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def functions(sources: dict[str, str], packages: Iterable[str]) -> list[Function]:
    """Every function and method of ``packages``, longest first (lines from ``def`` to
    its last line, decorators and docstring included)."""
    wanted = tuple(f"{package}/" for package in packages)
    found = []
    for path, source in sources.items():
        if not path.startswith(wanted):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append(Function(module_name(path), node.name, node.end_lineno - first + 1))
    return sorted(found, key=lambda f: (-f.lines, f.module, f.name))


def package_lines(sources: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per top-level package (and per subpackage of ``lsp_server``): files and lines."""
    sizes: dict[str, dict[str, int]] = {}
    for path, source in sources.items():
        parts = PurePosixPath(path).parts
        keys = [parts[0]]
        if parts[0] == "lsp_server" and len(parts) > 2:
            keys.append("/".join(parts[:2]))
        for key in keys:
            entry = sizes.setdefault(key, {"files": 0, "lines": 0})
            entry["files"] += 1
            entry["lines"] += source.count("\n")
    return dict(sorted(sizes.items()))


def report(rev: str | None, longest: int) -> dict[str, Any]:
    sources = read_tree(rev)
    graph = import_graph(sources)
    return {
        "rev": rev or "working tree",
        "modules": len(graph),
        "cycles": cycles(graph),
        "packages": package_lines(sources),
        "longest_functions": [
            {"function": f"{f.module}.{f.name}", "lines": f.lines}
            for f in functions(sources, LONGEST_IN)[:longest]
        ],
    }


def _print(result: dict[str, Any]) -> None:
    print(f"{result['rev']}: {result['modules']} modules, {len(result['cycles'])} import cycles")
    for group in result["cycles"]:
        print("  cycle:", " ↔ ".join(group))
    print("lines per package:")
    for name, size in result["packages"].items():
        print(f"  {name:24} {size['files']:4} files {size['lines']:7} lines")
    print("longest functions in", ", ".join(LONGEST_IN) + ":")
    for entry in result["longest_functions"]:
        print(f"  {entry['lines']:4}  {entry['function']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.code_shape", description=__doc__)
    parser.add_argument("--rev", help="a git revision (default: the working tree)")
    parser.add_argument("--longest", type=int, default=10, help="functions listed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = report(args.rev, args.longest)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        _print(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
