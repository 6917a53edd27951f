"""Structures freed a little at a time (``lsp_server.release``): everything that was the
thread's alone is freed, nothing still held elsewhere is changed."""

from __future__ import annotations

import copy
import threading
import weakref
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server.release import release, take_apart


class Node:
    """An instance with attributes (weakly referenceable)."""

    def __init__(self, *children: Any) -> None:
        self.children = list(children)
        self.meta = {"n": len(children)}


class Slotted:
    __slots__ = ("__weakref__", "left", "right")

    def __init__(self, left: Any, right: Any) -> None:
        self.left = left
        self.right = right


def _tree(draw: Any, depth: int, shared: list[Any], nodes: list[Any]) -> Any:
    kind = draw(st.integers(0, 6 if depth else 1))
    if kind == 0:
        return draw(st.integers() | st.text(max_size=3))
    if kind == 1:
        return shared[draw(st.integers(0, len(shared) - 1))]  # held elsewhere too
    parts = [_tree(draw, depth - 1, shared, nodes) for _ in range(draw(st.integers(0, 3)))]
    if kind == 2:
        return parts
    if kind == 3:
        return tuple(parts)
    if kind == 4:
        return {i: part for i, part in enumerate(parts)}
    node: Any = Node(*parts) if kind == 5 else Slotted(parts, tuple(parts))
    nodes.append(weakref.ref(node))
    if parts and draw(st.booleans()):
        return [node, node]  # one node reached twice
    return node


@st.composite
def structures(draw: Any) -> tuple[list[Any], list[Any], list[Any]]:
    shared: list[Any] = [{"keep": [1, 2]}, [3, {"four": 4}], Node([5])]
    nodes: list[Any] = []
    root = _tree(draw, 4, shared, nodes)
    return [root], shared, nodes


@settings(max_examples=200, deadline=None)
@given(structures())
def test_what_was_ours_is_freed_and_what_is_held_elsewhere_stays(
    case: tuple[list[Any], list[Any], list[Any]],
) -> None:
    holder, shared, nodes = case
    before = copy.deepcopy(shared)
    del case
    take_apart(holder)
    assert holder == []
    assert all(ref() is None for ref in nodes)
    assert shared[0] == before[0] and shared[1] == before[1]
    assert shared[2].children == before[2].children and shared[2].meta == before[2].meta


def test_a_long_chain_is_taken_apart_without_recursion() -> None:
    chain: Any = None
    for i in range(200_000):
        chain = Slotted(chain, i)
    ref = weakref.ref(chain)
    holder = [chain]
    del chain
    assert take_apart(holder) == 200_000
    assert ref() is None


def test_release_frees_on_its_thread() -> None:
    freed = threading.Event()
    node = Node([Node(), {"x": Node()}])
    weakref.finalize(node, freed.set)
    release(node)
    del node
    assert freed.wait(10)
