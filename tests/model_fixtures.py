"""Session fixtures for the model-layer tests: tiny random-weight GGUF models, built once.

Import the fixtures into a test module (``from model_fixtures import ...``). Every model is
written under a session temporary folder, and ``FIMLSP_CACHE_DIR`` points there too, so the
tests never write into the user's cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
pytest.importorskip("gguf", reason="the gguf package is not installed")

from lsp_server.decoding.options import DecodeOptions
from lsp_server.model.local.llm import FimModel
from testmodels.tiny import STOPPING_MODEL, build_tiny_model

TinyFactory = Callable[..., Path]


def _user_vocab_dirs() -> list[Path]:
    """Folders where a developer may have extracted more ggml-vocab-*.gguf files, read
    before the session redirects the cache (and without creating anything)."""
    dirs: list[Path] = []
    if os.environ.get("FIMLSP_VOCAB_DIR"):
        dirs.append(Path(os.environ["FIMLSP_VOCAB_DIR"]).expanduser())
    if os.environ.get("FIMLSP_CACHE_DIR"):
        base = Path(os.environ["FIMLSP_CACHE_DIR"]).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "fimlsp"
    dirs.append(base / "vocab")
    return dirs


USER_VOCAB_DIRS = _user_vocab_dirs()
#: The environment before the session redirects the cache, for fetching into the user's own.
USER_ENV = dict(os.environ)


def optional_vocab(name: str) -> Path:
    """Path of an extracted vocabulary, or skip the test saying how to get it."""
    for folder in USER_VOCAB_DIRS:
        path = folder / f"ggml-vocab-{name}.gguf"
        if path.is_file():
            return path
    pytest.skip(
        f"vocabulary {name!r} not extracted: run `python -m testmodels.tiny extract-vocab "
        "llama_cpp_python-0.3.36.tar.gz` (from `pip download --no-deps --no-binary :all: "
        "llama-cpp-python==0.3.36`) or set FIMLSP_VOCAB_DIR"
    )


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private fimlsp cache for the whole session."""
    path = tmp_path_factory.mktemp("fimlsp-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FIMLSP_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def tiny_factory(model_cache: Path) -> TinyFactory:
    """``make(name, vocab="starcoder", **build_kwargs) -> Path``, building each name once."""
    built: dict[str, Path] = {}

    def make(name: str, vocab: str | os.PathLike[str] = "starcoder", **kwargs: Any) -> Path:
        if name not in built:
            built[name] = build_tiny_model(model_cache / f"tiny-{name}.gguf", vocab, **kwargs)
        return built[name]

    return make


@pytest.fixture(scope="session")
def tiny_model_path(tiny_factory: TinyFactory) -> Path:
    """The default tiny model: StarCoder vocabulary, 2 layers, 64 wide."""
    return tiny_factory("starcoder")


@pytest.fixture(scope="session")
def stopping_model(tiny_factory: TinyFactory) -> Path:
    return tiny_factory("stopping", **STOPPING_MODEL)


@pytest.fixture(scope="session")
def tiny_session_model(tiny_model_path: Path) -> Iterator[FimModel]:
    model = FimModel(tiny_model_path, n_ctx=1024)
    yield model
    model.close()


@pytest.fixture
def tiny_model(tiny_session_model: FimModel) -> FimModel:
    """The shared tiny model with an empty KV cache."""
    tiny_session_model.cache.reset()
    return tiny_session_model


def syntax_options(**settings: object) -> DecodeOptions:
    """Decoding options for tests of the syntax checks on random-weight models, with
    ``knownNames`` off: such models write arbitrary names, which the check
    (``test_known_names``) would refuse, changing the scenarios under test."""
    return DecodeOptions(**{"known_names": False, **settings})  # type: ignore[arg-type]
