"""The language server over stdio, driven by pytest-lsp with the tiny test model.

Every completion the server returns is applied to the document and must make it
parse (``ast.parse``), unless the right context cannot be completed at all.
"""

from __future__ import annotations

import ast
import asyncio
import random
import re
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

import pytest_lsp
from lsp_fixtures import (
    SERVER,
    Statuses,
    inline_items,
    inline_params,
    open_doc,
    server_status,
    sha256,
    stopping_model,
    wait_ready,
)
from model_fixtures import TinyFactory, model_cache, tiny_factory
from pytest_lsp import LanguageClient, client_capabilities

from lexer.version import NEWEST
from lsp_server.transport.serving import SWITCH_INTERVAL_S
from quotient_parser.quotient import Quotient

__all__ = ["model_cache", "stopping_model", "tiny_factory"]  # fixtures used by name

pytestmark = pytest.mark.asyncio(loop_scope="module")

STDLIB = Path(sysconfig.get_paths()["stdlib"])
_LINE_END = re.compile(r"\r\n|\r|\n")


def lsp_position(text: str, offset: int) -> types.Position:
    """The protocol's position of a string offset (UTF-16 columns), computed independently."""
    before = text[:offset]
    starts = [0] + [m.end() for m in _LINE_END.finditer(before)]
    line_text = before[starts[-1] :]
    return types.Position(line=len(starts) - 1, character=len(line_text.encode("utf-16-le")) // 2)


async def settled(client: LanguageClient, timeout: float = 10) -> dict[str, Any]:
    """serverStatus once the worker has nothing queued or running (or fail)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await server_status(client)
        if status["queuedJobs"] == 0 and status["pendingRequests"] == 0:
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the worker still holds requests: {status}")
        await asyncio.sleep(0.05)


async def settings_become(
    client: LanguageClient, check: Any, timeout: float = 10
) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        settings = (await server_status(client))["settings"]
        if check(settings):
            return dict(settings)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"settings did not change: {settings}")
        await asyncio.sleep(0.05)


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, stopping_model: Path) -> Any:
    statuses = Statuses()
    lsp_client.feature("fimlsp/status")(statuses)
    lsp_client.statuses = statuses  # type: ignore[attr-defined]
    result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options={
                "model": str(stopping_model),
                "deadlineMs": 8000,
                "maxTokens": 48,
                # the random-weight model writes arbitrary names, which knownNames refuses
                "knownNames": False,
            },
        )
    )
    lsp_client.init_result = result  # type: ignore[attr-defined]
    assert (await wait_ready(lsp_client))["state"] == "ready"
    yield
    await lsp_client.shutdown_session()


# ----------------------------------------------------------------------------- session


async def test_capabilities(client: LanguageClient) -> None:
    caps = client.init_result.capabilities  # type: ignore[attr-defined]
    assert caps.inline_completion_provider is not None
    assert caps.completion_provider is not None
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert caps.position_encoding in (types.PositionEncodingKind.Utf16, "utf-16")
    assert client.init_result.server_info.name == "fimlsp"  # type: ignore[attr-defined]


async def test_model_load_reports_progress(client: LanguageClient) -> None:
    reports = [r for token, r in client.progress_reports.items() if "fimlsp-load" in str(token)]
    assert reports, client.progress_reports
    kinds = [type(item).__name__ for item in reports[0]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert any(getattr(item, "percentage", None) == 100 for item in reports[0])


async def test_completion_fits_between_left_and_right(client: LanguageClient) -> None:
    uri = "file:///demo.py"
    text = "def f(x):\n    return (x +\n\nprint(f(1))\n"
    open_doc(client, uri, text)
    offset = text.index("+") + 1
    result = await inline_items(client, uri, 1, offset - text.index("\n") - 1)
    assert result, client.statuses.items[-3:]  # type: ignore[attr-defined]
    middle = result[0].insert_text
    assert isinstance(middle, str) and middle
    assert parses(text[:offset] + middle + text[offset:])
    status = await client.statuses.wait_for(lambda s: s.get("uri") == uri and "tokens" in s)  # type: ignore[attr-defined]
    assert status["complete"] is True
    for key in ("timeToFirstTokenMs", "tokensPerSecond", "parserUsPerToken", "stopReason"):
        assert key in status
    # The figures come from one timeline: the phases add up, the first token comes within.
    phases = [status[k] for k in ("queueMs", "quotientMs", "promptMs", "generateMs")]
    assert abs(sum(phases) - status["elapsedMs"]) <= 0.05, status
    assert status["timeToFirstTokenMs"] <= status["elapsedMs"], status


async def test_typing_along_reuses_the_shown_completion(client: LanguageClient) -> None:
    uri = "file:///along.py"
    text = "values = [1, 2, 3]\ntotal = sum(values\nprint(total)\n"
    open_doc(client, uri, text)
    offset = text.index("sum(values") + len("sum(values")
    pos = lsp_position(text, offset)
    first = await inline_items(client, uri, pos.line, pos.character)
    assert first
    middle = first[0].insert_text
    assert isinstance(middle, str)
    if len(middle) < 2:
        pytest.skip(f"the model's middle {middle!r} is too short to type along")
    typed = middle[0]
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=pos, end=pos), text=typed
                )
            ],
        )
    )
    second = await inline_items(client, uri, pos.line, pos.character + 1)
    assert second
    assert second[0].insert_text == middle[1:]
    status = await client.statuses.wait_for(  # type: ignore[attr-defined]
        lambda s: s.get("uri") == uri and s.get("stopReason") == "reused"
    )
    assert status["tokens"] == 0


async def test_incremental_changes_keep_the_text_in_sync(client: LanguageClient) -> None:
    """Edits with non-ASCII text and surrogate pairs before the cursor, then a completion
    applied at the client's position must parse: the server's copy matches ours."""
    uri = "file:///edits.py"
    text = "s = 'héllo 🐍'\nx = (1 +\nprint(s)\n"
    open_doc(client, uri, text)
    edits = [
        # (start offset, end offset, new text)
        (text.index("héllo"), text.index("héllo") + 5, "wörld 𝔘"),
        (0, 0, "# ünïcode ✓ 🎉\n"),
    ]
    version = 1
    for start, end, new in edits:
        version += 1
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=lsp_position(text, start), end=lsp_position(text, end)
                        ),
                        text=new,
                    )
                ],
            )
        )
        text = text[:start] + new + text[end:]
    offset = text.index("(1 +") + len("(1 +")
    pos = lsp_position(text, offset)
    result = await inline_items(client, uri, pos.line, pos.character)
    assert result
    middle = result[0].insert_text
    assert isinstance(middle, str)
    assert parses(text[:offset] + middle + text[offset:])


async def test_many_cursors_in_stdlib_files(client: LanguageClient) -> None:
    """Inline completion and the completion fallback at random cursors of real files."""
    rng = random.Random(5)
    returned = 0
    for name in ("textwrap.py", "json/decoder.py", "string.py"):
        path = STDLIB / name
        text = path.read_text(encoding="utf-8")
        uri = path.as_uri()
        open_doc(client, uri, text)
        for i in range(8):
            offset = rng.randrange(len(text))
            pos = lsp_position(text, offset)
            left, right = text[:offset], text[offset:]
            if i % 2 == 0:
                result = await inline_items(client, uri, pos.line, pos.character)
                for item in result:
                    assert isinstance(item.insert_text, str)
                    assert item.range is not None and item.range.start == pos
                    assert parses(left + item.insert_text + right), (name, pos, item.insert_text)
                    returned += 1
            else:
                listing = await client.text_document_completion_async(
                    types.CompletionParams(
                        text_document=types.TextDocumentIdentifier(uri=uri), position=pos
                    )
                )
                assert isinstance(listing, types.CompletionList)
                for citem in listing.items:
                    edit = citem.text_edit
                    assert isinstance(edit, types.TextEdit)
                    assert edit.range.end == pos
                    word = left[len(left) - (pos.character - edit.range.start.character) :]
                    assert edit.new_text.startswith(word)
                    assert parses(left[: len(left) - len(word)] + edit.new_text + right)
                    returned += 1
    assert returned >= 3, "the stopping test model should complete some of these cursors"


# ----------------------------------------------------------------------------- load


async def test_cancel_request_stops_generation(client: LanguageClient) -> None:
    uri = "file:///cancel.py"
    text = "def f(a, b):\n    return [a,\n"
    open_doc(client, uri, text)
    before = await server_status(client)
    # Send the request and then $/cancelRequest by hand: cancelling the client's own
    # future would make pygls' client choke on the server's (required) reply.
    pending = set(client.protocol._request_futures)
    future = client.protocol.send_request(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, 1, 15)
    )
    (msg_id,) = set(client.protocol._request_futures) - pending
    await asyncio.sleep(0.02)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    try:
        result = await asyncio.wait_for(asyncio.wrap_future(future), timeout=10)
    except Exception as exc:  # the server answers RequestCancelled (-32800)
        assert "cancel" in str(exc).lower()
    else:  # or it had already finished
        assert isinstance(result, types.InlineCompletionList)
    after = await settled(client)
    assert after["state"] == "ready"
    assert after["served"] > before["served"]


async def test_storm_of_changes_and_requests(client: LanguageClient) -> None:
    """500 change + request pairs without waiting: the last answer is right, older ones are
    superseded, and nothing is left queued or held."""
    uri = "file:///storm.py"
    base = "import os\n\ndef main(path):\n    name = os.path.basename(path\n"
    open_doc(client, uri, base)
    before = await settled(client)
    text = base
    futures: list[asyncio.Future[Any]] = []
    for i in range(500):
        # Alternately append and delete a space at the end of the document.
        if i % 2 == 0:
            start, end, new_text = len(text), len(text), " "
        else:
            start, end, new_text = len(text) - 1, len(text), ""
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=lsp_position(text, start), end=lsp_position(text, end)),
            text=new_text,
        )
        text = text[:start] + new_text + text[end:]
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                content_changes=[change],
            )
        )
        offset = base.rindex("(path") + len("(path")
        pos = lsp_position(text, offset)
        # send_request writes the request now, between the changes (the *_async helpers
        # would only send it when awaited, after all 500 changes).
        futures.append(
            asyncio.wrap_future(
                client.protocol.send_request(
                    types.TEXT_DOCUMENT_INLINE_COMPLETION,
                    inline_params(uri, pos.line, pos.character),
                )
            )
        )
    results = await asyncio.gather(*futures, return_exceptions=True)
    document = (await server_status(client, uri))["document"]
    assert document["sha256"] == sha256(text), (document, len(text))
    assert not [r for r in results if isinstance(r, BaseException)]
    last = results[-1]
    assert isinstance(last, types.InlineCompletionList)
    assert last.items, [s for s in client.statuses.items if s.get("uri") == uri][-3:]  # type: ignore[attr-defined]
    offset = text.rindex("(path") + len("(path")
    middle = last.items[0].insert_text
    assert isinstance(middle, str)
    assert parses(text[:offset] + middle + text[offset:])
    status = await settled(client)
    assert status["capturedRequests"] == 0 and status["runningRequests"] == 0
    # Every request was answered exactly once: generated, or dropped as superseded.
    assert status["shared"] == before["shared"]  # the text changed between all requests
    assert status["served"] - before["served"] == 500


async def test_large_document(client: LanguageClient) -> None:
    """5 MB: no completion (over maxDocumentChars), a clear status, the server stays up."""
    uri = "file:///big.py"
    line = "value = compute(1, 2, 3)  # padding padding padding\n"
    text = line * (5_000_000 // len(line)) + "x = (\n"
    open_doc(client, uri, text)
    pos = lsp_position(text, len(text) - 1)
    result = await inline_items(client, uri, pos.line, pos.character)
    assert not result
    status = await client.statuses.wait_for(lambda s: s.get("uri") == uri)  # type: ignore[attr-defined]
    assert status["stopReason"] == "too_large"
    # Parsed off the loop, its lines indexed there: a whole new text, then an edit
    # near its end, and the server's copy is the client's.
    text = "é = 1\r\n" + text
    here = lsp_position(text, len(text) - 3)
    edit = types.Range(start=here, end=here)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangeWholeDocument(text=text),
                types.TextDocumentContentChangePartial(range=edit, text="😀"),
            ],
        )
    )
    text = text[:-3] + "😀" + text[-3:]
    status = await server_status(client, uri)
    document = status["document"]
    assert document["sha256"] == sha256(text) and document["version"] == 2
    # The loop-lag monitor has been ticking since initialize (its figures: benchmarks).
    assert status["loopLagTicks"] > 0
    assert status["loopLagMaxMs"] >= status["loopLagP99Ms"] >= 0
    # It serves with a short switch interval: the loop waits little behind its threads.
    assert status["switchIntervalMs"] == SWITCH_INTERVAL_S * 1e3
    # The model runs in the engine process, whose memory is reported beside the front's.
    assert status["enginePid"] > 0 and status["engineRssMb"] > 0 and status["rssMb"] > 0
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("name", "text", "cursor"),
    [
        ("nul", "x = (1 +\x00\n", 8),
        ("surrogate", "s = '\ud800'\nx = (1 +\n", 20),
        ("deep", "x = " + "(" * 10_000 + "\n", 5000),
        ("indent", "".join(" " * i + "if x:\n" for i in range(150)), 40),
    ],
)
async def test_hostile_documents(client: LanguageClient, name: str, text: str, cursor: int) -> None:
    """No completion where none can fit, a status that says why, and the server lives."""
    uri = f"file:///hostile-{name}.py"
    open_doc(client, uri, text)
    pos = lsp_position(text, cursor)
    items = await inline_items(client, uri, pos.line, pos.character)
    assert not items
    status = await client.statuses.wait_for(lambda s: s.get("uri") == uri)  # type: ignore[attr-defined]
    assert status["stopReason"] == "no_middle_fits" and status["message"]
    assert (await server_status(client))["state"] == "ready"


async def test_out_of_range_and_unknown_documents(client: LanguageClient) -> None:
    uri = "file:///small.py"
    open_doc(client, uri, "x = 1\n")
    with pytest.raises(Exception, match="past the end"):
        await client.text_document_inline_completion_async(inline_params(uri, 99, 0))
    with pytest.raises(Exception, match="not open"):
        await client.text_document_inline_completion_async(inline_params("file:///nope.py", 0, 0))
    # A column past the end of its line means the end of the line (the specification).
    await inline_items(client, uri, 0, 500)
    assert (await server_status(client))["state"] == "ready"


async def test_settings_pulled_with_workspace_configuration(
    client: LanguageClient, stopping_model: Path
) -> None:
    """didChangeConfiguration without settings: the server asks for section fimlsp."""
    client.set_configuration(
        {"model": str(stopping_model), "maxTokens": 7, "lineMode": "multi", "topK": "x"},
        section="fimlsp",
    )
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    settings = await settings_become(client, lambda s: s["max_tokens"] == 7)
    assert settings["line_mode"] == "multi" and settings["top_k"] == 50
    await asyncio.sleep(0.1)
    assert any("topK" in m.message for m in client.log_messages)
    client.set_configuration({"model": str(stopping_model)}, section="fimlsp")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await settings_become(client, lambda s: s["max_tokens"] != 7)


async def test_stay_inside_setting(
    client: LanguageClient, tiny_factory: TinyFactory, stopping_model: Path
) -> None:
    """stayInside (on by default) keeps a closer-loving model's answer inside the call at
    the cursor; switched off, the answer may leave it; a non-boolean is refused."""
    bias = {")": 30.0, "]": 29.0, "}": 28.0, ":": 27.0}
    closer = tiny_factory("closer", stop_bias=-30.0, token_bias=bias, n_layer=1, n_embd=32)
    text = "values = [1, 2]\ntotal = max(values, )\nprint(total)\n"
    offset = text.index(", )") + 2
    left, right = text[:offset], text[offset:]
    uri = "file:///inside.py"

    async def answer(settings: dict[str, Any]) -> str:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimlsp": settings})
        )
        await settings_become(client, lambda s: s["stay_inside"] == settings["stayInside"])
        assert (await wait_ready(client))["state"] == "ready"
        items = await inline_items(client, uri, 1, offset - text.index("total"))
        assert len(items) <= 1
        return str(items[0].insert_text) if items else ""

    try:
        open_doc(client, uri, text)
        # One line, as the scenario needs (over several, the closer model's ')' and line
        # break write R's ')' again: an echo); knownNames off for the random weights.
        common = {"model": str(closer), "maxTokens": 16, "lineMode": "single", "knownNames": False}
        kept = await answer({**common, "stayInside": True})
        assert parses(left + kept + right), kept
        status = await client.statuses.wait_for(  # type: ignore[attr-defined]
            lambda s: s.get("uri") == uri and "steeredTokens" in s
        )
        assert status["steeredTokens"] >= 0 and status["rescuedSteps"] >= 0
        assert "witnessChars" not in status  # witness endings are off by default
        assert not kept.startswith(")")
        inside = Quotient(left, right, NEWEST, stay_inside=True)
        assert inside.initial.feed(kept).complete
        free = await answer({**common, "stayInside": False})
        assert free != kept and parses(left + free + right), free
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimlsp": {"model": str(closer), "stayInside": "yes"}}
            )
        )
        await settings_become(client, lambda s: s["stay_inside"] is True)
        await asyncio.sleep(0.1)
        assert any("stayInside" in m.message for m in client.log_messages)
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(stopping_model)}})
        )
        await asyncio.sleep(0.1)
        assert (await wait_ready(client))["state"] == "ready"


async def test_configuration_to_missing_model_and_back(
    client: LanguageClient, stopping_model: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.gguf"
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(missing)}})
    )
    status = await wait_ready(client)
    assert status["state"] == "error" and "not found" in status["message"]
    await asyncio.sleep(0.2)
    assert any("missing.gguf" in m.message for m in client.messages)
    uri = "file:///config.py"
    open_doc(client, uri, "x = (1 +\n")
    result = await inline_items(client, uri, 0, 8)
    assert not result
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(stopping_model)}})
    )
    await asyncio.sleep(0.1)
    assert (await wait_ready(client))["state"] == "ready"
    result = await inline_items(client, uri, 0, 8)
    assert result


async def test_inline_and_completion_for_one_keystroke_share_the_answer(
    client: LanguageClient,
) -> None:
    """Clients that ask both ways must not have the two requests cancel each other."""
    uri = "file:///both.py"
    text = "def f(x):\n    return (x +\n"
    open_doc(client, uri, text)
    before = await settled(client)
    inline, listing = await asyncio.gather(
        inline_items(client, uri, 1, 15),
        client.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=1, character=15),
            )
        ),
    )
    after = await settled(client)
    assert after["served"] == before["served"] + 1  # one generation for both
    assert after["cancelled"] == before["cancelled"]
    assert isinstance(listing, types.CompletionList)
    # The cursor follows "+", so no word before it: the edit inserts the middle itself.
    assert [i.insert_text for i in inline] == [
        c.text_edit.new_text for c in listing.items if c.text_edit is not None
    ]


async def test_invoked_request_offers_the_other_line_mode_to_cycle_to(
    client: LanguageClient, tiny_factory: TinyFactory, stopping_model: Path
) -> None:
    """Asked for explicitly (VS Code's next suggestion, Neovim's trigger), the server
    offers up to three distinct complete middles, the multi-line one among them, ranked
    by length-normalised log-probability; typing gets only the first generation's."""
    # A model that would rather break the line than close the bracket.
    newliner = tiny_factory("newliner", stop_bias=30.0, token_bias={"\n": 40.0, ")": 25.0})
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(newliner)}})
    )
    await asyncio.sleep(0.1)
    assert (await wait_ready(client))["state"] == "ready"
    try:
        uri = "file:///cycle.py"
        text = "values = [1, 2]\ntotal = max(values, \nprint(total)\n"
        open_doc(client, uri, text)
        offset = text.index("max(values, ") + len("max(values, ")
        typing = await inline_items(client, uri, 1, 20)
        invoked = await inline_items(client, uri, 1, 20, types.InlineCompletionTriggerKind.Invoked)
        middles = [item.insert_text for item in invoked]
        assert [item.insert_text for item in typing] == [")"]
        assert ")" in middles and 2 <= len(middles) <= 3, middles
        assert len(set(map(str, middles))) == len(middles)  # distinct
        assert any("\n" in str(middle) for middle in middles), middles
        for middle in middles:
            assert parses(text[:offset] + str(middle) + text[offset:]), middle
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimlsp": {"model": str(stopping_model)}})
        )
        await asyncio.sleep(0.1)
        assert (await wait_ready(client))["state"] == "ready"
