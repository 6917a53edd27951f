"""Tiny random-weight GGUF models with real code-model tokenizers, for tests.

No FIM code model can be fetched in CI, yet the model layer must be exercised end to end
through llama.cpp. A 2-layer, 64-wide llama-architecture model with random weights loads in
milliseconds and decodes deterministically; its tokenizer is copied from one of llama.cpp's
vocabulary-only GGUF files (StarCoder2's ships with this package, the others come out of
the llama-cpp-python source distribution), so tokenization, FIM token detection and
special-token handling are exactly those of the real model family. ``tiny_families``
says, per family, which special tokens are edited in and where each id comes from.

Command line::

    python -m testmodels.tiny build OUT.gguf [--family NAME | --vocab starcoder]
    python -m testmodels.tiny --list [--json]
    python -m testmodels.tiny fetch-vocab [NAME ...]
    python -m testmodels.tiny extract-vocab llama_cpp_python-0.3.36.tar.gz
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from lsp_server.model import gguf
from lsp_server.model.cache import cache_dir
from lsp_server.model.errors import ModelError

from .tiny_families import CONTROL, FAMILIES, NORMAL, USER_DEFINED, Family

__all__ = [
    "BUNDLED_VOCABS",
    "FAMILIES",
    "FIM_TOKEN_TEXTS",
    "STOPPING_MODEL",
    "build_tiny_model",
    "extract_vocabs",
    "family_report",
    "fetch_vocabs",
    "read_gguf_metadata",
    "tiny_model_cached",
    "vocab_path",
]

VOCAB_DIR = Path(__file__).with_name("vocab")

#: ``build_tiny_model`` arguments of a tiny model that wants to stop: end-of-sequence above
#: all, then closers.  Constrained decoding ends at the first complete middle, so its users
#: (the tests, ``bench.team_load --model tiny-stopping``) see completions; with plain random
#: weights almost none would end in time.
STOPPING_MODEL: dict[str, Any] = {
    "stop_bias": 30.0,
    "token_bias": {")": 25.0, "]": 24.0, "}": 23.0, " x": 20.0, "\n": 15.0},
}

#: Vocabularies shipped (xz-compressed) in ``vocab/``: name -> sha256 of the plain GGUF.
BUNDLED_VOCABS: dict[str, str] = {
    "starcoder": "fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d",
}

#: Token texts llama.cpp (and ``llm.FimModel``) recognise as FIM markers. ``strip_fim``
#: renames these so that a vocabulary with FIM tokens can stand in for one without.
FIM_TOKEN_TEXTS: frozenset[str] = frozenset(
    {
        "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>",
        "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|fim_repo|>",
        "<fim-prefix>", "<fim-suffix>", "<fim-middle>", "<fim-pad>", "<fim-repo>",
        "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>",
        "<PRE>", "<SUF>", "<MID>", "<PAD>", "▁<PRE>", "▁<SUF>", "▁<MID>",
        "<|code_prefix|>", "<|code_suffix|>", "<|code_middle|>",
        "<|prefix|>", "<|suffix|>", "<|middle|>",
        "[PREFIX]", "[SUFFIX]", "[MIDDLE]",
        "<|repo_name|>", "<repo_name>", "<reponame>", "<REPO>", "<|file_sep|>", "<file_sep>",
    }
)  # fmt: skip

_FIM_ID_KEYS = ("pre", "suf", "mid", "pad", "rep", "sep")
_VOCAB_FILE = "ggml-vocab-{name}.gguf"
_SDIST_VOCAB_RE = re.compile(r"(?:^|/)vendor/llama\.cpp/models/ggml-vocab-([\w.-]+)\.gguf$")
_FETCH_HINT = "python -m testmodels.tiny fetch-vocab"


# ---------------------------------------------------------------- vocabularies


def _search_dirs() -> list[Path]:
    """Folders holding plain ``ggml-vocab-*.gguf`` files, most specific first."""
    dirs: list[Path] = []
    env = os.environ.get("FIMLSP_VOCAB_DIR")
    if env:
        dirs.append(Path(env).expanduser())
    dirs.append(cache_dir("vocab"))
    return dirs


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _atomic_write_from(src: Any, target: Path) -> None:
    """Copy a readable stream to ``target`` via a temporary file, so that a crash or a
    concurrent test worker never leaves a half-written vocabulary behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def vocab_path(vocab: str | os.PathLike[str]) -> Path:
    """Return a plain vocabulary GGUF for a name ("starcoder") or a path.

    Names are looked up in ``$FIMLSP_VOCAB_DIR`` and the cache, then in the bundled
    ``vocab/*.gguf.xz`` (decompressed into the cache once), then extracted from a
    llama-cpp-python source distribution already on this machine (``sdist_path``). A path
    may be plain or ``.xz``.
    """
    as_path = Path(vocab)
    if isinstance(vocab, os.PathLike) or as_path.suffix in {".gguf", ".xz"} or "/" in str(vocab):
        if not as_path.is_file():
            raise ModelError(f"vocabulary file not found: {as_path}")
        if as_path.suffix != ".xz":
            return as_path
        target = cache_dir("vocab") / as_path.with_suffix("").name
        if not target.is_file():
            with lzma.open(as_path, "rb") as src:
                _atomic_write_from(src, target)
        return target

    name = str(vocab)
    filename = _VOCAB_FILE.format(name=name)
    expected = BUNDLED_VOCABS.get(name)
    for folder in _search_dirs():
        candidate = folder / filename
        if candidate.is_file() and (expected is None or _sha256(candidate) == expected):
            return candidate
    bundled = VOCAB_DIR / (filename + ".xz")
    if bundled.is_file():
        target = cache_dir("vocab") / filename
        with lzma.open(bundled, "rb") as src:
            _atomic_write_from(src, target)
        if expected is not None and _sha256(target) != expected:
            target.unlink(missing_ok=True)
            raise ModelError(f"bundled vocabulary {bundled} is corrupt (sha256 mismatch)")
        return target
    sdist = sdist_path(download=False)
    if sdist is not None:
        found = extract_vocabs(sdist, names=[name], missing_ok=True)
        if found:
            return found[0]
    known = sorted(BUNDLED_VOCABS)
    raise ModelError(
        f"vocabulary {name!r} not found (bundled: {', '.join(known)}); get llama.cpp's "
        f"vocabularies from the llama-cpp-python source distribution with `{_FETCH_HINT}` "
        "(pip download, about 80 MB, from pip's cache when it has it), or `python -m "
        "testmodels.tiny extract-vocab llama_cpp_python-X.Y.Z.tar.gz`, or set "
        "FIMLSP_VOCAB_DIR to a folder of ggml-vocab-*.gguf files"
    )


