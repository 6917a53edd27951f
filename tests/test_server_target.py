"""The target Python read from the user's project, through the real server.

A temporary workspace holds a ``pyproject.toml`` with ``requires-python = ">=3.12"``
and, added later as a second workspace folder, a project with only a virtual
environment for Python 3.9.  ``pythonVersion`` is left unset (``auto``): the target
of each document comes from its project; ``fimlsp/status`` and
``fimlsp/serverStatus`` say which and from where; a file that uses syntax newer
than its target gets ``no_middle_fits`` naming the line and the version it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

import pytest_lsp
from lsp_fixtures import SERVER, Statuses, inline_items, open_doc, server_status, wait_ready
from model_fixtures import model_cache, stopping_model, tiny_factory
from pytest_lsp import LanguageClient, client_capabilities

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name

pytestmark = pytest.mark.asyncio(loop_scope="module")

NEWER = 'name = "x"\ngreeting = t"hi {name}"\nvalues = (\n'


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    (root / "app").mkdir(parents=True)
    (root / "app" / "pyproject.toml").write_text(
        '[project]\nname = "app"\nrequires-python = ">=3.12"\n'
    )
    venv = root / "legacy" / ".venv"
    venv.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.9.18\n")
    return root


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, stopping_model: Path, workspace: Path) -> Any:
    statuses = Statuses()
    lsp_client.feature("fimlsp/status")(statuses)
    lsp_client.statuses = statuses  # type: ignore[attr-defined]
    app = workspace / "app"
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=app.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=app.as_uri(), name="app")],
            initialization_options={"model": str(stopping_model), "maxTokens": 16},
        )
    )
    assert (await wait_ready(lsp_client))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


async def _status_of(client: LanguageClient, uri: str, line: int, character: int) -> Any:
    statuses: Statuses = client.statuses  # type: ignore[attr-defined]
    seen = len(statuses.items)
    items = await inline_items(client, uri, line, character)
    status = await statuses.wait_for(lambda s: s.get("uri") == uri and "stopReason" in s)
    assert statuses.items.index(status) >= seen
    return items, status


async def test_the_target_comes_from_the_project(client: LanguageClient, workspace: Path) -> None:
    uri = (workspace / "app" / "src" / "main.py").as_uri()
    open_doc(client, uri, "import os\nvalues = (\n")
    _, status = await _status_of(client, uri, 1, 10)
    pyproject = workspace / "app" / "pyproject.toml"
    assert (status["target"], status["targetSource"]) == ("3.12", "pyproject")
    assert status["targetOrigin"] == f"requires-python >=3.12 in {pyproject}"
    document = (await server_status(client, uri))["document"]
    assert (document["target"], document["targetSource"]) == ("3.12", "pyproject")
    assert (await server_status(client))["settings"]["python_version"] == "auto"


async def test_newer_syntax_than_the_target(client: LanguageClient, workspace: Path) -> None:
    uri = (workspace / "app" / "src" / "newer.py").as_uri()
    open_doc(client, uri, NEWER)
    items, status = await _status_of(client, uri, 2, 10)
    assert items == []
    assert status["stopReason"] == "no_middle_fits"
    pyproject = workspace / "app" / "pyproject.toml"
    assert status["message"] == (
        "line 2 uses syntax from Python 3.14, newer than the target Python 3.12 "
        f"(requires-python >=3.12 in {pyproject}): raise requires-python or set pythonVersion"
    )


async def test_the_setting_wins(client: LanguageClient, workspace: Path) -> None:
    uri = (workspace / "app" / "src" / "setting.py").as_uri()
    open_doc(client, uri, NEWER)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimlsp": {"pythonVersion": "3.14"}})
    )
    try:
        for _ in range(100):
            if (await server_status(client))["settings"]["python_version"] == "3.14":
                break
        _, status = await _status_of(client, uri, 2, 10)
        assert (status["target"], status["targetSource"]) == ("3.14", "setting")
        assert status["stopReason"] != "no_middle_fits", status
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimlsp": {"pythonVersion": "auto"}})
        )


async def test_a_workspace_folder_added_later(client: LanguageClient, workspace: Path) -> None:
    """A project without pyproject.toml: its virtual environment's Python (3.9), once the
    folder is part of the workspace; a 3.10 match statement is then newer syntax."""
    legacy = workspace / "legacy"
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=legacy.as_uri(), name="legacy")], removed=[]
            )
        )
    )
    uri = (legacy / "old.py").as_uri()
    open_doc(client, uri, "match x:\n    case 1:\n        y = (\n")
    document: dict[str, Any] = {}
    for _ in range(100):  # the notification is handled before the next request
        document = (await server_status(client, uri))["document"]
        if document["targetSource"] == "venv":
            break
    assert (document["target"], document["targetSource"]) == ("3.9", "venv")
    _, status = await _status_of(client, uri, 2, 13)
    assert status["stopReason"] == "no_middle_fits"
    assert status["message"].startswith("line 1 uses syntax from Python 3.10, newer than")
