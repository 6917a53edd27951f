"""The server's configuration, as editors send it.

Settings arrive as JSON from ``initializationOptions``, from
``workspace/didChangeConfiguration`` and from ``workspace/configuration``
(section ``fimlsp``).  Keys are camelCase as in VS Code's settings; snake_case
is accepted too.  A bad value is reported and ignored, never fatal: the rest of
the settings still apply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexer.version import SUPPORTED, TargetVersion

from .modes import LINE_MODES, MODES, SERVER_APIS, LineMode, Mode, ServerApi

__all__ = ["AUTO_TARGET", "Settings", "SettingsLayers"]

#: ``pythonVersion`` when the target comes from the user's project (``lsp_server.target``).
AUTO_TARGET = "auto"
_TARGETS = (AUTO_TARGET, *(str(v) for v in SUPPORTED))


@dataclass(frozen=True)
class Settings:
    """Everything a user can configure."""

    enable: bool = True
    #: ``default`` (the embedded model), a model by name (``qwen2.5-coder-0.5b``,
    #: ``qwen2.5-coder-1.5b``, ``gemma-3-270m``: ``lsp_server.model.catalog``), a GGUF path,
    #: ``hf://owner/repo/file.gguf``, or an inference server's ``http://host:port`` /
    #: ``https://...`` (llama-server, vLLM, ...).
    model: str = "default"
    #: Alternative to ``hf://`` in ``model``: a Hugging Face repository and file.
    model_repo: str | None = None
    model_file: str | None = None
    gpu_layers: int | None = None  # None: all layers when llama.cpp can offload
    context_size: int = 4096
    #: CPU threads for llama.cpp; 0: what suits the machine (``model.local.threads``).
    threads: int = 0
    max_tokens: int = 64
    deadline_ms: int = 3000
    top_k: int = 50
    mode: Mode = "constrained"
    line_mode: LineMode = "auto"
    #: A target ("3.12"), or ``auto``: the project's (``requires-python`` and so on).
    python_version: str = AUTO_TARGET
    #: Larger documents get no completions (building their quotient would take seconds).
    max_document_chars: int = 2_000_000
    #: A middle does not leave the bracket, string or block open at the cursor that the
    #: text after the cursor closes (where no middle can, this is not enforced).
    stay_inside: bool = True
    #: When the model cannot finish within ``max_tokens``, end the middle with the
    #: shortest text that makes the file valid (text the model did not write).
    witness_ending: bool = False
    #: A middle may not load a bare name bound nowhere where the cursor is (builtins,
    #: imports, the scopes in view, names bound later or by the middle itself); off for a
    #: file that uses Python's dynamic features (``lsp_server/names``).
    known_names: bool = True
    #: An inference server's API key (sent as a bearer token), when ``model`` is a URL.
    api_key: str | None = dataclasses.field(default=None, repr=False)
    #: The server's API: ``llama.cpp`` (llama-server's ``/completion``), ``openai``
    #: (``/v1/completions``: vLLM, SGLang, TGI, ...) or ``auto`` (asked of the server).
    server_api: ServerApi = "auto"
    #: Other files of the project at the head of the prompt (imported definitions, recent
    #: edits, similar code), for models whose family has a repository-level format.
    project_context: bool = True
    #: The share of the prompt (of the machine window: ``lsp_server.prompt_budget``) that
    #: project context may take.
    project_context_share: float = 0.3
    #: A local copy of the served model's vocabulary (a GGUF, vocabulary-only or whole):
    #: needed for servers that cannot describe their own (OpenAI-only engines).
    model_vocab: str | None = None

    @property
    def target(self) -> TargetVersion | None:
        """``python_version`` as the parser takes it (the setting is spelled "3.13");
        None for ``auto`` (:func:`lsp_server.target.target_in_force` resolves it)."""
        if self.python_version == AUTO_TARGET:
            return None
        return TargetVersion.parse(self.python_version)

    @property
    def model_spec(self) -> str | tuple[str, str]:
        """What ``lsp_server.model.resolve_model`` takes."""
        if self.model_repo and self.model_file:
            return (self.model_repo, self.model_file)
        return self.model

    @property
    def model_key(self) -> tuple[object, ...]:
        """The settings that need the model reloaded when they change."""
        local = (self.gpu_layers, self.threads)
        remote = (self.api_key, self.server_api, self.model_vocab)
        return (self.model_spec, self.context_size, *local, *remote)

    def merged(self, data: object) -> tuple[Settings, list[str]]:
        """These settings updated from editor JSON; returns (settings, problems)."""
        if not isinstance(data, Mapping):
            return self, [] if data is None else [f"settings must be an object, got {data!r}"]
        if isinstance(data.get("fimlsp"), Mapping):
            data = data["fimlsp"]  # {"fimlsp": {...}} as didChangeConfiguration sends it
        assert isinstance(data, Mapping)
        changes: dict[str, Any] = {}
        problems: list[str] = []
        for key, value in data.items():
            if key in _CLIENT_KEYS:
                continue
            name = _field_name(str(key))
            if name is None:
                problems.append(f"unknown setting {key!r}")
                continue
            try:
                changes[name] = _check(name, value)
            except (TypeError, ValueError) as exc:
                problems.append(f"setting {key!r}: {exc}")
        return dataclasses.replace(self, **changes), problems


@dataclass
class SettingsLayers:
    """Where the settings come from; later layers win.

    ``initial``: ``initializationOptions``; ``pulled``: the client's answer to
    ``workspace/configuration`` (section ``fimlsp``); ``pushed``: the last settings sent
    with ``workspace/didChangeConfiguration``.  Each is editor JSON (or None).
    """

    initial: object = None
    pulled: object = None
    pushed: object = None

    def resolve(self) -> tuple[Settings, list[str]]:
        """The settings, and the problems found on the way (bad values are ignored)."""
        settings, problems = Settings(), []
        for layer in (self.initial, self.pulled, self.pushed):
            settings, found = settings.merged(layer)
            problems += found
        return settings, problems


_FIELDS = {f.name for f in dataclasses.fields(Settings)}
_BOOLEANS = frozenset({"enable", "stay_inside", "witness_ending", "known_names", "project_context"})
#: Keys of the same section that belong to the editor's client (how to start the
#: server, protocol tracing), sent along by clients that send the whole section.
_CLIENT_KEYS = frozenset({"server", "trace"})


def _field_name(key: str) -> str | None:
    snake = "".join("_" + c.lower() if c.isupper() else c for c in key).lstrip("_")
    aliases = {"ctx_size": "context_size", "n_gpu_layers": "gpu_layers"}
    snake = aliases.get(snake, snake)
    return snake if snake in _FIELDS else None


def _int(value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise TypeError(f"expected an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise ValueError(f"{value} is outside {low}..{high}")
    return int(value)


def _share(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number from 0 to 1, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{value} is outside 0..1")
    return float(value)


def _choice(value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _check(name: str, value: object) -> object:
    """The value for field ``name``, or TypeError / ValueError."""
    if name in _BOOLEANS:
        if not isinstance(value, bool):
            raise TypeError(f"expected true or false, got {value!r}")
        return value
    if name in ("model", "model_repo", "model_file", "api_key", "model_vocab"):
        if value is None or value == "":
            return "default" if name == "model" else None
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value
    if name == "gpu_layers":
        return None if value is None or value == -1 else _int(value, 0, 100_000)
    if name == "python_version":
        return _choice(str(value), _TARGETS)
    if name == "mode":
        return _choice(value, MODES)
    if name == "line_mode":
        return _choice(value, LINE_MODES)
    if name == "server_api":
        return _choice(value, SERVER_APIS)
    if name == "project_context_share":
        return _share(value)
    limits = {
        "context_size": (256, 1 << 20),
        "threads": (0, 512),
        "max_tokens": (1, 4096),
        "deadline_ms": (50, 600_000),
        "top_k": (1, 1 << 20),
        "max_document_chars": (1, 1 << 31),
    }
    return _int(value, *limits[name])