def extract_vocabs(
    sdist: str | os.PathLike[str],
    dest: str | os.PathLike[str] | None = None,
    names: Iterable[str] | None = None,
    *,
    missing_ok: bool = False,
) -> list[Path]:
    """Copy ``vendor/llama.cpp/models/ggml-vocab-*.gguf`` out of a llama-cpp-python sdist.

    They are too large to bundle all of them (up to 16 MB each); extracting them into the
    cache lets tests and ``build_tiny_model`` use any of them by name.
    """
    wanted = set(names) if names is not None else None
    out_dir = Path(dest) if dest is not None else cache_dir("vocab")
    written: list[Path] = []
    try:
        with tarfile.open(sdist, "r:*") as tar:
            for member in tar:
                match = _SDIST_VOCAB_RE.search(member.name)
                if not match or not member.isfile():
                    continue
                if wanted is not None and match.group(1) not in wanted:
                    continue
                src = tar.extractfile(member)
                if src is None:
                    continue
                with src:
                    target = out_dir / _VOCAB_FILE.format(name=match.group(1))
                    _atomic_write_from(src, target)
                written.append(target)
    except (OSError, tarfile.TarError) as exc:
        raise ModelError(f"cannot read source distribution {sdist}: {exc}") from exc
    if not written and not missing_ok:
        raise ModelError(f"no ggml-vocab-*.gguf files found in {sdist}")
    return sorted(written)


def llama_cpp_version() -> str:
    """The installed llama-cpp-python version: its sdist vendors the matching vocabularies."""
    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError as exc:
        raise ModelError("llama-cpp-python is not installed") from exc


