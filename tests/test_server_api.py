"""``lsp_server.model.remote.server_api`` against a real llama-server running the tiny test model.

The server and the in-process ``FimModel`` load the same GGUF file with the same llama.cpp
(the server is built from the sources llama-cpp-python vendors), single-threaded, without
flash attention: greedy decoding must give the same tokens, and the server's top-n
alternatives the same ranking as the in-process logits.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from lsp_fixtures import stopping_model
from model_fixtures import (
    TinyFactory,
    model_cache,
    optional_vocab,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)
from test_llama_server import llama_server_binary
from test_model import FAMILIES

from bench.llama_server import LlamaServer, running_llama_server
from lsp_server.model import FimModel
from lsp_server.model.remote.server_api import (
    LLAMA_CPP,
    OPENAI,
    Completion,
    ServerClient,
    ServerVocab,
    Step,
    load_local_vocab,
)
from lsp_server.model.remote.server_api.client import incomplete_utf8_tail

__all__ = [  # fixtures used by name
    "llama_server_binary",
    "model_cache",
    "stopping_model",
    "tiny_factory",
    "tiny_model",
    "tiny_model_path",
    "tiny_session_model",
]

SNIPPETS = [
    ("def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"),
    ("import os\n\nfor name in os.listdir('.'):\n    ", "\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.", "\n"),
]


@pytest.fixture(scope="module")
def server(
    llama_server_binary: Path, tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """The tiny model served with 4 slots of 1024 tokens (the in-process model's n_ctx)."""
    with running_llama_server(
        llama_server_binary,
        tiny_model_path,
        parallel=4,
        ctx_size=4096,
        log_dir=tmp_path_factory.mktemp("llama-server"),
    ) as running:
        yield running


@pytest.fixture
def client(server: LlamaServer) -> Iterator[ServerClient]:
    with ServerClient(server.url) as c:
        yield c


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - float(np.max(logits))
    out: np.ndarray = shifted - np.log(np.sum(np.exp(shifted)))
    return out


def greedy_in_process(
    model: FimModel, prompt: Sequence[int], n: int, bias: Mapping[int, float] | None = None
) -> list[tuple[int, np.ndarray]]:
    """``n`` greedy tokens after ``prompt``, each with the raw logits it was chosen from."""
    model.cache.reset()
    logits = model.cache.evaluate(prompt)
    out: list[tuple[int, np.ndarray]] = []
    for _ in range(n):
        biased = logits.copy()
        for token, value in (bias or {}).items():
            biased[token] += value
        token = int(np.argmax(biased))
        out.append((token, logits))
        logits = model.cache.append(token)
    return out


def assert_matches_in_process(
    model: FimModel, prompt: Sequence[int], steps: Sequence[Step], n_probs: int
) -> None:
    """Same tokens; top-``n_probs`` alternatives in the in-process ranking, same logprobs."""
    expected = greedy_in_process(model, prompt, len(steps))
    assert [s.token for s in steps] == [t for t, _ in expected]
    for step, (token, logits) in zip(steps, expected):
        ranking = [int(t) for t in np.argsort(-logits, kind="stable")[:n_probs]]
        assert [c.token for c in step.top] == ranking
        logprobs = log_softmax(logits)
        assert [c.logprob for c in step.top] == pytest.approx(
            [logprobs[t] for t in ranking], abs=2e-3
        )
        assert step.logprob == pytest.approx(logprobs[token], abs=2e-3)
        assert step.piece == model.vocab.token_bytes[token] or model.vocab.token_bytes[token] == b""


# ---------------------------------------------------------------- discovery and vocabulary


def test_detects_llama_server_and_reads_its_model(
    client: ServerClient, tiny_model: FimModel, tiny_model_path: Path
) -> None:
    assert client.detect() == LLAMA_CPP
    client.health()
    props = client.props()
    assert props["model_path"] == str(tiny_model_path) and props["total_slots"] == 4
    assert client.n_ctx() == 1024
    assert client.models()[0]["meta"]["n_vocab"] == tiny_model.vocab.n_vocab
    with ServerClient(client.url, server_api="openai") as openai:
        assert openai.detect() == OPENAI  # llama-server serves both; the setting decides


def test_tokenize_round_trip_with_fim_tokens(client: ServerClient, tiny_model: FimModel) -> None:
    text = "<fim_prefix>def f(x):\n    return 'é' + x<fim_suffix>\n<fim_middle>"
    ids = client.tokenize(text, parse_special=True)
    assert ids == tiny_model.tokenize(text, parse_special=True)
    assert ids[0] == tiny_model.fim_tokens.pre and ids[-1] == tiny_model.fim_tokens.mid
    plain = client.tokenize(text)  # the same text as text: no control tokens
    assert plain == tiny_model.tokenize(text) and tiny_model.fim_tokens.pre not in plain
    assert client.detokenize(ids) == text
    pieces = client.token_pieces(ids)
    for token, piece in zip(ids, pieces):
        assert piece == (
            tiny_model.vocab.token_bytes[token] or tiny_model.vocab.token_text(token).encode()
        )


def _family_model(tiny_factory: TinyFactory, family: str) -> Path:
    if family == "starcoder":
        return tiny_factory("starcoder")
    if family == "nofim":
        return tiny_factory("nofim", strip_fim=True, n_layer=1, n_embd=32)
    if family == "codellama-spm":
        renames = {"왕": "▁<PRE>", "ὀ": "▁<SUF>", "ℓ": "▁<MID>", "ḥ": "▁<EOT>"}
        return tiny_factory(
            "codellama-spm",
            optional_vocab("llama-spm"),
            rename_tokens=renames,
            n_layer=1,
            n_embd=32,
        )
    if family in ("deepseek-coder", "qwen2", "refact"):
        return tiny_factory(f"{family}-real", optional_vocab(family), n_layer=1, n_embd=32)
    return tiny_factory(family, rename_tokens=FAMILIES[family], n_layer=1, n_embd=32)


@pytest.mark.parametrize(
    "family",
    ["starcoder", *sorted(FAMILIES), "nofim", "codellama-spm", "deepseek-coder", "qwen2", "refact"],
)
def test_vocabulary_from_the_server_is_the_in_process_one(
    llama_server_binary: Path, tiny_factory: TinyFactory, tmp_path: Path, family: str
) -> None:
    """FIM markers, end tokens, BOS and token bytes, found from the server's answers and
    from a local copy of the vocabulary, are what ``FimModel`` finds in process."""
    path = _family_model(tiny_factory, family)
    with (
        FimModel(path, n_ctx=256) as model,
        running_llama_server(llama_server_binary, path, ctx_size=256, log_dir=tmp_path) as running,
        ServerClient(running.url) as remote,
    ):
        vocab = remote.vocabulary()
        local = load_local_vocab(path)
        for found in (vocab, local):
            assert found.fim == model.fim_tokens
            # llama.cpp (and so llama-server) ends at every token spelled '</s>', which
            # FimModel takes as text where the file calls it ordinary (Qwen's 128247)
            assert found.eog == frozenset(model.eog_ids) | model.vocab.ordinary_ids
            assert found.add_bos == model.layout.add_bos
            assert found.space_prefix == (model.vocab.detokenize(model.tokenize("a")) == b" a")
            assert found.n_vocab == model.vocab.n_vocab
        assert vocab.pieces == local.pieces
        for token in range(model.vocab.n_vocab):
            if model.vocab.token_bytes[token]:
                assert vocab.token_bytes(token) == model.vocab.token_bytes[token]


# ---------------------------------------------------------------- completions


@pytest.mark.parametrize("snippet", range(len(SNIPPETS)))
def test_greedy_completion_equals_in_process(
    client: ServerClient, tiny_model: FimModel, snippet: int
) -> None:
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[snippet])
    answer = client.complete(prompt, n_predict=24, n_probs=5)
    assert answer.end.stop == "limit" and answer.end.n_predicted == 24
    assert len(answer.steps) == 24 and answer.tokens == tuple(s.token for s in answer.steps)
    assert [s.position for s in answer.steps] == list(range(24))
    assert_matches_in_process(tiny_model, prompt, answer.steps, 5)


