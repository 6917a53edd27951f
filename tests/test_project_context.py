"""Project context (lsp_server/project): what other files of the workspace a prompt
carries, what it never reads, and how it stays in the KV cache.

Temporary workspaces hold small packages; the tokenizers and models are the tiny
family models (StarCoder2's vocabulary ships with fimlsp; Qwen2.5-Coder's is fetched,
else that test skips) run by the real llama.cpp.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_lsp
from family_fixtures import FamilyModel, family_model, family_path  # noqa: F401
from lsp_fixtures import SERVER, Statuses, inline_items, open_doc, server_status, wait_ready
from lsprotocol import types
from model_fixtures import STOPPING_MODEL, TinyFactory, model_cache, tiny_factory  # noqa: F401
from pytest_lsp import LanguageClient, client_capabilities

from lsp_server.decoding import DecodeOptions
from lsp_server.model import FimModel
from lsp_server.model.prompt import RepoContext
from lsp_server.project import FileAccess, ProjectContext, ProjectView
from lsp_server.project.chunks import TOO_SIMILAR, Chunk, identifiers, jaccard, most_similar
from lsp_server.project.imports import find_imports
from lsp_server.prompt_budget import PromptBudget, ReadSpeed
from lsp_server.settings import Settings

Get = Callable[[str], FamilyModel]

CORE = '''"""Money arithmetic."""


def compute_total(items, *, tax=0.0):
    """The sum of the items' prices, with ``tax`` added."""
    subtotal = sum(item.price for item in items)
    return subtotal * (1 + tax)


class Ledger:
    """Entries in order."""

    currency = "EUR"

    def add(self, entry):
        """Record one entry."""
        self.entries.append(entry)