def sdist_path(download: bool = False) -> Path | None:
    """The llama-cpp-python source distribution of the installed version, if at hand.

    Looked for in ``$FIMLSP_LLAMA_SDIST`` and fimlsp's cache; with ``download``, fetched
    into the cache by ``pip download`` (which answers from pip's HTTP cache when the
    install downloaded the same file).
    """
    env = os.environ.get("FIMLSP_LLAMA_SDIST")
    if env and Path(env).expanduser().is_file():
        return Path(env).expanduser()
    try:
        version = llama_cpp_version()
    except ModelError:
        return None
    folder = cache_dir("sdist")
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.*"))
    if found or not download:
        return found[0] if found else None
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           f"llama-cpp-python=={version}", "-d", str(folder)]  # fmt: skip
    print("fetching llama.cpp's vocabularies: " + " ".join(cmd[2:]), file=sys.stderr)
    done = subprocess.run(cmd, stdout=sys.stderr, check=False, timeout=1800)
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.*"))
    if done.returncode != 0 or not found:
        raise ModelError(f"pip download of llama-cpp-python=={version} failed")
    return found[0]


def fetch_vocabs(names: Iterable[str] | None = None, download: bool = True) -> list[Path]:
    """Make llama.cpp's vocabulary files available in the cache and return their paths.

    ``names`` defaults to every family's vocabulary; those already cached are kept.
    """
    wanted = sorted(set(names) if names is not None else {f.vocab for f in FAMILIES.values()})
    missing = [n for n in wanted if n not in BUNDLED_VOCABS and not _cached_vocab(n)]
    if missing:
        sdist = sdist_path(download=download)
        if sdist is None:
            raise ModelError(f"no llama-cpp-python source distribution: run `{_FETCH_HINT}`")
        extract_vocabs(sdist, names=missing)
    return [vocab_path(n) for n in wanted]


def _cached_vocab(name: str) -> Path | None:
    for folder in _search_dirs():
        candidate = folder / _VOCAB_FILE.format(name=name)
        if candidate.is_file():
            return candidate
    return None


# ---------------------------------------------------------------- GGUF files


def read_gguf_metadata(path: Path) -> dict[str, tuple[int, int | None, Any]]:
    """Read a GGUF file's key/value metadata as ``{key: (type, array_item_type, value)}``
    (numeric arrays as lists); see :func:`lsp_server.model.gguf.read_metadata`."""
    return gguf.read_metadata(path)


# ---------------------------------------------------------------- tokenizers


