"""The tiny test models of every FIM family: their tokenizers, files, listing and sources.

What llama.cpp makes of them (FIM tokens, layout, end tokens) is in test_families.py;
here: the GGUF files themselves (token texts, types and ids as published, the metadata a
conversion writes, a file ``gguf``'s own reader accepts), ``--list``, the cache, and how
the vocabularies are fetched from the llama-cpp-python source distribution.
"""

# Fixtures imported from the fixture modules are requested by parameter name, which ruff
# reads as redefining the import.
# ruff: noqa: F811

from __future__ import annotations

import io
import json
import lzma
import tarfile
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from family_fixtures import FAMILY_NAMES, family_path, family_vocab  # noqa: F401
from model_fixtures import model_cache  # noqa: F401

from lsp_server.model import ModelError
from testmodels.tiny import (
    VOCAB_DIR,
    build_tiny_model,
    family_report,
    fetch_vocabs,
    main,
    read_gguf_metadata,
    tiny_model_cached,
    vocab_path,
)
from testmodels.tiny_families import CONTROL, FAMILIES, NORMAL, USER_DEFINED

#: Published sizes (config.json vocab_size / the tokenizer's last id + 1).
SIZES = {
    "starcoder2": 49152, "qwen2.5-coder": 151936, "qwen3": 151936, "deepseek-coder": 32256,
    "codellama": 32016, "codestral": 32768, "mellum": 49152, "llama3": 128256,
    "gemma": 262144,
}  # fmt: skip


@pytest.fixture(scope="module")
def metadata(family_path: Callable[[str], Path]) -> Callable[[str], dict[str, object]]:
    cache: dict[str, dict[str, object]] = {}

    def get(name: str) -> dict[str, object]:
        if name not in cache:
            cache[name] = {k: v[2] for k, v in read_gguf_metadata(family_path(name)).items()}
        return cache[name]

    return get


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_published_tokens_at_published_ids(
    metadata: Callable[[str], dict[str, object]], name: str
) -> None:
    meta = metadata(name)
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    assert isinstance(tokens, list) and isinstance(types, list)
    assert len(tokens) == len(types) == SIZES[name] == meta["llama.vocab_size"]
    for token in FAMILIES[name].tokens:
        assert (tokens[token.id], types[token.id]) == (token.text, token.type)
    for key, value in FAMILIES[name].metadata.items():
        assert meta[f"tokenizer.ggml.{key}"] == value
    # no conversion writes FIM ids: llama.cpp finds the tokens by their text
    assert not any("fim" in key or key.endswith(("prefix_token_id", "suffix_token_id"))
                   for key in meta)  # fmt: skip


def test_qwen_padding_as_a_conversion_writes_it(
    metadata: Callable[[str], dict[str, object]],
) -> None:
    tokens = metadata("qwen2.5-coder")["tokenizer.ggml.tokens"]
    types = metadata("qwen2.5-coder")["tokenizer.ggml.token_type"]
    assert isinstance(tokens, list) and isinstance(types, list)
    assert tokens[151659:151665] == ["<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                                     "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]  # fmt: skip
    assert (tokens[151665], types[151665]) == ("[PAD151665]", USER_DEFINED)
    assert (tokens[151657], types[151657]) == ("<tool_call>", USER_DEFINED)
    assert metadata("qwen3")["tokenizer.ggml.tokens"][151667] == "<think>"  # type: ignore[index]


def test_codestral_vocabulary_is_mistral_v3_shaped(
    metadata: Callable[[str], dict[str, object]],
) -> None:
    """768 control tokens after </s>, then the SentencePiece pieces shifted by 768: the byte
    token <0x0A> lands on 781, as in mistral-common's expected encodings."""
    meta = metadata("codestral")
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    scores = meta["tokenizer.ggml.scores"]
    assert isinstance(tokens, list) and isinstance(types, list) and isinstance(scores, list)
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert tokens[10] == "[control_8]" and tokens[770] == "[control_768]"
    assert tokens[11:14] == ["[PREFIX]", "[MIDDLE]", "[SUFFIX]"]
    assert set(types[3:771]) == {CONTROL}
    assert tokens[771] == "<0x00>" and tokens[781] == "<0x0A>" and tokens[1026] == "<0xFF>"
    llama = read_gguf_metadata(vocab_path(family_vocab("codestral")))
    assert tokens[771:] == llama["tokenizer.ggml.tokens"][2][3:]
    assert scores[771:] == llama["tokenizer.ggml.scores"][2][3:]
    assert (meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]) == (1, 2)


def test_codellama_infilling_pieces(metadata: Callable[[str], dict[str, object]]) -> None:
    meta = metadata("codellama")
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    scores = meta["tokenizer.ggml.scores"]
    assert isinstance(tokens, list) and isinstance(types, list) and isinstance(scores, list)
    assert tokens[32007:32011] == ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"]
    assert tokens[32015] == "▁<EOT><EOT><EOT><EOT><EOT><EOT>" and types[32015] == NORMAL
    ordinary = [s for s in scores[:32000] if s > -1e8]  # Llama 2's space runs have -1e9
    assert max(scores[32000:32007]) < min(ordinary)  # new pieces never win a merge