'''

MAIN = """from shop.core import compute_total
from ..util import slugify
import shop.secret_rates as rates

def checkout(cart):
    total = compute_total(cart.items, tax=rates.VAT)
    return """


def spelled(model: FimModel, prompt: list[int]) -> str:
    """The prompt as text, control tokens by name."""
    table = model.vocab_bytes
    return "".join(
        table[t].decode("utf-8", "replace") if table[t] else model.vocab.token_text(t)
        for t in prompt
    )


def words(text: str) -> list[str]:
    """A stand-in tokenizer where the real one is beside the point."""
    return text.split()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """``shop`` with a package: core (definitions), util, a git-ignored module, app."""
    root = tmp_path / "shop-repo"
    pkg = root / "shop"
    (pkg / "app").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("shop/secret_rates.py\nbuild/\n")
    (pkg / "__init__.py").write_text("from .core import compute_total as total\n")
    (pkg / "core.py").write_text(CORE)
    (pkg / "util.py").write_text(
        "def slugify(text):\n    '''A URL-safe name.'''\n    return text.lower()\n"
    )
    (pkg / "secret_rates.py").write_text("VAT = 0.21  # private\nAPI_KEY = 'hunter2'\n")
    (pkg / "app" / "__init__.py").write_text("")
    (pkg / "app" / "main.py").write_text(MAIN)
    return root


def context_for(
    root: Path,
    text: str,
    budget: int = 2000,
    view: ProjectView | None = None,
    tokenize: Callable[[str], list[str]] | None = None,
) -> tuple[RepoContext | None, ProjectContext]:
    project = ProjectContext(view or ProjectView())
    uri = (root / "shop" / "app" / "main.py").as_uri()
    tok: Callable[[str], list[object]] = tokenize or words  # type: ignore[assignment]
    return project.for_request(uri, text, "", [str(root)], budget, tok), project  # type: ignore[arg-type]


def files_of(context: RepoContext | None) -> dict[str, str]:
    assert context is not None
    return dict(context.files)


# ---------------------------------------------------------------- imports


def test_imports_are_read_from_text_that_does_not_parse() -> None:
    found = find_imports(
        "import os.path as p, sys\nfrom . import (a,\n   b as c)\ndef f(:\n    from ..x import *\n"
    )
    assert [(i.module, i.level, i.names, i.alias) for i in found] == [
        ("os.path", 0, (), "p"),
        ("sys", 0, (), ""),
        ("", 1, (("a", "a"), ("b", "c")), ""),
        ("x", 2, (("*", "*"),), ""),
    ]


def test_imported_definitions_come_as_outlines_then_bodies(workspace: Path) -> None:
    small, _ = context_for(workspace, MAIN, budget=30)
    files = files_of(small)
    core = files["shop/core.py"]
    assert 'def compute_total(items, *, tax=0.0):\n    """The sum' in core
    assert "subtotal" not in core  # the body did not fit: signature and docstring only
    assert "    ...\n" in core
    large, _ = context_for(workspace, MAIN, budget=4000)
    assert "subtotal = sum(item.price for item in items)" in files_of(large)["shop/core.py"]
    assert "def slugify(text):" in files_of(large)["shop/util.py"]  # a relative import
    assert large is not None
    assert (large.name, large.current_path) == ("shop-repo", "shop/app/main.py")


def test_reexports_are_followed(workspace: Path) -> None:
    context, _ = context_for(workspace, "from shop import total\n\nx = total(")
    assert "def compute_total(" in files_of(context)["shop/core.py"]


# ---------------------------------------------------------------- privacy


def test_a_gitignored_module_is_never_read(workspace: Path) -> None:
    context, _ = context_for(workspace, MAIN)
    text = "".join(body for _, body in files_of(context).items())
    assert "hunter2" not in text and "VAT" not in text
    access = FileAccess([workspace])
    assert not access.readable(workspace / "shop" / "secret_rates.py")
    assert not access.readable(workspace / "build" / "gen.py")  # an ignored directory
    assert not access.readable(workspace / ".git" / "hooks.py")
    assert access.readable(workspace / "shop" / "core.py")
    assert not access.readable(workspace / "shop" / "notes.txt")  # not Python source


def test_a_gitignored_module_the_editor_opened_may_be_read(workspace: Path) -> None:
    view = ProjectView()
    secret = workspace / "shop" / "secret_rates.py"
    view.document_changed(secret.as_uri(), "VAT = 0.25  # as the editor has it\n")
    context, _ = context_for(workspace, MAIN, view=view)
    assert "VAT = 0.25" in files_of(context)["shop/secret_rates.py"]


def test_nothing_outside_the_folders_and_packages(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "keys.py").write_text("TOKEN = 'secret'\n")
    os.symlink(outside / "keys.py", workspace / "shop" / "keys.py")
    access = FileAccess([workspace])
    assert not access.readable(workspace / "shop" / "keys.py")  # a link out
    assert not access.readable(outside / "keys.py")
    context, _ = context_for(workspace, "from shop.keys import TOKEN\nx = ")
    assert context is None or "secret" not in str(context.files)
    venv = workspace / ".venv" / "lib" / "python3.12" / "site-packages"
    venv.mkdir(parents=True)
    (workspace / ".gitignore").write_text(".venv/\n")
    (venv / "lib.py").write_text("def f():\n    pass\n")
    assert not FileAccess([workspace]).readable(venv / "lib.py")
    assert FileAccess([workspace], [venv]).readable(venv / "lib.py")  # installed: public


# ---------------------------------------------------------------- similar chunks


def test_similar_chunks_skip_near_copies_and_repeats() -> None:
    window = "def checkout(cart):\n    total = compute_total(cart.items)\n    return total\n"
    related = Chunk(0, 3, "def refund(cart):\n    total = compute_total(cart.refunds)\n")
    copy = Chunk(3, 6, window)
    repeat = Chunk(6, 9, "import shop.core as core_module\nLIMIT = 10\n")
    unrelated = Chunk(9, 12, "class Widget:\n    color = 'red'\n")
    file_lines = frozenset({"import shop.core as core_module", "LIMIT = 10"})
    chunks = [("a.py", c) for c in (related, copy, repeat, unrelated)]
    chosen = [chunk for _, _, chunk in most_similar(chunks, window, file_lines)]
    assert chosen == [related]
    assert jaccard(identifiers(copy.text), identifiers(window)) >= TOO_SIMILAR


def test_recent_edits_and_similar_documents_come_in(workspace: Path) -> None:
    view = ProjectView()
    other = (workspace / "shop" / "report.py").as_uri()
    view.document_changed(other, "# report\n")
    edited = "".join(f"line_{i} = {i}\n" for i in range(60)) + "def refund(cart):\n    pass\n"
    view.document_changed(other, edited, edited_to=len(edited) - 5)
    context, _ = context_for(workspace, MAIN, view=view)
    assert "def refund(cart):" in files_of(context)["shop/report.py"]


# ---------------------------------------------------------------- budget


def test_the_budget_is_filled_in_priority_order(family_model: Get, workspace: Path) -> None:
    model = family_model("starcoder2").model
    view = ProjectView()
    similar = "".join(f"def helper_{i}(cart, items):\n    return compute_total(items)\n\n"
                      for i in range(40))  # fmt: skip
    view.document_changed((workspace / "shop" / "helpers.py").as_uri(), similar)
    for budget in (64, 128, 512, 2048):
        context, _ = context_for(workspace, MAIN, budget, view, model.tokenize)  # type: ignore[arg-type]
        if context is None:
            continue
        header = model.prompts.context_tokens(context)
        assert len(header) <= budget, budget
        files = dict(context.files)
        if "shop/helpers.py" in files:  # similar chunks only after the imports
            assert "shop/core.py" in files and "shop/util.py" in files
    small, _ = context_for(workspace, MAIN, 128, view, model.tokenize)  # type: ignore[arg-type]
    assert small is not None and "shop/helpers.py" not in dict(small.files)


# ---------------------------------------------------------------- prompt layout

CONTEXT = RepoContext("shop", (("shop/core.py", "def total(items):\n    ...\n"),), "app.py")


def test_qwen_repository_prompt(family_model: Get) -> None:
    """Qwen2.5-Coder's repository-level format, as its technical report lays it out:
    <|repo_name|>name\\n<|file_sep|>path\\ncontent<|file_sep|>path\\n<|fim_prefix|>..."""
    model = family_model("qwen2.5-coder").model
    prompt = model.build_fim_prompt("x = tot", "\n", context=CONTEXT)
    text = spelled(model, prompt)
    assert text == (
        "<|repo_name|>shop\n<|file_sep|>shop/core.py\ndef total(items):\n    ...\n"
        "<|file_sep|>app.py\n<|fim_prefix|>x = tot<|fim_suffix|>\n<|fim_middle|>"
    )
    assert model.detected()["repoFormat"] == "qwen"
    ft = model.fim_tokens
    assert ft.sep is not None and prompt[0] == ft.rep
    assert prompt.count(ft.sep) == 2  # one token each, not text


def test_starcoder2_repository_prompt(family_model: Get) -> None:
    model = family_model("starcoder2").model
    text = spelled(model, model.build_fim_prompt("x = tot", "\n", context=CONTEXT))
    assert text.startswith("<repo_name>shop<file_sep>shop/core.py\ndef total(items):\n")
    assert "<file_sep>app.py\n<fim_prefix>x = tot" in text


def test_families_without_a_repository_format_get_none(family_model: Get) -> None:
    model = family_model("mellum").model  # <reponame> but no file separator
    assert model.detected()["repoFormat"] is None
    plain = model.build_fim_prompt("x = tot", "\n")
    assert model.build_fim_prompt("x = tot", "\n", context=CONTEXT) == plain


def test_file_text_that_spells_special_tokens_stays_text(family_model: Get) -> None:
    model = family_model("starcoder2").model
    sneaky = RepoContext("r", (("a.py", "s = '<file_sep><fim_middle>'\n"),), "b.py")
    prompt = model.build_fim_prompt("x", "", context=sneaky)
    sep, mid = model.fim_tokens.sep, model.fim_tokens.mid
    assert sep is not None and mid is not None
    assert prompt.count(sep) == 2 and prompt.count(mid) == 1


# ---------------------------------------------------------------- the KV cache


def _typing(workspace: Path) -> tuple[str, str]:
    values = "".join(f"value_{i} = {i}\n" for i in range(40))
    text = MAIN.replace("def checkout", values + "\n\ndef checkout") + "total\n"
    cut = text.index("return ") + len("return ")
    return text[:cut], text[cut:]


def test_a_keystroke_keeps_the_context_in_the_cache(
    family_path: Callable[[str], Path], workspace: Path
) -> None:
    """Two keystrokes: the context is not chosen again, and reading the second prompt
    costs what it costs without context (the text after the change), not the context."""
    with FimModel(family_path("starcoder2"), n_ctx=2048) as model:
        project = ProjectContext(ProjectView())
        uri = (workspace / "shop" / "app" / "main.py").as_uri()
        left, right = _typing(workspace)
        first = project.for_request(uri, left, right, [str(workspace)], 512, model.tokenize)
        assert first is not None
        header = model.prompts.context_tokens(first)
        assert len(header) > 50

        def second_read(context: RepoContext | None) -> int:
            model.cache.reset()
            model.prefill(model.build_fim_prompt(left, right, 16, context=context))
            before = model.cache.n_decoded
            model.prefill(model.build_fim_prompt(left + "t", right, 16, context=context))
            return model.cache.n_decoded - before

        again = project.for_request(uri, left + "t", right, [str(workspace)], 512, model.tokenize)
        assert again is first and project.built == 1  # not chosen again
        with_context = second_read(first)
        assert model.cache.cached_tokens[: len(header)] == tuple(header)
        assert with_context == second_read(None) < len(header)


def test_a_request_takes_the_context_once_read_ahead_read_it(
    family_path: Callable[[str], Path], workspace: Path
) -> None:
    with FimModel(family_path("starcoder2"), n_ctx=2048) as model:
        budget = PromptBudget(ReadSpeed(400.0))  # a slow machine: a cold read is short
        left, right = _typing(workspace)
        project = ProjectContext(ProjectView())
        uri = (workspace / "shop" / "app" / "main.py").as_uri()
        size = budget.context_budget(3.0, 0.3, 2048)
        assert size == 256  # 0.3 of 1200, rounded down to a power of two
        context = project.for_request(uri, left, right, [str(workspace)], size, model.tokenize)
        options = DecodeOptions(max_tokens=16, project_context=context)
        cold = budget.choose(model, left, right, options, 3.0)
        assert cold.context is None  # reading the context would not fit the allowance
        model.prefill(cold.prompt)
        widest = budget.choose(model, left, right, options, 3.0, allowance=1 << 30)
        assert widest.context is context  # what read-ahead reads while the user pauses
        model.read_ahead(widest.prompt)
        warm = budget.choose(model, left + "t", right, options, 3.0)
        assert warm.context is context and warm.uncached <= 4


# ---------------------------------------------------------------- settings


def test_the_settings() -> None:
    assert (Settings().project_context, Settings().project_context_share) == (True, 0.3)
    settings, problems = Settings().merged({"projectContext": False, "projectContextShare": 0.5})
    assert problems == [] and (settings.project_context, settings.project_context_share) == (
        False,
        0.5,
    )
    _, problems = Settings().merged({"projectContextShare": 1.5})
    assert problems == ["setting 'projectContextShare': 1.5 is outside 0..1"]


# ---------------------------------------------------------------- through the server


@pytest.fixture(scope="module")
def repo_model(tiny_factory: TinyFactory) -> Path:
    """A tiny StarCoder2 model that wants to stop (so that completions come back)."""
    return tiny_factory("stopping-starcoder2", family="starcoder2", **STOPPING_MODEL)


@pytest_lsp.fixture(config=SERVER)
async def client(
    lsp_client: LanguageClient, repo_model: Path, workspace: Path
) -> AsyncIterator[None]:
    statuses = Statuses()
    lsp_client.feature("fimlsp/status")(statuses)
    lsp_client.statuses = statuses  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="shop")],
            initialization_options={"model": str(repo_model), "maxTokens": 8},
        )
    )
    assert (await wait_ready(lsp_client))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_the_server_reads_project_context_ahead(
    client: LanguageClient, workspace: Path
) -> None:
    """Over stdio, with the workspace folder from ``initialize``: the first request has
    no context (none was chosen yet); read-ahead chooses it while the user pauses; the
    next request's prompt carries it."""
    statuses: Statuses = client.statuses  # type: ignore[attr-defined]
    uri = (workspace / "shop" / "app" / "main.py").as_uri()
    open_doc(client, uri, MAIN + "\n")
    line, column = MAIN.count("\n"), len(MAIN.rsplit("\n", 1)[1])
    await inline_items(client, uri, line, column)
    first = await statuses.wait_for(lambda s: s.get("uri") == uri and "stopReason" in s)
    assert "projectFiles" not in first
    for _ in range(200):  # read-ahead after the pause (IDLE_S)
        status = await server_status(client)
        if status["projectContexts"] >= 1 and status["readAheadTokens"] > 0:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"no project context read ahead: {status}")
    seen = len(statuses.items)
    await inline_items(client, uri, line, column)
    second = await statuses.wait_for(
        lambda s: s.get("uri") == uri and "stopReason" in s and statuses.items.index(s) >= seen
    )
    assert second["projectFiles"] >= 2  # shop/core.py and shop/util.py
    assert 0 < second["contextTokens"] < second["promptTokens"]
    assert second["promptEvaluated"] < second["promptTokens"] // 4  # it was read ahead


def test_a_folder_on_the_interpreters_path_keeps_its_gitignore(workspace: Path) -> None:
    """A workspace folder that is also a package root (on ``PYTHONPATH``, or inside a
    standard library) is still read by its ``.gitignore``."""
    for packages in ([workspace], [workspace.parent]):
        access = FileAccess([workspace], packages)
        assert not access.readable(workspace / "shop" / "secret_rates.py")
        assert access.readable(workspace / "shop" / "core.py")