class _Tokenizer:
    """The ``tokenizer.*`` entries of a vocabulary GGUF, with the edits tests need.

    Token texts, types and scores are decoded when first used (they are what gets edited)
    and written back if they were; every other entry, BPE merges included, is copied as
    the file encodes it.
    """

    def __init__(self, vocab_file: Path) -> None:
        self.entries = [
            kv for kv in gguf.read_entries(vocab_file) if kv.key.startswith("tokenizer.")
        ]
        self._by_key = {kv.key: kv for kv in self.entries}
        if "tokenizer.ggml.tokens" not in self._by_key:
            raise ModelError(f"{vocab_file} has no tokenizer.ggml.tokens: not a vocabulary GGUF")
        self.scalars: dict[str, tuple[int, Any]] = {
            kv.key: (kv.vtype, kv.value()) for kv in self.entries if kv.vtype in gguf.SCALAR_FORMATS
        }
        self.dropped: set[str] = set()

    @cached_property
    def tokens(self) -> list[str]:
        value: list[str] = self._by_key["tokenizer.ggml.tokens"].value()
        return value

    @cached_property
    def types(self) -> list[int] | None:
        kv = self._by_key.get("tokenizer.ggml.token_type")
        return None if kv is None else kv.value().tolist()

    @cached_property
    def scores(self) -> list[float] | None:
        kv = self._by_key.get("tokenizer.ggml.scores")
        return None if kv is None else kv.value().tolist()

    def __len__(self) -> int:
        if "tokens" in self.__dict__:
            return len(self.tokens)
        return self._by_key["tokenizer.ggml.tokens"].count

    def scalar(self, name: str) -> Any:
        entry = self.scalars.get(f"tokenizer.ggml.{name}")
        return None if entry is None else entry[1]

    def set_scalar(self, name: str, value: int | bool | str) -> None:
        vtype = (
            gguf.BOOL
            if isinstance(value, bool)
            else gguf.STRING
            if isinstance(value, str)
            else gguf.UINT32
        )
        self.scalars[f"tokenizer.ggml.{name}"] = (vtype, value)

    def ids(self) -> dict[str, int]:
        return {text: i for i, text in enumerate(self.tokens)}

    def _new_score(self, token_type: int) -> float:
        """Added special tokens get -1000 as in conversions; new pieces rank below every
        ordinary piece (Llama 2 gives its whitespace runs -1e9: those stay last)."""
        if token_type != NORMAL or not self.scores:
            return -1000.0
        return min(s for s in self.scores if s > -1e8) - 1.0

    def set_token(self, token_id: int, text: str, token_type: int) -> None:
        """Put ``text`` at ``token_id``, padding the vocabulary up to it if needed."""
        self.pad_to(token_id)
        if token_id == len(self.tokens):
            self.tokens.append(text)
            if self.types is not None:
                self.types.append(token_type)
            if self.scores is not None:
                self.scores.append(self._new_score(token_type))
            return
        self.tokens[token_id] = text
        if self.types is not None:
            self.types[token_id] = token_type
        if self.scores is not None and token_type == NORMAL:
            self.scores[token_id] = self._new_score(token_type)

    def pad_to(self, size: int) -> None:
        """``[PAD<id>]`` user-defined tokens up to ``size``, as conversions pad a vocabulary
        to the model's embedding size."""
        if len(self) >= size:
            return
        while len(self.tokens) < size:
            self.tokens.append(f"[PAD{len(self.tokens)}]")
            if self.types is not None:
                self.types.append(USER_DEFINED)
            if self.scores is not None:
                self.scores.append(-1000.0)

    def insert(self, at: int, texts: Sequence[str], token_type: int) -> None:
        """Insert tokens before id ``at``; later ids, special ids included, shift up."""
        n = len(texts)
        self.tokens[at:at] = texts
        if self.types is not None:
            self.types[at:at] = [token_type] * n
        if self.scores is not None:
            self.scores[at:at] = [0.0] * n
        for key, (vtype, value) in list(self.scalars.items()):
            if key.endswith("_token_id") and vtype != gguf.BOOL and value >= at:
                self.scalars[key] = (vtype, value + n)

    def rename(self, renames: Mapping[str, str]) -> None:
        """Rename token texts; renamed tokens become control tokens, as special tokens are."""
        index = self.ids()
        for old, new in renames.items():
            if old not in index:
                raise ValueError(f"rename_tokens: {old!r} is not in the vocabulary")
            self.tokens[index[old]] = new
            if self.types is not None:
                self.types[index[old]] = CONTROL
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError("rename_tokens: renamed tokens collide with existing ones")

    def strip_fim(self) -> None:
        """Rename every FIM marker away (and drop explicit FIM ids): a model without FIM."""
        self.rename({t: f"<reserved_{i}>" for i, t in enumerate(self.tokens)
                     if t in FIM_TOKEN_TEXTS})  # fmt: skip
        for kind in _FIM_ID_KEYS:
            self.dropped.add(f"tokenizer.ggml.fim_{kind}_token_id")
        for kind in ("prefix", "suffix", "middle"):
            self.dropped.add(f"tokenizer.ggml.{kind}_token_id")

    def apply_family(self, family: Family) -> None:
        if family.controls is not None:
            block = family.controls
            names = [block.pattern.format(n=n + 1) for n in range(block.count)]
            self.insert(block.at, names, CONTROL)
        for token in family.tokens:
            self.set_token(token.id, token.text, token.type)
        for name, value in family.metadata.items():
            self.set_scalar(name, value)

    def token_id(self, text: str) -> int | None:
        """The id of the token that renders as ``text`` (byte-level BPE or '▁' spaces);
        ``"<0xC3>"`` names the token of that one byte in either kind of vocabulary."""
        index = self.ids()
        spellings = [_byte_level(text.encode("utf-8")), text.replace(" ", "▁"), text]
        named = _BYTE_NAME.fullmatch(text)
        if named is not None:  # SentencePiece's byte-fallback spelling, else byte-level's
            spellings = [text, _byte_level(bytes((int(named[1], 16),)))]
        for spelling in spellings:
            if spelling in index:
                return index[spelling]
        return None

    def encode(self) -> list[bytes]:
        """The entries in their original order, edited ones re-encoded."""
        arrays = {"tokenizer.ggml.tokens": "tokens", "tokenizer.ggml.token_type": "types",
                  "tokenizer.ggml.scores": "scores"}  # fmt: skip
        out: list[bytes] = []
        seen: set[str] = set()
        for kv in self.entries:
            seen.add(kv.key)
            if kv.key in self.dropped:
                continue
            if arrays.get(kv.key) in self.__dict__:  # decoded, maybe edited
                out.append(
                    gguf.encode_entry(kv.key, gguf.ARRAY, getattr(self, arrays[kv.key]), kv.sub)
                )
            elif kv.key in self.scalars and self.scalars[kv.key] != (kv.vtype, kv.value()):
                vtype, value = self.scalars[kv.key]
                out.append(gguf.encode_entry(kv.key, vtype, value))
            else:
                out.append(gguf.encode_string(kv.key) + kv.raw)
        for key, (vtype, value) in self.scalars.items():
            if key not in seen and key not in self.dropped:
                out.append(gguf.encode_entry(key, vtype, value))
        return out


