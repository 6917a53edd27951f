"""Fixtures for the per-family tests: each FIM family's tiny model, built once.

The family models need llama.cpp's vocabulary files: StarCoder2's ships with fimlsp, the
others come out of the llama-cpp-python source distribution. A test whose vocabulary is
missing is skipped with the command that fetches them all (CI runs it before the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from model_fixtures import USER_VOCAB_DIRS

from lsp_server.model.llm import FimModel
from lsp_server.model.tiny import BUNDLED_VOCABS, FAMILIES, build_tiny_model
from lsp_server.model.tiny_families import Family

FETCH_COMMAND = "python -m lsp_server.model.tiny fetch-vocab"
FAMILY_NAMES = list(FAMILIES)
#: The tiny models' size (layers, width): small, since Gemma's embedding has 262,144 rows.
N_LAYER, N_EMBD = 1, 16


def family_vocab(name: str) -> str | Path:
    """The base vocabulary of family ``name``: bundled, extracted, or the test skips."""
    vocab = FAMILIES[name].vocab
    if vocab in BUNDLED_VOCABS:
        return vocab
    for folder in USER_VOCAB_DIRS:
        path = folder / f"ggml-vocab-{vocab}.gguf"
        if path.is_file():
            return path
    pytest.skip(f"vocabulary {vocab!r} of family {name} not extracted: run `{FETCH_COMMAND}`")


@pytest.fixture(scope="session")
def family_path(model_cache: Path) -> Callable[[str], Path]:
    """``path(name)``: the family's tiny model, built once per session."""
    built: dict[str, Path] = {}

    def path(name: str) -> Path:
        if name not in built:
            target = model_cache / f"family-{name}.gguf"
            built[name] = build_tiny_model(target, family_vocab(name), family=name,
                                           n_layer=N_LAYER, n_embd=N_EMBD)  # fmt: skip
        return built[name]

    return path


@dataclass
class FamilyModel:
    name: str
    spec: Family
    model: FimModel


@pytest.fixture(scope="module")
def family_model(family_path: Callable[[str], Path]) -> Iterator[Callable[[str], FamilyModel]]:
    """``get(name)``: the family's tiny model loaded through llama.cpp, once per module,
    with an empty KV cache."""
    loaded: dict[str, FamilyModel] = {}

    def get(name: str) -> FamilyModel:
        if name not in loaded:
            loaded[name] = FamilyModel(name, FAMILIES[name], FimModel(family_path(name), n_ctx=512))
        loaded[name].model.reset()
        return loaded[name]

    yield get
    for item in loaded.values():
        item.model.close()
