"""Fixtures for the per-family tests: each FIM family's tiny model, built once.

The family models need llama.cpp's vocabulary files: StarCoder2's ships with fimlsp, the
others come out of the llama-cpp-python source distribution. The first test that needs a
missing one fetches them all into the user's cache (``fetch-vocab``: a ``pip download``
that pip's cache usually answers); where that fails, the test is skipped with the command.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from model_fixtures import USER_ENV, USER_VOCAB_DIRS

from lsp_server.model.local.llm import FimModel
from testmodels.tiny import BUNDLED_VOCABS, FAMILIES, build_tiny_model
from testmodels.tiny_families import Family

FETCH_COMMAND = "python -m testmodels.tiny fetch-vocab"
FAMILY_NAMES = list(FAMILIES)
#: The tiny models' size (layers, width): small, since Gemma's embedding has 262,144 rows.
N_LAYER, N_EMBD = 1, 16


@functools.cache
def _fetch_vocabs() -> bool:
    """Fetch every family's vocabulary into the user's cache, once per session."""
    done = subprocess.run(
        [sys.executable, "-m", "testmodels.tiny", "fetch-vocab"],
        env=USER_ENV,
        stdout=subprocess.DEVNULL,
        check=False,
        timeout=1800,
    )
    return done.returncode == 0


def _extracted(vocab: str) -> Path | None:
    for folder in USER_VOCAB_DIRS:
        path = folder / f"ggml-vocab-{vocab}.gguf"
        if path.is_file():
            return path
    return None


def family_vocab(name: str) -> str | Path:
    """The base vocabulary of family ``name``: bundled, extracted (fetched on first need),
    or the test skips."""
    vocab = FAMILIES[name].vocab
    if vocab in BUNDLED_VOCABS:
        return vocab
    path = _extracted(vocab) or (_fetch_vocabs() and _extracted(vocab))
    if path:
        return path
    pytest.skip(f"vocabulary {vocab!r} of family {name} is not fetched: run `{FETCH_COMMAND}`")


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
        loaded[name].model.cache.reset()
        return loaded[name]

    yield get
    for item in loaded.values():
        item.model.close()