#: How a single byte's token is named: SentencePiece's byte-fallback spelling.
_BYTE_NAME = re.compile("<0x([0-9A-F]{2})>")


def _byte_level(data: bytes) -> str:
    """``data`` as byte-level BPE vocabularies (GPT-2, StarCoder) spell it."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return "".join(table[b] for b in data)


def family_tokenizer(
    family: str | Family, vocab: str | os.PathLike[str] | None = None
) -> _Tokenizer:
    """The edited tokenizer of a family (``vocab`` overrides where its base vocabulary is)."""
    fam = FAMILIES[family] if isinstance(family, str) else family
    tokenizer = _Tokenizer(vocab_path(vocab if vocab is not None else fam.vocab))
    tokenizer.apply_family(fam)
    return tokenizer


# ---------------------------------------------------------------- model


def build_tiny_model(
    path: str | os.PathLike[str],
    vocab: str | os.PathLike[str] | None = None,
    *,
    family: str | None = None,
    seed: int = 0,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_ctx_train: int = 4096,
    dtype: Literal["f32", "f16"] = "f32",
    embd_scale: float = 0.5,
    rename_tokens: Mapping[str, str] | None = None,
    strip_fim: bool = False,
    fim_ids: Mapping[str, int] | None = None,
    stop_bias: float = 0.0,
    token_bias: Mapping[str, float] | None = None,
) -> Path:
    """Write a tiny random-weight llama-architecture GGUF to ``path`` and return it.

    The tokenizer comes from ``vocab`` (see ``vocab_path``; "starcoder" by default), or
    with ``family`` (a key of ``FAMILIES``) from that family's base vocabulary, edited into
    the family's published tokenizer (``vocab`` then only says where the base vocabulary
    file is). ``rename_tokens`` renames token texts (e.g. ``{"<fim_prefix>": "<PRE>"}``) to
    imitate another FIM family with the same BPE; ``strip_fim`` renames every FIM marker
    away to imitate a model without FIM; ``fim_ids`` writes explicit
    ``tokenizer.ggml.fim_*_token_id`` keys. Renamed tokens become control tokens, as
    special tokens are in real conversions. The output embedding is tied to the input one
    (llama.cpp duplicates it), halving the file size. The same arguments always give
    byte-identical files.

    ``stop_bias`` makes a model that wants to stop: every token embedding gets a
    constant first channel, which survives to the last layer, and the output row
    of the end-of-sequence token reads that channel with this weight (the output
    embedding is then written untied).  With a large bias, end-of-sequence ranks
    first at every step, so constrained decoding stops at the first point where
    the middle is complete: tests of the server get completions that end.
    ``token_bias`` does the same for other tokens, named by their text, so that a test
    model can prefer, say, closing brackets.
    """
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must be a multiple of n_head, n_head of n_head_kv")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if family is not None:
        if family not in FAMILIES:
            raise ModelError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
        tokenizer = family_tokenizer(family, vocab)
        name = family
    else:
        tokenizer = _Tokenizer(vocab_path(vocab if vocab is not None else "starcoder"))
        name = Path(str(vocab if vocab is not None else "starcoder")).name
    if rename_tokens:
        tokenizer.rename(rename_tokens)
    if strip_fim:
        tokenizer.strip_fim()
    for kind, token_id in (fim_ids or {}).items():
        if kind not in _FIM_ID_KEYS:
            raise ValueError(f"fim_ids: unknown kind {kind!r} (expected one of {_FIM_ID_KEYS})")
        tokenizer.set_scalar(f"fim_{kind}_token_id", token_id)
    n_vocab = len(tokenizer)

    head_dim = n_embd // n_head
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(seed)

    def weight(rows: int, cols: int, scale: float) -> npt.NDArray[Any]:
        # numpy (rows, cols) becomes ggml ne = [cols, rows]: llama.cpp's {n_in, n_out}.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np_dtype)

    def ones() -> npt.NDArray[Any]:
        return np.ones(n_embd, dtype=np.float32)  # norms stay f32, as in real conversions

    kvs = [
        gguf.encode_entry("general.architecture", gguf.STRING, "llama"),
        gguf.encode_entry("general.name", gguf.STRING, f"fimlsp-tiny-{name}"),
        gguf.encode_entry("llama.context_length", gguf.UINT32, n_ctx_train),
        gguf.encode_entry("llama.embedding_length", gguf.UINT32, n_embd),
        gguf.encode_entry("llama.block_count", gguf.UINT32, n_layer),
        gguf.encode_entry("llama.feed_forward_length", gguf.UINT32, n_ff),
        gguf.encode_entry("llama.attention.head_count", gguf.UINT32, n_head),
        gguf.encode_entry("llama.attention.head_count_kv", gguf.UINT32, n_head_kv),
        gguf.encode_entry("llama.attention.layer_norm_rms_epsilon", gguf.FLOAT32, 1e-5),
        gguf.encode_entry("llama.rope.dimension_count", gguf.UINT32, head_dim),
        gguf.encode_entry("llama.rope.freq_base", gguf.FLOAT32, 10000.0),
        gguf.encode_entry("general.file_type", gguf.UINT32, 0 if dtype == "f32" else 1),
        *tokenizer.encode(),
        gguf.encode_entry("llama.vocab_size", gguf.UINT32, n_vocab),
    ]

    tensors: list[tuple[str, npt.NDArray[Any]]] = []
    embeddings = weight(n_vocab, n_embd, embd_scale)
    if stop_bias or token_bias:
        biases = {int(tokenizer.scalar("eos_token_id")): stop_bias}
        for text, bias in (token_bias or {}).items():
            token = tokenizer.token_id(text)
            if token is None:
                raise ModelError(f"no token {text!r} in the vocabulary {name}")
            biases[token] = bias
        output = embeddings.copy()
        embeddings[:, 0] = 4.0 * embd_scale
        output[:, 0] = 0.0
        for token, bias in biases.items():
            output[token, 0] = bias
        tensors.append(("output.weight", output))
    tensors += [("token_embd.weight", embeddings), ("output_norm.weight", ones())]
    q_scale, o_scale = n_embd**-0.5, (n_head * head_dim) ** -0.5
    for i in range(n_layer):
        blk = f"blk.{i}"
        tensors += [
            (f"{blk}.attn_norm.weight", ones()),
            (f"{blk}.attn_q.weight", weight(n_head * head_dim, n_embd, q_scale)),
            (f"{blk}.attn_k.weight", weight(n_head_kv * head_dim, n_embd, q_scale)),
            (f"{blk}.attn_v.weight", weight(n_head_kv * head_dim, n_embd, q_scale)),
            (f"{blk}.attn_output.weight", weight(n_embd, n_head * head_dim, o_scale)),
            (f"{blk}.ffn_norm.weight", ones()),
            (f"{blk}.ffn_gate.weight", weight(n_ff, n_embd, q_scale)),
            (f"{blk}.ffn_up.weight", weight(n_ff, n_embd, q_scale)),
            (f"{blk}.ffn_down.weight", weight(n_embd, n_ff, n_ff**-0.5)),
        ]
    gguf.write_gguf(out, kvs, tensors)
    return out


#: Bumped when the same arguments start to give a different file.
_FORMAT = 2


def tiny_model_cached(vocab: str | None = None, **kwargs: Any) -> Path:
    """``build_tiny_model`` into the cache, keyed by its arguments and the vocabulary
    file's contents, building only once."""
    family = kwargs.get("family")
    base = vocab if vocab is not None else FAMILIES[family].vocab if family else "starcoder"
    identity = (_FORMAT, vocab, _sha256(vocab_path(base)), sorted(kwargs.items()))
    key = hashlib.sha256(repr(identity).encode()).hexdigest()[:16]
    target = cache_dir("tiny") / f"tiny-{family or Path(base).name}-{key}.gguf"
    if not target.is_file():
        build_tiny_model(target, vocab, **kwargs)
    return target