def test_a_model_that_stops_stops_at_the_same_token(
    llama_server_binary: Path, stopping_model: Path, tmp_path: Path
) -> None:
    with (
        FimModel(stopping_model, n_ctx=512) as model,
        running_llama_server(
            llama_server_binary, stopping_model, ctx_size=512, log_dir=tmp_path
        ) as running,
        ServerClient(running.url) as remote,
    ):
        prompt = model.build_fim_prompt("total = sum(", "\n")
        answer = remote.complete(prompt, n_predict=32, n_probs=3)
        assert answer.end.stop == "eos"
        assert_matches_in_process(model, prompt, answer.steps, 3)
        last = answer.steps[-1]
        assert last.token in model.eog_ids and last.piece == b"" and last.text == b""
        streamed = list(remote.stream(prompt, n_predict=32, n_probs=3))
        assert [s.token for s in streamed] == [s.token for s in answer.steps]


def test_stream_gives_the_same_steps_as_the_whole_answer(
    client: ServerClient, tiny_model: FimModel
) -> None:
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[0])
    whole = client.complete(prompt, n_predict=16, n_probs=4)
    with client.stream(prompt, n_predict=16, n_probs=4) as stream:
        steps = list(stream)
        end = stream.end
    assert steps == list(whole.steps)
    assert end is not None and end.stop == "limit" and end.n_predicted == 16
    assert end.tokens == ()  # a stream sends no id list at the end
    assert end.n_prompt == len(prompt)


