"""The OpenAI path against an engine that speaks only OpenAI's legacy completions shape:
llama-cpp-python's own server (``llama-cpp-python[server]``), running the tiny model.

It answers ``logprobs: N`` with the top N alternatives per position as ``{text: logprob}``
(no ids) and refuses token ids as the prompt, so the client needs the model's vocabulary
(``modelVocab``): to send the prompt as text with its special tokens spelled out, and to
map the answer's texts back to ids.  vLLM answers in the same shape (with ids, as
``token_id:N`` texts, when asked).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from model_fixtures import (
    model_cache,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)
from test_server_api import SNIPPETS, greedy_in_process, log_softmax

from bench.llama_server import free_port
from lsp_server.decoding import DecodeOptions, generate
from lsp_server.model import FimModel
from lsp_server.model.remote import open_remote
from lsp_server.model.remote.server_api import (
    OPENAI,
    ServerClient,
    ServerError,
    ServerHTTPError,
    load_local_vocab,
)

__all__ = [  # fixtures used by name
    "model_cache",
    "tiny_factory",
    "tiny_model",
    "tiny_model_path",
    "tiny_session_model",
]

_SERVER_MODULES = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "yaml")


@pytest.fixture(scope="module")
def lcpp_server(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on the tiny model; its URL."""
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python[server] is not installed (no {', '.join(missing)})")
    port = free_port()
    log = tmp_path_factory.mktemp("llama-cpp-python-server") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_model_path),
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024", "--n_threads", "1",
             "--n_threads_batch", "1"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with ServerClient(url, server_api="openai", connect_timeout=1) as probe:
                    probe.models()
                break
            except ServerError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_detected_as_openai_and_token_prompts_need_the_vocabulary(
    lcpp_server: str, tiny_model: FimModel
) -> None:
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[0])
    with ServerClient(lcpp_server) as client:
        assert client.detect() == OPENAI  # no /props
        with pytest.raises(ServerHTTPError, match=r"prompt.*valid string"):
            client.complete(prompt, n_predict=2)  # refuses ids, and no vocabulary to spell them


def test_legacy_logprobs_map_back_to_the_in_process_tokens(
    lcpp_server: str, tiny_model: FimModel, tiny_model_path: Path
) -> None:
    vocab = load_local_vocab(tiny_model_path)
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[1])
    with ServerClient(lcpp_server, vocab=vocab) as client:
        whole = client.complete(prompt, n_predict=10, n_probs=4)
        with client.stream(prompt, n_predict=10, n_probs=4) as stream:
            streamed = list(stream)
            end = stream.end
    assert whole.end.stop == "limit" and whole.end.n_prompt == len(prompt)
    assert end is not None and end.stop == "limit"
    assert [(s.token, [c.token for c in s.top]) for s in streamed] == [
        (s.token, [c.token for c in s.top]) for s in whole.steps
    ]
    expected = greedy_in_process(tiny_model, prompt, 10)
    resolved = 0
    for step, (token, logits) in zip(whole.steps, expected, strict=True):
        logprobs = log_softmax(logits)
        ranking = [int(t) for t in np.argsort(-logits, kind="stable")[:4]]
        assert step.token in (None, token)
        resolved += step.token is not None
        assert step.logprob == pytest.approx(logprobs[token], abs=2e-3)
        for cand in step.top:  # texts shared by several tokens come back without an id
            assert cand.token is None or cand.token in ranking
            if cand.token is not None:
                assert cand.logprob == pytest.approx(logprobs[cand.token], abs=2e-3)
    assert resolved >= 5  # most tokens have a text of their own


def test_the_remote_backend_over_llama_cpp_python_gives_the_in_process_middles(
    lcpp_server: str, tiny_model: FimModel, tiny_model_path: Path, target: tuple[int, int]
) -> None:
    """The whole remote backend (modelVocab, streamed legacy logprobs, a new request at each
    rejected token) against this server: greedy constrained decoding reaches the in-process
    tokens, stop reasons and verdicts."""
    # knownNames off: the random-weight model's arbitrary names would be refused, and
    # the server's few ranked alternatives run out sooner than the whole vocabulary
    options = DecodeOptions(max_tokens=10, token_healing=False, known_names=False)
    with open_remote(lcpp_server, model_vocab=tiny_model_path, n_ctx=1024) as remote:
        assert remote.client.api == OPENAI and remote.layout == tiny_model.layout
        for left, right in SNIPPETS:
            expected = generate(tiny_model, left, right, options, target=target)
            got = generate(remote, left, right, options, target=target)
            assert (got.tokens, got.stop_reason, got.complete) == (
                expected.tokens,
                expected.stop_reason,
                expected.complete,
            ), (left[-30:], right[:30])
        assert remote.counters.streams >= len(SNIPPETS)