# ---------------------------------------------------------------- families listed


def family_report(name: str, vocab: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What a family's test model is: vocabulary, size, FIM and end tokens with their
    texts, the prompt layout, and where the ids come from (``--list``)."""
    fam = FAMILIES[name]
    report: dict[str, Any] = {
        "family": name,
        "models": fam.models,
        "vocab_file": _VOCAB_FILE.format(name=fam.vocab),
        "layout": fam.layout,
        "fidelity": fam.fidelity,
        "sources": list(fam.sources),
    }
    try:
        tokens = family_tokenizer(fam, vocab).tokens
    except ModelError as exc:
        tokens = None
        report["error"] = str(exc)
    report["vocab_size"] = None if tokens is None else len(tokens)
    report["fim"] = {kind: {"id": i, "text": tokens[i] if tokens else None}
                     for kind, i in fam.fim.items()}  # fmt: skip
    report["eog"] = [{"id": i, "text": tokens[i] if tokens else None} for i in fam.eog]
    return report


def _print_report(report: Mapping[str, Any]) -> None:
    size = report["vocab_size"] or "? (vocabulary not at hand)"
    print(f"{report['family']}: {report['models']}")
    print(f"  vocabulary: {report['vocab_file']}, {size} tokens; {report['fidelity']}")
    fim = ", ".join(f"{k} {v['text'] or '?'} {v['id']}" for k, v in report["fim"].items())
    print(f"  FIM tokens: {fim or 'none'}")
    print("  end of generation (llama.cpp): "
          + ", ".join(f"{e['text'] or '?'} {e['id']}" for e in report["eog"]))  # fmt: skip
    print(f"  layout: {report['layout']}")
    for source in report["sources"]:
        print(f"  source: {source}")
    if "error" in report:
        print(f"  ({report['error']})")


# ---------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Build a tiny model, list the families, or get llama.cpp's vocabularies."""
    parser = argparse.ArgumentParser(prog="python -m testmodels.tiny")
    parser.add_argument("--list", action="store_true", help="describe every --family")
    parser.add_argument("--json", action="store_true", help="--list as JSON")
    sub = parser.add_subparsers(dest="cmd")
    build = sub.add_parser("build", help="write a tiny random-weight GGUF")
    build.add_argument("out", type=Path)
    source = build.add_mutually_exclusive_group()
    source.add_argument("--family", choices=sorted(FAMILIES), help="a FIM family's tokenizer")
    source.add_argument("--vocab", default=None, help="vocabulary name or GGUF path")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--n-layer", type=int, default=2)
    build.add_argument("--n-embd", type=int, default=64)
    build.add_argument("--strip-fim", action="store_true")
    fetch = sub.add_parser("fetch-vocab", help="get llama.cpp's vocabularies (pip download)")
    fetch.add_argument("names", nargs="*", help="vocabulary names (default: every family's)")
    extract = sub.add_parser("extract-vocab", help="copy ggml-vocab-*.gguf out of an sdist")
    extract.add_argument("sdist", type=Path)
    extract.add_argument("--dest", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.list:
            reports = [family_report(name) for name in FAMILIES]
            if args.json:
                print(json.dumps({"families": reports}, indent=2, ensure_ascii=False))
            else:
                for report in reports:
                    _print_report(report)
        elif args.cmd == "build":
            if args.family is not None:
                fetch_vocabs([FAMILIES[args.family].vocab])
            out = build_tiny_model(args.out, args.vocab, family=args.family, seed=args.seed,
                                   n_layer=args.n_layer, n_embd=args.n_embd,
                                   strip_fim=args.strip_fim)  # fmt: skip
            print(out)
        elif args.cmd == "fetch-vocab":
            for path in fetch_vocabs(args.names or None):
                print(path)
        elif args.cmd == "extract-vocab":
            for path in extract_vocabs(args.sdist, args.dest):
                print(path)
        else:
            parser.print_help()
            return 2
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