def test_openai_completions_give_the_same_tokens_and_alternatives(
    server: LlamaServer, tiny_model: FimModel
) -> None:
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[1])
    with ServerClient(server.url) as native, ServerClient(server.url, server_api="openai") as oai:
        expected = native.complete(prompt, n_predict=12, n_probs=4)
        whole = oai.complete(prompt, n_predict=12, n_probs=4)
        with oai.stream(prompt, n_predict=12, n_probs=4) as stream:
            streamed = list(stream)
            end = stream.end
    for steps in (whole.steps, tuple(streamed)):
        assert [(s.token, s.piece, [c.token for c in s.top]) for s in steps] == [
            (s.token, s.piece, [c.token for c in s.top]) for s in expected.steps
        ]
    assert whole.end.stop == "limit" and whole.end.n_predicted == 12
    assert end is not None and end.stop == "limit"
    assert_matches_in_process(tiny_model, prompt, whole.steps, 4)


def test_prompt_cache_reuses_the_shared_prefix(client: ServerClient, tiny_model: FimModel) -> None:
    prompt = tiny_model.build_fim_prompt("values = [1, 2, 3]\nresult = ", "\n")
    client.complete(prompt, n_predict=4)
    again = client.complete(prompt, n_predict=4)
    assert again.end.n_cached >= len(prompt) - 1  # only the last prompt token is re-read


def test_logit_bias_bans_a_token(client: ServerClient, tiny_model: FimModel) -> None:
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[2])
    first = client.complete(prompt, n_predict=1, n_probs=2).steps[0]
    banned = client.complete(
        prompt, n_predict=1, n_probs=2, logit_bias={first.token or 0: float("-inf")}
    ).steps[0]
    assert banned.token == first.top[1].token != first.token
    assert [c.token for c in banned.top] == [c.token for c in first.top]  # raw logits


def _split_character_bias(model: FimModel, prompt: list[int]) -> tuple[int, int, dict[int, float]]:
    """Two tokens A, B whose bytes make one character, and a logit bias under which greedy
    decoding after ``prompt`` picks A, then B."""
    table = model.vocab_bytes
    leads = [
        t
        for t in range(model.vocab.n_vocab)
        if len(table[t]) == 2 and incomplete_utf8_tail(table[t]) and table[t][0] >= 0xE0
    ]
    by_bytes = {table[t]: t for t in range(model.vocab.n_vocab)}
    model.cache.reset()
    logits = model.cache.evaluate(prompt)
    for a in leads:
        b = next(
            (
                by_bytes[bytes([c])]
                for c in range(0x80, 0xC0)
                if bytes([c]) in by_bytes and _valid(table[a] + bytes([c]))
            ),
            None,
        )
        if b is None:
            continue
        after_a = model.cache.evaluate([*prompt, a])  # the prompt stays cached for the next
        first, second = logits[a] - logits[b], after_a[a] - after_a[b]
        if first > second + 2:  # room for a bias between them
            return a, b, {a: 100.0, b: 100.0 + float(first + second) / 2}
    pytest.skip("no token pair splits a character for this model")