def test_mellum_tokens_and_pre_tokenizer(metadata: Callable[[str], dict[str, object]]) -> None:
    meta = metadata("mellum")
    tokens = meta["tokenizer.ggml.tokens"]
    assert isinstance(tokens, list)
    assert tokens[5:7] == ["<reponame>", "<filename>"] and "<file_sep>" not in tokens
    assert meta["tokenizer.ggml.pre"] == "mellum"


def test_gguf_reader_accepts_the_files(family_path: Callable[[str], Path]) -> None:
    """The files are GGUF as the gguf package (llama.cpp's Python reader) reads it."""
    gguf = pytest.importorskip("gguf")
    path = family_path("codellama")
    reader = gguf.GGUFReader(path)
    fields = reader.fields
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "llama"
    assert len(fields["tokenizer.ggml.tokens"].data) == 32016
    names = {t.name: t for t in reader.tensors}
    embd = names["token_embd.weight"]
    assert list(embd.shape) == [16, 32016]
    ours = read_gguf_metadata(path)
    assert ours["llama.embedding_length"][2] == 16
    assert np.asarray(embd.data).shape == (32016, 16)


def test_build_is_deterministic_and_cached(model_cache: Path, tmp_path: Path) -> None:
    a = build_tiny_model(tmp_path / "a.gguf", family="mellum", n_layer=1, n_embd=16)
    b = build_tiny_model(tmp_path / "b.gguf", family="mellum", n_layer=1, n_embd=16)
    assert a.read_bytes() == b.read_bytes()
    first = tiny_model_cached(family="mellum", n_layer=1, n_embd=16)
    assert first.read_bytes() == a.read_bytes()
    mtime = first.stat().st_mtime_ns
    assert tiny_model_cached(family="mellum", n_layer=1, n_embd=16) == first
    assert first.stat().st_mtime_ns == mtime
    assert tiny_model_cached(family="mellum", n_layer=1, n_embd=16, seed=1) != first
    with pytest.raises(ModelError, match="unknown family"):
        build_tiny_model(tmp_path / "c.gguf", family="no-such-family")


def test_token_bias_finds_sentencepiece_tokens(tmp_path: Path) -> None:
    vocab = family_vocab("codellama")
    path = build_tiny_model(tmp_path / "biased.gguf", vocab, family="codellama", n_layer=1,
                            n_embd=16, token_bias={" return": 30.0})  # fmt: skip
    tokens = read_gguf_metadata(path)["tokenizer.ggml.tokens"][2]
    assert "▁return" in tokens
    with pytest.raises(ModelError, match="no token"):
        build_tiny_model(tmp_path / "x.gguf", vocab, family="codellama", n_layer=1, n_embd=16,
                         token_bias={"no such token here": 1.0})  # fmt: skip


# ---------------------------------------------------------------- --list


def test_list_names_every_family(model_cache: Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--list", "--json"]) == 0
    reports = {r["family"]: r for r in json.loads(out.getvalue())["families"]}
    assert list(reports) == FAMILY_NAMES
    for name, report in reports.items():
        spec = FAMILIES[name]
        assert report["vocab_file"] == f"ggml-vocab-{spec.vocab}.gguf"
        assert {k: v["id"] for k, v in report["fim"].items()} == dict(spec.fim)
        assert [e["id"] for e in report["eog"]] == list(spec.eog)
        assert report["layout"] and report["sources"]
        if report["vocab_size"] is not None:
            assert report["vocab_size"] == SIZES[name]
    starcoder = reports["starcoder2"]  # bundled: always at hand
    assert starcoder["fim"]["pre"] == {"id": 1, "text": "<fim_prefix>"}
    text = io.StringIO()
    with redirect_stdout(text):
        assert main(["--list"]) == 0
    assert "qwen2.5-coder" in text.getvalue() and "<fim_prefix> 1" in text.getvalue()


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_report_texts(model_cache: Path, name: str) -> None:
    report = family_report(name, family_vocab(name))
    assert report["vocab_size"] == SIZES[name]
    texts = {e["text"] for e in report["eog"]}
    assert None not in texts
    assert all(v["text"] for v in report["fim"].values())


# ---------------------------------------------------------------- vocabularies


def _fake_sdist(path: Path, names: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in names.items():
            info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/vendor/llama.cpp/models/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_vocabularies_come_out_of_a_local_sdist(
    model_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = lzma.decompress((VOCAB_DIR / "ggml-vocab-starcoder.gguf.xz").read_bytes())
    sdist = _fake_sdist(tmp_path / "llama_cpp_python-0.3.36.tar.gz",
                        {"ggml-vocab-fake-one.gguf": payload})  # fmt: skip
    monkeypatch.setenv("FIMLSP_VOCAB_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("FIMLSP_LLAMA_SDIST", str(sdist))
    path = vocab_path("fake-one")  # found in the sdist on first use, then cached
    assert path.read_bytes() == payload and path.parent == model_cache / "vocab"
    assert fetch_vocabs(["fake-one", "starcoder"], download=False)[0] == path
    with pytest.raises(ModelError, match="fetch-vocab"):
        vocab_path("fake-two")
    monkeypatch.setenv("FIMLSP_LLAMA_SDIST", str(tmp_path / "missing.tar.gz"))
    with pytest.raises(ModelError, match="fetch-vocab"):
        fetch_vocabs(["fake-three"], download=False)
