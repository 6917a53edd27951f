"""Every FIM family through the real server over stdio and through ``fimlsp complete``.

One server runs for the module; each test points it at one family's tiny model (the
family's real vocabulary, weights that end the middle at the first place it is complete
and favour "]"), checks that ``fimlsp/serverStatus`` reports what ``FimModel`` detects
(family, layout, end tokens), and asks for a completion that must close the open list.
"""

# Fixtures imported from the fixture modules are requested by parameter name, which ruff
# reads as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

import pytest_lsp
from family_fixtures import N_EMBD, N_LAYER, family_vocab
from lsp_fixtures import SERVER, inline_items, open_doc, server_status, wait_ready
from model_fixtures import TinyFactory, model_cache, tiny_factory  # noqa: F401
from pytest_lsp import LanguageClient, client_capabilities

from lsp_server.model.local.llm import FimModel
from testmodels.tiny_families import FAMILIES

REPO = Path(__file__).resolve().parents[1]
LEFT, RIGHT = "values = [1, 2", "\nprint(values)\n"
#: Layout each family's prompt takes (the server does not ask for suffix first).
LAYOUTS = {"codestral": "sp", "mellum": "spm_infill", "llama3": "none", "qwen3": "psm",
           "gemma": "none"}  # fmt: skip


@pytest.fixture(scope="module")
def closing_model(tiny_factory: TinyFactory) -> Callable[[str], Path]:
    """``path(name)``: the family's tiny model that wants to write "]" and then stop."""

    def path(name: str) -> Path:
        return tiny_factory(f"closing-{name}", family_vocab(name), family=name,
                            n_layer=N_LAYER, n_embd=N_EMBD, stop_bias=30.0,
                            token_bias={"]": 25.0})  # fmt: skip

    return path


def _expected(path: Path) -> dict[str, Any]:
    with FimModel(path, n_ctx=256) as model:
        return model.detected()


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient) -> Any:
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options={"deadlineMs": 8000, "maxTokens": 8},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def _load(client: LanguageClient, path: Path, timeout: float = 60) -> dict[str, Any]:
    """Point the server at ``path``; its status once that model is loaded."""
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(path)}})
    )
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await wait_ready(client, timeout)
        if status["settings"]["model"] == str(path) and status["model"] is not None:
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"model {path} not loaded: {status}")
        await asyncio.sleep(0.1)


def _layout(name: str) -> str:
    return LAYOUTS.get(name, "psm")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", list(FAMILIES))
async def test_server_reports_and_completes_with_each_family(
    client: LanguageClient, closing_model: Callable[[str], Path], name: str
) -> None:
    path = closing_model(name)
    expected = _expected(path)
    status = await _load(client, path)
    assert status["state"] == "ready"
    model = status["model"]
    assert model == expected
    assert model["layout"] == _layout(name)
    assert model["endTokens"] and all(set(t) == {"id", "text"} for t in model["endTokens"])
    uri = f"file:///work/{name.replace('.', '_')}.py"
    text = LEFT + RIGHT
    open_doc(client, uri, text)
    items = await inline_items(client, uri, 0, len(LEFT))
    assert items, f"{name}: no completion"
    insert = items[0].insert_text
    middle = insert if isinstance(insert, str) else insert.value
    assert "]" in middle
    ast.parse(LEFT + middle + RIGHT)
    status = await server_status(client)
    assert status["model"] == expected


#: Per case: the family, the tokens a model is made to prefer (in this order, by their
#: text; "<0xC3>" is the one byte's token) and the text they make.  CodeLlama's
#: SentencePiece spells the bytes of "é" as byte-fallback tokens and a space as "▁", Qwen's
#: byte-level BPE spells them "Ã", "©" and "Ġ".
SPELLED = [
    ("codellama", ("<0xC3>", "<0xA9>"), "é"),
    ("qwen2.5-coder", ("<0xC3>", "<0xA9>"), "é"),
    ("codellama", (" x",), " x"),
    ("qwen2.5-coder", (" x",), " x"),
]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("name", "tokens", "unit"), SPELLED)
async def test_server_spells_byte_and_space_tokens(
    client: LanguageClient,
    tiny_factory: TinyFactory,
    name: str,
    tokens: tuple[str, ...],
    unit: str,
) -> None:
    """Through the server: a character cut into byte tokens is held back until whole
    (its first byte alone is taken, then a continuation byte among every token that can
    go on with it, whatever its rank), and space markers become spaces."""
    bias = {text: 25.0 - i for i, text in enumerate(tokens)}
    path = tiny_factory(f"spelling-{name}-{len(tokens)}",
                        family_vocab(name), family=name, n_layer=N_LAYER, n_embd=N_EMBD,
                        token_bias=bias)  # fmt: skip
    await _load(client, path)
    left, right = 's = "', '"\nprint(s)\n'
    uri = f"file:///work/spelling_{name.replace('.', '_')}_{len(tokens)}.py"
    open_doc(client, uri, left + right)
    items = await inline_items(client, uri, 0, len(left))
    assert items, f"{name}: no completion"
    insert = items[0].insert_text
    middle = insert if isinstance(insert, str) else insert.value
    assert not {"\ufffd", "\u2581", "\u0120"} & set(middle), middle  # no broken or raw spelling
    if unit.isascii():
        assert unit in middle, middle
    else:  # the character the first byte began came out whole (its second byte may vary)
        assert any(ch.encode()[:1] == unit.encode()[:1] for ch in middle), middle
    ast.parse(left + middle + right)


@pytest.mark.parametrize(
    ("name", "family"),
    [("qwen2.5-coder", "qwen"), ("codestral", "codestral"), ("mellum", "mellum"),
     ("gemma", "none")],
)  # fmt: skip
def test_complete_json_names_the_family_and_layout(
    closing_model: Callable[[str], Path],
    model_cache: Path,
    tmp_path: Path,
    name: str,
    family: str,
) -> None:
    source = tmp_path / "lists.py"
    source.write_text(LEFT + RIGHT, encoding="utf-8")
    env = dict(os.environ, FIMLSP_CACHE_DIR=str(model_cache))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", "complete", str(source), "--line", "1",
         "--column", str(len(LEFT) + 1), "--model", str(closing_model(name)),
         "--max-tokens", "8", "--json"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["model"]["family"] == family
    assert result["model"]["layout"] == _layout(name)
    assert result["complete"] and "]" in result["middle"]
    ast.parse(LEFT + result["middle"] + RIGHT)