def _valid(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_tokens_held_back_inside_a_character(client: ServerClient, tiny_model: FimModel) -> None:
    """llama-server reports no token that ends inside a UTF-8 character: the next event
    carries both, and a generation that ends inside one reports nothing for it."""
    prompt = tiny_model.build_fim_prompt(*SNIPPETS[0])
    a, b, bias = _split_character_bias(tiny_model, prompt)
    assert [t for t, _ in greedy_in_process(tiny_model, prompt, 2, bias)] == [a, b]
    table = tiny_model.vocab_bytes
    with client.stream(prompt, n_predict=2, n_probs=3, logit_bias=bias) as stream:
        streamed = list(stream)
        end = stream.end
    assert [(s.position, s.token, s.skipped) for s in streamed] == [(1, b, 1)]
    assert streamed[0].text == table[a] + table[b] and streamed[0].piece == table[b]
    assert end is not None and end.n_predicted == 2
    whole = client.complete(prompt, n_predict=2, n_probs=3, logit_bias=bias)
    assert whole.tokens == (a, b)
    assert [(s.position, s.token, s.skipped) for s in whole.steps] == [(1, b, 1)]
    # Ending inside the character: the server generated A and says nothing about it.
    cut = client.complete(prompt, n_predict=1, n_probs=3, logit_bias=bias)
    assert cut.steps == () and cut.tokens == (a,) and cut.end.n_predicted == 1
    with client.stream(prompt, n_predict=1, n_probs=3, logit_bias=bias) as stream:
        assert list(stream) == [] and stream.end is not None and stream.end.n_predicted == 1


# ---------------------------------------------------------------- many clients


def test_many_clients_on_one_server_get_their_own_answers(
    server: LlamaServer, tiny_model: FimModel
) -> None:
    prompts = [tiny_model.build_fim_prompt(p, s) for p, s in SNIPPETS]
    prompts.append(tiny_model.build_fim_prompt("x = 1\ny = ", "\n"))
    with ServerClient(server.url) as alone:
        solo = [alone.complete(p, n_predict=16, n_probs=3) for p in prompts]
    results: dict[tuple[int, int], Completion] = {}
    errors: list[BaseException] = []

    def editor(index: int) -> None:
        try:
            with ServerClient(server.url) as mine:
                for round_ in range(3):
                    which = (index + round_) % len(prompts)
                    results[(index, round_)] = mine.complete(
                        prompts[which], n_predict=16, n_probs=3
                    )
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=editor, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert len(results) == 12
    for (index, round_), answer in results.items():
        expected = solo[(index + round_) % len(prompts)]
        # Same tokens and alternatives; the log-probabilities move in the 6th digit, since
        # slots decoded in one batch go through differently shaped matrix products.
        assert [(s.token, [c.token for c in s.top]) for s in answer.steps] == [
            (s.token, [c.token for c in s.top]) for s in expected.steps
        ]
        assert [s.logprob for s in answer.steps] == pytest.approx(
            [s.logprob for s in expected.steps], abs=1e-4
        )


def test_server_vocab_resolves_openai_token_texts(
    client: ServerClient, tiny_model: FimModel
) -> None:
    vocab: ServerVocab = client.vocabulary()
    token = tiny_model.tokenize(" return")[0]
    assert vocab.resolve(" return") == token
    partial = next(
        t
        for t in range(tiny_model.vocab.n_vocab)
        if incomplete_utf8_tail(tiny_model.vocab.token_bytes[t])
    )
    assert vocab.resolve(tiny_model.vocab.token_bytes[partial].decode("utf-8", "replace")) is None
