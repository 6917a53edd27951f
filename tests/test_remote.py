"""The remote backend (lsp_server.model.remote) against a real llama-server.

The server runs the same GGUF as the in-process ``FimModel``, with the same llama.cpp
(built from the sources llama-cpp-python vendors), one thread, no flash attention: greedy
decoding through the server must give the middles the in-process model gives, whatever the
decoder rejects on the way, and every request it sends is counted.
"""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from backend_contract import check_generation, check_ranking
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    STOPPING_MODEL,
    TinyFactory,
    model_cache,
    tiny_factory,
    tiny_model_path,
)
from test_backend import cuts  # noqa: F401  (the decoding tests' cuts)
from test_llama_server import llama_server_binary  # noqa: F401

from bench.llama_server import LlamaServer, running_llama_server, start_llama_server
from lsp_server.decoding import Completion, DecodeOptions, generate
from lsp_server.model import FimModel, Interrupted
from lsp_server.model.remote import RemoteBackend, is_server_url, open_remote
from lsp_server.model.remote.server_api import ServerError
from lsp_server.modes import Mode

#: The in-process model's context, and each server slot's.
N_CTX = 1024
LEFT, RIGHT = "def add(a, b):\n    return ", "\n\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def stopping_path(tiny_factory: TinyFactory) -> Path:
    return tiny_factory("stopping", **STOPPING_MODEL)


@pytest.fixture(scope="module")
def split_path(tiny_factory: TinyFactory) -> Path:
    """A model that wants to write the first two bytes of a three-byte character ("âĢ" is
    bytes E2 80 in StarCoder's byte-level vocabulary): llama-server holds such tokens back."""
    return tiny_factory("split", token_bias={"âĢ": 40.0})


def _serve(binary: Path, model: Path, tmp: Path, parallel: int = 2) -> Iterator[LlamaServer]:
    with running_llama_server(
        binary, model, parallel=parallel, ctx_size=N_CTX * parallel, log_dir=tmp
    ) as running:
        yield running


