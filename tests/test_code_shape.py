"""bench.code_shape: the import-cycle finder on small graphs, and no cycle in the
product's packages (a hidden import inside a function counts)."""

from __future__ import annotations

from bench.code_shape import cycles, import_graph, read_tree


def test_cycles_finds_each_strongly_connected_group() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_function_level_import_counts_and_relative_imports_resolve() -> None:
    sources = {
        "pkg/__init__.py": "",
        "pkg/one.py": "from .two import g\n",
        "pkg/two.py": "def g():\n    from pkg.one import f\n",
    }
    graph = import_graph(sources)
    assert graph["pkg.one"] == {"pkg.two"} and graph["pkg.two"] == {"pkg.one"}
    assert cycles(graph) == [["pkg.one", "pkg.two"]]


def test_the_packages_have_no_import_cycle() -> None:
    assert cycles(import_graph(read_tree(None))) == []