@pytest.fixture(scope="module")
def server(
    llama_server_binary: Path, tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    yield from _serve(llama_server_binary, tiny_model_path, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def stopping_server(
    llama_server_binary: Path, stopping_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    yield from _serve(llama_server_binary, stopping_path, tmp_path_factory.mktemp("stopping"))


@pytest.fixture(scope="module")
def local(tiny_model_path: Path) -> Iterator[FimModel]:
    with FimModel(tiny_model_path, n_ctx=N_CTX) as model:
        yield model


@pytest.fixture(scope="module")
def local_stopping(stopping_path: Path) -> Iterator[FimModel]:
    with FimModel(stopping_path, n_ctx=N_CTX) as model:
        yield model


@pytest.fixture(scope="module")
def remote(server: LlamaServer) -> Iterator[RemoteBackend]:
    with open_remote(server.url) as backend:
        yield backend


@pytest.fixture(scope="module")
def remote_stopping(stopping_server: LlamaServer) -> Iterator[RemoteBackend]:
    with open_remote(stopping_server.url) as backend:
        yield backend


def _slots_busy(server: LlamaServer) -> bool:
    with urllib.request.urlopen(f"{server.url}/slots", timeout=10) as answer:
        import json

        return any(slot["is_processing"] for slot in json.loads(answer.read()))


def _slots_idle_soon(server: LlamaServer, within_s: float = 5.0) -> bool:
    """Whether every slot is idle within `within_s`: the server notices a closed stream
    at its next step, not at the moment the client closes it."""
    deadline = time.monotonic() + within_s
    while _slots_busy(server) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _slots_busy(server)


def _outcome(c: Completion) -> tuple[str, str, bool | None, int]:
    return (c.middle, str(c.stop_reason), c.complete, c.tokens)


def assert_same_generation(got: Completion, expected: Completion) -> None:
    """The same tokens, stop reason and verdict; the same middle wherever the middle ended
    by itself or was not checked.  (Stopped at the token limit, a constrained middle is
    the best stopping point so far, scored with the probability of ending there, which the
    server knows only for the end tokens among the alternatives it sent.)"""
    assert _outcome(got)[1:] == _outcome(expected)[1:]
    if got.complete is None or expected.stop_reason in ("eos", "connected"):
        assert got.middle == expected.middle


# ---------------------------------------------------------------- the model it serves


def test_a_url_names_a_server() -> None:
    assert is_server_url("http://gpu-box:8080") and is_server_url(" HTTPS://x/v1")
    assert not is_server_url("default") and not is_server_url("hf://a/b/c.gguf")
    assert not is_server_url("/models/http.gguf") and not is_server_url(None)


def test_the_servers_model_is_the_in_process_one(
    remote: RemoteBackend, local: FimModel, tiny_model_path: Path
) -> None:
    assert remote.has_fim and remote.layout == local.layout
    assert remote.fim_tokens == local.fim_tokens
    assert list(remote.eog_ids) == list(local.eog_ids)
    assert remote.n_ctx == N_CTX and remote.name == tiny_model_path.name
    assert "FIM" in remote.describe() and remote.client.url in remote.describe()
    table, expected = remote.vocab_bytes, local.vocab_bytes
    assert len(table) == len(expected)
    assert all(table[t] == expected[t] for t in range(len(table)) if expected[t])
    for token in (*remote.eog_ids, *(t for t in local.fim_tokens.markers if t is not None)):
        assert table[token] == b""
    assert remote.build_fim_prompt(LEFT, RIGHT) == local.build_fim_prompt(LEFT, RIGHT)
    assert remote.tokenize("x = 'é'\n") == local.tokenize("x = 'é'\n")


def test_a_local_copy_of_the_vocabulary_is_exact(
    server: LlamaServer, local: FimModel, tiny_model_path: Path
) -> None:
    with open_remote(server.url, model_vocab=tiny_model_path) as backend:
        assert backend.vocab_bytes == local.vocab_bytes  # control tokens included
        assert backend.layout == local.layout and backend.fim_tokens == local.fim_tokens
        assert list(backend.eog_ids) == list(local.eog_ids)
        assert backend.build_fim_prompt(LEFT, RIGHT) == local.build_fim_prompt(LEFT, RIGHT)


def test_the_remote_backend_keeps_the_contract(remote: RemoteBackend, local: FimModel) -> None:
    prompt = remote.build_fim_prompt(LEFT, RIGHT)
    before = remote.counters.snapshot()
    taken = check_generation(remote, prompt)
    assert taken == check_generation(local, prompt)  # the same positions, the same tokens
    spent = {k: v - before[k] for k, v in remote.counters.snapshot().items()}
    # check_generation takes a token that is not the best at steps 0 and 2: each costs a
    # new request (the stream is closed), the others are read on.
    assert spent["rejected"] == 2 and spent["streams"] == 3 and spent["requests"] == 3


# ---------------------------------------------------------------- the same middles


@pytest.mark.parametrize("mode", ["constrained", "unconstrained"])
def test_greedy_middles_are_the_in_process_ones(
    remote_stopping: RemoteBackend,
    local_stopping: FimModel,
    cuts: list[tuple[str, str]],
    target: tuple[int, int],
    mode: Mode,
) -> None:
    """A model that ends its middles: every stop reason and token count is the
    in-process one, and every middle that ended by itself."""
    # without looking further down the top k: beyond the server's top n that costs a
    # request of its own, which the stream count below does not hold; and one generation
    # per cut (a restart would start another), which the stream arithmetic assumes
    options = DecodeOptions(
        mode=mode, max_tokens=16, token_healing=False, further_down=0, restart=False
    )
    before = remote_stopping.counters.snapshot()
    at_limit = 0
    for left, right in cuts:
        expected = generate(local_stopping, left, right, options, target=target)
        got = generate(remote_stopping, left, right, options, target=target)
        assert_same_generation(got, expected)
        at_limit += got.stop_reason == "max_tokens"
    spent = {k: v - before[k] for k, v in remote_stopping.counters.snapshot().items()}
    assert spent["generations"] == len(cuts)
    assert spent["requests"] == spent["streams"] + spent["probes"]
    # a stream per generation, and a new one after each token turned down, except after
    # the last token of a generation that ran to the token limit (nothing more is read)
    most = len(cuts) + spent["rejected"] + spent["refills"]
    assert most - at_limit <= spent["streams"] <= most


def test_random_weights_give_the_same_tokens_and_outcomes(
    remote: RemoteBackend, local: FimModel, cuts: list[tuple[str, str]], target: tuple[int, int]
) -> None:
    """A model that never ends by itself: the same tokens, stop reasons and verdicts."""
    # without looking further down the top k: that search is bounded in time (50 ms), and
    # beyond the server's top n each look costs a request, so the two backends' searches
    # may end at different depths
    options = DecodeOptions(max_tokens=16, token_healing=False, further_down=0)
    rejected = remote.counters.rejected
    same = 0
    for left, right in cuts:
        expected = generate(local, left, right, options, target=target)
        got = generate(remote, left, right, options, target=target)
        assert_same_generation(got, expected)
        same += got.middle == expected.middle
    assert remote.counters.rejected > rejected  # the decoder did turn streamed tokens down
    assert same >= len(cuts) // 2


def test_token_healing_looks_beyond_the_top_n(
    stopping_server: LlamaServer,
    local_stopping: FimModel,
    cuts: list[tuple[str, str]],
    target: tuple[int, int],
) -> None:
    """With the cursor inside a word the decoder needs the best token that writes the word's
    end, wherever it ranks: a probe for the whole vocabulary finds what the in-process
    model finds."""
    options = DecodeOptions(max_tokens=12, token_healing=True, further_down=0)
    in_word = [(left, right) for left, right in cuts if left[-1:].isalnum()]
    in_word.append(("def add(first, second):\n    return fir", "\n"))
    with open_remote(stopping_server.url, wide_probs=1 << 20) as remote:
        for left, right in in_word:
            expected = generate(local_stopping, left, right, options, target=target)
            got = generate(remote, left, right, options, target=target)
            assert _outcome(got) == _outcome(expected), (left[-30:], right[:30])
            assert got.healed == expected.healed
        assert remote.counters.wide >= len(in_word)


def test_characters_split_over_tokens(
    llama_server_binary: Path, split_path: Path, tmp_path: Path, target: tuple[int, int]
) -> None:
    """llama-server sends no alternatives for a token that ends inside a character: the
    backend asks for that position alone, and the middles are the in-process ones."""
    left, right = "name = '", "'\n"
    with (
        FimModel(split_path, n_ctx=N_CTX) as model,
        running_llama_server(
            llama_server_binary, split_path, ctx_size=N_CTX, log_dir=tmp_path
        ) as running,
        open_remote(running.url, wide_probs=1 << 20) as remote,
    ):
        for mode in ("unconstrained", "constrained"):
            options = DecodeOptions(mode=mode, max_tokens=6, token_healing=False, further_down=0)
            expected = generate(model, left, right, options, target=target)
            got = generate(remote, left, right, options, target=target)
            assert_same_generation(got, expected)
            if mode == "unconstrained":  # the biased token first, then what completes it
                assert got.middle.encode()[:2] == b"\xe2\x80", got.middle
        assert remote.counters.held_back > 0


def test_the_openai_api_gives_the_same_middles(
    stopping_server: LlamaServer,
    remote_stopping: RemoteBackend,
    cuts: list[tuple[str, str]],
    target: tuple[int, int],
) -> None:
    options = DecodeOptions(max_tokens=12, token_healing=False, further_down=0)
    # An OpenAI client's base URL ends in /v1: the same server.
    with open_remote(f"{stopping_server.url}/v1/", server_api="openai") as openai:
        assert openai.client.api == "openai" and openai.client.url == stopping_server.url
        for left, right in cuts[:6]:
            expected = generate(remote_stopping, left, right, options, target=target)
            assert _outcome(generate(openai, left, right, options, target=target)) == _outcome(
                expected
            )


def test_several_clients_on_one_server_get_their_own_middles(
    stopping_server: LlamaServer,
    remote_stopping: RemoteBackend,
    cuts: list[tuple[str, str]],
    target: tuple[int, int],
) -> None:
    options = DecodeOptions(max_tokens=12, token_healing=False, further_down=0)
    alone = [
        _outcome(generate(remote_stopping, left, right, options, target=target))
        for left, right in cuts
    ]
    results: dict[tuple[int, int], tuple[str, str, bool | None, int]] = {}
    errors: list[BaseException] = []

    def editor(index: int) -> None:
        try:
            with open_remote(stopping_server.url) as mine:
                for i in range(len(cuts)):
                    which = (index * 5 + i) % len(cuts)
                    left, right = cuts[which]
                    got = generate(mine, left, right, options, target=target)
                    results[(index, which)] = _outcome(got)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=editor, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors
    assert len(results) == 3 * len(cuts)
    for (_, which), outcome in results.items():
        assert outcome == alone[which]


# ---------------------------------------------------------------- reading ahead, stopping


def test_prefill_reads_the_prompt_without_generating(
    remote: RemoteBackend, server: LlamaServer
) -> None:
    prompt = remote.build_fim_prompt("values = [1, 2, 3]\nresult = sum(", ")\n")
    before = remote.counters.snapshot()
    remote.prefill(prompt)
    assert remote.counters.prefills == before["prefills"] + 1
    assert remote.counters.generations == before["generations"]
    with pytest.raises(Interrupted):
        remote.prefill(prompt, interrupt=lambda: True)
    assert _slots_idle_soon(server)


def _long_generation(
    backend: RemoteBackend, cancel: Callable[[], bool], deadline: float | None
) -> Completion:
    options = DecodeOptions(mode="unconstrained", max_tokens=900, deadline_s=deadline)
    return generate(backend, "# ", "\n", options, cancel=cancel)


@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_cancel_and_deadline_close_the_stream_at_once(
    remote: RemoteBackend, server: LlamaServer, how: str
) -> None:
    flag = threading.Event()
    timer = threading.Timer(0.4, flag.set)
    started = time.perf_counter()
    if how == "cancel":
        timer.start()
        result = _long_generation(remote, flag.is_set, None)
        late = time.perf_counter() - started - 0.4
    else:
        result = _long_generation(remote, flag.is_set, 0.4)
        late = time.perf_counter() - started - 0.4
    timer.cancel()
    assert str(result.stop_reason) in ("cancelled", "deadline", "no_viable_token")
    assert 0 < result.tokens < 900
    assert late < 0.15, late
    assert _slots_idle_soon(server)  # the server noticed the closed stream and stopped


def test_a_server_that_dies_mid_generation_is_an_error_not_a_hang(
    llama_server_binary: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    running = start_llama_server(
        llama_server_binary, tiny_model_path, ctx_size=N_CTX, log_dir=tmp_path
    )
    try:
        with open_remote(running.url) as backend:
            killer = threading.Timer(0.3, running.process.kill)
            killer.start()
            started = time.monotonic()
            with pytest.raises(ServerError):
                _long_generation(backend, lambda: False, None)
            assert time.monotonic() - started < 10
            killer.join()
    finally:
        running.stop()


def test_rankings_are_what_the_server_sent(remote: RemoteBackend, local: FimModel) -> None:
    prompt = remote.build_fim_prompt(LEFT, RIGHT)
    with remote.start(prompt) as generation, local.start(prompt) as expected:
        ranking = generation.ranking()
        best = check_ranking(ranking, remote, k=remote.n_probs)
        assert best.tolist() == expected.ranking().best(remote.n_probs).tolist()
        for token in best[:5]:
            assert ranking.logprob(int(token)) == pytest.approx(
                expected.ranking().logprob(int(token)), abs=2e-3
            )
        unsent = int(expected.ranking().best(remote.n_probs + 1)[-1])
        assert ranking.logprob(unsent) == float("-inf")
        # The end tokens it did not send are estimated from the mass left over: not below
        # the truth here, where the end tokens are among the likelier unsent tokens.
        assert ranking.end_logprob() >= expected.ranking().end_logprob() - 1e-3


# ---------------------------------------------------------------- bench.remote's report


def test_the_benchmark_says_where_two_middles_part() -> None:
    """``bench.remote`` shows, for middles that differ, the first step whose tokens differ
    with each side's lead over its runner-up, or that one side stopped there."""
    from bench.remote import Trail, divergence

    vocab = [b"a", b"b", b"c", b"\xe2"]
    local = Trail((0, 1, 2), (-0.5, -1.0, -0.7), (2.0, 0.01, 1.5))
    remote = Trail((0, 1, 3), (-0.52, -1.01, -0.71), (1.9, 0.02, float("inf")))
    got = divergence(local, remote, vocab)
    assert got["step"] == 2 and got["common_tokens"] == 2
    assert got["max_logprob_delta_before"] == pytest.approx(0.02)
    assert got["local"] == {"token": 2, "text": "c", "logprob": -0.7, "lead": 1.5}
    assert got["remote"] == {"token": 3, "text": "\ufffd", "logprob": -0.71, "lead": None}
    stopped = divergence(local, Trail((0, 1), (-0.5, -1.0), (2.0, 0.01)), vocab)
    assert stopped["step"] == 2 and stopped["remote"] is None
    assert stopped["tokens"] == {"local": 3, "remote": 2}
